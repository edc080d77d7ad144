//! Finding the perf binary to run, and proving that it runs.
//!
//! Search order, first candidate that *runs* wins: `--perf PATH`, `$PERF`, Ubuntu's
//! `/usr/lib/linux-tools/$(uname -r)/perf`, Ubuntu's `/usr/lib/linux-tools-<abi>/perf` (`6.8.0-134`
//! for release `6.8.0-134-generic`: the package the first one links into), then every other
//! `/usr/lib/linux-tools/*/perf` and `/usr/lib/linux-tools-*/perf` of the running kernel's
//! major.minor (a custom-built kernel's release is not the name its perf was installed under),
//! Debian's older versioned `perf_<major>.<minor>` on `PATH` (linux-perf-4.19 shipped
//! `/usr/bin/perf_4.19`), every `perf` on `PATH`, then the remaining linux-tools perfs, nearest
//! version first (see `nearest`). The result says which was chosen and why
//! ([`FoundPerf::choice`]).
//!
//! As root, a candidate another user could have replaced (see `trust`) is passed over, with
//! the reason, like one that does not run.
//!
//! A file that exists proves nothing: Ubuntu's `/usr/bin/perf` (linux-tools-common) is a script
//! that execs the running kernel's perf and otherwise prints `WARNING: perf not found for kernel
//! 6.8.0-134` and exits 2 (`fixtures/perf/ubuntu-wrapper.sh`). So each candidate is run with
//! `--version`; one that fails is recorded with its reason and the search goes on.
//!
//! An explicit `--perf` or `$PERF` is never fallen through: missing, not running, or (as root)
//! replaceable by another user, it is the error.

use super::nearest::Ranked;
use super::probe::run_version;
use super::trust::{check_trust, trusted_owners, untrusted_reason};
use crate::error::{check, usage};
use crate::perf::version::{install_hint, kernel_major_minor, MajorMinor, PerfVersion};
use anyhow::{Context, Result};
use serde::Serialize;
use std::collections::HashSet;
use std::ffi::{CStr, OsString};
use std::fs;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// How long `perf --version` may take before the candidate is given up on.
const VERSION_TIMEOUT: Duration = Duration::from_secs(5);

/// Where a perf candidate came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Source {
    /// `--perf PATH`.
    Flag,
    /// The `PERF` environment variable.
    Env,
    /// Ubuntu's `/usr/lib/linux-tools/$(uname -r)/perf`.
    LinuxToolsKernel,
    /// Ubuntu's `/usr/lib/linux-tools-<abi>/perf`.
    LinuxToolsVersion,
    /// Another `/usr/lib/linux-tools/*/perf` or `/usr/lib/linux-tools-*/perf`, by nearest
    /// major.minor.
    LinuxToolsNearest,
    /// Debian's `perf_<major>.<minor>` on `PATH`.
    DebianVersioned,
    /// `perf` on `PATH`.
    Path,
}

impl Source {
    /// A short human description, for messages and `doctor`.
    pub fn describe(self) -> &'static str {
        match self {
            Source::Flag => "--perf",
            Source::Env => "$PERF",
            Source::LinuxToolsKernel => "linux-tools for the running kernel",
            Source::LinuxToolsVersion => "linux-tools for the running kernel's ABI",
            Source::LinuxToolsNearest => "linux-tools of the nearest kernel version",
            Source::DebianVersioned => "Debian's versioned perf_<major.minor>",
            Source::Path => "PATH",
        }
    }
}

/// Everything the search depends on, so tests can point it at a temp tree.
#[derive(Debug, Clone)]
pub(crate) struct Locator {
    /// `--perf PATH`; wins over `env`.
    pub explicit: Option<PathBuf>,
    /// `$PERF`; an empty value counts as unset.
    pub env: Option<OsString>,
    /// `/` in production; the linux-tools directories and os-release are read under it.
    pub root: PathBuf,
    /// The running kernel's `uname -r`.
    pub kernel_release: String,
    /// `$PATH`; its entries are used as given, relative ones are skipped.
    pub path_var: Option<OsString>,
    /// `--trust-perf`: run an explicit perf as root even if others could have replaced it.
    pub trust_perf: bool,
    /// Whether we run as root: then every candidate must pass the trust check.
    pub as_root: bool,
}

impl Locator {
    /// The production locator: `uname -r`, `$PATH` and `$PERF` from this process, root `/`.
    pub fn from_env(explicit: Option<PathBuf>, trust_perf: bool) -> Result<Locator> {
        Ok(Locator {
            explicit,
            env: std::env::var_os("PERF"),
            root: PathBuf::from("/"),
            kernel_release: uname_release()?,
            path_var: std::env::var_os("PATH"),
            trust_perf,
            as_root: running_as_root(),
        })
    }
}

/// A candidate passed over, and why. It is written to JSON as `[path, why]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rejected {
    pub path: PathBuf,
    pub why: String,
}

impl Serialize for Rejected {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        (&self.path, &self.why).serialize(serializer)
    }
}

/// A perf binary worth trying.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Candidate {
    /// The path as found (not canonicalized).
    pub path: PathBuf,
    /// Where it came from.
    pub source: Source,
    /// Why this one, when that is not obvious from `source` (a linux-tools of another version).
    pub note: Option<String>,
}

/// The perf that will be used, and what the search learned on the way.
#[derive(Debug, Clone, Serialize)]
pub struct FoundPerf {
    /// The binary to run.
    pub path: PathBuf,
    /// Where it came from.
    pub source: Source,
    /// What its `--version` said.
    pub version: PerfVersion,
    /// The running kernel's `uname -r`.
    pub kernel_release: String,
    /// Whether perf's major.minor is the kernel's.
    pub matches_kernel: bool,
    /// The warning to print when it is not, naming the package to install (no `warning:` prefix).
    pub mismatch_hint: Option<String>,
    /// Candidates tried before this one that did not run, and why.
    pub rejected: Vec<Rejected>,
    /// Which perf was chosen and why, in one line (for `doctor` and the run record).
    pub choice: String,
}

/// The candidates in search order, existing files only, without duplicates (by canonical
/// path: Ubuntu's linux-tools/<release>/perf links to linux-tools-<abi>/perf). With `--perf` or
/// `$PERF` set, only that one (none if it does not exist: `locate` reports that).
pub(crate) fn candidates(loc: &Locator) -> Vec<Candidate> {
    let list = match explicit_choice(loc) {
        Some((given, source)) => resolve_explicit(loc, &given, source)
            .map(|path| {
                vec![Candidate {
                    path,
                    source,
                    note: None,
                }]
            })
            .unwrap_or_default(),
        None => search_list(loc),
    };
    let mut seen = HashSet::new();
    list.into_iter()
        .filter(|c| seen.insert(fs::canonicalize(&c.path).unwrap_or_else(|_| c.path.clone())))
        .collect()
}

/// Finds the perf to use: the explicit one or the first candidate whose `--version` works.
/// The error is one line: what was tried (and why each failed) and how to install perf.
pub(crate) fn locate(loc: &Locator) -> Result<FoundPerf> {
    if let Some((given, source)) = explicit_choice(loc) {
        return locate_explicit(loc, &given, source);
    }
    let mut rejected = Vec::new();
    for candidate in candidates(loc) {
        if loc.as_root {
            if let Some(why) = untrusted_reason(&candidate.path, &trusted_owners()) {
                rejected.push(Rejected {
                    path: candidate.path,
                    why: format!("not run as root: {why}"),
                });
                continue;
            }
        }
        match run_version(&candidate.path, VERSION_TIMEOUT) {
            Ok(version) => return Ok(found(loc, candidate, version, rejected)),
            Err(why) => rejected.push(Rejected {
                path: candidate.path,
                why,
            }),
        }
    }
    Err(none_found(loc, &rejected))
}

/// `--perf` or `$PERF`, whichever is set (`--perf` wins).
fn explicit_choice(loc: &Locator) -> Option<(PathBuf, Source)> {
    if let Some(path) = &loc.explicit {
        return Some((path.clone(), Source::Flag));
    }
    let env = loc.env.as_ref().filter(|v| !v.is_empty())?;
    Some((PathBuf::from(env), Source::Env))
}

/// How to name an explicit choice in a message: `--perf /x/perf` or `$PERF=/x/perf`.
fn explicit_label(given: &Path, source: Source) -> String {
    match source {
        Source::Env => format!("$PERF={}", given.display()),
        _ => format!("--perf {}", given.display()),
    }
}

/// The file an explicit choice names. A bare name (`PERF=perf-6.8`) is looked up on `PATH`,
/// as a shell would; anything with a `/` must exist as given.
fn resolve_explicit(loc: &Locator, given: &Path, source: Source) -> Result<PathBuf> {
    let label = explicit_label(given, source);
    if !given.as_os_str().as_bytes().contains(&b'/') {
        let paths = absolute_path_var(loc);
        return which::which_in(given, paths, &loc.root)
            .map_err(|_| usage(format!("{label}: not found on PATH; give its full path")));
    }
    if !given.is_file() {
        let what = if given.exists() {
            "not a file"
        } else {
            "no such file"
        };
        let fix = match source {
            Source::Env => "fix or unset PERF to search the usual places",
            _ => "drop --perf to search the usual places",
        };
        return Err(usage(format!("{label}: {what}; {fix}")));
    }
    Ok(given.to_path_buf())
}

/// The explicit perf, checked for trust and run; every failure is the user's to fix.
fn locate_explicit(loc: &Locator, given: &Path, source: Source) -> Result<FoundPerf> {
    let path = resolve_explicit(loc, given, source)?;
    let label = explicit_label(given, source);
    check_trust(&path, &label, loc.as_root, loc.trust_perf)?;
    let version = run_version(&path, VERSION_TIMEOUT)
        .map_err(|why| usage(format!("{label} does not work: {why}")))?;
    let candidate = Candidate {
        path,
        source,
        note: None,
    };
    Ok(found(loc, candidate, version, Vec::new()))
}

/// The automatic search, in order; only files that exist.
fn search_list(loc: &Locator) -> Vec<Candidate> {
    let mut list = Vec::new();
    for (path, source) in linux_tools_paths(loc) {
        if path.is_file() {
            list.push(Candidate {
                path,
                source,
                note: None,
            });
        }
    }
    let (same, other) = super::nearest::nearest_linux_tools(&loc.root, &loc.kernel_release);
    let nearest = |ranked: Ranked| Candidate {
        path: ranked.path,
        source: Source::LinuxToolsNearest,
        note: Some(ranked.why),
    };
    list.extend(same.into_iter().map(nearest));
    if let Some(MajorMinor { major, minor }) = kernel_major_minor(&loc.kernel_release) {
        list.extend(on_path(
            loc,
            &format!("perf_{major}.{minor}"),
            Source::DebianVersioned,
        ));
    }
    list.extend(on_path(loc, "perf", Source::Path));
    list.extend(other.into_iter().map(nearest));
    list
}

/// Ubuntu's two per-kernel locations under `root`, whether or not they exist.
fn linux_tools_paths(loc: &Locator) -> Vec<(PathBuf, Source)> {
    let release = loc.kernel_release.as_str();
    if release.is_empty() || release.contains('/') {
        return Vec::new();
    }
    let lib = loc.root.join("usr/lib");
    vec![
        (
            lib.join("linux-tools").join(release).join("perf"),
            Source::LinuxToolsKernel,
        ),
        (
            lib.join(format!("linux-tools-{}", ubuntu_abi(release)))
                .join("perf"),
            Source::LinuxToolsVersion,
        ),
    ]
}

/// The release without its flavour, computed as Ubuntu's wrapper does (`${full%-$flavour}`):
/// `6.8.0-134-generic` → `6.8.0-134`, `4.19.69-v8+` → `4.19.69`.
fn ubuntu_abi(release: &str) -> String {
    let parts: Vec<&str> = release.splitn(3, '-').collect();
    match parts.as_slice() {
        [version, abi, _flavour] => format!("{version}-{abi}"),
        [version, ..] => (*version).to_string(),
        [] => release.to_string(),
    }
}

/// Every executable `name` on `PATH`, in `PATH` order.
fn on_path(loc: &Locator, name: &str, source: Source) -> Vec<Candidate> {
    let Some(paths) = absolute_path_var(loc) else {
        return Vec::new();
    };
    match which::which_in_all(name, Some(paths), &loc.root) {
        Ok(found) => found
            .map(|path| Candidate {
                path,
                source,
                note: None,
            })
            .collect(),
        Err(_) => Vec::new(),
    }
}

/// `$PATH` without its relative entries: as root, `.` in `PATH` would let the current
/// directory choose what root runs.
fn absolute_path_var(loc: &Locator) -> Option<OsString> {
    let dirs = std::env::split_paths(loc.path_var.as_ref()?).filter(|d| d.is_absolute());
    std::env::join_paths(dirs).ok()
}

/// Assembles the result, with the mismatch warning when major.minor differ.
fn found(
    loc: &Locator,
    candidate: Candidate,
    version: PerfVersion,
    rejected: Vec<Rejected>,
) -> FoundPerf {
    let matches_kernel = version.matches_kernel(&loc.kernel_release);
    let mismatch_hint = (!matches_kernel).then(|| mismatch_warning(loc, &candidate.path, &version));
    let choice = choice_line(loc, &candidate, &version, &rejected);
    FoundPerf {
        choice,
        path: candidate.path,
        source: candidate.source,
        version,
        kernel_release: loc.kernel_release.clone(),
        matches_kernel,
        mismatch_hint,
        rejected,
    }
}

/// Which perf, found how, and why this one: the note of a nearest-version linux-tools, and how
/// many candidates before it were passed over.
fn choice_line(
    loc: &Locator,
    candidate: &Candidate,
    version: &PerfVersion,
    rejected: &[Rejected],
) -> String {
    let mut line = format!(
        "{} (perf {}) from {}",
        candidate.path.display(),
        version.raw,
        candidate.source.describe()
    );
    if let Some(note) = &candidate.note {
        line.push_str(&format!(": {note}"));
    } else if version.matches_kernel(&loc.kernel_release) {
        line.push_str(&format!(
            ": its major.minor is the running kernel's ({})",
            loc.kernel_release
        ));
    }
    if !rejected.is_empty() {
        line.push_str(&format!(
            "; {} earlier candidate(s) passed over (doctor --json lists why)",
            rejected.len()
        ));
    }
    line
}

/// One line: which perf, which kernel, that it still works, and the package to install.
fn mismatch_warning(loc: &Locator, path: &Path, version: &PerfVersion) -> String {
    let kernel = kernel_major_minor(&loc.kernel_release)
        .map_or_else(String::new, |version| format!(" ({version})"));
    format!(
        "perf {} at {} does not match the running kernel {}{kernel}: it still works, but may not \
         know this kernel's newer features; for a matching perf: {}, or build tools/perf from the \
         running kernel's source",
        version.raw,
        path.display(),
        loc.kernel_release,
        install_hint(&read_os_release(&loc.root), &loc.kernel_release),
    )
}

/// The error when nothing worked: what was tried, or where we looked, and how to install perf.
fn none_found(loc: &Locator, rejected: &[Rejected]) -> anyhow::Error {
    let hint = install_hint(&read_os_release(&loc.root), &loc.kernel_release);
    let tried = if rejected.is_empty() {
        format!("looked for {}", searched_places(loc))
    } else {
        let each: Vec<String> = rejected
            .iter()
            .map(|passed| format!("{} ({})", passed.path.display(), passed.why))
            .collect();
        format!("tried {}", each.join("; "))
    };
    check(format!(
        "no working perf found: {tried}; install one ({hint}) or pass --perf PATH"
    ))
}

/// The places the automatic search looks, for the "not found" message.
fn searched_places(loc: &Locator) -> String {
    let mut places: Vec<String> = linux_tools_paths(loc)
        .iter()
        .map(|(path, _)| path.display().to_string())
        .collect();
    if let Some(version) = kernel_major_minor(&loc.kernel_release) {
        places.push(format!("perf_{version} on PATH"));
    }
    places.push("perf on PATH".to_string());
    places.join(", ")
}

/// `<root>/etc/os-release`, else `<root>/usr/lib/os-release` (os-release(5)); empty if neither.
fn read_os_release(root: &Path) -> String {
    ["etc/os-release", "usr/lib/os-release"]
        .iter()
        .find_map(|rel| fs::read_to_string(root.join(rel)).ok())
        .unwrap_or_default()
}

fn running_as_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// The running kernel's release, as `uname -r` prints it.
fn uname_release() -> Result<String> {
    // SAFETY: utsname is plain data; uname fills it and NUL-terminates each field.
    let mut uts: libc::utsname = unsafe { std::mem::zeroed() };
    if unsafe { libc::uname(&mut uts) } != 0 {
        return Err(std::io::Error::last_os_error()).context("uname() failed");
    }
    // SAFETY: release is NUL-terminated by uname and lives as long as `uts`.
    let release = unsafe { CStr::from_ptr(uts.release.as_ptr()) };
    Ok(release.to_string_lossy().into_owned())
}

#[cfg(test)]
#[path = "locate_tests.rs"]
mod tests;
