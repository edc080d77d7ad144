//! The interleaved rounds: pairs of one round per arm, the order within each pair drawn by a
//! fair coin (seeded), added until a fixed count, or until the p50 interval is narrower than a
//! target or a time budget runs out.
//!
//! Why a coin and not strict alternation (base-treat, treat-base, …): both run each arm first
//! in half the pairs, so a steady trend biases neither; but with a coin, which arm runs first
//! is independent of everything the machine does, so under no effect each pair difference is
//! as likely to be positive as negative *whatever* the interference looks like — drift, bursts,
//! a period that a fixed pattern could resonate with, pair differences correlated in time
//! (measured here: lag-1 correlations of 0.1–0.3 between consecutive pair differences). That
//! makes the sign-test interval of [`crate::stats`] exact for a shift of the whole round, not
//! only for independent pairs.

use super::arms::Arm;
use super::pressure::{self, RoundMaps};
use super::runner::{BenchRun, Served};
use crate::error::usage;
use crate::signals::Interrupts;
use crate::stats::compare::block_pairs;
use crate::stats::rank::critical_rank;
use crate::stats::rng::Rng;
use crate::stats::{shift_interval, RoundSummary};
use anyhow::Result;
use serde::Serialize;
use std::io::IsTerminal;
use std::time::{Duration, Instant};

/// The fewest pairs before a target may end a run ([`first_look`]).
pub const MIN_PAIRS: usize = 100;

/// Pairs fitted to stop in no less than 2 s even for a short --max-time (the "too short"
/// hint).
const HINT_PAIRS: usize = 30;

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

/// How often the progress line on a terminal is redrawn.
const PROGRESS_EVERY: Duration = Duration::from_millis(200);

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

    /// Whether to stop before pair `done + 1`, `spent` into the rounds: the count is reached,
    /// or the next pair (as long as the pairs so far took on average) would end past the budget.
    pub fn before_pair(self, done: usize, spent: Duration) -> Option<&'static str> {
        match self {
            Stop::Pairs(n) => (done >= n).then_some("rounds"),
            Stop::Adaptive { budget, .. } => {
                let per_pair = spent.checked_div(done as u32).unwrap_or_default();
                (done > 0 && spent + per_pair > budget).then_some("time")
            }
        }
    }

    /// Whether to stop after `done` pairs whose p50 interval is `width` ns wide: adaptive runs
    /// stop once it is within the target at one of the looks from `first` ([`is_look`]).
    pub fn after_pair(self, done: usize, first: usize, width: Option<f64>) -> Option<&'static str> {
        match self {
            Stop::Adaptive {
                target_ns: Some(target),
                ..
            } if is_look(done, first) && width.is_some_and(|w| w <= target) => Some("target"),
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

/// Why the rounds ended, and where they got to.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Ended {
    /// `rounds` (the count asked for), `target` (the p50 interval got narrow enough) or `time`
    /// (the budget ran out).
    pub reason: &'static str,
    /// Pairs of rounds run.
    pub pairs: usize,
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
    /// How `stop` ended after `pairs` pairs in `spent`, the p50 interval `width` ns wide.
    fn new(
        reason: &'static str,
        pairs: usize,
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
            seconds: spent.as_secs_f64(),
            p50_width_ns: width,
            target_ns,
            max_time_s,
        }
    }

    /// One line: "stopped: the p50 interval was 9.6 ns wide, within the 10 ns target, after 48
    /// pairs (5.1 s)".
    pub fn sentence(&self) -> String {
        let width = self
            .p50_width_ns
            .map_or_else(|| "?".into(), |w| format!("{w:.1} ns"));
        let target = self
            .target_ns
            .map_or_else(String::new, |t| format!(" (target {t:.0} ns)"));
        match self.reason {
            "target" => format!(
                "stopped: the p50 interval was {width} wide, within the {:.0} ns target, after {} pairs ({:.1} s)",
                self.target_ns.unwrap_or(f64::NAN),
                self.pairs,
                self.seconds
            ),
            "time" => format!(
                "{} pairs of rounds in the {:.0} s budget; the p50 interval is {width} wide{target}",
                self.pairs,
                self.max_time_s.unwrap_or(f64::NAN)
            ),
            _ => format!("{} pairs of rounds as asked ({:.1} s)", self.pairs, self.seconds),
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
    /// Add a round: its samples, their summary at `quantiles`, when it began.
    fn push(&mut self, samples: Vec<u64>, quantiles: &[f64], began: f64) {
        self.summaries.push(RoundSummary::of(&samples, quantiles));
        self.samples.push(samples);
        self.started_s.push(began);
    }
}

/// Both arms' rounds and how they ended.
#[derive(Debug, Clone)]
pub struct Rounds {
    pub base: ArmRounds,
    pub treat: ArmRounds,
    pub ended: Ended,
}

/// What the rounds need besides the arms.
pub struct RoundsPlan<'a> {
    pub bench: &'a BenchRun,
    pub stop: Stop,
    /// Maps of programs someone else loaded, read after every attached round.
    pub watch: &'a [u32],
    /// The compared percentiles; 50 must be among them.
    pub quantiles: &'a [f64],
    /// Confidence of the p50 interval the target is checked on.
    pub confidence: f64,
    /// Seed of the coin that orders each pair.
    pub seed: u64,
}

/// Run the interleaved rounds, reading the maps of every attached round (and of the watched
/// programs) after its benchmark.
pub fn measure(
    arms: [&mut Arm; 2],
    plan: &RoundsPlan,
    ints: &Interrupts,
) -> Result<(Rounds, Vec<RoundMaps>)> {
    let [base_arm, treat_arm] = arms;
    let mut out = [ArmRounds::default(), ArmRounds::default()];
    let mut maps = Vec::new();
    let start = Instant::now();
    let k50 = plan.quantiles.iter().position(|&q| q == 50.0).unwrap_or(0);
    let mut coin = Rng::new(plan.seed);
    let mut server = plan.bench.serve()?;
    // Whether progress is shown, when it last was, and the first look (after the first round).
    let (tty, mut last_shown, mut first) = (std::io::stderr().is_terminal(), start, MIN_PAIRS);
    let mut pair = 0;
    let reason = loop {
        if let Some(reason) = plan.stop.before_pair(pair, start.elapsed()) {
            break reason;
        }
        pair += 1;
        let mut order = [(0, &mut *base_arm, "base"), (1, &mut *treat_arm, "treat")];
        if coin.uniform() < 0.5 {
            order.reverse();
        }
        for (side, arm, name) in order {
            ints.check()?;
            let began = start.elapsed().as_secs_f64();
            // A round cut short by a signal is the signal's doing: say that.
            let (samples, round_maps) = one_round(arm, name, pair, plan, server.as_mut())
                .or_else(|e| ints.check().and(Err(e)))?;
            maps.extend(round_maps);
            out[side].push(samples, plan.quantiles, began);
            if pair == 1 && out[0].samples.len() + out[1].samples.len() == 1 {
                check_two_rounds_fit(plan.stop, start.elapsed())?;
                first = first_look(out[side].samples[0].len(), plan.quantiles, plan.confidence);
            }
        }
        // The interval over thousands of pairs is worth computing only when it is looked at
        // (a target's looks) or shown (the progress line, a few times a second).
        let look = plan.stop.has_target() && is_look(pair, first);
        let show = tty && last_shown.elapsed() >= PROGRESS_EVERY;
        let width = (look || show)
            .then(|| p50_width(&out, k50, plan.confidence))
            .flatten();
        if show {
            last_shown = Instant::now();
            progress(pair, start, width, plan.stop);
        }
        if let Some(reason) = plan.stop.after_pair(pair, first, width) {
            break reason;
        }
    };
    if tty {
        crate::out::err_text("\n");
    }
    let width = p50_width(&out, k50, plan.confidence);
    let ended = Ended::new(reason, pair, start.elapsed(), width, plan.stop);
    let [base, treat] = out;
    Ok((Rounds { base, treat, ended }, maps))
}

/// After the first round (which took `one`): a budget that cannot hold two rounds is a usage
/// error, said before spending it.
fn check_two_rounds_fit(stop: Stop, one: Duration) -> Result<()> {
    match stop {
        Stop::Adaptive { budget, .. } if one * 2 > budget => Err(usage(format!(
            "--max-time {:.2}s is too short for two rounds: one round took {:.2}s here; give at least {:.0}s, or fewer iterations per round (-n)",
            budget.as_secs_f64(),
            one.as_secs_f64(),
            (one.as_secs_f64() * 2.0 * HINT_PAIRS as f64).ceil()
        ))),
        _ => Ok(()),
    }
}

/// One round of one arm: bring it about, run the bench, read the maps, undo it.
fn one_round(
    arm: &mut Arm,
    name: &str,
    pair: usize,
    plan: &RoundsPlan,
    server: Option<&mut Served>,
) -> Result<(Vec<u64>, Option<RoundMaps>)> {
    let engaged = arm.engage()?;
    if name == "treat" {
        crate::failpoint::hit("overhead:attached");
    }
    let label = format!("{name} {pair}");
    let samples = match server {
        Some(s) => s.round(&label),
        None => plan.bench.run(&label),
    };
    let mut ids = engaged.map_ids();
    ids.extend_from_slice(plan.watch);
    let maps = if ids.is_empty() {
        None
    } else {
        Some(pressure::read(name, pair, &ids)?)
    };
    engaged.disengage()?;
    Ok((samples?, maps))
}

/// The width of the p50 interval over the pairs so far.
fn p50_width(arms: &[ArmRounds; 2], k50: usize, confidence: f64) -> Option<f64> {
    shift_interval(&arms[0].summaries, &arms[1].summaries, k50, confidence).map(|i| i.hi - i.lo)
}

/// The progress line on a terminal.
fn progress(pair: usize, start: Instant, width: Option<f64>, stop: Stop) {
    let w = width.map_or_else(String::new, |w| format!(", p50 interval {w:.0} ns wide"));
    let goal = match stop {
        Stop::Pairs(n) => format!(" of {n}"),
        Stop::Adaptive { target_ns, budget } => format!(
            " ({}at most {:.0} s)",
            target_ns.map_or_else(String::new, |t| format!("target {t:.0} ns, ")),
            budget.as_secs_f64()
        ),
    };
    crate::out::err_text(&format!(
        "\rebpf-prof: {pair} pairs{goal}, {:.1} s{w}   ",
        start.elapsed().as_secs_f64()
    ));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stop_rules() {
        let ms = Duration::from_millis;
        assert_eq!(Stop::Pairs(3).before_pair(2, ms(10)), None);
        assert_eq!(Stop::Pairs(3).before_pair(3, ms(10)), Some("rounds"));
        let long = Stop::Adaptive {
            target_ns: Some(10.0),
            budget: Duration::from_secs(60),
        };
        assert_eq!(long.before_pair(0, ms(0)), None);
        assert_eq!(long.before_pair(5, ms(500)), None);
        let short = Stop::Adaptive {
            target_ns: Some(10.0),
            budget: Duration::from_secs(1),
        };
        // 3 pairs in 0.9 s: the fourth would end at about 1.2 s, past the budget.
        assert_eq!(short.before_pair(3, ms(900)), Some("time"));
        assert_eq!(short.before_pair(3, ms(600)), None);
        // (pairs, width, stops on target): at the looks only, and only within the target.
        for (pairs, width, stops) in [
            (MIN_PAIRS - 1, Some(3.0), false),
            (MIN_PAIRS, Some(9.9), true),
            (MIN_PAIRS, Some(10.1), false),
            (MIN_PAIRS + 1, Some(3.0), false),
            (150, Some(3.0), true),
            (150, None, false),
        ] {
            assert_eq!(
                long.after_pair(pairs, MIN_PAIRS, width).is_some(),
                stops,
                "{pairs} {width:?}"
            );
        }
        assert_eq!(Stop::Pairs(3).after_pair(30, 30, Some(1.0)), None);
        let no_target = Stop::Adaptive {
            target_ns: None,
            budget: Duration::from_secs(60),
        };
        assert_eq!(no_target.after_pair(MIN_PAIRS, MIN_PAIRS, Some(0.1)), None);
        let one = Duration::from_millis(600);
        assert!(check_two_rounds_fit(short, one).is_err());
        assert!(check_two_rounds_fit(short, Duration::from_millis(400)).is_ok());
        assert!(check_two_rounds_fit(Stop::Pairs(2), one).is_ok());
    }

    #[test]
    fn looks_grow_by_half() {
        let looks: Vec<usize> = (0..2_000).filter(|&p| is_look(p, 360)).collect();
        assert_eq!(looks, [360, 540, 810, 1215, 1822]);
        // The first look: enough blocks for p99.9 at the level, and never under MIN_PAIRS.
        let q = [50.0, 90.0, 99.0, 99.9];
        assert_eq!(first_look(225, &q, 0.99), 8 * 45);
        assert_eq!(first_look(225, &q, 0.95), 6 * 45);
        assert_eq!(first_look(1800, &q, 0.99), MIN_PAIRS);
        assert_eq!(first_look(225, &[50.0], 0.99), MIN_PAIRS);
    }

    #[test]
    fn ended_sentences() {
        let e = Ended {
            reason: "target",
            pairs: 48,
            seconds: 5.12,
            p50_width_ns: Some(9.63),
            target_ns: Some(10.0),
            max_time_s: Some(12.0),
        };
        assert_eq!(
            e.sentence(),
            "stopped: the p50 interval was 9.6 ns wide, within the 10 ns target, after 48 pairs (5.1 s)"
        );
        let t = Ended {
            reason: "time",
            target_ns: None,
            ..e.clone()
        };
        assert_eq!(
            t.sentence(),
            "48 pairs of rounds in the 12 s budget; the p50 interval is 9.6 ns wide"
        );
        let r = Ended {
            reason: "rounds",
            target_ns: None,
            max_time_s: None,
            ..e
        };
        assert_eq!(r.sentence(), "48 pairs of rounds as asked (5.1 s)");
    }
}
