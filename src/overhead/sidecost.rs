//! `overhead --side-cost`: the hook measured twice, on purpose. Once on the operation that fires
//! its programs (their cost, inside the operation that makes their event), once on an unrelated
//! operation that fires none of them (what having them attached costs everything else: for a
//! syscall tracepoint, the tracing slow path every system call then takes). Each measurement
//! has the whole `--max-time`; gates, the plot, `--keep` and `--profile` are the first's.

use super::arms::ArmSpec;
use super::output::{write_user_file, Report, EXPORT_JSON};
use super::{gate_exit, measure_and_report, OverheadOptions};
use crate::bench::choose::{self, Chosen, OpChoice};
use crate::bench::{OpKind, Operation};
use crate::error::usage;
use crate::host::Host;
use crate::out::say;
use crate::signals::Interrupts;
use anyhow::Result;
use serde::Serialize;

/// The unrelated operations tried, in this order: cheap system calls with no set-up.
const UNRELATED: [Operation; 5] = [
    Operation::Openat,
    Operation::Read,
    Operation::Stat,
    Operation::Write,
    Operation::Mmap,
];

/// Everything `--side-cost --json` prints.
#[derive(Debug, Serialize)]
pub struct SideCostReport {
    /// The version of this document ([`crate::out::JSON_SCHEMA`]).
    pub schema: u32,
    /// On the operation that fires the programs.
    pub own: Report,
    /// On an operation that fires none of them (`None` when every operation fires them).
    pub side: Option<Report>,
    /// One sentence with both figures.
    pub summary: String,
}

/// The first unrelated operation that fires none of `chosen`'s programs.
fn unrelated(chosen: &Chosen) -> Option<Operation> {
    UNRELATED
        .into_iter()
        .find(|&op| op != chosen.op && !chosen.programs.iter().any(|p| p.fires.inside(op)))
}

/// Measure on the hook's own operation, then on an unrelated one; print both and the summary.
pub fn run(
    o: &OverheadOptions,
    arms: (&ArmSpec, &ArmSpec, super::Mode),
    host_cpu: (&Host, u32),
    chosen: Option<&Chosen>,
    watch: &[u32],
    ints: &Interrupts,
) -> Result<()> {
    let Some(chosen) = chosen else {
        return Err(usage(
            "--side-cost is for the built-in bench with --load or --attach-cmd: it times two of its operations",
        ));
    };
    let other = unrelated(chosen);
    say(format!(
        "side cost, 1/2: on {}, the hook's own event",
        chosen.op
    ));
    let own = measure_and_report(o, arms, host_cpu, Some(chosen.clone()), watch, ints)?;
    let side = match other {
        Some(op) => {
            say(format!(
                "side cost, 2/2: on {op}, which fires none of the programs"
            ));
            let side_o = o.with_op(OpKind::new(op, o.path.clone()), OpChoice::Given);
            let side_chosen = choose::given(op, OpChoice::Given, chosen.programs.clone());
            Some(measure_and_report(
                &side_o,
                arms,
                host_cpu,
                Some(side_chosen),
                watch,
                ints,
            )?)
        }
        None => {
            say("every operation fires the programs (a hook on every system call): there is no unrelated operation to measure a side cost on");
            None
        }
    };
    let doc = SideCostReport {
        schema: crate::out::JSON_SCHEMA,
        summary: summary(&own.report, side.as_ref().map(|s| &s.report)),
        own: own.report,
        side: side.map(|s| s.report),
    };
    emit(o, &doc, &own.rounds)?;
    if let Some(dir) = &o.opened.profile {
        let both = [("base", arms.0), ("treat", arms.1)];
        super::profile::record_arms(dir, both, &own.bench, &doc.own.comparison)?;
    }
    gate_exit(&doc.own.gates)
}

/// "side cost: +319 ns at p50 [277, 360] on exec, its own event (the programs ran 1.00 times
/// per exec); +60 ns [50, 69] on openat, which fires none of them: …".
fn summary(own: &Report, side: Option<&Report>) -> String {
    let p50 = |r: &Report| {
        r.comparison.diff(50.0).map_or_else(
            || "no p50 difference".to_string(),
            |d| format!("{:+.0} ns at p50 [{:.0}, {:.0}]", d.delta, d.lo, d.hi),
        )
    };
    let op = |r: &Report| r.op.as_ref().map_or("?", |c| c.op.name()).to_string();
    let runs = |r: &Report| {
        r.ran
            .as_ref()
            .and_then(|x| x.runs_per_op)
            .map_or_else(String::new, |n| {
                format!(" (the programs ran {n:.2} times per {})", op(r))
            })
    };
    let mut s = format!(
        "side cost: {} on {}, its own event{}",
        p50(own),
        op(own),
        runs(own)
    );
    match side {
        Some(side) => s.push_str(&format!(
            "; {} on {}, which fires none of them{}: what every operation that does not fire the programs pays while they are attached",
            p50(side),
            op(side),
            runs(side)
        )),
        None => s.push_str("; no unrelated operation: every one fires the programs"),
    }
    s
}

/// Print both tables and the summary (or the JSON document), write the first measurement's
/// files.
fn emit(o: &OverheadOptions, doc: &SideCostReport, own_rounds: &super::Rounds) -> Result<()> {
    let json = serde_json::to_string_pretty(doc)? + "\n";
    let text = match &doc.side {
        Some(side) => format!("{}\n{}\n{}\n", doc.own.table(), side.table(), doc.summary),
        None => format!("{}\n{}\n", doc.own.table(), doc.summary),
    };
    crate::out::stdout(if o.json { &json } else { &text })?;
    if let Some(p) = &o.export_json {
        write_user_file(p, EXPORT_JSON, json.as_bytes())?;
    }
    doc.own.write_files(o, own_rounds)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_unrelated_operation_fires_none_of_the_programs() {
        let points = |list: &[&str]| -> Vec<(String, String)> {
            list.iter()
                .enumerate()
                .map(|(i, p)| (format!("p{i}"), p.to_string()))
                .collect()
        };
        let exec = choose::choose(&points(&["tracepoint/syscalls/sys_enter_execve"]));
        assert_eq!(unrelated(&exec), Some(Operation::Openat));
        let open_read = choose::choose(&points(&["lsm/file_open", "fentry/vfs_read"]));
        assert_eq!(unrelated(&open_read), Some(Operation::Stat));
        let every = choose::choose(&points(&["tracepoint/raw_syscalls/sys_enter"]));
        assert_eq!(unrelated(&every), None);
    }
}
