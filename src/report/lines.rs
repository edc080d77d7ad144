//! `report`'s "hot lines" section: the five BPF source lines (across programs) that hold the
//! most time, from the perf.data's BPF program info (what `annotate` reads), and the line the
//! own-code hint names. Kept apart from the folded-stack report: it needs the raw IPs.

use std::fmt::Write;
use std::path::Path;

use serde::Serialize;

use crate::bpfinfo::annotate::{annotate, annotate_from, Annotation, Request};
use crate::bpfinfo::source::SampleSource;
use crate::bpfinfo::{Aggregator, BpfInfo};
use crate::perf::PerfChoice;
use crate::profile::{self, Profile};

/// How many lines the section lists.
pub(crate) const HOT_LINES: usize = 5;

/// One hot line.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HotLine {
    /// The BPF function (name without `bpf_prog_<tag>_`).
    pub program: String,
    /// Its program id.
    pub id: u32,
    pub file: String,
    /// 0 without line info (then `offset` says where).
    pub line: u32,
    pub source: String,
    pub offset: Option<String>,
    /// % of all samples whose innermost BPF frame is this line.
    pub incl_percent: f64,
    /// % of all samples with the CPU in the line's own code.
    pub self_percent: f64,
    /// The helper it spends most in, with its share.
    pub top_helper: Option<(String, f64)>,
}

/// The hottest lines of the perf.data at `input`; `None` when it is not a perf.data with BPF
/// program info (a folded or text input, `--no-bpf-event`), or no sample maps to a line.
/// Runs its own `perf script` without a progress line, so it can run beside `report`'s.
pub fn hot_lines(input: &Path, kallsyms: Option<&Path>, perf: &PerfChoice) -> Option<Vec<HotLine>> {
    top_lines(&annotate(&request(input, kallsyms, perf)).ok()?)
}

/// A profile loaded as `profile::load` loads it, and its hot lines (`None` for input without
/// BPF program info). The hot lines need the raw IPs: with the built-in reader they are
/// aggregated in the same pass that folds the stacks; when perf script reads the file
/// instead, they take a pass of their own.
pub(crate) fn load_with_hot_lines(
    input: &Path,
    kallsyms: Option<&Path>,
    perf: &PerfChoice,
) -> anyhow::Result<(Profile, Option<Vec<HotLine>>)> {
    let info = crate::bpfinfo::annotate::load_info(input).ok();
    let Some((info, _)) = info.filter(|_| !perf.via_perf) else {
        let profile_read = profile::load(input, kallsyms, perf)?;
        let hot = (profile_read.kind == profile::folded::InputKind::PerfData)
            .then(|| hot_lines(input, kallsyms, perf))
            .flatten();
        return Ok((profile_read, hot));
    };
    let mut feed = crate::bpfinfo::annotate::ResolvedFeed::default();
    let mut seen = false;
    let mut observe = |sample: &profile::perfdata::ResolvedSample<'_>| {
        seen = true;
        feed.add(&info, sample);
    };
    let programs = info.programs();
    let profile_read = profile::load_observed(input, kallsyms, perf, &mut observe, programs)?;
    let hot = if seen {
        let mut agg = crate::bpfinfo::Aggregator::default();
        feed.finish(&info, &mut agg);
        hot_lines_from(input, perf, &info, agg)
    } else {
        hot_lines(input, kallsyms, perf)
    };
    Ok((profile_read, hot))
}

/// The hottest lines from samples already aggregated through `info` (in `report`'s own pass
/// over the perf.data at `input`).
pub(crate) fn hot_lines_from(
    input: &Path,
    perf: &PerfChoice,
    info: &BpfInfo,
    agg: Aggregator,
) -> Option<Vec<HotLine>> {
    top_lines(&annotate_from(&request(input, None, perf), info, None, agg).ok()?)
}

fn request<'a>(input: &'a Path, kallsyms: Option<&'a Path>, perf: &'a PerfChoice) -> Request<'a> {
    Request {
        source: SampleSource {
            input,
            kallsyms,
            perf,
            quiet: true,
        },
        prog: None,
        top: HOT_LINES,
        asm: false,
    }
}

fn top_lines(annotation: &Annotation) -> Option<Vec<HotLine>> {
    let mut all: Vec<HotLine> = annotation
        .programs
        .iter()
        .flat_map(|prog| {
            prog.lines.iter().map(move |row| HotLine {
                program: prog.name.clone(),
                id: prog.id,
                file: row.file.clone(),
                line: row.line,
                source: row.source.clone(),
                offset: row.offset.clone(),
                incl_percent: row.incl_percent,
                self_percent: row.self_percent,
                top_helper: row.helpers.first().map(|h| (h.name.clone(), h.percent)),
            })
        })
        .collect();
    all.sort_by(|annotation, b| b.incl_percent.total_cmp(&annotation.incl_percent));
    all.truncate(HOT_LINES);
    (!all.is_empty()).then_some(all)
}

fn place(hot: &HotLine) -> String {
    match (&hot.offset, hot.line) {
        (Some(off), _) => format!("{}{off}", hot.program),
        (None, number) => format!("line {number} of {}", hot.file),
    }
}

/// The own-code hint's line: the line with the most time in its own code, e.g. "line 99 of
/// hook.bpf.c (`if (bpf_map_lookup_elem(…))`) holds 6.1% of all samples in its own code".
pub(crate) fn own_code_hint_line(lines: &[HotLine]) -> Option<String> {
    let hottest = lines
        .iter()
        .filter(|hottest| hottest.self_percent > 0.0)
        .max_by(|a, b| a.self_percent.total_cmp(&b.self_percent))?;
    let src = if hottest.source.is_empty() {
        String::new()
    } else {
        format!(" (`{}`)", hottest.source)
    };
    Some(format!(
        "{}{src} in {} holds {:.1}% of all samples in its own code ({:.1}% with what it calls): `ebpf-prof annotate --asm --prog {}` shows its instructions",
        place(hottest),
        hottest.program,
        hottest.self_percent,
        hottest.incl_percent,
        hottest.program
    ))
}

/// The section as text.
pub fn render(lines: &[HotLine]) -> String {
    let mut out = String::from("\nhot lines (innermost BPF frame; `ebpf-prof annotate` for all)\n");
    for hot in lines {
        let helper = hot
            .top_helper
            .as_ref()
            .filter(|(_, p)| *p >= 0.05)
            .map_or_else(String::new, |(n, p)| format!("   [in {n} {p:.1}%]"));
        let _ = writeln!(
            out,
            "  {:5.1}% incl {:5.1}% self  {} ({}): {}{helper}",
            hot.incl_percent,
            hot.self_percent,
            place(hot),
            hot.program,
            hot.source
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hl(line: u32, incl: f64, selfp: f64) -> HotLine {
        HotLine {
            program: "path_check_callback".into(),
            id: 7,
            file: "hook.bpf.c".into(),
            line,
            source: format!("line {line} text"),
            offset: None,
            incl_percent: incl,
            self_percent: selfp,
            top_helper: None,
        }
    }

    #[test]
    fn the_hint_names_the_line_with_most_own_code() {
        let lines = [hl(44, 31.0, 2.0), hl(50, 10.0, 8.5), hl(60, 5.0, 0.0)];
        let hint = own_code_hint_line(&lines).unwrap();
        assert!(
            hint.starts_with("line 50 of hook.bpf.c (`line 50 text`)"),
            "{hint}"
        );
        assert!(hint.contains("8.5%"), "{hint}");
        assert_eq!(own_code_hint_line(&[hl(1, 3.0, 0.0)]), None);
    }

    #[test]
    fn offsets_stand_in_without_line_info() {
        let mut l = hl(0, 4.0, 4.0);
        l.offset = Some("+0x19b".into());
        assert!(render(&[l]).contains("path_check_callback+0x19b"));
    }
}
