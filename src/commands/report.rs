//! `ebpf-prof report perf.data [--json] [--top N]`: runs without root. Takes what `flame` takes
//! through the same loader, and says what share of the profile is BPF, where it hooks in,
//! which programs, which kernel functions they spend their time in, and what to do about it
//! (the reading is [`crate::report`]).

use crate::out;
use crate::perf::PerfChoice;
use crate::profile;
use crate::report;
use anyhow::Result;
use std::path::PathBuf;

/// Everything `report` takes.
#[derive(Debug, Clone)]
pub struct ReportOptions {
    pub input: PathBuf,
    pub json: bool,
    /// How many kernel functions and unresolved frames to list.
    pub top: usize,
    /// The kallsyms snapshot (default: INPUT.kallsyms if present).
    pub kallsyms: Option<PathBuf>,
    pub perf: PerfChoice,
}

/// Run `report`.
pub fn run(opts: &ReportOptions) -> Result<()> {
    let p = profile::load(&opts.input, opts.kallsyms.as_deref(), &opts.perf)?;
    let r = report::report_on(&p, &opts.input, opts.kallsyms.as_deref(), opts.top)?;
    let text = if opts.json {
        serde_json::to_string_pretty(&r)? + "\n"
    } else {
        r.to_text()
    };
    out::stdout(&text)
}
