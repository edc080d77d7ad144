//! The report of a test run: per class the verdict, the packets, the p50 per run with its
//! interval and an example packet, as a table or as JSON (`test_run.classes[]`), with the
//! gates and the notes.

use super::classes::{Class, Family, Rewrite};
use super::kernel::{Outcome, RunMode};
use super::measure::{Ended, Plan, TimerCost, Timing};
use super::setup::ProgramChoice;
use super::TestRunOptions;
use crate::packets::Packet;
use crate::stats::rank::median_interval;
use serde::Serialize;

/// What [`build`] reads besides the classes and samples.
pub struct Context<'a> {
    pub options: &'a TestRunOptions,
    pub program: &'a ProgramChoice,
    pub packets: &'a [Packet],
    pub outcomes: &'a [Vec<Option<Outcome>>],
    pub plan: &'a Plan,
    pub ended: Ended,
    pub timer: TimerCost,
}

/// The whole report; `--json` prints `{"test_run": …}`.
#[derive(Debug, Clone, Serialize)]
pub struct TestRunReport {
    pub object: String,
    pub compare: Option<String>,
    pub program: String,
    pub section: String,
    pub kind: String,
    /// `built-in`, or the capture's path.
    pub packets_from: String,
    pub packets: usize,
    /// Packets the kernel's test run refused (length out of its range).
    pub refused: usize,
    /// `plain` or `live_frames`.
    pub mode: &'static str,
    pub confidence: f64,
    pub seed: u64,
    pub classes: Vec<ClassReport>,
    pub gates: Vec<GateReport>,
    pub notes: Vec<String>,
}

/// One class.
#[derive(Debug, Clone, Serialize)]
pub struct ClassReport {
    pub verdict: String,
    pub retval: u32,
    pub family: Family,
    pub protocol: String,
    pub destination_port: Option<u16>,
    pub packets: usize,
    /// The median of the batches' per-run cost, and its interval.
    pub p50_ns: f64,
    pub lo_ns: f64,
    pub hi_ns: f64,
    /// The cross-check: the median of the batches' slopes of the kernel's own means (whole ns).
    pub kernel_p50_ns: f64,
    pub batches: usize,
    /// Runs in the shorter call of a batch.
    pub repeat: u32,
    /// `slope` (R and 2R runs on one buffer) or `fresh_copy` (one run per call).
    pub timing: &'static str,
    pub rewrites: bool,
    pub example: String,
    /// `--compare`: the second object on the same packets.
    pub compare: Option<CompareReport>,
}

/// The second object in one class, and the difference (second − first).
#[derive(Debug, Clone, Serialize)]
pub struct CompareReport {
    pub verdict: String,
    pub p50_ns: f64,
    pub lo_ns: f64,
    pub hi_ns: f64,
    pub delta_ns: f64,
    pub delta_lo_ns: f64,
    pub delta_hi_ns: f64,
}

/// One gate on one class.
#[derive(Debug, Clone, Serialize)]
pub struct GateReport {
    pub gate: &'static str,
    pub limit: f64,
    pub class: String,
    /// The lower end of the interval the gate looks at.
    pub lower_end: f64,
    pub exceeded: bool,
    pub message: String,
}

/// The report of the batches.
pub fn build(
    context: &Context<'_>,
    classes: &[Class],
    samples: &[Vec<Vec<f64>>],
    kernel_samples: &[Vec<Vec<f64>>],
) -> TestRunReport {
    let o = context.options;
    let mut reports: Vec<ClassReport> = classes
        .iter()
        .enumerate()
        .map(|(index, class)| {
            let mut report = class_report(context, index, class, &samples[index]);
            report.kernel_p50_ns = median_interval(&kernel_samples[index][0], 0.5)
                .map_or(f64::NAN, |interval| interval.estimate);
            report
        })
        .collect();
    reports.sort_by(|a, b| a.p50_ns.total_cmp(&b.p50_ns));
    let refused = context.outcomes[0].iter().filter(|o| o.is_none()).count();
    TestRunReport {
        object: o.object.display().to_string(),
        compare: o.compare.as_ref().map(|p| p.display().to_string()),
        program: context.program.name.clone(),
        section: context.program.section.clone(),
        kind: context.program.kind.to_string(),
        packets_from: match &o.packets {
            super::PacketSource::Builtin => "built-in".into(),
            super::PacketSource::Capture(path) => path.display().to_string(),
        },
        packets: context.packets.len(),
        refused,
        mode: match o.mode {
            RunMode::Plain => "plain",
            RunMode::LiveFrames => "live_frames",
        },
        confidence: o.confidence,
        seed: o.seed,
        gates: Vec::new(),
        notes: notes(context, classes, refused),
        classes: reports,
    }
}

fn class_report(
    context: &Context<'_>,
    index: usize,
    class: &Class,
    per_object: &[Vec<f64>],
) -> ClassReport {
    let o = context.options;
    let kind = context.program.kind;
    let interval = median_interval(&per_object[0], o.confidence);
    let (p50_ns, lo_ns, hi_ns) =
        interval.map_or((f64::NAN, f64::NAN, f64::NAN), |i| (i.estimate, i.lo, i.hi));
    let plan = &context.plan.classes[index];
    let compare = per_object.get(1).map(|second| {
        let deltas: Vec<f64> = second
            .iter()
            .zip(&per_object[0])
            .map(|(b, a)| b - a)
            .collect();
        let own = median_interval(second, o.confidence);
        let delta = median_interval(&deltas, o.confidence);
        let nan = (f64::NAN, f64::NAN, f64::NAN);
        let (p50, lo, hi) = own.map_or(nan, |i| (i.estimate, i.lo, i.hi));
        let (d, dlo, dhi) = delta.map_or(nan, |i| (i.estimate, i.lo, i.hi));
        CompareReport {
            verdict: second_verdict(context, class),
            p50_ns: p50,
            lo_ns: lo,
            hi_ns: hi,
            delta_ns: d,
            delta_lo_ns: dlo,
            delta_hi_ns: dhi,
        }
    });
    ClassReport {
        verdict: kind.verdict_name(class.key.retval),
        retval: class.key.retval,
        family: class.key.family,
        protocol: class.key.protocol.to_string(),
        destination_port: class.key.destination_port,
        packets: class.packets.len(),
        p50_ns,
        lo_ns,
        hi_ns,
        kernel_p50_ns: f64::NAN,
        batches: per_object[0].len(),
        repeat: plan.repeat,
        timing: match plan.timing {
            Timing::Slope => "slope",
            Timing::FreshCopy => "fresh_copy",
        },
        rewrites: class.rewrite == Rewrite::Rewrites,
        example: class.example.clone(),
        compare,
    }
}

/// The second object's verdict on a class's packets: one name, or `mixed (…)`.
fn second_verdict(context: &Context<'_>, class: &Class) -> String {
    let kind = context.program.kind;
    let mut names: Vec<String> = class
        .packets
        .iter()
        .filter_map(|index| context.outcomes[1][*index].as_ref())
        .map(|outcome| kind.verdict_name(outcome.retval))
        .collect();
    names.sort();
    names.dedup();
    match names.len() {
        0 => "refused".into(),
        1 => names.remove(0),
        _ => format!("mixed ({})", names.join(", ")),
    }
}

fn notes(context: &Context<'_>, classes: &[Class], refused: usize) -> Vec<String> {
    let mut notes = Vec::new();
    if refused > 0 {
        notes.push(format!(
            "{refused} of {} packets were refused by the kernel's test run (shorter than an Ethernet header or longer than a page less its head room) and left out",
            context.packets.len()
        ));
    }
    let fresh: Vec<&str> = classes
        .iter()
        .zip(&context.plan.classes)
        .filter(|(_, plan)| plan.timing == Timing::FreshCopy)
        .map(|(class, _)| class.example.as_str())
        .collect();
    if !fresh.is_empty() {
        notes.push(format!(
            "the program rewrites its packet ({}): a second run on one buffer would see the rewritten packet, so those classes are timed one run per call on a fresh copy{}",
            fresh.join("; "),
            match context.timer {
                TimerCost::TakenOff => ", less what the kernel's timing adds to one run (from the untouched classes of the same batch)",
                TimerCost::Included => "; no class is left untouched to tell what the kernel's timing adds to one run, so it is included (two clock readings)",
            }
        ));
    }
    if let Ended::Budget { batches } = context.ended {
        notes.push(format!(
            "the time budget (--max-time) ended the batches after {batches} per class"
        ));
    }
    if context.options.mode == RunMode::LiveFrames {
        notes.push("live frames: each verdict carried out in a private network namespace (PASS up its stack, whose loopback is down; TX and REDIRECT to a device that cannot send them): the figures include what the kernel does after the program".into());
    }
    if context.program.others > 0 {
        notes.push(format!(
            "only {} ran: the object's {} other programs are not packet programs or come after it",
            context.program.name, context.program.others
        ));
    }
    notes
}
