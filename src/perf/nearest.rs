//! The linux-tools perf nearest to the running kernel, when none is installed under its exact
//! release. A custom-built kernel (`6.8.12-mykernel`) has no `/usr/lib/linux-tools/6.8.12-mykernel`,
//! but a perf installed for another build of the same major.minor (`/usr/lib/linux-tools/6.8.0-134/perf`,
//! `/usr/lib/linux-tools-6.8.0-134/perf`) knows this kernel's features as well as a matching
//! one would. Every `perf` under both layouts is ranked by [`version_rank`]: the kernel's own
//! major.minor first; then the same major, nearest minor, newer before older on a tie (a newer
//! perf reads an older kernel's records; an older one may not know newer ones); then other
//! majors by distance; then directories whose name holds no version. Each candidate carries
//! the reason it was ranked where it is. Those of the kernel's own major.minor are tried before
//! any perf on `PATH`; the others after it (a perf on `PATH` that runs, a Debian perf or one
//! the user built, is then as good a guess, and Ubuntu's wrapper on `PATH` fails and passes
//! the search on to them).

use super::version::kernel_major_minor;
use std::path::{Path, PathBuf};

/// Sort key of a linux-tools version against the kernel's: smaller is better.
pub(super) fn version_rank(found: Option<(u32, u32)>, kernel: Option<(u32, u32)>) -> (u8, u64, u8) {
    let (Some((maj, min)), Some((kmaj, kmin))) = (found, kernel) else {
        return (3, 0, 0);
    };
    let older = u8::from((maj, min) < (kmaj, kmin));
    if (maj, min) == (kmaj, kmin) {
        (0, 0, 0)
    } else if maj == kmaj {
        (1, u64::from(min.abs_diff(kmin)), older)
    } else {
        let dist = u64::from(maj.abs_diff(kmaj)) * 1000 + u64::from(min.abs_diff(kmin));
        (2, dist, older)
    }
}

/// The numbers of a version string, for the last tie-break (higher first): `6.8.0-134` → 6,8,0,134.
fn numbers(version: &str) -> Vec<u64> {
    version
        .split(|c: char| !c.is_ascii_digit())
        .filter_map(|n| n.parse().ok())
        .collect()
}

/// Every `<root>/usr/lib/linux-tools/*/perf` and `<root>/usr/lib/linux-tools-*/perf` that is
/// a file, with the version its directory names.
fn scan(root: &Path) -> Vec<(PathBuf, String)> {
    let lib = root.join("usr/lib");
    let mut found = Vec::new();
    if let Ok(dirs) = std::fs::read_dir(lib.join("linux-tools")) {
        for entry in dirs.flatten() {
            let version = entry.file_name().to_string_lossy().into_owned();
            found.push((entry.path().join("perf"), version));
        }
    }
    if let Ok(dirs) = std::fs::read_dir(&lib) {
        for entry in dirs.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if let Some(version) = name.strip_prefix("linux-tools-") {
                found.push((entry.path().join("perf"), version.to_string()));
            }
        }
    }
    found.retain(|(p, _)| p.is_file());
    found
}

/// A linux-tools perf and why it is ranked where it is.
pub(super) type Ranked = (PathBuf, String);

/// The perfs, best first, each with why it is where it is: those of the running kernel's
/// major.minor, and the others.
pub(super) fn nearest_linux_tools(root: &Path, release: &str) -> (Vec<Ranked>, Vec<Ranked>) {
    let kernel = kernel_major_minor(release);
    let mut found = scan(root);
    found.sort_by(|(pa, left), (pb, right)| {
        let ka = version_rank(kernel_major_minor(left), kernel);
        let kb = version_rank(kernel_major_minor(right), kernel);
        ka.cmp(&kb)
            .then_with(|| numbers(right).cmp(&numbers(left)))
            .then_with(|| pa.cmp(pb))
    });
    let all: Vec<String> = found.iter().map(|(_, v)| v.clone()).collect();
    let (same, other): (Vec<_>, Vec<_>) = found
        .into_iter()
        .map(|(path, version)| {
            let same = kernel.is_some() && kernel_major_minor(&version) == kernel;
            (same, (path, note(&version, release, kernel, &all)))
        })
        .partition(|(same, _)| *same);
    (strip(same), strip(other))
}

fn strip(ranked: Vec<(bool, Ranked)>) -> Vec<Ranked> {
    ranked.into_iter().map(|(_, c)| c).collect()
}

/// Why a linux-tools of `version` was ranked where it is.
fn note(version: &str, release: &str, kernel: Option<(u32, u32)>, all: &[String]) -> String {
    let others = all.join(", ");
    match (kernel_major_minor(version), kernel) {
        (Some(found), Some(kernel_version)) if found == kernel_version => format!(
            "no linux-tools for {release} itself (a custom-built kernel?); {version} has the running kernel's major.minor {}.{} (installed: {others})",
            kernel_version.0, kernel_version.1
        ),
        (Some(found), Some(kernel_version)) => format!(
            "no linux-tools for {}.{} (the running kernel {release}); {version} ({}.{}) is the nearest installed (installed: {others})",
            kernel_version.0, kernel_version.1, found.0, found.1
        ),
        _ => format!(
            "its directory names no version to compare with {release}; tried after those that do (installed: {others})"
        ),
    }
}
