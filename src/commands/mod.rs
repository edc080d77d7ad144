//! One file per subcommand, each a short script over the modules.

pub mod bench;
pub mod demo;
pub mod diff;
pub mod doctor;
pub mod flame;
pub mod hook;
pub mod overhead;
pub mod record;
pub mod report;

use crate::error::usage;
use crate::perf::locate::{locate, FoundPerf, Locator};
use anyhow::Result;
use regex::Regex;
use std::path::PathBuf;

/// The reference's filter for the hook's program symbols.
pub const DEFAULT_FILTER: &str = "security|path|file|open";

/// Which perf to use, as the user asked.
#[derive(Debug, Clone, Default)]
pub struct PerfChoice {
    /// `--perf PATH`.
    pub explicit: Option<PathBuf>,
    /// `--trust-perf`.
    pub trust: bool,
}

impl PerfChoice {
    /// Find and run-check perf; a version mismatch is printed as a warning.
    pub fn find(&self, quiet: bool) -> Result<FoundPerf> {
        let loc = Locator::from_env(self.explicit.clone(), self.trust)?;
        let found = locate(&loc)?;
        if let (Some(hint), false) = (&found.mismatch_hint, quiet) {
            eprintln!("ebpf-prof: warning: {hint}");
        }
        Ok(found)
    }
}

/// Compile a user's --filter regex, with a clear error.
pub fn filter_regex(filter: &str) -> Result<Regex> {
    Regex::new(filter).map_err(|e| {
        let text = e.to_string();
        let why = text
            .lines()
            .rfind(|l| !l.trim().is_empty())
            .unwrap_or("invalid")
            .trim_start_matches("error: ");
        usage(format!("--filter {filter:?} is not a valid regex: {why}"))
    })
}

/// Print a progress line on stderr.
pub fn say(msg: impl std::fmt::Display) {
    eprintln!("ebpf-prof: {msg}");
}
