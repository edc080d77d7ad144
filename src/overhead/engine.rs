//! The measuring engine: it drives a [`Rig`] through the pairs of rounds of [`super::rounds`],
//! spread over loads of the arms' objects, and decides when they end. The real rig attaches BPF
//! objects and runs the pinned benchmark ([`super::rig`]); the tests drive a seeded fake.
//!
//! Two ways to run the rounds of a load:
//! - **pairs**, the default: one round of each arm, the order within the pair drawn by the
//!   coin, the arm brought about for its round and undone after;
//! - **blocks**, when the treatment is slow to bring about (a user's loader, whose start takes
//!   far longer than a round): per load one block of base rounds and one of treatment rounds,
//!   the order of the two blocks drawn by the coin, the loader started once for its block.
//!   Round i of one block is paired with round i of the other, so the comparison takes them as
//!   it takes pairs; their drift does not cancel within the load, but the coin decides its sign
//!   from load to load and the interval is taken across loads.

use super::rounds::{
    first_look, is_look, share, ArmRounds, BlockTimes, BudgetFlag, Ended, Progress, Rig, Rounds,
    RoundsPlan, Side, Stop, StopReason, HINT_PAIRS, MIN_PAIRS,
};
use crate::error::usage;
use crate::stats::loads::{self, Load, LoadOrder};
use crate::stats::rng::Rng;
use crate::stats::{shift_interval, shift_interval_loads};
use anyhow::Result;
use std::time::Duration;

/// The rounds so far, and the coin.
struct Engine<'p> {
    plan: &'p RoundsPlan<'p>,
    arms: [ArmRounds; 2],
    loads: Vec<Load>,
    coin: Rng,
    k50: usize,
    /// Time spent in rounds (not in loading), and the pairs run.
    in_pairs: Duration,
    pairs: usize,
    /// The longest pair of rounds so far (a held block's round counts twice).
    longest_pair: Duration,
    /// The first pair count at which a single load looks at a target ([`first_look`]).
    first_look: usize,
    /// With blocks: what a hold and a round take, as the rig measured them.
    blocks: Option<BlockTimes>,
}

/// Run the interleaved rounds on `rig`: the pairs (or blocks), spread over the plan's loads,
/// reloading the arms' objects before each load but the first.
pub fn run<R: Rig>(rig: &mut R, plan: &RoundsPlan) -> Result<Rounds> {
    let blocks = rig.wants_blocks()?;
    let prepared = rig.prepared();
    let loads = match (prepared, blocks) {
        (None, None) => 1,
        (_, Some(times)) => {
            let fitted = || loads_that_fit(plan.stop, rig.elapsed(), times);
            plan.stop.loads_for(plan.loads.unwrap_or_else(fitted))
        }
        (Some(_), None) => plan
            .stop
            .loads_for(plan.loads.unwrap_or(super::DEFAULT_LOADS)),
    };
    let mut engine = Engine {
        plan,
        arms: [ArmRounds::default(), ArmRounds::default()],
        loads: Vec::new(),
        coin: Rng::new(plan.seed),
        k50: plan.quantiles.iter().position(|&q| q == 50.0).unwrap_or(0),
        in_pairs: Duration::ZERO,
        longest_pair: Duration::ZERO,
        pairs: 0,
        first_look: MIN_PAIRS,
        blocks,
    };
    let two_objects = prepared.is_some_and(|o| o != LoadOrder::OneObject);
    let orders = loads::orders(loads, two_objects, || engine.coin.uniform() < 0.5);
    let reason = engine.all_loads(rig, &orders, prepared)?;
    let width = engine.width();
    let counts = (engine.pairs, engine.loads.len());
    let ended = Ended::new(reason, counts, rig.elapsed(), width, plan.stop);
    let [base, treat] = engine.arms;
    Ok(Rounds {
        base,
        treat,
        loads: engine.loads,
        ended,
    })
}

impl Engine<'_> {
    /// Every load in `orders`, each reloaded unless it is the first in the order prepared;
    /// why the rounds ended.
    fn all_loads<R: Rig>(
        &mut self,
        rig: &mut R,
        orders: &[LoadOrder],
        prepared: Option<LoadOrder>,
    ) -> Result<StopReason> {
        let mut current = prepared.unwrap_or(LoadOrder::OneObject);
        for (index, &order) in orders.iter().enumerate() {
            if prepared.is_some() && (index > 0 || order != current) {
                rig.reload(order)?;
                current = order;
            }
            let first_pair = self.pairs;
            let place = (index, orders.len());
            let ended = match self.blocks {
                Some(times) => self.one_load_in_blocks(rig, place, times)?,
                None => self.one_load(rig, place)?,
            };
            self.loads.push(Load {
                first_pair,
                pairs: self.pairs - first_pair,
                order,
            });
            let reason = ended.or_else(|| {
                self.plan
                    .stop
                    .after_load(self.loads.len(), self.load_width())
            });
            if let Some(reason) = reason {
                return Ok(reason);
            }
        }
        Ok(match self.plan.stop {
            Stop::Pairs(_) => StopReason::Rounds,
            Stop::Adaptive { .. } => StopReason::Time,
        })
    }

    /// What the next pair of rounds is taken to need: the longest pair so far, not the
    /// average, so that a pair slower than most does not end the run past its budget.
    fn per_pair(&self) -> Duration {
        let average = self
            .in_pairs
            .checked_div(self.pairs as u32)
            .unwrap_or_default();
        average.max(self.longest_pair)
    }

    /// The pairs of load `load` (of `loads`); `Some` when the rounds as a whole must stop.
    fn one_load<R: Rig>(
        &mut self,
        rig: &mut R,
        (load, loads): (usize, usize),
    ) -> Result<Option<StopReason>> {
        let stop = self.plan.stop;
        let mut in_load = 0;
        loop {
            let per_pair = self.per_pair();
            if let Some(reason) = stop.before_pair(self.pairs, rig.elapsed(), per_pair) {
                return Ok(Some(reason));
            }
            if stop.load_done((load, loads), in_load, rig.elapsed(), per_pair) {
                return Ok(None);
            }
            self.one_pair(rig)?;
            in_load += 1;
            self.show(rig, (load, loads));
            // With one load, a target is looked at after pairs, as the pairs are the level.
            if loads == 1 && stop.has_target() && is_look(self.pairs, self.first_look) {
                if let Some(reason) = stop.after_pair(self.pairs, self.first_look, self.width()) {
                    return Ok(Some(reason));
                }
            }
        }
    }

    /// One pair of rounds, the order of its arms by the coin.
    fn one_pair<R: Rig>(&mut self, rig: &mut R) -> Result<()> {
        self.pairs += 1;
        let began = rig.elapsed();
        let mut order = [Side::Base, Side::Treat];
        if self.coin.uniform() < 0.5 {
            order.reverse();
        }
        for side in order {
            let samples = rig.round(side, self.pairs)?;
            self.keep(rig, side, samples)?;
        }
        let took = rig.elapsed().saturating_sub(began);
        self.in_pairs += took;
        self.longest_pair = self.longest_pair.max(took);
        Ok(())
    }

    /// Keep a round's samples; after the very first round, check the budget holds two and
    /// fix the first look of a target.
    fn keep<R: Rig>(&mut self, rig: &R, side: Side, samples: Vec<u64>) -> Result<()> {
        let at = rig.elapsed().as_secs_f64();
        let first_round = self.arms.iter().all(|a| a.samples.is_empty());
        let kept = samples.len();
        self.arms[side.index()].push(samples, self.plan.quantiles, at);
        if first_round {
            check_two_rounds_fit(self.plan.stop, self.plan.budget_flag, rig.elapsed())?;
            self.first_look = first_look(kept, self.plan.quantiles, self.plan.confidence);
        }
        Ok(())
    }

    /// Load `load` (of `loads`) as two blocks, one of each arm, in the coin's order, with as
    /// many rounds each; `Some` when the rounds as a whole must stop.
    fn one_load_in_blocks<R: Rig>(
        &mut self,
        rig: &mut R,
        (load, loads): (usize, usize),
        times: BlockTimes,
    ) -> Result<Option<StopReason>> {
        let mut order = [Side::Base, Side::Treat];
        if self.coin.uniform() < 0.5 {
            order.reverse();
        }
        let per_pair = self.per_pair();
        if let Some(reason) = self
            .plan
            .stop
            .before_pair(self.pairs, rig.elapsed(), per_pair)
        {
            return Ok(Some(reason));
        }
        let rounds = match self.plan.stop {
            Stop::Pairs(total) => share(total, load, loads),
            Stop::Adaptive { budget, .. } => {
                // A load that cannot finish its blocks in what is left would give an estimate
                // from a pair or two, as rough as it is heavy in the mean: it is not started.
                let left = budget.saturating_sub(rig.elapsed());
                if left < block_load_time(MIN_BLOCK_ROUNDS, times) {
                    return Ok(Some(StopReason::Time));
                }
                rounds_per_block(left / (loads - load) as u32, times)
            }
        };
        let first = self.block(rig, order[0], rounds)?;
        let second = self.block(rig, order[1], first)?;
        // A block cut short by the budget: the longer one's extra rounds are dropped, so that
        // every round still has its partner.
        let pairs = first.min(second);
        for arm in &mut self.arms {
            arm.truncate(self.pairs + pairs);
        }
        self.pairs += pairs;
        self.show(rig, (load, loads));
        let per_pair = self.per_pair();
        Ok(self
            .plan
            .stop
            .before_pair(self.pairs, rig.elapsed(), per_pair))
    }

    /// One block of `rounds` rounds of `side`, held for the block (fewer when the budget runs
    /// out); how many it ran.
    fn block<R: Rig>(&mut self, rig: &mut R, side: Side, rounds: usize) -> Result<usize> {
        rig.hold(side)?;
        let ran = self.block_rounds(rig, side, rounds);
        let released = rig.release(side);
        let ran = ran?;
        released?;
        Ok(ran)
    }

    /// The rounds of one held block.
    fn block_rounds<R: Rig>(&mut self, rig: &mut R, side: Side, rounds: usize) -> Result<usize> {
        for count in 0..rounds {
            let per_round = self.per_pair() / 2;
            let over_budget = matches!(self.plan.stop,
                Stop::Adaptive { budget, .. } if count > 0 && rig.elapsed() + per_round > budget);
            if over_budget {
                return Ok(count);
            }
            let began = rig.elapsed();
            let samples = rig.round(side, self.pairs + count + 1)?;
            self.keep(rig, side, samples)?;
            // A block's round is half of the pair it makes with its partner.
            let took = rig.elapsed().saturating_sub(began);
            self.in_pairs += took;
            self.longest_pair = self.longest_pair.max(took * 2);
        }
        Ok(rounds)
    }

    /// The progress line, when the rig shows one now.
    fn show<R: Rig>(&self, rig: &mut R, (load, loads): (usize, usize)) {
        if rig.shows_progress() {
            let status = Progress {
                pairs: self.pairs,
                load: load + 1,
                loads,
                stop: self.plan.stop,
                elapsed: rig.elapsed(),
                width: self.width(),
            };
            rig.progress(&status);
        }
    }

    /// The width of the p50 interval: across loads when there are enough of them, else over
    /// the pairs.
    fn width(&self) -> Option<f64> {
        self.load_width().or_else(|| {
            let [base, treat] = &self.arms;
            shift_interval(
                &base.summaries,
                &treat.summaries,
                self.k50,
                self.plan.confidence,
            )
            .map(|i| i.hi - i.lo)
        })
    }

    /// The width of the p50 interval across the loads so far.
    fn load_width(&self) -> Option<f64> {
        let [base, treat] = &self.arms;
        shift_interval_loads(
            (&base.summaries, &treat.summaries),
            &self.loads,
            self.k50,
            self.plan.confidence,
        )
        .map(|a| a.hi - a.lo)
    }
}

/// The fewest rounds a block gets: fewer make a load's estimate too rough to be worth its hold.
pub const MIN_BLOCK_ROUNDS: usize = 5;

/// The rounds a block gets when the loads are fitted to the budget: the treatment's hold is
/// worth spreading over a few of them, but where loads vary more than the rounds within one
/// (a loader's cost moves from one start to the next), more loads narrow the interval more
/// than longer blocks do.
pub const FITTED_BLOCK_ROUNDS: usize = 20;

/// A round's time as the engine plans with it: the measured one and a fifth more (the
/// treatment's rounds are slower, and the machine varies).
fn planned_round(times: BlockTimes) -> Duration {
    times.round.mul_f64(1.2)
}

/// What a load in blocks of `rounds` rounds takes: a hold, and two blocks.
fn block_load_time(rounds: usize, times: BlockTimes) -> Duration {
    times.hold + planned_round(times) * (2 * rounds) as u32
}

/// Rounds per block for a load's share of the time: what is left after the hold, halved
/// between the two blocks; at least [`MIN_BLOCK_ROUNDS`].
fn rounds_per_block(slice: Duration, times: BlockTimes) -> usize {
    let left = slice.saturating_sub(times.hold).as_secs_f64();
    let round = planned_round(times).as_secs_f64().max(1e-6);
    ((left / 2.0 / round) as usize).max(MIN_BLOCK_ROUNDS)
}

/// With the treatment held in blocks and no `--loads`: as many loads as the rest of the budget
/// holds with blocks of [`FITTED_BLOCK_ROUNDS`], and no fewer than enough for an interval.
fn loads_that_fit(stop: Stop, spent: Duration, times: BlockTimes) -> usize {
    match stop {
        Stop::Adaptive { budget, .. } => {
            let left = budget.saturating_sub(spent).as_secs_f64();
            let each = block_load_time(FITTED_BLOCK_ROUNDS, times).as_secs_f64();
            ((left / each.max(1e-6)) as usize).max(crate::stats::loads::MIN_LOADS)
        }
        Stop::Pairs(_) => super::DEFAULT_LOADS,
    }
}

/// After the first round (which took `one`): a budget that cannot hold two rounds is a usage
/// error, said before spending it, naming the option the budget came from.
fn check_two_rounds_fit(stop: Stop, flag: BudgetFlag, one: Duration) -> Result<()> {
    match stop {
        Stop::Adaptive { budget, .. } if one * 2 > budget => {
            Err(usage(flag.too_short(budget, one, HINT_PAIRS)))
        }
        _ => Ok(()),
    }
}

#[cfg(test)]
#[path = "engine_tests.rs"]
mod tests;
