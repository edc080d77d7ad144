//! The kernel's own view: in extra attached rounds (never the latency rounds — run stats cost
//! ~20 ns a run), BPF run stats are on, and each program's run count and run time are read
//! before and after the benchmark.
//!
//! The programs may also run outside the timed span — a hook on every system call runs on the
//! `close(2)` after each openat too — and only their runs inside it are part of the latency
//! delta. With the built-in bench, one more stats round runs it with `--untimed-only` (the loop
//! without the timed operation: the close of each openat on no fd), and its runs and time are
//! taken off. With the user's own bench that cannot be done, and a program that runs more than
//! once per iteration makes its time inside the span unknown: the report says so instead of
//! subtracting.

use super::arms::Arm;
use super::runner::BenchRun;
use crate::bpf::{self, ProgramStats};
use crate::signals::Interrupts;
use anyhow::Result;
use serde::Serialize;

/// One program's figures over the stats rounds of one arm.
#[derive(Debug, Clone, Serialize)]
pub struct ProgramView {
    pub arm: String,
    pub id: u32,
    pub name: String,
    pub runs: u64,
    pub run_time_ns: u64,
    /// Runs per timed operation: per iteration of the built-in bench, per latency a user's
    /// bench printed (other processes' events count too).
    pub runs_per_iteration: f64,
    /// Mean run time per run, ns.
    pub mean_run_ns: f64,
    /// Runs and time per iteration outside the timed span (the `--untimed-only` round of the
    /// built-in bench); `None` with the user's bench.
    pub outside_runs_per_iteration: Option<f64>,
    pub outside_ns_per_iteration: Option<f64>,
    /// Whether a tail-call table (`PROG_ARRAY`) of the arm holds it: its runs and time are
    /// counted under the program that tail-called it.
    pub tail_call_target: bool,
    /// Whether nothing attaches it (no link, perf event or cgroup): a loader that loads a
    /// program it never attaches (syscount's `sys_enter` without `-L`).
    pub attached_nowhere: bool,
}

impl ProgramView {
    /// Runs per iteration inside the timed span, when that can be told.
    pub fn runs_in_span(&self) -> Option<f64> {
        match self.outside_runs_per_iteration {
            Some(out) => Some((self.runs_per_iteration - out).max(0.0)),
            None => {
                (self.runs_per_iteration <= ONCE_PER_ITERATION).then_some(self.runs_per_iteration)
            }
        }
    }

    /// Own time per iteration inside the timed span, ns, when that can be told.
    pub fn ns_in_span(&self) -> Option<f64> {
        let all = self.runs_per_iteration * self.mean_run_ns;
        match self.outside_ns_per_iteration {
            Some(out) => Some((all - out).max(0.0)),
            None => (self.runs_per_iteration <= ONCE_PER_ITERATION).then_some(all),
        }
    }

    /// One line for the table.
    pub fn sentence(&self, method: &str) -> String {
        if self.runs == 0 && self.tail_call_target {
            return format!("kernel ({} arm): {} never ran on its own: it is a tail-call target (a prog array of the arm holds it), and its runs and time count under the program that tail-called it", self.arm, self.name);
        }
        if self.runs == 0 && self.attached_nowhere {
            return format!("kernel ({} arm): {} is loaded, attached nowhere: no event runs it (its loader never attached it)", self.arm, self.name);
        }
        if self.runs == 0 {
            return format!("kernel ({} arm): {} is attached but did not run during the stats rounds: its event did not fire (the bench does not trigger it)", self.arm, self.name);
        }
        if self.runs_per_iteration < NONE_BELOW && !self.tail_call_target {
            return format!(
                "kernel ({} arm, {method}): {} is attached but did not run inside the timed operations ({:.2} runs per timed operation, {} in all: other processes' events); the bench does not trigger it",
                self.arm, self.name, self.runs_per_iteration, self.runs
            );
        }
        let inside = match (self.runs_in_span(), self.outside_runs_per_iteration) {
            (Some(r), Some(_)) => format!(", {r:.2} of them inside the timed span"),
            (None, _) => ", some outside the timed span (this bench cannot tell how many)".into(),
            _ => String::new(),
        };
        format!(
            "kernel ({} arm, {method}): {} ran {:.2} times per timed operation{inside}, {:.0} ns per run",
            self.arm, self.name, self.runs_per_iteration, self.mean_run_ns
        )
    }
}

/// Below this many runs per timed operation the programs did not run inside it: other
/// processes' events add a few runs.
pub const NONE_BELOW: f64 = 0.05;

/// Up to this many runs per iteration count as "once": other processes' events add a few.
const ONCE_PER_ITERATION: f64 = 1.05;

/// The kernel's view of each attached arm.
#[derive(Debug, Clone, Serialize, Default)]
pub struct KernelView {
    /// How stats were enabled (BPF_ENABLE_STATS or the sysctl).
    pub method: String,
    pub rounds: usize,
    pub programs: Vec<ProgramView>,
}

impl KernelView {
    /// The programs' own time per benchmark iteration inside the timed span for one arm, ns:
    /// `None` when the arm has no programs or the time inside the span cannot be told.
    pub fn time_in_span(&self, arm: &str) -> Option<f64> {
        let v: Vec<&ProgramView> = self.programs.iter().filter(|p| p.arm == arm).collect();
        if v.is_empty() {
            return None;
        }
        v.iter().map(|p| p.ns_in_span()).sum()
    }
}

/// Iterations at least of the built-in bench in a stats round: each round is a process of its
/// own, whose start-up makes system calls of its own (the loader's openats), a few dozen that
/// rounds of a few hundred iterations would count as a third more runs per iteration.
pub const MIN_ITERATIONS: usize = 5_000;

/// Run `rounds` stats rounds for every attached arm (and one `--untimed-only` round of the
/// built-in bench, to take off the runs outside the timed span).
pub fn collect(
    arms: [&mut Arm; 2],
    bench: &BenchRun,
    rounds: usize,
    iterations: usize,
    ints: &Interrupts,
) -> Result<KernelView> {
    let mut view = KernelView {
        rounds,
        ..Default::default()
    };
    if rounds == 0 {
        return Ok(view);
    }
    // The built-in bench runs at least MIN_ITERATIONS a stats round; a user's runs as it is,
    // its iterations the -n given.
    let iterations = if bench.builtin {
        iterations.max(MIN_ITERATIONS)
    } else {
        iterations
    };
    let bench = &bench.with_iterations(iterations);
    for (i, spec) in arms.into_iter().enumerate() {
        if matches!(spec, Arm::Detached) {
            continue;
        }
        let arm = if i == 0 { "base" } else { "treat" };
        let views = arm_view(spec, bench, (rounds, iterations), arm, ints)?;
        view.method = views.0;
        view.programs.extend(views.1);
    }
    Ok(view)
}

/// `rounds` stats rounds of one arm (and the `--untimed-only` round of the built-in bench):
/// how the stats were on, and each program's view. Runs count per timed operation: of the
/// built-in bench, its `iterations` each round (the unprinted warm-up included: it is timed
/// too); of a user's bench, the latencies it printed (an unprinted warm-up of its own counts in
/// as runs: see docs/overhead-method.md).
pub(super) fn arm_view(
    spec: &mut Arm,
    bench: &BenchRun,
    (rounds, iterations): (usize, usize),
    arm: &str,
    ints: &Interrupts,
) -> Result<(String, Vec<ProgramView>)> {
    let mut method = String::new();
    let (totals, roles, printed) = stats_rounds(spec, bench, rounds, arm, &mut method, ints)?;
    let outside = match bench.untimed() {
        Some(u) => Some(stats_rounds(spec, &u, 1, arm, &mut method, ints)?.0),
        None => None,
    };
    let timed = |rounds: usize| match bench.builtin {
        true => (iterations * rounds).max(1) as f64,
        false => printed.max(1) as f64,
    };
    let per_op = |n: u64, rounds: usize| n as f64 / timed(rounds);
    let views = totals.into_iter().map(|t| {
        let out = outside
            .as_ref()
            .map(|o| o.iter().find(|x| x.name == t.name));
        ProgramView {
            arm: arm.into(),
            id: t.id,
            outside_runs_per_iteration: out.map(|o| o.map_or(0.0, |o| per_op(o.run_cnt, 1))),
            outside_ns_per_iteration: out.map(|o| o.map_or(0.0, |o| per_op(o.run_time_ns, 1))),
            tail_call_target: roles.tail_call_targets.contains(&t.id),
            attached_nowhere: roles.attached_nowhere.contains(&t.name),
            name: t.name,
            runs: t.run_cnt,
            run_time_ns: t.run_time_ns,
            runs_per_iteration: per_op(t.run_cnt, rounds),
            mean_run_ns: if t.run_cnt == 0 {
                0.0
            } else {
                t.run_time_ns as f64 / t.run_cnt as f64
            },
        }
    });
    Ok((method, views.collect()))
}

/// `rounds` rounds of `bench` with the arm engaged and run stats on: each program's runs and
/// time, summed by name, the tail-call targets of the arm's maps, and the latencies the
/// benchmark printed.
fn stats_rounds(
    spec: &mut Arm,
    bench: &BenchRun,
    rounds: usize,
    arm: &str,
    method: &mut String,
    ints: &Interrupts,
) -> Result<(Vec<ProgramStats>, Roles, usize)> {
    let mut totals: Vec<ProgramStats> = Vec::new();
    let mut roles = Roles::default();
    let mut printed = 0;
    for r in 1..=rounds {
        ints.check()?;
        let active = spec.engage()?;
        let ids = active.program_ids();
        roles
            .tail_call_targets
            .extend(bpf::tail_call_targets(&active.map_ids())?);
        let guard = bpf::enable_run_stats()?;
        crate::failpoint::hit("overhead:stats-on");
        method.clone_from(&guard.method().to_string());
        let names = active.program_names();
        roles.attached_nowhere.extend(attached_nowhere(&names));
        let before = bpf::program_stats(&ids)?;
        let ran = bench.run(&format!("stats {arm} {r}"));
        let mut after = bpf::program_stats(&ids)?;
        for a in &mut after {
            if let Some((_, full)) = names.iter().find(|(id, _)| *id == a.id) {
                a.name.clone_from(full);
            }
        }
        drop(guard);
        active.disengage()?;
        printed += ran?.len();
        accumulate(&mut totals, &before, &after);
    }
    Ok((totals, roles, printed))
}

/// What the arm's programs are besides attached ones: tail-call targets (by id) and programs
/// attached nowhere (by name: the ids change from load to load).
#[derive(Debug, Default)]
struct Roles {
    tail_call_targets: std::collections::BTreeSet<u32>,
    attached_nowhere: std::collections::BTreeSet<String>,
}

/// The names of `programs` (id, name) that nothing attaches right now.
fn attached_nowhere(programs: &[(u32, String)]) -> Vec<String> {
    let found = bpf::attachments::attachments(&crate::host::Host::live());
    programs
        .iter()
        .filter(|(id, _)| !found.iter().any(|a| a.prog_id == *id))
        .map(|(_, name)| name.clone())
        .collect()
}

/// Add `after − before` per program name into `totals` (ids change from round to round).
fn accumulate(totals: &mut Vec<ProgramStats>, before: &[ProgramStats], after: &[ProgramStats]) {
    for a in after {
        let b = before.iter().find(|b| b.id == a.id);
        let runs = a.run_cnt.saturating_sub(b.map_or(0, |b| b.run_cnt));
        let time = a.run_time_ns.saturating_sub(b.map_or(0, |b| b.run_time_ns));
        match totals.iter_mut().find(|t| t.name == a.name) {
            Some(t) => {
                t.run_cnt += runs;
                t.run_time_ns += time;
            }
            None => totals.push(ProgramStats {
                run_cnt: runs,
                run_time_ns: time,
                ..a.clone()
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn view(runs: f64, mean: f64, outside: Option<(f64, f64)>, target: bool) -> ProgramView {
        ProgramView {
            arm: "treat".into(),
            id: 1,
            name: "p".into(),
            runs: (runs * 1000.0) as u64,
            run_time_ns: 0,
            runs_per_iteration: runs,
            mean_run_ns: mean,
            outside_runs_per_iteration: outside.map(|o| o.0),
            outside_ns_per_iteration: outside.map(|o| o.1),
            tail_call_target: target,
            attached_nowhere: false,
        }
    }

    #[test]
    fn time_inside_the_span_table() {
        // (what, view, runs in span, ns in span)
        let cases = [
            (
                "once, user bench",
                view(1.01, 100.0, None, false),
                Some(1.01),
                Some(101.0),
            ),
            (
                "twice, user bench",
                view(2.01, 100.0, None, false),
                None,
                None,
            ),
            (
                "twice, built-in bench: close counted apart",
                view(2.01, 100.0, Some((1.0, 80.0)), false),
                Some(1.01),
                Some(121.0),
            ),
        ];
        for (what, v, runs, ns) in cases {
            let close = |a: Option<f64>, b: Option<f64>| match (a, b) {
                (Some(a), Some(b)) => (a - b).abs() < 1e-9,
                (a, b) => a.is_none() && b.is_none(),
            };
            assert!(
                close(v.runs_in_span(), runs),
                "{what}: {:?}",
                v.runs_in_span()
            );
            assert!(close(v.ns_in_span(), ns), "{what}: {:?}", v.ns_in_span());
        }
    }

    #[test]
    fn a_program_that_did_not_run_is_named_for_why() {
        let target = view(0.0, 0.0, None, true).sentence("x");
        assert!(target.contains("tail-call target"), "{target}");
        let idle = view(0.0, 0.0, None, false).sentence("x");
        assert!(
            idle.contains("did not run") && !idle.contains("tail-call"),
            "{idle}"
        );
        let mut never_attached = view(0.0, 0.0, None, false);
        never_attached.name = "sys_enter".into();
        never_attached.attached_nowhere = true;
        assert_eq!(
            never_attached.sentence("x"),
            "kernel (treat arm): sys_enter is loaded, attached nowhere: no event runs it (its loader never attached it)"
        );
        let twice = view(2.01, 100.0, None, false).sentence("BPF_ENABLE_STATS");
        assert!(twice.contains("cannot tell how many"), "{twice}");
    }
}
