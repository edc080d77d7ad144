//! The only code that runs perf: locating the version-matched binary, building the `record`
//! argv (a pure function), running `record` and `script`.

pub mod features;
pub mod locate;
mod nearest;
pub mod options;
mod probe;
pub mod record;
pub mod script;
pub mod trust;
pub mod version;

use anyhow::Result;
use locate::{locate, FoundPerf, Locator};
use std::path::PathBuf;

/// Which perf to use, as the user asked.
#[derive(Debug, Clone, Default)]
pub struct PerfChoice {
    /// `--perf PATH`.
    pub explicit: Option<PathBuf>,
    /// `--trust-perf`.
    pub trust: bool,
    /// `--via-perf`: read perf.data with `perf script`, not the native reader.
    pub via_perf: bool,
}

/// Whether this process has said which perf it uses and how it matches the kernel: one run
/// may look perf up at every step (`overhead --profile` records once per arm), and the lines
/// would be the same each time.
static PERF_NOTED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

impl PerfChoice {
    /// Find and run-check perf; a version mismatch is printed as a warning, once a process.
    pub fn find(&self, quiet: bool) -> Result<FoundPerf> {
        let loc = Locator::from_env(self.explicit.clone(), self.trust)?;
        let found = locate(&loc).map_err(no_working_perf)?;
        if quiet || PERF_NOTED.swap(true, std::sync::atomic::Ordering::Relaxed) {
            return Ok(found);
        }
        if found.source == locate::Source::LinuxToolsNearest {
            // Not the obvious place: say which perf and why.
            crate::out::say(format!("using {}", found.choice));
        }
        if let Some(hint) = &found.mismatch_hint {
            crate::out::say(format!("warning: {hint}"));
        }
        Ok(found)
    }
}

/// Variables perf reads besides its arguments that would make a run other than the one its
/// arguments describe: where it looks for helper programs and its build-id cache, and its pager.
const CALLER_ENV_PERF_IGNORES: [&str; 4] = [
    "PERF_EXEC_PATH",
    "PERF_BUILDID_DIR",
    "PERF_PAGER",
    "PERF_DEBUGFS_DIR",
];

/// Set up the environment of a perf we start. perf reads no config file: a `~/.perfconfig`, or
/// the file `PERF_CONFIG` names, can change sampling, call graphs and output behind the flags
/// we pass, and as root under `sudo -E` it would be another user's file. The variables above
/// are removed for the same reasons. duct expressions take this through `before_spawn`.
pub(crate) fn without_caller_config(cmd: &mut std::process::Command) -> &mut std::process::Command {
    cmd.env("PERF_CONFIG", "/dev/null");
    for name in CALLER_ENV_PERF_IGNORES {
        cmd.env_remove(name);
    }
    cmd
}

/// The home directory a `perf script` we start as root looks in for its build-id cache
/// (`$HOME/.debug`): root's own, not a caller's that `sudo -E` passed on, whose files another
/// user may have written. `None` when not root (the caller's home is theirs to use).
pub(crate) fn script_home() -> Option<std::path::PathBuf> {
    crate::host::security::is_root().then(root_home)
}

/// Root's home directory from the password database, `/` when it has none.
fn root_home() -> std::path::PathBuf {
    use std::os::unix::ffi::OsStrExt;
    // SAFETY: passwd is integers and pointers, for which all zeros is a valid value.
    let mut entry: libc::passwd = unsafe { std::mem::zeroed() };
    let mut buffer = vec![0 as libc::c_char; 4096];
    let mut found: *mut libc::passwd = std::ptr::null_mut();
    // SAFETY: getpwuid_r writes the entry and its strings into `entry` and `buffer`, both
    // ours and as large as said; `found` is set to `&entry` or null.
    let status =
        unsafe { libc::getpwuid_r(0, &mut entry, buffer.as_mut_ptr(), buffer.len(), &mut found) };
    if status != 0 || found.is_null() || entry.pw_dir.is_null() {
        return std::path::PathBuf::from("/");
    }
    // SAFETY: pw_dir points at a NUL-terminated string inside `buffer`, alive here.
    let dir = unsafe { std::ffi::CStr::from_ptr(entry.pw_dir) };
    std::path::PathBuf::from(std::ffi::OsStr::from_bytes(dir.to_bytes()))
}

/// Every way of not getting a perf to run — none found, `--perf`/`$PERF` missing, not a file,
/// failing its `--version`, or refused as untrusted — is the documented exit 1, "no working
/// perf" (a check that failed), with the reason kept.
fn no_working_perf(e: anyhow::Error) -> anyhow::Error {
    let msg = match e.downcast_ref::<crate::error::Failure>() {
        Some(f) if f.kind == crate::error::Kind::Check => return e,
        Some(f) => f.message.clone(),
        None => format!("{e:#}"),
    };
    let msg = match msg.strip_prefix("no working perf") {
        Some(_) => msg,
        None => format!("no working perf: {msg}"),
    };
    crate::error::check(msg)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn perf_starts_without_the_callers_config_or_exec_path() {
        let mut cmd = std::process::Command::new("perf");
        cmd.env("PERF_CONFIG", "callers.perfconfig");
        cmd.env("PERF_EXEC_PATH", "callers-helpers");
        without_caller_config(&mut cmd);
        let envs: Vec<_> = cmd.get_envs().collect();
        assert!(envs.contains(&("PERF_CONFIG".as_ref(), Some("/dev/null".as_ref()))));
        for name in CALLER_ENV_PERF_IGNORES {
            assert!(envs.contains(&(name.as_ref(), None)), "{name} is removed");
        }
    }

    #[test]
    fn roots_home_is_an_absolute_directory() {
        let home = root_home();
        assert!(home.is_absolute() && home.is_dir(), "{}", home.display());
    }

    /// `record --perf /nonexistent` and a refused perf exited 2.
    #[test]
    fn regression_every_missing_perf_is_exit_1() {
        let e = PerfChoice {
            explicit: Some(PathBuf::from("/nonexistent/perf")),
            ..PerfChoice::default()
        }
        .find(true)
        .unwrap_err();
        assert_eq!(crate::error::exit_code(&e), 1, "{e:#}");
        assert!(
            e.to_string()
                .starts_with("no working perf: --perf /nonexistent/perf"),
            "{e}"
        );
    }
}
