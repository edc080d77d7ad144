//! The engine's decisions against a seeded fake rig: the coin's balance, the loads and their
//! orders, each stop rule, an interrupt, and blocks of rounds for a slow treatment.

use super::*;
use crate::overhead::rounds::{BlockTimes, PAIRS_PER_LOAD};
use crate::signals::Interrupted;
use crate::stats::loads::MIN_LOADS;

/// A rig that takes a fixed time per round and per load, gives each arm's round a level
/// (the treatment `effect` ns above, the object loaded second `order_effect` ns above), and
/// can be made to be interrupted at a given round.
struct FakeRig {
    prepared: Option<LoadOrder>,
    clock: Duration,
    round_time: Duration,
    load_time: Duration,
    effect: f64,
    order_effect: f64,
    order: LoadOrder,
    rng: Rng,
    /// The arms of the rounds run, in order.
    log: Vec<Side>,
    /// The orders of the reloads asked for.
    reloads: Vec<LoadOrder>,
    interrupt_at: Option<usize>,
    /// Whether the treatment is slow to bring about (rounds in blocks), and the holds and
    /// releases asked for, in order.
    blocks: bool,
    holds: Vec<(Side, bool)>,
}

impl FakeRig {
    fn new(prepared: Option<LoadOrder>, seed: u64) -> FakeRig {
        FakeRig {
            prepared,
            clock: Duration::ZERO,
            round_time: Duration::from_millis(2),
            load_time: Duration::from_millis(50),
            effect: 0.0,
            order_effect: 0.0,
            order: prepared.unwrap_or(LoadOrder::OneObject),
            rng: Rng::new(seed),
            log: Vec::new(),
            reloads: Vec::new(),
            interrupt_at: None,
            blocks: false,
            holds: Vec::new(),
        }
    }

    /// The object of `side` was loaded second in the current order.
    fn loaded_second(&self, side: Side) -> bool {
        matches!(
            (self.order, side),
            (LoadOrder::BaseFirst, Side::Treat) | (LoadOrder::TreatFirst, Side::Base)
        )
    }
}

impl Rig for FakeRig {
    fn prepared(&self) -> Option<LoadOrder> {
        self.prepared
    }

    fn reload(&mut self, order: LoadOrder) -> Result<()> {
        self.clock += self.load_time;
        self.order = order;
        self.reloads.push(order);
        Ok(())
    }

    fn round(&mut self, side: Side, _pair: usize) -> Result<Vec<u64>> {
        if self.interrupt_at == Some(self.log.len()) {
            return Err(Interrupted(libc::SIGINT).into());
        }
        self.log.push(side);
        self.clock += self.round_time;
        let mut level = 1000.0
            + if side == Side::Treat {
                self.effect
            } else {
                0.0
            };
        if self.loaded_second(side) {
            level += self.order_effect;
        }
        let noise = 5.0 * self.rng.normal();
        Ok((0..200)
            .map(|i| (level + noise + (i % 7) as f64) as u64)
            .collect())
    }

    fn elapsed(&self) -> Duration {
        self.clock
    }

    fn wants_blocks(&mut self) -> Result<Option<BlockTimes>> {
        Ok(self.blocks.then_some(BlockTimes {
            hold: self.round_time * 10,
            round: self.round_time,
        }))
    }

    fn hold(&mut self, side: Side) -> Result<()> {
        // Starting the treatment (a loader) takes ten rounds' time.
        if side == Side::Treat {
            self.clock += self.round_time * 10;
        }
        self.holds.push((side, true));
        Ok(())
    }

    fn release(&mut self, side: Side) -> Result<()> {
        self.holds.push((side, false));
        Ok(())
    }
}

fn plan(stop: Stop, loads: usize) -> RoundsPlan<'static> {
    RoundsPlan {
        stop,
        budget_flag: BudgetFlag::MaxTime,
        quantiles: &[50.0],
        confidence: 0.99,
        seed: 11,
        loads: Some(loads),
    }
}

fn budget(seconds: f64) -> Stop {
    Stop::Adaptive {
        target_ns: None,
        budget: Duration::from_secs_f64(seconds),
    }
}

#[test]
fn the_coin_puts_each_arm_first_in_about_half_the_pairs() {
    let mut rig = FakeRig::new(None, 1);
    let r = run(&mut rig, &plan(Stop::Pairs(2000), 1)).unwrap();
    assert_eq!(r.ended.pairs, 2000);
    let base_first = rig.log.chunks(2).filter(|p| p[0] == Side::Base).count();
    // 2000 fair coins: within ±4 sd (89) of 1000.
    assert!((911..=1089).contains(&base_first), "{base_first}");
    assert!(
        rig.log.chunks(2).all(|p| p[0] != p[1]),
        "each pair has one round of each arm"
    );
}

#[test]
fn a_fixed_count_is_shared_between_loads_made_in_both_orders() {
    let mut rig = FakeRig::new(Some(LoadOrder::BaseFirst), 2);
    let r = run(&mut rig, &plan(Stop::Pairs(100), 8)).unwrap();
    assert_eq!((r.ended.pairs, r.ended.loads), (100, 8));
    assert_eq!(r.ended.reason, StopReason::Rounds);
    let pairs: Vec<usize> = r.loads.iter().map(|l| l.pairs).collect();
    assert_eq!(pairs.iter().sum::<usize>(), 100);
    assert!(pairs.iter().all(|&p| p == 12 || p == 13), "{pairs:?}");
    for couple in r.loads.chunks(2) {
        assert_eq!(couple[1].order, couple[0].order.swapped(), "{:?}", r.loads);
    }
    // Every load but a first one made in the prepared order is a reload.
    let reloaded = r.loads.len() - usize::from(r.loads[0].order == LoadOrder::BaseFirst);
    assert_eq!(rig.reloads.len(), reloaded);
    // A small count gets fewer loads, never fewer than PAIRS_PER_LOAD pairs each.
    let mut small = FakeRig::new(Some(LoadOrder::OneObject), 3);
    let r = run(&mut small, &plan(Stop::Pairs(12), 8)).unwrap();
    assert_eq!(r.ended.loads, 12 / PAIRS_PER_LOAD);
}

#[test]
fn nothing_to_load_means_one_load() {
    let mut rig = FakeRig::new(None, 4);
    let r = run(&mut rig, &plan(Stop::Pairs(40), 8)).unwrap();
    assert_eq!(r.loads.len(), 1);
    assert!(rig.reloads.is_empty());
}

#[test]
fn the_budget_ends_the_rounds_and_shares_it_between_loads() {
    let mut rig = FakeRig::new(Some(LoadOrder::OneObject), 5);
    let r = run(&mut rig, &plan(budget(2.0), 4)).unwrap();
    assert_eq!(r.ended.reason, StopReason::Time);
    assert!(rig.clock <= Duration::from_secs(2), "{:?}", rig.clock);
    assert_eq!(r.loads.len(), 4);
    // 2 s less three reloads of 50 ms, in pairs of 4 ms: about 460 pairs, a quarter a load.
    assert!((440..=500).contains(&r.ended.pairs), "{}", r.ended.pairs);
    for l in &r.loads {
        assert!((100..=130).contains(&l.pairs), "{:?}", r.loads);
    }
}

#[test]
fn a_target_stops_after_a_load_once_there_are_enough_loads() {
    let stop = Stop::Adaptive {
        target_ns: Some(1000.0),
        budget: Duration::from_secs(10),
    };
    let mut rig = FakeRig::new(Some(LoadOrder::BaseFirst), 6);
    let r = run(&mut rig, &plan(stop, 12)).unwrap();
    assert_eq!(r.ended.reason, StopReason::Target);
    assert_eq!(
        r.ended.loads, MIN_LOADS,
        "the first look is after the fourth load"
    );
    assert!(r.ended.p50_width_ns.unwrap() <= 1000.0);
    // An unreachable target runs to the budget.
    let stop = Stop::Adaptive {
        target_ns: Some(1e-6),
        budget: Duration::from_secs(1),
    };
    let mut rig = FakeRig::new(Some(LoadOrder::BaseFirst), 6);
    let r = run(&mut rig, &plan(stop, 12)).unwrap();
    assert_eq!((r.ended.reason, r.ended.loads), (StopReason::Time, 12));
}

#[test]
fn with_one_load_a_target_is_looked_at_after_pairs() {
    let stop = Stop::Adaptive {
        target_ns: Some(1000.0),
        budget: Duration::from_secs(60),
    };
    let mut rig = FakeRig::new(None, 7);
    let r = run(&mut rig, &plan(stop, 12)).unwrap();
    assert_eq!(r.ended.reason, StopReason::Target);
    assert_eq!(r.ended.pairs, first_look(200, &[50.0], 0.99));
}

#[test]
fn an_interrupt_ends_the_rounds_with_its_signal() {
    let mut rig = FakeRig::new(Some(LoadOrder::BaseFirst), 8);
    rig.interrupt_at = Some(37);
    let e = run(&mut rig, &plan(Stop::Pairs(100), 4)).unwrap_err();
    assert_eq!(
        e.downcast_ref::<Interrupted>().map(|i| i.0),
        Some(libc::SIGINT)
    );
    assert_eq!(rig.log.len(), 37, "no round after the interrupt");
}

#[test]
fn a_budget_too_short_for_two_rounds_is_refused_after_the_first() {
    let mut rig = FakeRig::new(None, 9);
    rig.round_time = Duration::from_millis(600);
    let e = run(&mut rig, &plan(budget(1.0), 1)).unwrap_err();
    assert!(
        format!("{e:#}").contains("too short for two rounds"),
        "{e:#}"
    );
    assert_eq!(rig.log.len(), 1);
}

#[test]
fn loads_in_both_orders_cancel_an_order_effect() {
    // Identical objects, the one loaded second 10 ns slower: across loads the difference is 0.
    let mut rig = FakeRig::new(Some(LoadOrder::BaseFirst), 10);
    rig.order_effect = 10.0;
    let r = run(&mut rig, &plan(Stop::Pairs(400), 8)).unwrap();
    let c = crate::stats::compare_loads(
        (&r.base.samples, &r.base.summaries),
        (&r.treat.samples, &r.treat.summaries),
        &r.loads,
        &crate::stats::CompareOptions {
            quantiles: vec![50.0],
            confidence: 0.99,
            ..Default::default()
        },
    );
    let d = &c.diffs[0];
    assert!(d.lo <= 0.0 && 0.0 <= d.hi, "{d:?}");
    assert!((d.order_effect.unwrap() - 10.0).abs() < 2.0, "{d:?}");
    assert_eq!(c.loads, 8);
}

#[test]
fn a_slow_treatment_comes_in_blocks_of_as_many_rounds_each() {
    let mut rig = FakeRig::new(None, 12);
    rig.blocks = true;
    let r = run(&mut rig, &plan(Stop::Pairs(60), 6)).unwrap();
    assert_eq!((r.ended.pairs, r.ended.loads), (60, 6));
    assert_eq!(r.base.samples.len(), 60);
    assert_eq!(r.treat.samples.len(), 60);
    // Per load: one block of each arm, held and released around it, 10 rounds each.
    assert_eq!(rig.holds.len(), 6 * 4);
    for (load, blocks) in rig.log.chunks(20).enumerate() {
        let first = blocks[0];
        assert!(
            blocks[..10].iter().all(|&s| s == first),
            "load {load}: {blocks:?}"
        );
        assert!(
            blocks[10..].iter().all(|&s| s != first),
            "load {load}: {blocks:?}"
        );
    }
    let base_first = rig.log.chunks(20).filter(|b| b[0] == Side::Base).count();
    assert!(
        (1..=5).contains(&base_first),
        "the coin orders the blocks: {base_first}"
    );
    for pair in rig.holds.chunks(2) {
        assert_eq!(
            (pair[0].0, pair[0].1, pair[1].1),
            (pair[1].0, true, false),
            "{:?}",
            rig.holds
        );
    }
}

#[test]
fn blocks_share_a_budget_between_loads_and_pair_up_their_rounds() {
    let mut rig = FakeRig::new(None, 13);
    rig.blocks = true;
    rig.effect = 40.0;
    let r = run(&mut rig, &plan(budget(3.0), 6)).unwrap();
    assert_eq!(r.ended.reason, StopReason::Time);
    assert!(rig.clock <= Duration::from_millis(3050), "{:?}", rig.clock);
    assert_eq!(r.loads.len(), 6);
    assert_eq!(r.base.samples.len(), r.treat.samples.len());
    for l in &r.loads {
        assert!(l.pairs > 50, "{:?}", r.loads);
    }
    let c = crate::stats::compare_loads(
        (&r.base.samples, &r.base.summaries),
        (&r.treat.samples, &r.treat.summaries),
        &r.loads,
        &crate::stats::CompareOptions {
            quantiles: vec![50.0],
            confidence: 0.99,
            ..Default::default()
        },
    );
    let d = &c.diffs[0];
    assert!(d.lo <= 40.0 && 40.0 <= d.hi && d.lo > 0.0, "{d:?}");
}
