//! `ebpf-prof report perf.data [--json] [--top N]`: runs without root. Takes what `flame` takes
//! (perf.data, `perf script` text, folded stacks) through the same loader, and says what share
//! of the profile is BPF, where it hooks in, which programs, which kernel functions they spend
//! their time in, and what to do about it.

use super::flame::{is_broken_pipe, load, Profile};
use super::{say, PerfChoice};
use crate::folded::Folded;
use crate::host::kallsyms::{self, Symbol};
use crate::report::{self, Input, Report};
use crate::runfiles::RunFiles;
use anyhow::Result;
use std::io::Write;
use std::path::{Path, PathBuf};

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
    let p = load(&opts.input, opts.kallsyms.as_deref(), &opts.perf)?;
    let r = report_on(&p, &opts.input, opts.kallsyms.as_deref(), opts.top);
    let text = if opts.json {
        serde_json::to_string_pretty(&r)? + "\n"
    } else {
        r.to_text()
    };
    let mut out = std::io::stdout().lock();
    match out
        .write_all(text.as_bytes())
        .and_then(|()| out.flush())
        .map_err(anyhow::Error::from)
    {
        Err(e) if is_broken_pipe(&e) => Ok(()),
        other => other,
    }
}

/// The report on a loaded profile; `input` locates the run's kallsyms snapshot unless
/// `kallsyms` names one.
pub fn report_on(p: &Profile, input: &Path, kallsyms: Option<&Path>, top: usize) -> Report {
    let folded = Folded::parse(&p.folded);
    let syms = snapshot(input, kallsyms);
    report::build(&Input {
        name: input.display().to_string(),
        folded: &folded,
        record: p.record.as_ref(),
        kallsyms: syms.as_deref(),
        top,
    })
}

/// The kallsyms snapshot to name unresolved addresses with, if there is a readable one.
fn snapshot(input: &Path, explicit: Option<&Path>) -> Option<Vec<Symbol>> {
    let path = explicit
        .map(Path::to_path_buf)
        .or_else(|| Some(RunFiles::new(input).kallsyms()).filter(|p| p.exists()))?;
    match std::fs::read_to_string(&path) {
        Ok(text) => Some(kallsyms::parse(&text)),
        Err(e) => {
            say(format!(
                "warning: cannot read the kallsyms snapshot {}: {e}; unresolved frames stay unnamed",
                path.display()
            ));
            None
        }
    }
}
