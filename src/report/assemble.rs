//! From tallies to the [`Report`]: percentages, ordering, ids from the run record, hints and
//! warnings.

use super::kinds::{self, Category};
use super::resolve::{self, Resolver};
use super::walk::{self, Tally};
use super::*;
use crate::profile::prognames::ProgramNames;
use crate::profile::stacks::Stacks;
use crate::runrecord::ProgramSeen;
use std::collections::{BTreeMap, BTreeSet, HashMap};

/// Median folded count below which counts are taken for sample counts: a period-weighted stack
/// weighs at least one period (thousands of ns or cycles), a stack of counted samples a few.
const SAMPLE_COUNT_MEDIAN: u64 = 1000;

pub(super) fn build(input: &Input<'_>) -> Report {
    let resolved = input
        .kallsyms
        .map(|syms| resolve::resolve(input.stacks, &Resolver::new(syms)));
    let (stacks, outcomes) = match &resolved {
        Some((stacks, outcomes)) => (stacks, outcomes.as_slice()),
        None => (input.stacks, &[][..]),
    };
    let t = walk::tally(stacks);
    let (samples, samples_source) = samples(stacks, input.record, input.counted);
    let bpf = bpf_share(&t, samples, samples_source);
    let breakdown = breakdown(&t);
    let kernel_functions = kernel_functions(&t, input.top);
    let programs = programs(&t, input.record);
    let enough = bpf.samples.is_none_or(|n| n >= MIN_BPF_SAMPLES);
    let hints = if enough {
        hints(
            &breakdown,
            &kernel_functions,
            &programs,
            input.own_code_line.as_deref(),
        )
    } else {
        Vec::new()
    };
    let nearest: HashMap<&str, &str> = outcomes
        .iter()
        .filter_map(|o| Some((o.frame.as_str(), o.nearest.as_deref()?)))
        .collect();
    let mut r = Report {
        schema: crate::out::JSON_SCHEMA,
        input: input.name.clone(),
        event: input
            .record
            .map(|r| r.event_sampled.as_str())
            .or(input.event)
            .map(String::from),
        count_unit: count_unit(input, samples_source),
        total_weight: t.total,
        samples,
        samples_source,
        attach_points: attach_points(&t, input.record),
        packet_hooks: packet_hooks(&t),
        not_sampled: not_sampled(&t, input.record),
        programs,
        kernel_functions,
        breakdown,
        hints,
        resolved: resolved_only(outcomes),
        unresolved: unresolved(&t, input.top, &nearest),
        programs_ran: input.record.and_then(|r| r.programs_ran.clone()),
        warnings: Vec::new(),
        bpf,
    };
    packet_hints::word_for_packets(&r.packet_hooks, &mut r.hints);
    let packet = packet_hints::hints(&r.packet_hooks, &r.kernel_functions, r.bpf.percent);
    r.hints.extend(packet.into_iter().filter(|_| enough));
    r.warnings = warnings(&r, &t, input);
    r
}

/// The frames the snapshot named.
fn resolved_only(outcomes: &[resolve::Outcome]) -> Vec<resolve::Outcome> {
    outcomes
        .iter()
        .filter(|o| o.symbol.is_some())
        .cloned()
        .collect()
}

fn count_unit(input: &Input, source: SamplesSource) -> String {
    match (input.record, input.event, source) {
        (Some(r), _, _) => r.count_unit().to_string(),
        (None, Some(event), _) => crate::runrecord::count_unit(event).to_string(),
        (None, None, SamplesSource::FoldedCounts) => "samples".into(),
        (None, None, _) => "unknown".into(),
    }
}

fn samples(
    folded: &Stacks,
    record: Option<&RunRecord>,
    counted: Option<u64>,
) -> (Option<u64>, SamplesSource) {
    if let Some(n) = record.and_then(|r| r.perf_samples) {
        return (Some(n), SamplesSource::PerfRecord);
    }
    if let Some(n) = counted {
        return (Some(n), SamplesSource::Counted);
    }
    let mut counts: Vec<u64> = folded.stacks.iter().map(|s| s.count).collect();
    counts.sort_unstable();
    match counts.get(counts.len() / 2) {
        Some(&m) if record.is_none() && m < SAMPLE_COUNT_MEDIAN => {
            (Some(folded.total()), SamplesSource::FoldedCounts)
        }
        _ => (None, SamplesSource::Unknown),
    }
}

fn bpf_share(t: &Tally, samples: Option<u64>, source: SamplesSource) -> BpfShare {
    let in_bpf = match source {
        SamplesSource::FoldedCounts => Some(t.bpf),
        _ => samples.map(|n| (n as f64 * t.bpf as f64 / t.total.max(1) as f64).round() as u64),
    };
    BpfShare {
        percent: pct(t.bpf, t.total),
        programs_percent: pct(t.programs, t.total),
        glue_percent: pct(t.bpf - t.programs, t.total),
        unresolved_under_runners_percent: pct(t.under_runner, t.total),
        samples: in_bpf,
        min_samples: MIN_BPF_SAMPLES,
    }
}

fn heaviest(map: &HashMap<String, u64>) -> Option<(&String, u64)> {
    map.iter()
        .map(|(k, v)| (k, *v))
        .max_by(|a, b| a.1.cmp(&b.1).then_with(|| b.0.cmp(a.0)))
}

/// An ancestor of an attach point, with the attach point's share of it: the weight of the
/// stacks through both over the ancestor's inclusive weight (never over 100%).
fn ancestor(t: &Tally, anc: &Option<(String, u64)>) -> Option<Ancestor> {
    let (name, joint) = anc.as_ref()?;
    let incl = t.incl.get(name).copied().unwrap_or(0);
    Some(Ancestor {
        name: name.clone(),
        percent: pct(incl, t.total),
        hook_share: pct((*joint).min(incl), incl),
    })
}

fn attach_points(t: &Tally, record: Option<&RunRecord>) -> Vec<AttachPoint> {
    let mut out: Vec<AttachPoint> = t
        .attach
        .iter()
        .map(|(name, a)| {
            let incl = t.incl.get(name).copied().unwrap_or(a.bpf);
            AttachPoint {
                name: name.clone(),
                percent: pct(incl, t.total),
                bpf_percent: pct(a.bpf, t.total),
                bpf_share_of_it: pct(a.bpf, incl),
                parent: ancestor(t, &a.ancestors[0]),
                grandparent: ancestor(t, &a.ancestors[1]),
                programs: a.programs.iter().cloned().collect(),
                via: a.via.iter().cloned().collect(),
                attached_nowhere: attached_nowhere(t, &a.programs, record),
            }
        })
        .collect();
    out.sort_by(|a, b| b.bpf_percent.total_cmp(&a.bpf_percent));
    out
}

/// The packet hooks the stacks were entered from, heaviest first.
fn packet_hooks(t: &Tally) -> Vec<super::PacketHookShare> {
    let mut out: Vec<super::PacketHookShare> = t
        .hooks
        .iter()
        .map(|(hook, h)| super::PacketHookShare {
            hook: *hook,
            what: hook.describe().to_string(),
            bpf_percent: pct(h.bpf, t.total),
            attach_points: h.attach.iter().cloned().collect(),
        })
        .collect();
    out.sort_by(|a, b| b.bpf_percent.total_cmp(&a.bpf_percent));
    out
}

/// Of `programs` (entered at one attach point), those the recording's program list shows
/// attached nowhere: tail-call targets, entered in their caller's place. `None` when the
/// recording does not say (no program list, or a program not found in it by its tag).
fn attached_nowhere(
    t: &Tally,
    programs: &BTreeSet<String>,
    record: Option<&RunRecord>,
) -> Option<Vec<String>> {
    let loaded = &record?.loaded_programs;
    let mut nowhere = Vec::new();
    for name in programs {
        let tags = &t.progs.get(name)?.tags;
        let listed = loaded
            .iter()
            .find(|p| tags.contains(&p.tag))
            .or_else(|| only_one_named(loaded, name))?;
        if !listed.attached {
            nowhere.push(name.clone());
        }
    }
    Some(nowhere)
}

/// The one loaded program of this name, when exactly one has it. The frame of a program with
/// sub-functions carries its first function's tag, which is not the program's own tag, so a
/// tail-call target with sub-functions is found by its name.
fn only_one_named<'a>(
    loaded: &'a [crate::bpf::InventoryProgram],
    name: &str,
) -> Option<&'a crate::bpf::InventoryProgram> {
    let mut named = loaded.iter().filter(|p| p.name == name);
    let first = named.next()?;
    named.next().is_none().then_some(first)
}

/// A program's attach points, the one it was entered from most first.
fn by_weight(attach: &BTreeMap<String, u64>) -> Vec<String> {
    let mut points: Vec<(&String, &u64)> = attach.iter().collect();
    points.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
    points.into_iter().map(|(name, _)| name.clone()).collect()
}

fn programs(t: &Tally, record: Option<&RunRecord>) -> Vec<Program> {
    let mut out: Vec<Program> = t
        .progs
        .iter()
        .map(|(name, p)| {
            let seen = recorded(record, &p.tags, name);
            let mut tags = p.tags.clone();
            tags.extend(seen.map(|s| s.tag.clone()));
            Program {
                name: name.clone(),
                id: seen.and_then(|s| s.id),
                tags: tags.into_iter().collect(),
                percent: pct(p.incl, t.total),
                self_percent: pct(p.own, t.total),
                attach_points: by_weight(&p.attach),
                functions: functions(t, name, p),
            }
        })
        .collect();
    out.sort_by(|a, b| b.percent.total_cmp(&a.percent));
    out
}

fn functions(t: &Tally, prog: &str, p: &walk::ProgTally) -> Vec<Function> {
    let mut out: Vec<Function> = p
        .functions
        .iter()
        .map(|(name, f)| Function {
            name: name.clone(),
            depth: if name == prog { Some(0) } else { f.depth },
            called_from: heaviest(&f.callers).map(|(c, _)| c.clone()),
            percent: pct(f.incl, t.total),
            self_percent: pct(f.own, t.total),
            unwound_short_percent: pct(f.unwound_short, t.total),
        })
        .collect();
    out.sort_by(|a, b| {
        (a.depth.unwrap_or(usize::MAX), a.name != prog)
            .cmp(&(b.depth.unwrap_or(usize::MAX), b.name != prog))
            .then_with(|| b.percent.total_cmp(&a.percent))
    });
    out
}

fn not_sampled(t: &Tally, record: Option<&RunRecord>) -> Vec<NotSampled> {
    let seen: BTreeSet<&str> = t
        .progs
        .values()
        .flat_map(|p| p.functions.keys())
        .map(String::as_str)
        .collect();
    let names = ProgramNames::from_record(record);
    record
        .into_iter()
        .flat_map(|r| &r.bpf_programs)
        .map(|p| (names.of_tag(&p.tag, &p.name), p))
        .filter(|(name, _)| !seen.contains(name.as_str()))
        .map(|(name, p)| NotSampled { name, id: p.id })
        .collect()
}

/// The run record's entry for a program shown as `name` whose frames carry `tags`: by tag,
/// else by the name shown for it (a program with sub-functions is framed under its first
/// function's tag, which is not the one kallsyms lists).
fn recorded<'r>(
    record: Option<&'r RunRecord>,
    tags: &BTreeSet<String>,
    name: &str,
) -> Option<&'r ProgramSeen> {
    let seen = &record?.bpf_programs;
    let names = ProgramNames::from_record(record);
    seen.iter()
        .find(|s| tags.contains(&s.tag))
        .or_else(|| seen.iter().find(|s| names.of_tag(&s.tag, &s.name) == name))
}

fn kernel_functions(t: &Tally, top: usize) -> Vec<KernelFunction> {
    let mut all: Vec<(&String, &walk::KfuncTally)> = t.kfuncs.iter().collect();
    all.sort_by(|a, b| b.1.incl.cmp(&a.1.incl).then_with(|| a.0.cmp(b.0)));
    all.into_iter()
        .take(top)
        .map(|(name, k)| {
            let mut callers: Vec<Caller> = k
                .callers
                .iter()
                .map(|(c, n)| Caller {
                    name: c.clone(),
                    percent: pct(*n, t.total),
                })
                .collect();
            callers.sort_by(|a, b| b.percent.total_cmp(&a.percent).then(a.name.cmp(&b.name)));
            callers.truncate(3);
            KernelFunction {
                name: name.clone(),
                percent: pct(k.incl, t.total),
                self_percent: pct(k.own, t.total),
                category: kinds::of_function(name),
                called_from: callers,
            }
        })
        .collect()
}

fn breakdown(t: &Tally) -> Vec<CategoryShare> {
    let mut out: Vec<CategoryShare> = t
        .categories
        .iter()
        .map(|(c, n)| CategoryShare {
            category: *c,
            percent: pct(*n, t.total),
            share_of_bpf: pct(*n, t.bpf),
        })
        .collect();
    out.sort_by(|a, b| b.share_of_bpf.total_cmp(&a.share_of_bpf));
    out
}

fn hints(
    cats: &[CategoryShare],
    kfuncs: &[KernelFunction],
    progs: &[Program],
    own_line: Option<&str>,
) -> Vec<Hint> {
    let evidence = own_line.map_or(kinds::OwnCodeEvidence::None, kinds::OwnCodeEvidence::Line);
    let mut v: Vec<Hint> = cats
        .iter()
        .filter_map(|c| {
            let who = match c.category {
                Category::OwnCode => progs
                    .iter()
                    .flat_map(|p| &p.functions)
                    .max_by(|a, b| a.self_percent.total_cmp(&b.self_percent))
                    .map(|f| f.name.as_str()),
                cat => kfuncs
                    .iter()
                    .find(|k| k.category == Some(cat) && !kinds::is_wakeup(&k.name))
                    .map(|k| k.name.as_str()),
            };
            if c.category == Category::Output {
                return kinds::output_hint(c.share_of_bpf, who, wakeup(c, kfuncs));
            }
            kinds::hint(c.category, c.share_of_bpf, who, evidence)
        })
        .collect();
    kinds::rank(&mut v);
    v
}

/// The heaviest wake-up function under the output (`cat`), with its share of the time in BPF.
fn wakeup<'a>(cat: &CategoryShare, kfuncs: &'a [KernelFunction]) -> Option<(&'a str, f64)> {
    if cat.share_of_bpf <= 0.0 {
        return None;
    }
    let in_bpf = 100.0 * cat.percent / cat.share_of_bpf;
    kfuncs
        .iter()
        .filter(|k| kinds::is_wakeup(&k.name))
        .max_by(|a, b| a.percent.total_cmp(&b.percent))
        .map(|k| (k.name.as_str(), 100.0 * k.percent / in_bpf))
}

fn unresolved(t: &Tally, top: usize, nearest: &HashMap<&str, &str>) -> Vec<Unresolved> {
    let mut out: Vec<Unresolved> = t
        .unresolved
        .iter()
        .map(|((frame, parent), (role, n))| Unresolved {
            frame: frame.clone(),
            role: *role,
            parent: parent.clone(),
            percent: pct(*n, t.total),
            nearest: nearest.get(frame.as_str()).map(|s| s.to_string()),
        })
        .collect();
    out.sort_by(|a, b| b.percent.total_cmp(&a.percent).then(a.frame.cmp(&b.frame)));
    out.truncate(top);
    out
}

fn warnings(r: &Report, t: &Tally, input: &Input<'_>) -> Vec<String> {
    let mut w = Vec::new();
    let not_run = r.programs_ran.as_ref().filter(|p| !p.fired());
    if let Some(ran) = not_run {
        w.push(did_not_run(ran));
    }
    w.extend(input.kernel_symbols_note.iter().map(|n| n.to_string()));
    if input.stacks.skipped > 0 {
        w.push(format!(
            "{} malformed folded lines were skipped",
            input.stacks.skipped
        ));
    }
    if t.no_kernel > t.total / 2 {
        w.push(format!("{:.0}% of the samples have no named kernel frame: kernel names were hidden from perf (kernel.kptr_restrict) and no kallsyms snapshot named them; give the run's snapshot with --kallsyms", pct(t.no_kernel, t.total)));
    }
    if t.bpf == 0 {
        // When the programs did not run, that is why no stack passes through them.
        if not_run.is_none() {
            w.push(no_bpf(r));
        }
    } else if let Some(n) = r.bpf.samples.filter(|&n| n < MIN_BPF_SAMPLES) {
        w.push(too_few(n, input.record));
    }
    if r.samples_source == SamplesSource::Unknown {
        w.push("the sample count is unknown (no perf.data.json beside the input, and the counts are periods): cannot tell whether enough samples fell inside BPF".into());
    }
    w
}

/// The cause named first: the recording's programs did not run under its benchmark.
pub(super) fn did_not_run(ran: &crate::runrecord::ProgramsRan) -> String {
    format!(
        "the loaded programs did not run during the benchmark: {:.2} runs per timed {} in the short run `record` made before perf started ({}): {}",
        ran.runs_per_op,
        ran.op,
        ran.programs.join(", "),
        ran.why
    )
}

fn no_bpf(r: &Report) -> String {
    let mut s = "no sampled stack passes through a BPF program: was the hook attached while recording, with net.core.bpf_jit_kallsyms=1? (`ebpf-prof record --load HOOK.bpf.o` does both)".to_string();
    if r.bpf.unresolved_under_runners_percent > 0.0 {
        s.push_str(&format!("; {:.1}% of the samples sit in unresolved frames right under a function that runs BPF programs: probably programs perf could not name (record as root, or give the run's kallsyms snapshot to a folded file with addresses)", r.bpf.unresolved_under_runners_percent));
    }
    s
}

fn too_few(n: u64, record: Option<&RunRecord>) -> String {
    let factor = (MIN_BPF_SAMPLES as f64 / n.max(1) as f64).ceil() as u64;
    let margin = 98.0 / (n.max(1) as f64).sqrt();
    let more = match record.and_then(bench_iterations) {
        Some(iters) => format!(
            "record about {factor}× as many iterations (-n {})",
            iters.saturating_mul(factor)
        ),
        None => format!("record about {factor}× as long"),
    };
    format!("only about {n} samples fall inside BPF (fewer than {MIN_BPF_SAMPLES}): the shares are rough (up to ±{margin:.0} points) and no hint is given; {more}, or sample faster (a higher -F)")
}

/// The iteration count of `ebpf-prof bench -n N`, when that was the benchmark.
fn bench_iterations(r: &RunRecord) -> Option<u64> {
    if r.command.get(1).map(String::as_str) != Some("bench") {
        return None;
    }
    let i = r
        .command
        .iter()
        .position(|a| a == "-n" || a == "--iterations")?;
    r.command.get(i + 1)?.parse().ok()
}
