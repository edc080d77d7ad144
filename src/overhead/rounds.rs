//! What the measuring engine ([`super::engine`]) works with: the rig it drives ([`Rig`]: the
//! arms, the benchmark and the clock), when to stop ([`Stop`]), the rounds it collects and how
//! they ended. The rounds come in pairs of one round per arm, the order within each pair drawn
//! by a fair coin (seeded), spread over several loads of the arms' objects, added until a
//! fixed count, or until the p50 interval is narrower than a target or a time budget runs out.
//!
//! Why a coin and not strict alternation (base-treat, treat-base, …): both run each arm first
//! in half the pairs, so a steady trend biases neither; but with a coin, which arm runs first
//! is independent of everything the machine does, so under no effect each pair difference is
//! as likely to be positive as negative *whatever* the interference looks like — drift, bursts,
//! a period that a fixed pattern could resonate with, pair differences correlated in time
//! (consecutive pair differences are correlated, see docs/overhead-method.md). That
//! makes the sign-test interval of [`crate::stats`] exact for a shift of the whole round, not
//! only for independent pairs.
//!
//! Why several loads: where the kernel places an object's JIT image and maps, and which of
//! two objects is loaded first, move a cost by a few ns for as long as the object stays
//! loaded, so pairs of rounds of one load describe that load only. The budget (or `--rounds`)
//! is cut into equal shares, one per load; before each share the objects are loaded afresh,
//! two objects in couples of loads made in both orders ([`crate::stats::loads`]), and the
//! interval is taken across loads.

use crate::stats::compare::block_pairs;
use crate::stats::loads::{Load, LoadOrder, MIN_LOADS};
use crate::stats::rank::critical_rank;
use crate::stats::RoundSummary;
use anyhow::Result;
use serde::Serialize;
use std::time::Duration;

/// The arm a round belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    /// The baseline: nothing attached, or `--load`'s object against `--compare`'s.
    Base,
    /// The treatment.
    Treat,
}

impl Side {
    /// "base" or "treat", as round labels and notes name the arms.
    pub fn name(self) -> &'static str {
        match self {
            Side::Base => "base",
            Side::Treat => "treat",
        }
    }

    pub(super) fn index(self) -> usize {
        match self {
            Side::Base => 0,
            Side::Treat => 1,
        }
    }
}

/// What the engine drives: the arms, the benchmark and the clock.
pub trait Rig {
    /// How the arms' objects were loaded before the first round: [`LoadOrder::OneObject`]
    /// when at most one arm loads an object; `None` when no arm loads one (nothing to reload).
    fn prepared(&self) -> Option<LoadOrder>;
    /// Unload the arms' objects and load them afresh, in `order`.
    fn reload(&mut self, order: LoadOrder) -> Result<()>;
    /// One round of `side`, labelled by its pair's number: bring the arm about, run the
    /// benchmark, undo the arm; the samples in loop order.
    fn round(&mut self, side: Side, pair: usize) -> Result<Vec<u64>>;
    /// Time since the rounds began.
    fn elapsed(&self) -> Duration;
    /// Whether the treatment is slow to bring about for each round (a user's loader): then
    /// the rounds of a load come in two blocks, the treatment held for its block, and what a
    /// hold and a round take. Asked once, before the rounds; no by default.
    fn wants_blocks(&mut self) -> Result<Option<BlockTimes>> {
        Ok(None)
    }
    /// Bring `side` about and keep it for a block of rounds; nothing by default.
    fn hold(&mut self, _side: Side) -> Result<()> {
        Ok(())
    }
    /// Undo what [`Rig::hold`] brought about; nothing by default.
    fn release(&mut self, _side: Side) -> Result<()> {
        Ok(())
    }
    /// Whether the rig shows progress now (a terminal, and the line is due): only then is
    /// the interval's width worked out for it.
    fn shows_progress(&mut self) -> bool {
        false
    }
    /// Show where the rounds are.
    fn progress(&mut self, _status: &Progress) {}
}

/// What bringing the treatment about for a block and one round take, measured before the
/// rounds: the engine sizes its blocks with them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlockTimes {
    pub hold: Duration,
    pub round: Duration,
}

/// Where the rounds are, for a progress line.
#[derive(Debug, Clone)]
pub struct Progress {
    pub pairs: usize,
    /// The load the rounds are in, 1-based, and how many there will be.
    pub load: usize,
    pub loads: usize,
    pub stop: Stop,
    pub elapsed: Duration,
    /// The p50 interval's width so far, ns.
    pub width: Option<f64>,
}

/// The fewest pairs before a target may end a run ([`first_look`]).
pub const MIN_PAIRS: usize = 100;

/// Pairs fitted to stop in no less than 2 s even for a short --max-time (the "too short"
/// hint).
pub(super) const HINT_PAIRS: usize = 30;

/// The fewest pairs of a fixed count (`--rounds`) per load.
pub const PAIRS_PER_LOAD: usize = 5;

/// Load `load`'s share of `total` pairs over `loads` loads: as equal as whole pairs allow.
pub(super) fn share(total: usize, load: usize, loads: usize) -> usize {
    total * (load + 1) / loads - total * load / loads
}

/// The first pair count at which a run with a target looks at its width: enough pairs for every
/// compared quantile to reach the asked confidence — the tail of rounds of `kept` samples is
/// compared over blocks of pairs ([`block_pairs`]), and a sign interval needs a few of them (8
/// for 99%) — and at least [`MIN_PAIRS`], as the width of fewer pairs is too noisy to stop on:
/// stopping on it favours runs whose spread came out small (simulated A/A coverage at a 95%
/// level, p50: 91.5–94.8% looking from 30 pairs, 94.8–97.2% from these looks;
/// `examples/stats_coverage.rs --target-ns 3 --confidence 0.95`). Rounds of 225 samples at 99%: 360 pairs; of 1800: 100.
pub fn first_look(kept: usize, quantiles: &[f64], confidence: f64) -> usize {
    let tail = quantiles.iter().copied().fold(50.0, f64::max);
    let blocks = (1..64)
        .find(|&n| critical_rank(n, confidence).1 >= confidence)
        .unwrap_or(64);
    MIN_PAIRS.max(blocks * block_pairs(kept, tail))
}

/// When to stop adding pairs of rounds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Stop {
    /// Exactly this many pairs (`--rounds N`).
    Pairs(usize),
    /// Until the next pair would not fit in `budget` or, with a `target_ns`, the p50 interval is
    /// at most that wide at one of the looks ([`is_look`]).
    ///
    /// The default has no target: how many pairs a run gets then depends on the clock only,
    /// never on what the pairs showed, and the interval keeps its exact coverage. Stopping on the
    /// interval's width favours runs whose spread came out small, so intervals that can be a
    /// little too narrow: in the simulation of `examples/stats_coverage.rs` at a 95% level, A/A
    /// coverage 94.8–97.2% at p50 and 93.5–98.8% at the other quantiles with the looks of
    /// [`first_look`] and [`is_look`]; 91.5–94.8% at p50 with looks from 30 pairs.
    Adaptive {
        target_ns: Option<f64>,
        budget: Duration,
    },
}

impl Stop {
    /// "pairs of rounds for 12 s", "30 pairs of rounds", ….
    pub fn describe(&self) -> String {
        match *self {
            Stop::Pairs(n) => format!("{n} pairs of rounds"),
            Stop::Adaptive {
                target_ns: Some(t),
                budget,
            } => format!(
                "pairs of rounds until the p50 interval is {t:.0} ns wide or {:.0} s have passed",
                budget.as_secs_f64()
            ),
            Stop::Adaptive {
                target_ns: None,
                budget,
            } => format!("pairs of rounds for {:.0} s", budget.as_secs_f64()),
        }
    }

    /// Whether a target width can end the rounds.
    pub fn has_target(self) -> bool {
        matches!(
            self,
            Stop::Adaptive {
                target_ns: Some(_),
                ..
            }
        )
    }

    /// Whether to stop before pair `done + 1`, `spent` into the rounds, the next pair taken to
    /// need `per_pair`: the count is reached, or the next pair would end past the budget.
    pub fn before_pair(
        self,
        done: usize,
        spent: Duration,
        per_pair: Duration,
    ) -> Option<StopReason> {
        match self {
            Stop::Pairs(n) => (done >= n).then_some(StopReason::Rounds),
            Stop::Adaptive { budget, .. } => {
                (done > 0 && spent + per_pair > budget).then_some(StopReason::Time)
            }
        }
    }

    /// Whether load `load` (0-based, of `loads`) has had its share: its pairs of a fixed count,
    /// or, with a budget, its time, the next pair taking `per_pair`. A load gets one pair at
    /// least.
    pub(super) fn load_done(
        self,
        (load, loads): (usize, usize),
        in_load: usize,
        spent: Duration,
        per_pair: Duration,
    ) -> bool {
        if in_load == 0 {
            return false;
        }
        match self {
            Stop::Pairs(n) => in_load >= share(n, load, loads),
            Stop::Adaptive { budget, .. } => {
                let end = budget.mul_f64((load + 1) as f64 / loads as f64);
                spent + per_pair > end
            }
        }
    }

    /// How many loads a run asked for `loads` gets: with a fixed count of pairs, no more than
    /// one per [`PAIRS_PER_LOAD`] pairs, and at least one.
    pub fn loads_for(self, loads: usize) -> usize {
        match self {
            Stop::Pairs(n) => loads.min(n / PAIRS_PER_LOAD).max(1),
            Stop::Adaptive { .. } => loads.max(1),
        }
    }

    /// Whether to stop after `done` pairs whose p50 interval is `width` ns wide: adaptive runs
    /// stop once it is within the target at one of the looks from `first` ([`is_look`]).
    pub fn after_pair(self, done: usize, first: usize, width: Option<f64>) -> Option<StopReason> {
        match self {
            Stop::Adaptive {
                target_ns: Some(target),
                ..
            } if is_look(done, first) && width.is_some_and(|w| w <= target) => {
                Some(StopReason::Target)
            }
            _ => None,
        }
    }

    /// Whether to stop after a load, `done` loads in, the p50 interval across them `width` ns
    /// wide: a target is looked at once there are [`MIN_LOADS`] loads, after each load.
    pub(super) fn after_load(self, done: usize, width: Option<f64>) -> Option<StopReason> {
        match self {
            Stop::Adaptive {
                target_ns: Some(target),
                ..
            } if done >= MIN_LOADS && width.is_some_and(|w| w <= target) => {
                Some(StopReason::Target)
            }
            _ => None,
        }
    }
}

/// The pair counts at which a run with a target looks at it: `first` ([`first_look`]), then half
/// as many again each time (360, 540, 810, 1215, … for rounds of 250 at 99%). A look after every pair would stop at the first
/// pair whose noisy width dips under the target — favouring runs whose spread came out small,
/// and so intervals that are too narrow; a few looks far apart, as in group-sequential designs
/// (Pocock 1977), keep that small.
pub fn is_look(pairs: usize, first: usize) -> bool {
    let mut look = first.max(1);
    while look < pairs {
        look += look / 2;
    }
    look == pairs
}

/// Why the rounds ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    /// The count of pairs asked for (`--rounds`).
    Rounds,
    /// The p50 interval got as narrow as `--target-ns`.
    Target,
    /// The time budget ran out (`--max-time`).
    Time,
}

/// Why the rounds ended, and where they got to.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Ended {
    pub reason: StopReason,
    /// Pairs of rounds run.
    pub pairs: usize,
    /// Loads of the arms' objects the pairs were spread over (1 when nothing was reloaded).
    pub loads: usize,
    /// Wall time of the rounds, s.
    pub seconds: f64,
    /// Width of the p50 interval when they ended, ns.
    pub p50_width_ns: Option<f64>,
    /// `--target-ns`, when given.
    pub target_ns: Option<f64>,
    /// `--max-time`, s, when adaptive.
    pub max_time_s: Option<f64>,
}

impl Ended {
    /// How `stop` ended after `pairs` pairs over `loads` loads in `spent`, the p50 interval
    /// `width` ns wide.
    pub(super) fn new(
        reason: StopReason,
        (pairs, loads): (usize, usize),
        spent: Duration,
        width: Option<f64>,
        stop: Stop,
    ) -> Ended {
        let (target_ns, max_time_s) = match stop {
            Stop::Adaptive { target_ns, budget } => (target_ns, Some(budget.as_secs_f64())),
            Stop::Pairs(_) => (None, None),
        };
        Ended {
            reason,
            pairs,
            loads,
            seconds: spent.as_secs_f64(),
            p50_width_ns: width,
            target_ns,
            max_time_s,
        }
    }

    /// One line: "stopped: the p50 interval was 9.6 ns wide, within the 10 ns target, after 48
    /// pairs over 6 loads (5.1 s)".
    pub fn sentence(&self) -> String {
        let width = self
            .p50_width_ns
            .map_or_else(|| "?".into(), |w| format!("{w:.1} ns"));
        let target = self
            .target_ns
            .map_or_else(String::new, |t| format!(" (target {t:.0} ns)"));
        let over = match self.loads {
            0 | 1 => String::new(),
            n => format!(" over {n} loads"),
        };
        match self.reason {
            StopReason::Target => format!(
                "stopped: the p50 interval was {width} wide, within the {:.0} ns target, after {} pairs{over} ({:.1} s)",
                self.target_ns.unwrap_or(f64::NAN),
                self.pairs,
                self.seconds
            ),
            StopReason::Time => format!(
                "{} pairs of rounds{over} in the {:.0} s budget; the p50 interval is {width} wide{target}",
                self.pairs,
                self.max_time_s.unwrap_or(f64::NAN)
            ),
            StopReason::Rounds => format!(
                "{} pairs of rounds{over} as asked ({:.1} s)",
                self.pairs, self.seconds
            ),
        }
    }
}

/// One arm's rounds: samples, summaries, and when each started.
#[derive(Debug, Clone, Default)]
pub struct ArmRounds {
    /// Each round's samples, in loop order.
    pub samples: Vec<Vec<u64>>,
    /// Each round reduced to the compared quantiles.
    pub summaries: Vec<RoundSummary>,
    /// Seconds from the start of the rounds to the start of each round.
    pub started_s: Vec<f64>,
}

impl ArmRounds {
    /// Keep the first `rounds` rounds only.
    pub(super) fn truncate(&mut self, rounds: usize) {
        self.samples.truncate(rounds);
        self.summaries.truncate(rounds);
        self.started_s.truncate(rounds);
    }

    /// Add a round: its samples, their summary at `quantiles`, when it began.
    pub(super) fn push(&mut self, samples: Vec<u64>, quantiles: &[f64], began: f64) {
        self.summaries.push(RoundSummary::of(&samples, quantiles));
        self.samples.push(samples);
        self.started_s.push(began);
    }
}

/// Both arms' rounds, the loads they were spread over, and how they ended.
#[derive(Debug, Clone)]
pub struct Rounds {
    pub base: ArmRounds,
    pub treat: ArmRounds,
    /// The loads of the arms' objects, in order, each with its pairs (one load when nothing
    /// was reloaded).
    pub loads: Vec<Load>,
    pub ended: Ended,
}

/// What the engine needs besides the rig.
#[derive(Debug, Clone)]
pub struct RoundsPlan<'a> {
    pub stop: Stop,
    /// The option a time budget in `stop` was given by, for the refusal of one too short.
    pub budget_flag: BudgetFlag,
    /// The compared percentiles; 50 must be among them.
    pub quantiles: &'a [f64],
    /// Confidence of the p50 interval the target is checked on.
    pub confidence: f64,
    /// Seed of the coin that orders each pair and each couple of loads.
    pub seed: u64,
    /// Loads of the arms' objects to spread the pairs over (1: load once); `None`: the
    /// default, [`super::DEFAULT_LOADS`], or for a treatment held in blocks as many as fit.
    pub loads: Option<usize>,
}

/// The option that gave a run its time budget: `overhead --max-time`, or the rounds `demo`
/// measures the hook's cost in (`--cost-time`), whose operations per round are their own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BudgetFlag {
    MaxTime,
    CostTime { iterations: usize },
}

impl BudgetFlag {
    /// The option's name.
    pub fn name(self) -> &'static str {
        match self {
            BudgetFlag::MaxTime => "--max-time",
            BudgetFlag::CostTime { .. } => "--cost-time",
        }
    }

    /// The same option, for rounds of `iterations` operations each.
    pub fn for_rounds_of(self, iterations: usize) -> BudgetFlag {
        match self {
            BudgetFlag::MaxTime => BudgetFlag::MaxTime,
            BudgetFlag::CostTime { .. } => BudgetFlag::CostTime { iterations },
        }
    }

    /// What a round is, and the other way to make two of them fit.
    fn round_and_remedy(self) -> (String, &'static str) {
        match self {
            BudgetFlag::MaxTime => ("one round".into(), ", or fewer iterations per round (-n)"),
            BudgetFlag::CostTime { iterations } => (
                format!("one round of the cost measurement ({iterations} operations, whatever -n says: -n is the recording's)"),
                "",
            ),
        }
    }

    /// The refusal of a `budget` that cannot hold two rounds when one took `one`, with the
    /// budget that would hold `pairs` pairs.
    pub fn too_short(self, budget: Duration, one: Duration, pairs: usize) -> String {
        let (round, remedy) = self.round_and_remedy();
        format!(
            "{} {}s is too short for two rounds: {round} took {}s here; give at least {:.0}s{remedy}",
            self.name(),
            seconds(budget),
            seconds(one),
            (one.as_secs_f64() * 2.0 * pairs as f64).ceil()
        )
    }
}

/// Seconds to three decimals at most, without trailing zeros (0.05, 0.001, 12).
fn seconds(time: Duration) -> String {
    let text = format!("{:.3}", time.as_secs_f64());
    text.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// The progress line on a terminal: pairs, the load, time, the p50 interval's width.
pub fn progress_line(p: &Progress) -> String {
    let w = p
        .width
        .map_or_else(String::new, |w| format!(", p50 interval {w:.0} ns wide"));
    let goal = match p.stop {
        Stop::Pairs(n) => format!(" of {n}"),
        Stop::Adaptive { target_ns, budget } => format!(
            " ({}at most {:.0} s)",
            target_ns.map_or_else(String::new, |t| format!("target {t:.0} ns, ")),
            budget.as_secs_f64()
        ),
    };
    let load = if p.loads > 1 {
        format!(", load {} of {}", p.load, p.loads)
    } else {
        String::new()
    };
    format!(
        "ebpf-prof: {} pairs{goal}{load}, {:.1} s{w}",
        p.pairs,
        p.elapsed.as_secs_f64()
    )
}

#[cfg(test)]
#[path = "rounds_tests.rs"]
mod tests;
