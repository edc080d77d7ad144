//! The only code that runs perf: locating the version-matched binary, building the `record`
//! argv (a pure function), running `record` and `script`.

pub mod locate;
mod probe;
pub mod record;
pub mod script;
mod trust;
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

impl PerfChoice {
    /// Find and run-check perf; a version mismatch is printed as a warning.
    pub fn find(&self, quiet: bool) -> Result<FoundPerf> {
        let loc = Locator::from_env(self.explicit.clone(), self.trust)?;
        let found = locate(&loc)?;
        if let (Some(hint), false) = (&found.mismatch_hint, quiet) {
            crate::out::say(format!("warning: {hint}"));
        }
        Ok(found)
    }
}
