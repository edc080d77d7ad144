//! Finding the perf binary to run, and proving that it runs.
//!
//! Search order, first candidate that *runs* wins: `--perf PATH`, `$PERF`, Ubuntu's
//! `/usr/lib/linux-tools/$(uname -r)/perf`, Ubuntu's `/usr/lib/linux-tools-<abi>/perf` (`6.8.0-134`
//! for release `6.8.0-134-generic`: the package the first one links into), Debian's older
//! versioned `perf_<major>.<minor>` on `PATH` (linux-perf-4.19 shipped `/usr/bin/perf_4.19`),
//! then every `perf` on `PATH`.
//!
//! A file that exists proves nothing: Ubuntu's `/usr/bin/perf` (linux-tools-common) is a script
//! that execs the running kernel's perf and otherwise prints `WARNING: perf not found for kernel
//! 6.8.0-134` and exits 2 (`fixtures/perf/ubuntu-wrapper.sh`). So each candidate is run with
//! `--version`; one that fails is recorded with its reason and the search goes on.
//!
//! An explicit `--perf` or `$PERF` is never fallen through: missing, not running, or (as root)
//! replaceable by another user, it is the error.

use crate::error::{check, usage};
use crate::perf::version::{install_hint, kernel_major_minor, parse_perf_version, PerfVersion};
use anyhow::{Context, Result};
use serde::Serialize;
use std::collections::HashSet;
use std::ffi::{CStr, OsString};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::Duration;
use std::{fs, thread};

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
            Source::DebianVersioned => "Debian's versioned perf_<major.minor>",
            Source::Path => "PATH",
        }
    }
}

/// Everything the search depends on, so tests can point it at a temp tree.
#[derive(Debug, Clone)]
pub struct Locator {
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
        })
    }
}

/// A perf binary worth trying.
#[derive(Debug, Clone, Serialize)]
pub struct Candidate {
    /// The path as found (not canonicalized).
    pub path: PathBuf,
    /// Where it came from.
    pub source: Source,
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
    pub rejected: Vec<(PathBuf, String)>,
}

/// The candidates in search order, existing files only, without duplicates (by canonical
/// path: Ubuntu's linux-tools/<release>/perf links to linux-tools-<abi>/perf). With `--perf` or
/// `$PERF` set, only that one (none if it does not exist: `locate` reports that).
pub fn candidates(loc: &Locator) -> Vec<Candidate> {
    let list = match explicit_choice(loc) {
        Some((given, source)) => resolve_explicit(loc, &given, source)
            .map(|path| vec![Candidate { path, source }])
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
pub fn locate(loc: &Locator) -> Result<FoundPerf> {
    if let Some((given, source)) = explicit_choice(loc) {
        return locate_explicit(loc, &given, source);
    }
    let mut rejected = Vec::new();
    for candidate in candidates(loc) {
        match run_version(&candidate.path, VERSION_TIMEOUT) {
            Ok(version) => return Ok(found(loc, candidate, version, rejected)),
            Err(why) => rejected.push((candidate.path, why)),
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
    check_trust(&path, &label, running_as_root(), loc.trust_perf)?;
    let version = run_version(&path, VERSION_TIMEOUT)
        .map_err(|why| usage(format!("{label} does not work: {why}")))?;
    Ok(found(loc, Candidate { path, source }, version, Vec::new()))
}

/// The automatic search, in order; only files that exist.
fn search_list(loc: &Locator) -> Vec<Candidate> {
    let mut list = Vec::new();
    for (path, source) in linux_tools_paths(loc) {
        if path.is_file() {
            list.push(Candidate { path, source });
        }
    }
    if let Some((major, minor)) = kernel_major_minor(&loc.kernel_release) {
        list.extend(on_path(
            loc,
            &format!("perf_{major}.{minor}"),
            Source::DebianVersioned,
        ));
    }
    list.extend(on_path(loc, "perf", Source::Path));
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
        Ok(found) => found.map(|path| Candidate { path, source }).collect(),
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
    rejected: Vec<(PathBuf, String)>,
) -> FoundPerf {
    let matches_kernel = version.matches_kernel(&loc.kernel_release);
    let mismatch_hint = (!matches_kernel).then(|| mismatch_warning(loc, &candidate.path, &version));
    FoundPerf {
        path: candidate.path,
        source: candidate.source,
        version,
        kernel_release: loc.kernel_release.clone(),
        matches_kernel,
        mismatch_hint,
        rejected,
    }
}

/// One line: which perf, which kernel, that it still works, and the package to install.
fn mismatch_warning(loc: &Locator, path: &Path, version: &PerfVersion) -> String {
    let kernel = kernel_major_minor(&loc.kernel_release)
        .map_or_else(String::new, |(major, minor)| format!(" ({major}.{minor})"));
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
fn none_found(loc: &Locator, rejected: &[(PathBuf, String)]) -> anyhow::Error {
    let hint = install_hint(&read_os_release(&loc.root), &loc.kernel_release);
    let tried = if rejected.is_empty() {
        format!("looked for {}", searched_places(loc))
    } else {
        let each: Vec<String> = rejected
            .iter()
            .map(|(path, why)| format!("{} ({why})", path.display()))
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
    if let Some((major, minor)) = kernel_major_minor(&loc.kernel_release) {
        places.push(format!("perf_{major}.{minor} on PATH"));
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

/// As root, refuse an explicit perf that a non-root user could have replaced: the file, its
/// real directory or the directory it was named through is writable by group or others.
fn check_trust(path: &Path, label: &str, as_root: bool, trusted: bool) -> Result<()> {
    if !as_root || trusted {
        return Ok(());
    }
    match untrusted_reason(path) {
        None => Ok(()),
        Some(why) => Err(usage(format!(
            "refusing to run {label} as root: {why}, so another user could replace what root \
             runs; fix the permissions (chmod go-w) or pass --trust-perf if you trust it"
        ))),
    }
}

/// Why `path` is not safe to run as root, if it is not.
fn untrusted_reason(path: &Path) -> Option<String> {
    let real = fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    let mut checked = vec![real.clone()];
    checked.extend(real.parent().map(Path::to_path_buf));
    checked.extend(
        path.parent()
            .filter(|dir| !dir.as_os_str().is_empty())
            .map(Path::to_path_buf),
    );
    checked.iter().find_map(|p| {
        let mode = fs::metadata(p).ok()?.permissions().mode();
        (mode & 0o022 != 0).then(|| {
            format!(
                "{} is writable by group or others (mode {:o})",
                p.display(),
                mode & 0o7777
            )
        })
    })
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

/// Runs `<path> --version` and parses it; `Err` is one line saying why this perf does not work.
fn run_version(path: &Path, timeout: Duration) -> Result<PerfVersion, String> {
    let output = run_with_timeout(path, timeout)?;
    if !output.status.success() {
        return Err(failure_reason(&output));
    }
    let stdout = String::from_utf8_lossy(&output.stdout);
    parse_perf_version(&stdout).ok_or_else(|| {
        let said = first_line(&output.stdout).unwrap_or_else(|| "nothing".to_string());
        format!("`--version` printed no perf version (it printed: {said})")
    })
}

/// `<path> --version` with stdin closed and output captured, killed after `timeout`.
fn run_with_timeout(path: &Path, timeout: Duration) -> Result<Output, String> {
    let handle = start_version(path).map_err(|e| format!("could not run it: {e}"))?;
    match handle.wait_timeout(timeout) {
        Ok(Some(output)) => Ok(output.clone()),
        Ok(None) => {
            kill_group(&handle);
            Err(format!(
                "`--version` did not finish within {}s",
                timeout.as_secs_f32()
            ))
        }
        Err(e) => Err(format!("could not wait for it: {e}")),
    }
}

/// Starts `<path> --version` in its own process group, so a timeout can kill what a wrapper
/// script started too. Retries on ETXTBSY: exec of a script that was just written fails while
/// another thread's fork still holds it open for writing (seen in parallel tests).
fn start_version(path: &Path) -> std::io::Result<duct::Handle> {
    let expression = duct::cmd(path, ["--version"])
        .stdin_null()
        .stdout_capture()
        .stderr_capture()
        .unchecked()
        .before_spawn(|cmd| {
            cmd.process_group(0);
            Ok(())
        });
    let mut tries = 0;
    loop {
        match expression.start() {
            Err(e) if e.raw_os_error() == Some(libc::ETXTBSY) && tries < 10 => {
                tries += 1;
                thread::sleep(Duration::from_millis(20));
            }
            started => return started,
        }
    }
}

/// Kills the process group of a timed-out `--version` and reaps it if that is quick.
fn kill_group(handle: &duct::Handle) {
    for pid in handle.pids() {
        if let Ok(pid) = libc::pid_t::try_from(pid) {
            // SAFETY: plain syscall; the child leads its own group (process_group(0)).
            unsafe { libc::kill(-pid, libc::SIGKILL) };
        }
    }
    let _ = handle.kill();
    let _ = handle.wait_timeout(Duration::from_secs(1));
}

/// Exit status and the first thing it said, e.g. `exited with status 2: WARNING: perf not found
/// for kernel 6.8.0-134 (...)`.
fn failure_reason(output: &Output) -> String {
    let status = match (output.status.code(), output.status.signal()) {
        (Some(code), _) => format!("exited with status {code}"),
        (None, Some(signal)) => format!("killed by signal {signal}"),
        (None, None) => "failed".to_string(),
    };
    let mut reason = match first_line(&output.stderr).or_else(|| first_line(&output.stdout)) {
        Some(said) => format!("{status}: {said}"),
        None => status,
    };
    if String::from_utf8_lossy(&output.stderr).contains("not found for kernel") {
        reason.push_str(
            " (Ubuntu's linux-tools-common wrapper: the running kernel's linux-tools are not \
             installed)",
        );
    }
    reason
}

/// The first non-blank line of some output, trimmed and cut at 200 characters.
fn first_line(bytes: &[u8]) -> Option<String> {
    let text = String::from_utf8_lossy(bytes);
    let line = text.lines().map(str::trim).find(|l| !l.is_empty())?;
    Some(line.chars().take(200).collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;
    use tempfile::TempDir;

    const UBUNTU_RELEASE: &str = "6.8.0-134-generic";

    fn fixture(rel: &str) -> PathBuf {
        PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("fixtures/perf")
            .join(rel)
    }

    /// A fake root file system in a temp dir.
    struct Tree {
        dir: TempDir,
    }

    impl Tree {
        fn new() -> Tree {
            Tree {
                dir: tempfile::tempdir().unwrap(),
            }
        }

        fn path(&self, rel: &str) -> PathBuf {
            self.dir.path().join(rel)
        }

        /// Writes an executable `#!/bin/sh` script at `rel`.
        fn script(&self, rel: &str, body: &str) -> PathBuf {
            let path = self.path(rel);
            fs::create_dir_all(path.parent().unwrap()).unwrap();
            fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
            fs::set_permissions(&path, fs::Permissions::from_mode(0o755)).unwrap();
            path
        }

        /// A fake perf that prints `perf version <version>`.
        fn perf(&self, rel: &str, version: &str) -> PathBuf {
            self.script(rel, &format!("echo \"perf version {version}\""))
        }

        /// Ubuntu's wrapper at `rel`, pointed at this tree and at `release`.
        fn ubuntu_wrapper(&self, rel: &str, release: &str) -> PathBuf {
            let text = fs::read_to_string(fixture("ubuntu-wrapper.sh")).unwrap();
            let tools = self.path("usr/lib/linux-tools");
            let text = text
                .replace("`uname -r`", release)
                .replace("/usr/lib/linux-tools", tools.to_str().unwrap());
            let path = self.script(rel, "");
            fs::write(&path, text).unwrap();
            path
        }

        fn os_release(&self, name: &str) {
            fs::create_dir_all(self.path("etc")).unwrap();
            fs::copy(
                fixture(&format!("os-release/{name}")),
                self.path("etc/os-release"),
            )
            .unwrap();
        }

        /// A locator over this tree; `path_dirs` are relative to the tree.
        fn locator(&self, release: &str, path_dirs: &[&str]) -> Locator {
            let dirs = path_dirs.iter().map(|d| self.path(d));
            Locator {
                explicit: None,
                env: None,
                root: self.dir.path().to_path_buf(),
                kernel_release: release.to_string(),
                path_var: Some(std::env::join_paths(dirs).unwrap()),
                trust_perf: false,
            }
        }
    }

    fn paths(list: &[Candidate]) -> Vec<(PathBuf, Source)> {
        list.iter().map(|c| (c.path.clone(), c.source)).collect()
    }

    #[test]
    fn ubuntu_picks_the_running_kernels_tools_among_several() {
        let t = Tree::new();
        t.perf("usr/lib/linux-tools/6.8.0-130-generic/perf", "6.8.12");
        let running = t.perf("usr/lib/linux-tools/6.8.0-134-generic/perf", "6.8.12");
        t.ubuntu_wrapper("usr/bin/perf", UBUNTU_RELEASE);
        let loc = t.locator(UBUNTU_RELEASE, &["usr/bin"]);
        let found = locate(&loc).unwrap();
        assert_eq!(found.path, running);
        assert_eq!(found.source, Source::LinuxToolsKernel);
        assert!(found.matches_kernel);
        assert_eq!(found.mismatch_hint, None);
        assert!(found.rejected.is_empty());
    }

    #[test]
    fn ubuntu_wrapper_without_the_running_kernels_tools_is_rejected_with_its_warning() {
        let t = Tree::new();
        t.perf("usr/lib/linux-tools/6.8.0-130-generic/perf", "6.8.12");
        let wrapper = t.ubuntu_wrapper("usr/bin/perf", UBUNTU_RELEASE);
        let built = t.perf("usr/local/bin/perf", "6.8.12");
        let loc = t.locator(UBUNTU_RELEASE, &["usr/bin", "usr/local/bin"]);
        let found = locate(&loc).unwrap();
        assert_eq!((found.path, found.source), (built, Source::Path));
        assert_eq!(found.rejected.len(), 1);
        let (path, why) = &found.rejected[0];
        assert_eq!(path, &wrapper);
        assert!(
            why.starts_with("exited with status 2: WARNING: perf not found for kernel 6.8.0-134"),
            "{why}"
        );
        assert!(why.contains("linux-tools-common"), "{why}");
    }

    #[test]
    fn ubuntu_wrapper_alone_is_an_error_naming_the_package() {
        let t = Tree::new();
        t.os_release("ubuntu-24.04");
        t.ubuntu_wrapper("usr/bin/perf", UBUNTU_RELEASE);
        let loc = t.locator(UBUNTU_RELEASE, &["usr/bin"]);
        let err = format!("{:#}", locate(&loc).unwrap_err());
        assert!(
            err.contains("WARNING: perf not found for kernel 6.8.0-134"),
            "{err}"
        );
        assert!(
            err.contains("sudo apt install linux-tools-6.8.0-134-generic"),
            "{err}"
        );
        assert!(!err.contains('\n'), "{err}");
    }

    #[test]
    fn ubuntu_wrapper_execs_the_running_kernels_perf() {
        let t = Tree::new();
        t.perf("usr/lib/linux-tools/6.8.0-134-generic/perf", "6.8.12");
        let wrapper = t.ubuntu_wrapper("usr/bin/perf", UBUNTU_RELEASE);
        assert_eq!(
            run_version(&wrapper, VERSION_TIMEOUT).unwrap().raw,
            "6.8.12"
        );
    }

    #[test]
    fn ubuntu_abi_directory_layout() {
        let t = Tree::new();
        let abi = t.perf("usr/lib/linux-tools-6.8.0-134/perf", "6.8.12");
        t.perf("usr/lib/linux-tools-6.8.0-130/perf", "6.8.12");
        let found = locate(&t.locator(UBUNTU_RELEASE, &[])).unwrap();
        assert_eq!((found.path, found.source), (abi, Source::LinuxToolsVersion));
    }

    #[test]
    fn ubuntu_symlinked_layout_is_one_candidate() {
        let t = Tree::new();
        let abi = t.perf("usr/lib/linux-tools-6.8.0-134/perf", "6.8.12");
        let link = t.path("usr/lib/linux-tools/6.8.0-134-generic/perf");
        fs::create_dir_all(link.parent().unwrap()).unwrap();
        std::os::unix::fs::symlink(&abi, &link).unwrap();
        let list = candidates(&t.locator(UBUNTU_RELEASE, &[]));
        assert_eq!(paths(&list), vec![(link, Source::LinuxToolsKernel)]);
    }

    #[test]
    fn ubuntu_abi_strips_the_flavour_like_the_wrapper() {
        assert_eq!(ubuntu_abi("6.8.0-134-generic"), "6.8.0-134");
        assert_eq!(ubuntu_abi("6.8.0-45-generic-64k"), "6.8.0-45");
        assert_eq!(ubuntu_abi("4.19.69-v8+"), "4.19.69");
        assert_eq!(ubuntu_abi("6.10.0"), "6.10.0");
    }

    #[test]
    fn debian_versioned_perf_comes_before_plain_perf() {
        let t = Tree::new();
        let versioned = t.perf("usr/bin/perf_6.1", "6.1.192");
        let plain = t.perf("usr/bin/perf", "6.1.192");
        t.perf("usr/bin/perf_5.10", "5.10.0");
        let list = candidates(&t.locator("6.1.0-28-amd64", &["usr/bin"]));
        assert_eq!(
            paths(&list),
            vec![(versioned, Source::DebianVersioned), (plain, Source::Path)]
        );
    }

    #[test]
    fn fedora_and_arch_plain_usr_bin_perf() {
        for (release, version) in [
            ("6.9.10-200.fc40.x86_64", "6.9.10-200.fc40.x86_64"),
            ("6.11.5-arch1-1", "6.11-1"),
        ] {
            let t = Tree::new();
            let perf = t.perf("usr/bin/perf", version);
            let found = locate(&t.locator(release, &["usr/bin"])).unwrap();
            assert_eq!(
                (&found.path, found.source),
                (&perf, Source::Path),
                "{release}"
            );
            assert!(found.matches_kernel, "{release}");
        }
    }

    #[test]
    fn every_perf_on_path_is_a_candidate_in_order() {
        let t = Tree::new();
        let first = t.perf("opt/a/perf", "6.1.1");
        let second = t.perf("opt/b/perf", "6.1.2");
        let list = candidates(&t.locator("6.1.0", &["opt/a", "opt/b"]));
        assert_eq!(
            paths(&list),
            vec![(first, Source::Path), (second, Source::Path)]
        );
    }

    #[test]
    fn relative_path_entries_are_ignored() {
        let t = Tree::new();
        let mut loc = t.locator("6.1.0", &[]);
        loc.path_var = Some(OsString::from("fixtures/perf:."));
        assert!(candidates(&loc).is_empty());
    }

    #[test]
    fn env_perf_overrides_everything() {
        let t = Tree::new();
        t.perf("usr/lib/linux-tools/6.8.0-134-generic/perf", "6.8.12");
        let mine = t.perf("home/me/perf", "6.8.99");
        let mut loc = t.locator(UBUNTU_RELEASE, &["usr/bin"]);
        loc.env = Some(mine.clone().into_os_string());
        let found = locate(&loc).unwrap();
        assert_eq!((found.path, found.source), (mine, Source::Env));
    }

    #[test]
    fn flag_overrides_env_perf() {
        let t = Tree::new();
        let from_env = t.perf("home/me/env-perf", "6.8.1");
        let from_flag = t.perf("home/me/flag-perf", "6.8.2");
        let mut loc = t.locator(UBUNTU_RELEASE, &[]);
        loc.env = Some(from_env.into_os_string());
        loc.explicit = Some(from_flag.clone());
        let found = locate(&loc).unwrap();
        assert_eq!(
            (found.path, found.source),
            (from_flag.clone(), Source::Flag)
        );
        assert_eq!(paths(&candidates(&loc)), vec![(from_flag, Source::Flag)]);
    }

    #[test]
    fn empty_env_perf_counts_as_unset() {
        let t = Tree::new();
        let perf = t.perf("usr/bin/perf", "6.1.1");
        let mut loc = t.locator("6.1.0", &["usr/bin"]);
        loc.env = Some(OsString::new());
        assert_eq!(locate(&loc).unwrap().path, perf);
    }

    #[test]
    fn env_perf_bare_name_is_looked_up_on_path() {
        let t = Tree::new();
        let perf = t.perf("usr/bin/perf-6.8", "6.8.12");
        let mut loc = t.locator("6.8.0", &["usr/bin"]);
        loc.env = Some(OsString::from("perf-6.8"));
        assert_eq!(locate(&loc).unwrap().path, perf);
    }

    #[test]
    fn missing_env_perf_is_an_error_not_a_fallthrough() {
        let t = Tree::new();
        t.perf("usr/bin/perf", "6.1.1");
        let mut loc = t.locator("6.1.0", &["usr/bin"]);
        loc.env = Some(t.path("nope/perf").into_os_string());
        let err = locate(&loc).unwrap_err();
        assert_eq!(crate::error::exit_code(&err), 2);
        let msg = format!("{err:#}");
        assert!(msg.starts_with("$PERF="), "{msg}");
        assert!(msg.contains("no such file; fix or unset PERF"), "{msg}");
        assert!(candidates(&loc).is_empty());
    }

    #[test]
    fn missing_flag_perf_is_an_error() {
        let t = Tree::new();
        let mut loc = t.locator("6.1.0", &[]);
        loc.explicit = Some(t.path("nope/perf"));
        let msg = format!("{:#}", locate(&loc).unwrap_err());
        assert!(
            msg.starts_with("--perf ") && msg.contains("no such file"),
            "{msg}"
        );
    }

    #[test]
    fn failing_candidate_is_rejected_with_its_stderr() {
        let t = Tree::new();
        let broken = t.script(
            "opt/a/perf",
            "echo 'perf: error while loading shared libraries: libpython3.11.so' >&2; exit 127",
        );
        let good = t.perf("opt/b/perf", "6.1.192");
        let found = locate(&t.locator("6.1.0", &["opt/a", "opt/b"])).unwrap();
        assert_eq!(found.path, good);
        assert_eq!(
            found.rejected,
            vec![(broken, "exited with status 127: perf: error while loading shared libraries: libpython3.11.so".to_string())]
        );
    }

    #[test]
    fn failing_explicit_perf_is_an_error_with_its_stderr() {
        let t = Tree::new();
        let broken = t.script("opt/perf", "echo boom >&2; exit 1");
        t.perf("usr/bin/perf", "6.1.1");
        let mut loc = t.locator("6.1.0", &["usr/bin"]);
        loc.explicit = Some(broken);
        let err = locate(&loc).unwrap_err();
        assert_eq!(crate::error::exit_code(&err), 2);
        let msg = format!("{err:#}");
        assert!(
            msg.ends_with("does not work: exited with status 1: boom"),
            "{msg}"
        );
    }

    #[test]
    fn candidate_printing_no_version_is_rejected() {
        let t = Tree::new();
        let odd = t.script("opt/perf", "echo hello");
        let why = run_version(&odd, VERSION_TIMEOUT).unwrap_err();
        assert_eq!(
            why,
            "`--version` printed no perf version (it printed: hello)"
        );
    }

    #[test]
    fn hanging_candidate_is_killed_after_the_timeout() {
        let t = Tree::new();
        // No exec: the sleep is a grandchild holding the output pipes.
        let hang = t.script("opt/perf", "sleep 30; echo perf version 6.1.1");
        let started = Instant::now();
        let why = run_version(&hang, Duration::from_millis(300)).unwrap_err();
        assert!(why.contains("did not finish within 0.3s"), "{why}");
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "{:?}",
            started.elapsed()
        );
    }

    #[test]
    fn nothing_found_lists_where_it_looked_and_the_hint() {
        let t = Tree::new();
        t.os_release("fedora-40");
        let err = locate(&t.locator("6.9.10-200.fc40.x86_64", &["usr/bin"])).unwrap_err();
        assert_eq!(crate::error::exit_code(&err), 1);
        let msg = format!("{err:#}");
        assert!(
            msg.contains("linux-tools/6.9.10-200.fc40.x86_64/perf"),
            "{msg}"
        );
        assert!(msg.contains("perf_6.9 on PATH, perf on PATH"), "{msg}");
        assert!(msg.contains("install one (sudo dnf install perf)"), "{msg}");
    }

    #[test]
    fn version_mismatch_warning_names_the_package_per_distro() {
        let cases = [
            (
                "ubuntu-24.04",
                "6.11.0-9-generic",
                "sudo apt install linux-tools-6.11.0-9-generic",
            ),
            (
                "debian-12",
                "6.18.44-fc-v595",
                "sudo apt install linux-perf",
            ),
            (
                "fedora-40",
                "6.11.5-300.fc40.x86_64",
                "sudo dnf install perf",
            ),
            ("arch", "6.11.5-arch1-1", "sudo pacman -S perf"),
        ];
        for (distro, release, package) in cases {
            let t = Tree::new();
            t.os_release(distro);
            let perf = t.perf("usr/bin/perf", "6.1.192");
            let found = locate(&t.locator(release, &["usr/bin"])).unwrap();
            assert!(!found.matches_kernel, "{distro}");
            let hint = found.mismatch_hint.unwrap();
            assert!(hint.contains(package), "{distro}: {hint}");
            assert!(
                hint.contains(&perf.display().to_string()),
                "{distro}: {hint}"
            );
            assert!(hint.contains("it still works"), "{distro}: {hint}");
        }
    }

    fn world_writable_perf(t: &Tree) -> PathBuf {
        let perf = t.perf("shared/perf", "6.1.192");
        fs::set_permissions(&perf, fs::Permissions::from_mode(0o777)).unwrap();
        perf
    }

    #[test]
    fn world_writable_explicit_perf_is_refused_as_root() {
        let t = Tree::new();
        let perf = world_writable_perf(&t);
        let err = check_trust(&perf, "$PERF=x", true, false).unwrap_err();
        let msg = format!("{err:#}");
        assert!(
            msg.contains("writable by group or others (mode 777)"),
            "{msg}"
        );
        assert!(msg.contains("--trust-perf"), "{msg}");
        assert_eq!(crate::error::exit_code(&err), 2);
        assert!(check_trust(&perf, "$PERF=x", true, true).is_ok());
        assert!(check_trust(&perf, "$PERF=x", false, false).is_ok());
    }

    #[test]
    fn group_writable_directory_is_refused_as_root() {
        let t = Tree::new();
        let perf = t.perf("shared/perf", "6.1.192");
        fs::set_permissions(t.path("shared"), fs::Permissions::from_mode(0o775)).unwrap();
        let msg = format!(
            "{:#}",
            check_trust(&perf, "--perf x", true, false).unwrap_err()
        );
        assert!(
            msg.contains("shared is writable by group or others (mode 775)"),
            "{msg}"
        );
        fs::set_permissions(t.path("shared"), fs::Permissions::from_mode(0o755)).unwrap();
        assert!(check_trust(&perf, "--perf x", true, false).is_ok());
    }

    #[test]
    fn world_writable_env_perf_through_locate_as_root() {
        if !running_as_root() {
            eprintln!("SKIP world_writable_env_perf_through_locate_as_root: needs root");
            return;
        }
        let t = Tree::new();
        let perf = world_writable_perf(&t);
        let mut loc = t.locator("6.1.0", &[]);
        loc.env = Some(perf.clone().into_os_string());
        let msg = format!("{:#}", locate(&loc).unwrap_err());
        assert!(msg.starts_with("refusing to run $PERF="), "{msg}");
        loc.trust_perf = true;
        assert_eq!(locate(&loc).unwrap().path, perf);
    }

    #[test]
    fn from_env_reads_the_real_kernel_release() {
        let loc = Locator::from_env(None, false).unwrap();
        assert!(
            kernel_major_minor(&loc.kernel_release).is_some(),
            "{}",
            loc.kernel_release
        );
        assert_eq!(loc.root, PathBuf::from("/"));
    }

    /// This machine's real perf: Debian 12's linux-perf 6.1 under kernel 6.18.
    #[test]
    fn real_perf_on_this_machine() {
        let real = Path::new("/usr/bin/perf");
        if !real.exists() {
            assert!(
                std::env::var_os("CI").is_none(),
                "CI must have /usr/bin/perf"
            );
            eprintln!("SKIP real_perf_on_this_machine: no /usr/bin/perf");
            return;
        }
        let mut loc = Locator::from_env(None, false).unwrap();
        loc.env = None;
        loc.path_var = Some(OsString::from("/usr/bin"));
        let found = locate(&loc).unwrap();
        assert_eq!(found.path, real);
        assert_eq!(found.source, Source::Path);
        assert_eq!(
            found.matches_kernel,
            found.version.matches_kernel(&loc.kernel_release)
        );
        let os = read_os_release(Path::new("/"));
        if let Some(hint) = &found.mismatch_hint {
            assert!(
                hint.contains(&install_hint(&os, &loc.kernel_release)),
                "{hint}"
            );
        }
        // The machine this was written on: perf 6.1.192 (Debian 12) on kernel 6.18.
        if os.contains("ID=debian") && loc.kernel_release.starts_with("6.18.") {
            assert_eq!((found.version.major, found.version.minor), (6, 1));
            let hint = found.mismatch_hint.unwrap();
            assert!(hint.contains("sudo apt install linux-perf"), "{hint}");
        }
    }
}
