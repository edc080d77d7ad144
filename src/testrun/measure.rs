//! The timed batches of a test run, over a [`Runner`] (the kernel, or a simulation in the
//! tests). Each batch times, for each class and each object, one call of `R` runs, one of `2R`
//! runs (in an order a seeded coin picks) and one of a single run, all on the same packet.
//! Each call is read twice: its wall time around the syscall, and the kernel's own mean per
//! run, which it rounds down to whole ns. The per-run cost is the slope of the wall times,
//! `(t(2R) − t(R)) / R`: what a call costs besides its runs (the syscall, copying the packet
//! in, building the skb or xdp_buff, starting the timer) is the same in both calls and falls
//! out, and the slope resolves fractions of a ns. The kernel's means give a second slope,
//! `2·d(2R) − d(R)` plus half a ns for the rounding (the remainder of a total is on average half
//! a run's ns), kept as a cross-check in whole ns.
//!
//! A class whose packets the program rewrites is timed on a fresh copy instead: the single run
//! of each batch (a copy of the packet made by that call), less what the kernel's timing adds
//! to one run, which is estimated in the same batch from the classes the program leaves
//! untouched (their single run less their slope). With no such class, nothing is taken off
//! and the report says so. The classes take turns batch by batch, so drift of the machine
//! spreads over all of them.

use crate::stats::rng::Rng;
use std::time::{Duration, Instant};

/// The fewest batches a class gets before a time budget may end the run.
pub const MIN_BATCHES: usize = 20;

/// Makes one timed test-run call.
pub trait Runner {
    /// One call of `repeat` runs of object `object` (0: the one under test, 1: the one
    /// compared with) on packet `packet`.
    fn call(&mut self, object: usize, packet: usize, repeat: u32) -> anyhow::Result<Call>;
}

/// The two readings of one call.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Call {
    /// Around the syscall, in ns.
    pub wall_ns: f64,
    /// The kernel's mean per run, whole ns rounded down.
    pub kernel_mean: f64,
}

/// How each class is timed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Timing {
    /// The slope of `R` and `2R` runs on one buffer.
    Slope,
    /// One run on a fresh copy, the call's fixed cost taken off.
    FreshCopy,
}

/// One class as the batches see it.
#[derive(Debug, Clone)]
pub struct ClassPlan {
    pub packets: Vec<usize>,
    /// `R`: runs in the shorter call.
    pub repeat: u32,
    pub timing: Timing,
}

/// The batches to run.
#[derive(Debug, Clone)]
pub struct Plan {
    pub classes: Vec<ClassPlan>,
    /// Objects timed in each batch: 1, or 2 with `--compare`.
    pub objects: usize,
    pub batches: usize,
    /// Stop once this has passed (after [`MIN_BATCHES`]).
    pub budget: Duration,
    /// Go on past `batches` until this has passed.
    pub span: Duration,
    pub seed: u64,
}

/// What one batch gives for one class and object, in ns: the slope of the R and 2R calls' wall
/// times, the slope of the kernel's means, and the kernel's single run.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BatchFigures {
    pub slope: f64,
    pub kernel_slope: f64,
    pub single: f64,
}

/// Per class, per object, per batch.
pub type Batches = Vec<Vec<Vec<BatchFigures>>>;

/// Run the batches of `plan`: the figures, and whether the budget cut the batches short.
pub fn run(plan: &Plan, runner: &mut dyn Runner) -> anyhow::Result<(Batches, Ended)> {
    let mut coin = Rng::new(plan.seed);
    let mut batches: Batches = vec![vec![Vec::new(); plan.objects]; plan.classes.len()];
    let start = Instant::now();
    for batch in 0.. {
        let elapsed = start.elapsed();
        if batch >= plan.batches && elapsed >= plan.span {
            break;
        }
        if batch >= MIN_BATCHES && elapsed > plan.budget {
            return Ok((batches, Ended::Budget { batches: batch }));
        }
        for (class_index, class) in plan.classes.iter().enumerate() {
            let packet = class.packets[batch % class.packets.len()];
            let first = coin.below(plan.objects);
            for turn in 0..plan.objects {
                let object = (first + turn) % plan.objects;
                let figures = one_batch(class.repeat, object, packet, runner, &mut coin)?;
                batches[class_index][object].push(figures);
            }
        }
    }
    Ok((batches, Ended::AllBatches))
}

/// How the batches ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ended {
    AllBatches,
    /// The time budget ended them after this many.
    Budget {
        batches: usize,
    },
}

/// One batch of one class on `object`: the R and 2R calls in the coin's order, then a single run.
fn one_batch(
    repeat: u32,
    object: usize,
    packet: usize,
    runner: &mut dyn Runner,
    coin: &mut Rng,
) -> anyhow::Result<BatchFigures> {
    let (short, long) = if coin.below(2) == 0 {
        let short = runner.call(object, packet, repeat)?;
        (short, runner.call(object, packet, 2 * repeat)?)
    } else {
        let long = runner.call(object, packet, 2 * repeat)?;
        (runner.call(object, packet, repeat)?, long)
    };
    let single = runner.call(object, packet, 1)?.kernel_mean + ROUNDING;
    Ok(BatchFigures {
        slope: (long.wall_ns - short.wall_ns) / f64::from(repeat),
        kernel_slope: kernel_slope(short.kernel_mean, long.kernel_mean),
        single,
    })
}

/// The kernel rounds its mean down: on average that takes half a ns off.
const ROUNDING: f64 = 0.5;

/// The per-run cost from the kernel's means of a call of R runs and one of 2R runs.
pub fn kernel_slope(short_mean: f64, long_mean: f64) -> f64 {
    2.0 * long_mean - short_mean + ROUNDING
}

/// Whether the fresh-copy figures had the timing's own cost taken off.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimerCost {
    /// Estimated in each batch from the classes timed by their slope.
    TakenOff,
    /// No class was timed by its slope: the single runs include it.
    Included,
}

/// Per class, per object, the per-run cost of each batch: the slope, or for a class timed on a
/// fresh copy its single run less the batch's timer cost (see the module).
pub fn per_run_costs(plan: &Plan, batches: &Batches) -> (Vec<Vec<Vec<f64>>>, TimerCost) {
    let sloped: Vec<usize> = (0..plan.classes.len())
        .filter(|index| plan.classes[*index].timing == Timing::Slope)
        .collect();
    let cost = if sloped.is_empty() {
        TimerCost::Included
    } else {
        TimerCost::TakenOff
    };
    let costs = plan
        .classes
        .iter()
        .zip(batches)
        .map(|(class, per_object)| {
            per_object
                .iter()
                .enumerate()
                .map(|(object, figures)| match class.timing {
                    Timing::Slope => figures.iter().map(|f| f.slope).collect(),
                    Timing::FreshCopy => figures
                        .iter()
                        .enumerate()
                        .map(|(batch, f)| f.single - timer_cost(batches, &sloped, object, batch))
                        .collect(),
                })
                .collect()
        })
        .collect();
    (costs, cost)
}

/// Per class, per object, the kernel's slope of each batch (the cross-check in whole ns); for
/// a class timed on a fresh copy, the same figures as [`per_run_costs`].
pub fn kernel_costs(plan: &Plan, batches: &Batches, costs: &[Vec<Vec<f64>>]) -> Vec<Vec<Vec<f64>>> {
    plan.classes
        .iter()
        .zip(batches)
        .zip(costs)
        .map(|((class, per_object), own)| match class.timing {
            Timing::FreshCopy => own.clone(),
            Timing::Slope => per_object
                .iter()
                .map(|figures| figures.iter().map(|f| f.kernel_slope).collect())
                .collect(),
        })
        .collect()
}

/// What the kernel's timing adds to a single run in `batch`: the median over the classes timed
/// by their slope of (single run − slope); 0 with none.
fn timer_cost(batches: &Batches, sloped: &[usize], object: usize, batch: usize) -> f64 {
    let mut extra: Vec<f64> = sloped
        .iter()
        .filter_map(|class| batches[*class][object].get(batch))
        .map(|f| f.single - f.kernel_slope)
        .collect();
    if extra.is_empty() {
        return 0.0;
    }
    extra.sort_by(f64::total_cmp);
    extra[extra.len() / 2]
}

/// How many runs the shorter call makes for a program whose run takes `mean_ns` (the
/// kernel's whole-ns mean): enough that the call lasts about [`CALL_NS`], so the clock's steps
/// and the call's own cost are small beside it.
pub fn repeat_for(mean_ns: u32) -> u32 {
    let per_run = f64::from(mean_ns.max(1));
    (CALL_NS / per_run).clamp(MIN_REPEAT, MAX_REPEAT) as u32
}

/// The time the shorter call of a batch aims at, in ns.
const CALL_NS: f64 = 20_000.0;
const MIN_REPEAT: f64 = 8.0;
const MAX_REPEAT: f64 = 100_000.0;

#[cfg(test)]
mod tests {
    use super::*;

    /// A simulated kernel: a call costs a fixed part (the syscall, the copy) around its timed
    /// span, which costs a little besides its runs; seeded noise, now and then an
    /// interruption; the kernel's mean comes back rounded down, as the kernel returns it.
    struct Simulated {
        per_run: Vec<f64>,
        timer: f64,
        noise: Rng,
        calls: usize,
    }

    /// What a call costs outside the kernel's timed span.
    const CALL_FIXED: f64 = 1500.0;

    impl Runner for Simulated {
        fn call(&mut self, object: usize, _packet: usize, repeat: u32) -> anyhow::Result<Call> {
            self.calls += 1;
            let runs = f64::from(repeat);
            let jitter = self.noise.normal() * 0.8 * runs.sqrt();
            let burst = if self.noise.below(50) == 0 {
                300.0
            } else {
                0.0
            };
            let timed = self.timer + self.per_run[object] * runs + jitter + burst;
            let clock_step = self.noise.normal() * 10.0;
            Ok(Call {
                wall_ns: CALL_FIXED + timed + clock_step,
                kernel_mean: (timed / runs).floor(),
            })
        }
    }

    fn plan_of(timings: &[Timing], objects: usize, repeat: u32) -> Plan {
        Plan {
            classes: timings
                .iter()
                .map(|timing| ClassPlan {
                    packets: vec![0, 1, 2],
                    repeat,
                    timing: *timing,
                })
                .collect(),
            objects,
            batches: 400,
            budget: Duration::from_secs(60),
            span: Duration::ZERO,
            seed: 7,
        }
    }

    fn median(values: &[f64]) -> f64 {
        crate::stats::rank::median_interval(values, 0.99)
            .expect("values")
            .estimate
    }

    fn kernel(per_run: Vec<f64>, seed: u64) -> Simulated {
        Simulated {
            per_run,
            timer: 40.0,
            noise: Rng::new(seed),
            calls: 0,
        }
    }

    #[test]
    fn the_wall_slope_resolves_a_quarter_ns_and_drops_the_fixed_cost() {
        for true_cost in [29.4, 80.0, 709.7] {
            let mut simulated = kernel(vec![true_cost], 3);
            let repeat = repeat_for(true_cost as u32);
            let plan = plan_of(&[Timing::Slope], 1, repeat);
            let (batches, ended) = run(&plan, &mut simulated).expect("runs");
            assert_eq!(ended, Ended::AllBatches);
            assert_eq!(simulated.calls, 1200, "three calls a batch");
            let (costs, timer) = per_run_costs(&plan, &batches);
            assert_eq!(timer, TimerCost::TakenOff);
            let estimate = median(&costs[0][0]);
            assert!(
                (estimate - true_cost).abs() <= 0.25,
                "{true_cost}: {estimate}"
            );
            let kernel = kernel_costs(&plan, &batches, &costs);
            let whole = median(&kernel[0][0]);
            assert!((whole - true_cost).abs() <= 1.0, "{true_cost}: {whole}");
        }
    }

    #[test]
    fn a_fresh_copy_is_its_single_run_less_the_timer_of_the_batch() {
        let mut simulated = kernel(vec![120.0], 5);
        let plan = plan_of(&[Timing::Slope, Timing::FreshCopy], 1, 150);
        let (batches, _) = run(&plan, &mut simulated).expect("runs");
        let (costs, timer) = per_run_costs(&plan, &batches);
        assert_eq!(timer, TimerCost::TakenOff);
        let fresh = median(&costs[1][0]);
        assert!((fresh - 120.0).abs() <= 2.0, "{fresh}");
        // Without a class timed by its slope, the timer stays in.
        let alone = plan_of(&[Timing::FreshCopy], 1, 150);
        let (batches, _) = run(&alone, &mut kernel(vec![120.0], 5)).expect("runs");
        let (costs, timer) = per_run_costs(&alone, &batches);
        assert_eq!(timer, TimerCost::Included);
        assert!(
            median(&costs[0][0]) > 150.0,
            "the 40 ns of the timer included"
        );
    }

    #[test]
    fn two_objects_are_timed_in_every_batch() {
        let mut simulated = kernel(vec![30.0, 250.0], 11);
        let plan = plan_of(&[Timing::Slope], 2, 100);
        let (batches, _) = run(&plan, &mut simulated).expect("runs");
        let (costs, _) = per_run_costs(&plan, &batches);
        let deltas: Vec<f64> = costs[0][1]
            .iter()
            .zip(&costs[0][0])
            .map(|(b, a)| b - a)
            .collect();
        let delta = median(&deltas);
        assert!((delta - 220.0).abs() <= 1.0, "{delta}");
    }

    #[test]
    fn a_spent_budget_stops_after_the_minimum() {
        let plan = Plan {
            budget: Duration::ZERO,
            ..plan_of(&[Timing::Slope], 1, 10)
        };
        let (batches, ended) = run(&plan, &mut kernel(vec![30.0], 1)).expect("runs");
        assert_eq!(
            ended,
            Ended::Budget {
                batches: MIN_BATCHES
            }
        );
        assert_eq!(batches[0][0].len(), MIN_BATCHES);
    }

    #[test]
    fn the_batches_go_on_until_the_span_has_passed() {
        let span = Duration::from_millis(30);
        let plan = Plan {
            batches: 10,
            span,
            ..plan_of(&[Timing::Slope], 1, 10)
        };
        let start = Instant::now();
        let (batches, ended) = run(&plan, &mut kernel(vec![30.0], 1)).expect("runs");
        assert!(start.elapsed() >= span);
        assert_eq!(ended, Ended::AllBatches);
        assert!(batches[0][0].len() > 10, "{}", batches[0][0].len());
    }

    #[test]
    fn repeats_aim_at_a_call_of_twenty_microseconds() {
        assert_eq!(repeat_for(20), 1000);
        assert_eq!(repeat_for(0), 20_000);
        assert_eq!(repeat_for(1_000_000), 8);
    }
}
