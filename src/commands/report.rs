//! `ebpf-prof report perf.data [--json] [--top N]`: runs without root. Takes what `flame` takes
//! through the same loader, and says what share of the profile is BPF, where it hooks in,
//! which programs, which kernel functions they spend their time in, and what to do about it
//! (the reading is [`crate::report`]).

use crate::out;
use crate::perf::PerfChoice;
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
    let (p, hot) =
        report::lines::load_with_hot_lines(&opts.input, opts.kallsyms.as_deref(), &opts.perf)?;
    let own_line = hot.as_deref().and_then(report::lines::own_code_hint_line);
    let r = report::report_on(&p, &opts.input, opts.top, own_line)?;
    let text = if opts.json {
        let mut v = serde_json::to_value(&r)?;
        if let (Some(obj), Some(hot)) = (v.as_object_mut(), &hot) {
            obj.insert("hot_lines".into(), serde_json::to_value(hot)?);
        }
        serde_json::to_string_pretty(&v)? + "\n"
    } else {
        r.to_text()
            + &hot
                .as_deref()
                .map(report::lines::render)
                .unwrap_or_default()
    };
    out::stdout(&text)
}
