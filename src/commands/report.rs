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

/// The profile and its hot lines. The hot lines need the raw IPs: with the built-in reader
/// they are aggregated in the same pass that folds the stacks; when perf script reads the file
/// instead, they take a pass of their own.
fn load_with_hot_lines(
    opts: &ReportOptions,
) -> Result<(profile::Profile, Option<Vec<report::lines::HotLine>>)> {
    let kallsyms = opts.kallsyms.as_deref();
    let info = crate::bpfinfo::annotate::load_info(&opts.input).ok();
    let Some((info, _)) = info.filter(|_| !opts.perf.via_perf) else {
        let p = profile::load(&opts.input, kallsyms, &opts.perf)?;
        let hot = (p.kind == profile::folded::InputKind::PerfData)
            .then(|| report::lines::hot_lines(&opts.input, kallsyms, &opts.perf))
            .flatten();
        return Ok((p, hot));
    };
    let mut feed = crate::bpfinfo::annotate::ResolvedFeed::default();
    let mut seen = false;
    let mut observe = |s: &profile::perfdata::ResolvedSample<'_>| {
        seen = true;
        feed.add(&info, s);
    };
    let p = profile::load_observed(&opts.input, kallsyms, &opts.perf, &mut observe)?;
    let hot = if seen {
        let mut agg = crate::bpfinfo::Aggregator::default();
        feed.finish(&info, &mut agg);
        report::lines::hot_lines_from(&opts.input, &opts.perf, &info, agg)
    } else {
        report::lines::hot_lines(&opts.input, kallsyms, &opts.perf)
    };
    Ok((p, hot))
}

/// Run `report`.
pub fn run(opts: &ReportOptions) -> Result<()> {
    let (p, hot) = load_with_hot_lines(opts)?;
    let own_line = hot.as_deref().and_then(report::lines::own_code_hint_line);
    let r = report::report_on(
        &p,
        &opts.input,
        opts.kallsyms.as_deref(),
        opts.top,
        own_line,
    )?;
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
