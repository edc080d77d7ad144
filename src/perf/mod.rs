//! The only code that runs perf: locating the version-matched binary, building the `record`
//! argv (a pure function), running `record` and `script`.

pub mod features;
pub mod locate;
mod nearest;
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
