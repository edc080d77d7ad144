//! What ran inside the timed operation: the attached arm's programs' runs per timed operation
//! inside the span, from the kernel's run stats, and the words the verdict opens with. When
//! they did not run there, the latency delta is not the programs' cost but the side cost of
//! their attach point on other operations (for a syscall tracepoint: every system call of every
//! task takes the tracing slow path while a program is on one), and the verdict says so.

use super::kstats::ProgramView;
use crate::bench::choose::{self, Chosen};
use serde::Serialize;

pub use super::kstats::NONE_BELOW;
/// Below this many, the check before measuring says the hook does not fire.
pub const FIRES_FROM: f64 = 0.5;

/// How much of the timed operation the programs were in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Inside {
    /// At least [`FIRES_FROM`] runs per timed operation.
    Ran,
    /// Between [`NONE_BELOW`] and [`FIRES_FROM`]: in some timed operations only.
    Partly,
    /// Under [`NONE_BELOW`]: not inside the timed operation.
    NotRun,
    /// The bench cannot tell (a user's bench whose programs run more than once an iteration).
    Unknown,
}

/// The programs' runs inside the timed operation, as the verdict tells them.
#[derive(Debug, Clone, Serialize)]
pub struct Ran {
    /// The timed operation ("openat", "exec", or "iteration of your benchmark").
    pub op: String,
    /// Runs per timed operation inside the span, all the arm's programs together.
    pub runs_per_op: Option<f64>,
    /// Where the count comes from: `stats rounds` or `the check before measuring`.
    pub counted_by: &'static str,
    pub inside: Inside,
    /// The opening of the verdict.
    pub sentence: String,
    /// When the attach points read said otherwise than this count: what they said, and that
    /// the count wins (see [`reconcile`]).
    pub correction: Option<String>,
}

/// The runs of `programs` (one arm's) per timed `op` inside the span, with the words for
/// `chosen`'s attach points.
pub fn of(
    programs: &[&ProgramView],
    op: &str,
    counted_by: &'static str,
    chosen: Option<&Chosen>,
) -> Ran {
    let known: Option<f64> = programs.iter().map(|p| p.runs_in_span()).sum();
    let inside = match known {
        None => Inside::Unknown,
        Some(n) if n < NONE_BELOW => Inside::NotRun,
        Some(n) if n < FIRES_FROM => Inside::Partly,
        Some(_) => Inside::Ran,
    };
    let n = known.unwrap_or(f64::NAN);
    let sentence = match inside {
        Inside::Ran => format!("inside each timed {op} the programs ran {n:.2} times"),
        Inside::Partly => format!(
            "the programs ran only {n:.2} times per timed {op}: most of the delta is the side cost of their attach point ({}), not their own",
            side_cost_words(chosen)
        ),
        Inside::NotRun => format!(
            "the programs did not run inside the timed {op} ({n:.2} runs per {op}): the delta is the side cost of their attach point on other operations ({}), not the programs' cost{}",
            side_cost_words(chosen),
            firing_hint(chosen)
        ),
        Inside::Unknown => format!(
            "the programs ran {:.2} times per {op}, some of them outside the timed span (this bench cannot tell how many)",
            programs.iter().map(|p| p.runs_per_iteration).sum::<f64>()
        ),
    };
    Ran {
        op: op.into(),
        runs_per_op: known,
        counted_by,
        inside,
        sentence,
        correction: None,
    }
}

/// The line to say when what was read of the attach points (`chosen`) and what was measured
/// (`ran`) disagree: the measurement wins, and the line says so. `None` when they agree, or
/// when nothing was predicted or measured.
pub fn reconcile(chosen: Option<&Chosen>, ran: &Ran) -> Option<String> {
    let chosen = chosen?;
    let runs = ran.runs_per_op?;
    let op = &ran.op;
    let predicted_to_fire = !chosen.fired.is_empty();
    match (predicted_to_fire, ran.inside) {
        (false, Inside::Ran | Inside::Partly) => Some(format!(
            "the attach points read say {op} fires none of the programs, but {} counted {runs:.2} runs per timed {op}: the measurement wins, the programs run inside it",
            ran.counted_by
        )),
        (true, Inside::NotRun) => Some(format!(
            "the attach points read say {op} fires {}, but {} counted {runs:.2} runs per timed {op}: the measurement wins, the programs do not run inside it",
            chosen.fired.join(", "),
            ran.counted_by
        )),
        _ => None,
    }
}

impl Ran {
    /// The verdict: these words, then the figures, then the correction of the attach points
    /// read when there is one.
    pub fn verdict(&self, figures: &str) -> String {
        match &self.correction {
            Some(correction) => format!("{}: {figures} ({correction})", self.sentence),
            None => format!("{}: {figures}", self.sentence),
        }
    }
}

/// What the side cost of the programs' attach points is, in words.
fn side_cost_words(chosen: Option<&Chosen>) -> String {
    let points: Vec<&str> = chosen
        .map(|c| c.programs.iter().map(|p| p.point.as_str()).collect())
        .unwrap_or_default();
    // A section (`tracepoint/syscalls/sys_enter_x`) or a link (`tracepoint sys_enter_x`).
    let syscall_tp = points.iter().any(|p| {
        (p.starts_with("tracepoint") || p.starts_with("tp/"))
            && (p.contains("sys_enter_") || p.contains("sys_exit_"))
    });
    if syscall_tp {
        "a program on a syscall tracepoint sends every system call of every task through the tracing slow path".into()
    } else {
        "what having a program attached there costs the operations that do not fire it".into()
    }
}

/// "; --op exec fires them", or that no operation does.
fn firing_hint(chosen: Option<&Chosen>) -> String {
    let Some(c) = chosen else {
        return String::new();
    };
    let points: Vec<(String, String)> = c
        .programs
        .iter()
        .map(|p| (p.program.clone(), p.point.clone()))
        .collect();
    let best = choose::choose(&points);
    if best.fires_nothing() {
        return "; no operation of the bench fires them (a benchmark of your own that makes their event does: `overhead -- ./mybench`)".into();
    }
    if best.op == c.op {
        return String::new();
    }
    format!("; --op {} fires them", best.op)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn view(runs: f64, outside: f64) -> ProgramView {
        ProgramView {
            arm: "treat".into(),
            id: 1,
            name: "p".into(),
            runs: 1000,
            run_time_ns: 0,
            runs_per_iteration: runs,
            mean_run_ns: 100.0,
            outside_runs_per_iteration: Some(outside),
            outside_ns_per_iteration: Some(0.0),
            tail_call_target: false,
            attached_nowhere: false,
        }
    }

    fn execve_hook(op: crate::bench::Operation) -> Chosen {
        let points = vec![(
            "on_execve".to_string(),
            "tracepoint/syscalls/sys_enter_execve".to_string(),
        )];
        choose::given(
            op,
            choose::OpChoice::Given,
            choose::choose(&points).programs,
        )
    }

    fn loaded_program(point: &str, op: crate::bench::Operation) -> Chosen {
        let points = vec![("sys_enter_opena…".to_string(), point.to_string())];
        choose::given(op, choose::OpChoice::Auto, choose::choose(&points).programs)
    }

    /// Every pairing of what the attach points say and what was measured: a line only where
    /// they disagree, and that line takes the measurement's side.
    #[test]
    fn the_measurement_wins_when_the_attach_points_disagree() {
        use crate::bench::Operation;
        // Attach point unread: the choice says nothing fires, the round counts a run per op.
        let unread = loaded_program("", Operation::Openat);
        let ran_once = of(
            &[&view(1.0, 0.0)],
            "openat",
            "the check before measuring",
            Some(&unread),
        );
        assert_eq!(
            reconcile(Some(&unread), &ran_once).unwrap(),
            "the attach points read say openat fires none of the programs, but the check before measuring counted 1.00 runs per timed openat: the measurement wins, the programs run inside it"
        );
        // Read right and measured so: nothing to say.
        let read = loaded_program("tracepoint sys_enter_openat", Operation::Openat);
        let agree = of(&[&view(1.0, 0.0)], "openat", "stats rounds", Some(&read));
        assert_eq!(reconcile(Some(&read), &agree), None);
        // Said to fire, measured not to.
        let idle = of(&[&view(0.0, 0.0)], "openat", "stats rounds", Some(&read));
        assert_eq!(
            reconcile(Some(&read), &idle).unwrap(),
            "the attach points read say openat fires sys_enter_opena…, but stats rounds counted 0.00 runs per timed openat: the measurement wins, the programs do not run inside it"
        );
        // Said not to fire, measured not to: agree.
        let fork = loaded_program("tracepoint sched_process_fork", Operation::Openat);
        let none = of(&[&view(0.0, 0.0)], "openat", "stats rounds", Some(&fork));
        assert_eq!(reconcile(Some(&fork), &none), None);
        // Partly inside, said not to fire: the measurement wins.
        let partly = of(&[&view(0.3, 0.0)], "openat", "stats rounds", Some(&fork));
        assert!(reconcile(Some(&fork), &partly)
            .unwrap()
            .contains("0.30 runs per timed openat"));
        // Nothing measured, or no choice: nothing to reconcile.
        let mut unknown = view(2.0, 0.0);
        unknown.outside_runs_per_iteration = None;
        let cannot_tell = of(&[&unknown], "openat", "stats rounds", Some(&fork));
        assert_eq!(reconcile(Some(&fork), &cannot_tell), None);
        assert_eq!(reconcile(None, &ran_once), None);
    }

    #[test]
    fn the_verdict_says_what_ran_inside_the_timed_operation() {
        use crate::bench::Operation;
        let on_exec = execve_hook(Operation::Exec);
        let ran = of(&[&view(1.01, 0.0)], "exec", "stats rounds", Some(&on_exec));
        assert_eq!(ran.inside, Inside::Ran);
        assert_eq!(
            ran.verdict("+319 ns at p50 [277, 360]"),
            "inside each timed exec the programs ran 1.01 times: +319 ns at p50 [277, 360]"
        );
        // Other processes' execs give a few runs: still not the programs' cost.
        let on_openat = execve_hook(Operation::Openat);
        let idle = of(
            &[&view(0.01, 0.0)],
            "openat",
            "stats rounds",
            Some(&on_openat),
        );
        assert_eq!(idle.inside, Inside::NotRun);
        for part in [
            "the programs did not run inside the timed openat (0.01 runs per openat)",
            "side cost of their attach point",
            "tracing slow path",
            "not the programs' cost; --op exec-missing fires them",
        ] {
            assert!(idle.sentence.contains(part), "{part}: {}", idle.sentence);
        }
        let some = of(
            &[&view(1.3, 1.0)],
            "openat",
            "stats rounds",
            Some(&on_openat),
        );
        assert_eq!(some.inside, Inside::Partly, "{}", some.sentence);
        let mut unknown = view(2.0, 0.0);
        unknown.outside_runs_per_iteration = None;
        assert_eq!(of(&[&unknown], "x", "y", None).inside, Inside::Unknown);
    }
}
