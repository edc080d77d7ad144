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

use super::version::{kernel_major_minor, MajorMinor};
use std::path::{Path, PathBuf};

/// Sort key of a linux-tools version against the kernel's: smaller is better.
pub(super) fn version_rank(found: Option<MajorMinor>, kernel: Option<MajorMinor>) -> (u8, u64, u8) {
    let (Some(found), Some(kernel)) = (found, kernel) else {
        return (3, 0, 0);
    };
    let older = u8::from(found < kernel);
    let minors = u64::from(found.minor.abs_diff(kernel.minor));
    if found == kernel {
        (0, 0, 0)
    } else if found.major == kernel.major {
        (1, minors, older)
    } else {
        let majors = u64::from(found.major.abs_diff(kernel.major));
        (2, majors * 1000 + minors, older)
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
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Ranked {
    pub path: PathBuf,
    pub why: String,
}

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
    let all: Vec<String> = found.iter().map(|(_, version)| version.clone()).collect();
    let mut same = Vec::new();
    let mut other = Vec::new();
    for (path, version) in found {
        let ranked = Ranked {
            path,
            why: note(&version, release, kernel, &all),
        };
        if kernel.is_some() && kernel_major_minor(&version) == kernel {
            same.push(ranked);
        } else {
            other.push(ranked);
        }
    }
    (same, other)
}

/// Why a linux-tools of `version` was ranked where it is.
fn note(version: &str, release: &str, kernel: Option<MajorMinor>, all: &[String]) -> String {
    let others = all.join(", ");
    match (kernel_major_minor(version), kernel) {
        (Some(found), Some(kernel)) if found == kernel => format!(
            "no linux-tools for {release} itself (a custom-built kernel?); {version} has the running kernel's major.minor {kernel} (installed: {others})"
        ),
        (Some(found), Some(kernel)) => format!(
            "no linux-tools for {kernel} (the running kernel {release}); {version} ({found}) is the nearest installed (installed: {others})"
        ),
        _ => format!(
            "its directory names no version to compare with {release}; tried after those that do (installed: {others})"
        ),
    }
}
