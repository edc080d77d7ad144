//! Does `overhead`'s interval keep its promises at the default settings? Coverage, power and
//! speed of its whole procedure — `overhead`'s own engine ([`run_rounds`]) driving a simulated
//! rig: pairs of rounds ordered by a coin, spread over loads of the two objects made in both
//! orders, as many as the time budget holds, per-round mid-quantiles, per load the median pair
//! difference, across loads the mean with its t interval — on synthetic rounds shaped like the
//! test VM's.
//!
//! ```text
//! cargo run --release --example stats_coverage [-- --runs 400 --threads N --only NAME --rounds R --target-ns T --confidence C --loads L]
//! ```
//! (`--rounds R`: a fixed R pairs instead of the default time budget; `--target-ns T`: stop early
//! at that width, as `overhead --target-ns`; `--loads L`: loads per run; `--runs 0`: only the
//! timing.)
//!
//! Each load of an object shifts its rounds by a placement effect for as long as it stays
//! loaded, and of the two objects the one loaded second costs more ([`LOAD_MODEL`], fitted to
//! rounds kept on the test VM with `scripts/fit-load-model.py`).
//!
//! The model, calibrated on rounds kept with `overhead --keep` on the test VM (2 vCPUs, kernel
//! 6.18): a round is 225 kept openats (the default 250 of `--compare` and `--aa` less the
//! warm-up) whose latency is the level (≈1840 ns) plus an excess
//! drawn from the median per-round excess quantiles (a ±20 ns body, 3% from +120 ns, p99 +506,
//! p99.9 +11 µs: interrupts), in 10% of rounds with 30% of the body lifted by 190 ns (the
//! bimodal rounds seen there); each reading is the difference of two clock readings with a
//! 10 ns tick and a random phase, plus a 1 ns jitter (values such as 1833/1834). Rounds run in
//! time slots, the order within each pair by a coin as `overhead` does; each scenario gives
//! each slot a shift: AR(1) drift, an independent shift, bursts that lift a round by 150–700 ns
//! and dips that lower it by 100–500 ns (per arm), state changes of ±400 ns that last 10–40
//! slots, a steady trend, interference with a period of four slots (which strict ABBA
//! alternation would resonate with). The scenarios' rates and durations are per slot of 22.5 ms
//! (the rounds of 5,000 openats, a process each, they were measured on) and are rescaled to the
//! default round's time ([`Scenario::per_slot`]). Tail quantiles are compared as `overhead`
//! does, over blocks of pairs pooled ([`compare`]).
//! Bursts strike a round at a rate per unit of its time, so the treat arm's slightly longer
//! rounds are struck slightly more often; the last line multiplies the treat arm's rate by 2.5
//! besides (a hook that attracts interference: a stress case, not a target). The treatment
//! shifts every latency by the effect. A round takes 1.5 ms + 2.7 µs × 250
//! iterations of simulated time, a reload of both objects 60 ms, and the engine decides when a
//! run ends, as on the machine: at the default, when the next pair would not fit in the 12 s
//! budget.
//!
//! A/A lines count runs whose interval holds 0 for each quantile (the target: at least the
//! intervals' confidence, 99% by default as in `overhead`, ≥ 95% at `--confidence 0.95`); effect
//! lines count runs whose p50 interval excludes 0 with the right sign (power), with the
//! wrong sign, and whose intervals hold the true effect. P(≥19/20) and P(≥9/10) turn the rates
//! into the odds of passing a 20-run and a 10-run target.

use ebpf_prof::overhead::{
    run_rounds, Rig, RoundsPlan, Side, Stop, DEFAULT_CONFIDENCE, DEFAULT_ITERATIONS, DEFAULT_LOADS,
    DEFAULT_MAX_TIME,
};
use ebpf_prof::stats::rng::Rng;
use ebpf_prof::stats::{
    compare, compare_loads, shift_interval, CompareOptions, LoadOrder, RoundSummary,
};
use std::time::{Duration, Instant};

/// How the machine moves between rounds.
#[derive(Clone, Copy)]
struct Scenario {
    name: &'static str,
    /// Stationary sd (ns) and slot-to-slot correlation of an AR(1) shift.
    ar_sd: f64,
    rho: f64,
    /// sd of an independent shift per slot (ns).
    iid_sd: f64,
    /// Per round of the base arm: probability of a burst (+150–700 ns).
    burst: f64,
    /// The treat arm's burst rate relative to the base arm's, besides its longer rounds.
    burst_treat: f64,
    /// Per round: probability of a dip (−100–500 ns), both arms.
    dip: f64,
    /// Per slot: probability that a state change (±400 ns for 10–40 slots) starts.
    state: f64,
    /// A steady trend, ns per slot.
    trend: f64,
    /// Amplitude (ns) of an interference with a period of four slots.
    period4: f64,
}

/// Bursts strike a round at a rate per unit of its time: a round made longer by the effect is
/// struck a little more often (`b_treat` is the rate in the treat arm relative to base's
/// beyond that; only the stress line sets it above 1).
#[rustfmt::skip]
const SCENARIOS: [Scenario; 7] = [
    //        name                            ar_sd  rho  iid  burst  b_treat  dip   state  trend period4
    scenario("calm drift",                     6.0, 0.7,  5.0, 0.0,   1.0,   0.0,  0.0,   0.0,  0.0),
    scenario("bursts and dips (6%, 3%)",       6.0, 0.7,  5.0, 0.06,  1.0,   0.03, 0.0,   0.0,  0.0),
    scenario("state changes",                  6.0, 0.7,  5.0, 0.03,  1.0,   0.0,  0.01,  0.0,  0.0),
    scenario("trend 2 ns/slot",                6.0, 0.7,  5.0, 0.03,  1.0,   0.0,  0.0,   2.0,  0.0),
    scenario("period of 4 slots, ±8 ns",       6.0, 0.7,  5.0, 0.03,  1.0,   0.0,  0.0,   0.0,  8.0),
    scenario("noisy VM (all, 3x drift)",      18.0, 0.5, 15.0, 0.08,  1.0,   0.06, 0.01,  0.5,  3.0),
    scenario("stress: treat bursts 2.5x",      6.0, 0.7,  5.0, 0.04,  2.5,   0.03, 0.0,   0.0,  0.0),
];

impl Scenario {
    /// The scenario on slots [`SLOWER`] times shorter than those it was written for.
    fn per_slot(&self) -> Scenario {
        Scenario {
            rho: self.rho.powf(1.0 / SLOWER),
            burst: self.burst / SLOWER,
            dip: self.dip / SLOWER,
            state: self.state / SLOWER,
            trend: self.trend / SLOWER,
            ..*self
        }
    }
}

#[allow(clippy::too_many_arguments)]
const fn scenario(
    name: &'static str,
    ar_sd: f64,
    rho: f64,
    iid_sd: f64,
    burst: f64,
    burst_treat: f64,
    dip: f64,
    state: f64,
    trend: f64,
    period4: f64,
) -> Scenario {
    Scenario {
        name,
        ar_sd,
        rho,
        iid_sd,
        burst,
        burst_treat,
        dip,
        state,
        trend,
        period4,
    }
}

const LEVEL_NS: f64 = 1840.0;
/// `overhead --compare`'s default rounds, less the 10% warm-up.
const KEPT: usize = DEFAULT_ITERATIONS * 9 / 10;
const ITERATIONS: f64 = DEFAULT_ITERATIONS as f64;
/// A round's time: the bench's loop and what a switch of arms and the pipe round trip cost
/// (2,771 pairs of rounds of 250 in 12 s with `--compare` on the test VM).
const ROUND_S: f64 = 0.0015 + 2.7e-6 * ITERATIONS;
/// The scenarios' figures were calibrated on slots of 22.5 ms (rounds of 5,000 in a process
/// each); a slot of `ROUND_S` is this many times shorter, and [`Scenario::per_slot`] rescales
/// what depends on time: the drift's correlation from slot to slot, the chance per slot of a
/// burst, a dip or a state change, how many slots a state lasts, the trend.
const SLOWER: f64 = 0.0225 / ROUND_S;
/// Median per-round excess over the round's p50 at these probabilities (ns), test VM.
const EXCESS: [(f64, f64); 20] = [
    (0.0, -35.0),
    (0.001, -30.0),
    (0.01, -20.0),
    (0.1, -12.0),
    (0.25, -7.0),
    (0.5, 0.0),
    (0.75, 7.0),
    (0.9, 12.0),
    (0.95, 21.0),
    (0.965, 120.0),
    (0.97, 210.0),
    (0.98, 250.0),
    (0.99, 506.0),
    (0.995, 760.0),
    (0.997, 1110.0),
    (0.998, 7880.0),
    (0.999, 11100.0),
    (0.9995, 16400.0),
    (0.9999, 38000.0),
    (1.0, 60000.0),
];

fn excess(u: f64) -> f64 {
    let i = EXCESS
        .partition_point(|&(p, _)| p <= u)
        .clamp(1, EXCESS.len() - 1);
    let ((p0, x0), (p1, x1)) = (EXCESS[i - 1], EXCESS[i]);
    x0 + (x1 - x0) * (u - p0) / (p1 - p0)
}

/// One round's samples: level shift `d`, the effect `plus`, bimodal with probability 10%.
fn round(rng: &mut Rng, d: f64, plus: f64) -> Vec<u64> {
    let bimodal = rng.uniform() < 0.1;
    (0..KEPT)
        .map(|_| {
            let mut lat = LEVEL_NS + d + plus + excess(rng.uniform());
            if bimodal && rng.uniform() < 0.3 {
                lat += 190.0;
            }
            let phase = rng.uniform();
            let ticks = (lat / 10.0 + phase).floor();
            (ticks * 10.0) as u64 + u64::from(rng.uniform() < 0.5)
        })
        .collect()
}

/// The machine's state, slot by slot.
struct Machine<'a> {
    s: &'a Scenario,
    ar: f64,
    state_left: usize,
    state_shift: f64,
    slot: usize,
}

impl Machine<'_> {
    /// The shift of the next slot for a round of `arm` (0 base, 1 treat), `effect` ns per
    /// operation longer in the treat arm.
    fn next(&mut self, rng: &mut Rng, arm: usize, effect: f64) -> f64 {
        let s = self.s;
        self.ar = s.rho * self.ar + (1.0 - s.rho * s.rho).sqrt() * s.ar_sd * rng.normal();
        if self.state_left == 0 && rng.uniform() < s.state {
            self.state_left = ((10 + rng.below(31)) as f64 * SLOWER) as usize;
            self.state_shift = if rng.uniform() < 0.5 { 400.0 } else { -400.0 };
        }
        let state = if self.state_left > 0 {
            self.state_left -= 1;
            self.state_shift
        } else {
            0.0
        };
        let longer = 1.0 + effect / LEVEL_NS;
        let burst_p = [s.burst, s.burst * s.burst_treat * longer][arm];
        let burst = if rng.uniform() < burst_p {
            150.0 + 550.0 * rng.uniform()
        } else if rng.uniform() < s.dip {
            -100.0 - 400.0 * rng.uniform()
        } else {
            0.0
        };
        self.slot += 1;
        let wave = s.period4 * [1.0, 0.0, -1.0, 0.0][self.slot % 4];
        self.ar + s.iid_sd * rng.normal() + state + burst + s.trend * self.slot as f64 + wave
    }
}

/// How a load of an object moves its cost, fitted to `overhead --keep` rounds of the test VM
/// (docs/overhead-method.md, "Fitting the load model"): each load of an object shifts its
/// rounds by a placement effect for as long as it stays loaded, and of two objects the one
/// loaded second costs more.
#[derive(Clone, Copy)]
struct LoadModel {
    /// sd of an object's placement effect, per load (ns).
    placement_sd: f64,
    /// How much more the object loaded second costs (ns).
    order_effect: f64,
    /// Time a reload of both objects takes (s).
    reload_s: f64,
}

/// Fitted with `scripts/fit-load-model.py` to three runs of `overhead --aa --load lookups_2.bpf.o
/// --loads 40 --max-time 40s --keep DIR` (120 loads, 2026-12-02): an order effect of 7 ns, a
/// placement sd of 2.7 ns per object and load; a reload of both objects and its checks took
/// about 60 ms.
const LOAD_MODEL: LoadModel = LoadModel {
    placement_sd: 2.7,
    order_effect: 7.0,
    reload_s: 0.06,
};

/// The simulated machine as `overhead`'s engine drives it: two objects on a time-slotted
/// machine, each round's samples drawn from the scenario.
struct SimRig<'a> {
    machine: Machine<'a>,
    rng: Rng,
    effect: f64,
    loads: LoadModel,
    /// The placement effect of each arm's current load, and which arm was loaded second.
    placement: [f64; 2],
    second: Side,
    clock: Duration,
}

impl Rig for SimRig<'_> {
    fn prepared(&self) -> Option<LoadOrder> {
        Some(LoadOrder::BaseFirst)
    }

    fn reload(&mut self, order: LoadOrder) -> anyhow::Result<()> {
        self.placement = [0, 1].map(|_| self.loads.placement_sd * self.rng.normal());
        self.second = match order {
            LoadOrder::TreatFirst => Side::Base,
            _ => Side::Treat,
        };
        self.clock += Duration::from_secs_f64(self.loads.reload_s);
        Ok(())
    }

    fn round(&mut self, side: Side, _pair: usize) -> anyhow::Result<Vec<u64>> {
        let arm = usize::from(side == Side::Treat);
        let mut shift = self.machine.next(&mut self.rng, arm, self.effect) + self.placement[arm];
        if side == self.second {
            shift += self.loads.order_effect;
        }
        let plus = if arm == 1 { self.effect } else { 0.0 };
        self.clock += Duration::from_secs_f64(ROUND_S);
        Ok(round(&mut self.rng, shift, plus))
    }

    fn elapsed(&self) -> Duration {
        self.clock
    }
}

/// One simulated run of `overhead --compare` at the settings of `cfg`, through its engine.
fn simulate(seed: u64, s: &Scenario, cfg: &Config, effect: f64) -> (RunResult, usize) {
    let mut rng = Rng::new(seed);
    let s = &s.per_slot();
    let machine = Machine {
        s,
        ar: s.ar_sd * rng.normal(),
        state_left: 0,
        state_shift: 0.0,
        slot: 0,
    };
    let opts = CompareOptions {
        confidence: cfg.confidence,
        ..CompareOptions::default()
    };
    let mut rig = SimRig {
        machine,
        placement: [0, 1].map(|_| LOAD_MODEL.placement_sd * rng.normal()),
        rng,
        effect,
        loads: LOAD_MODEL,
        second: Side::Treat,
        clock: Duration::ZERO,
    };
    let plan = RoundsPlan {
        budget_flag: ebpf_prof::overhead::BudgetFlag::MaxTime,
        stop: cfg.stop,
        quantiles: &opts.quantiles,
        confidence: opts.confidence,
        seed: seed ^ 0x5eed,
        loads: Some(cfg.loads),
    };
    let r = run_rounds(&mut rig, &plan).expect("simulated rounds cannot fail");
    let c = compare_loads(
        (&r.base.samples, &r.base.summaries),
        (&r.treat.samples, &r.treat.summaries),
        &r.loads,
        &opts,
    );
    let intervals = c.diffs.iter().map(|d| (d.lo, d.hi)).collect();
    let p50 = c.diffs[0].delta;
    (RunResult { intervals, p50 }, r.ended.pairs)
}

struct RunResult {
    /// (lo, hi) per quantile: p50, p90, p99, p99.9.
    intervals: Vec<(f64, f64)>,
    /// The p50 estimate.
    p50: f64,
}

struct Config {
    /// Confidence of the intervals (the tool's default, or `--confidence`).
    confidence: f64,
    /// Loads of the objects per run (the tool's default, or `--loads`).
    loads: usize,
    runs: usize,
    threads: usize,
    stop: Stop,
    only: String,
}

/// Tallies over runs of one scenario and effect.
#[derive(Default, Clone)]
struct Tally {
    runs: usize,
    covers: [usize; 4],
    detects: usize,
    wrong_sign: usize,
    widths: Vec<f64>,
    pairs: Vec<f64>,
    estimates: Vec<f64>,
}

impl Tally {
    fn add(&mut self, r: &RunResult, pairs: usize, effect: f64) {
        self.runs += 1;
        for (k, &(lo, hi)) in r.intervals.iter().enumerate().take(4) {
            self.covers[k] += usize::from(lo <= effect && effect <= hi);
        }
        let (lo, hi) = r.intervals[0];
        self.detects += usize::from(lo > 0.0);
        self.wrong_sign += usize::from(hi < 0.0);
        self.widths.push(hi - lo);
        self.pairs.push(pairs as f64);
        self.estimates.push(r.p50);
    }

    fn merge(mut self, o: Tally) -> Tally {
        self.runs += o.runs;
        for k in 0..4 {
            self.covers[k] += o.covers[k];
        }
        self.detects += o.detects;
        self.wrong_sign += o.wrong_sign;
        self.widths.extend(o.widths);
        self.pairs.extend(o.pairs);
        self.estimates.extend(o.estimates);
        self
    }
}

/// `cfg.runs` runs of one scenario and effect, on all threads.
fn tally(s: &Scenario, cfg: &Config, effect: f64) -> Tally {
    std::thread::scope(|scope| {
        let handles: Vec<_> = (0..cfg.threads)
            .map(|t| {
                scope.spawn(move || {
                    let mut tally = Tally::default();
                    for run in (t..cfg.runs).step_by(cfg.threads) {
                        let seed = ((run as u64 + 1) * 0x9E37_79B9) ^ ((effect as u64) << 32);
                        let (r, pairs) = simulate(seed, s, cfg, effect);
                        tally.add(&r, pairs, effect);
                    }
                    tally
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_default())
            .fold(Tally::default(), Tally::merge)
    })
}

/// P(at least `k` of `n`) for a success probability `p`.
fn at_least(k: usize, n: usize, p: f64) -> f64 {
    let choose =
        |n: usize, k: usize| (0..k).fold(1.0, |acc, i| acc * (n - i) as f64 / (i + 1) as f64);
    (k..=n)
        .map(|j| choose(n, j) * p.powi(j as i32) * (1.0 - p).powi((n - j) as i32))
        .sum()
}

fn pct(k: usize, n: usize) -> f64 {
    100.0 * k as f64 / n.max(1) as f64
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
}

/// Wall time of the comparison on a long run: 3,000 pairs of default rounds.
fn timing() {
    const PAIRS: usize = 3_000;
    let mut rng = Rng::new(9);
    let opts = CompareOptions::default();
    let rounds: Vec<Vec<u64>> = (0..2 * PAIRS).map(|_| round(&mut rng, 0.0, 0.0)).collect();
    let t0 = Instant::now();
    let sums: Vec<RoundSummary> = rounds
        .iter()
        .map(|r| RoundSummary::of(r, &opts.quantiles))
        .collect();
    let summarise = t0.elapsed().as_secs_f64() * 1e6 / (2 * PAIRS) as f64;
    let t1 = Instant::now();
    let width = shift_interval(&sums[..PAIRS], &sums[PAIRS..], 0, opts.confidence);
    let look = t1.elapsed().as_secs_f64() * 1e3;
    std::hint::black_box(&width);
    let t2 = Instant::now();
    let c = compare(&rounds[..PAIRS], &rounds[PAIRS..], &opts);
    std::hint::black_box(&c);
    println!(
        "speed: summarising a {KEPT}-sample round {summarise:.0} µs; the p50 interval of {PAIRS} pairs {look:.2} ms; comparing {PAIRS} pairs, 4 quantiles (tails pooled) {:.0} ms",
        t2.elapsed().as_secs_f64() * 1e3
    );
}

fn parse_args() -> Config {
    let args: Vec<String> = std::env::args().collect();
    let get = |flag: &str| {
        let at = args.iter().position(|a| a == flag)?;
        args.get(at + 1)?.parse::<usize>().ok()
    };
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let confidence = args
        .iter()
        .position(|a| a == "--confidence")
        .and_then(|i| args.get(i + 1)?.parse::<f64>().ok())
        .unwrap_or(DEFAULT_CONFIDENCE);
    Config {
        confidence,
        loads: get("--loads").unwrap_or(DEFAULT_LOADS),
        runs: get("--runs").unwrap_or(400),
        threads: get("--threads").unwrap_or(cores).max(1),
        stop: get("--rounds").map_or(
            Stop::Adaptive {
                target_ns: get("--target-ns").map(|t| t as f64),
                budget: DEFAULT_MAX_TIME,
            },
            Stop::Pairs,
        ),
        only: args
            .iter()
            .position(|a| a == "--only")
            .and_then(|i| args.get(i + 1))
            .cloned()
            .unwrap_or_default(),
    }
}

fn main() {
    let cfg = parse_args();
    timing();
    if cfg.runs == 0 {
        return;
    }
    println!(
        "\n{} simulated runs per line, {}, {KEPT} kept samples a round, {:.0}% intervals",
        cfg.runs,
        stop_text(&cfg.stop),
        100.0 * cfg.confidence
    );
    aa_table(&cfg);
    for effect in [35.0, 15.0] {
        effect_table(&cfg, effect);
    }
}

/// How the simulated runs stop, in words.
fn stop_text(stop: &Stop) -> String {
    match *stop {
        Stop::Pairs(n) => format!("{n} pairs"),
        Stop::Adaptive {
            target_ns: None,
            budget,
        } => format!("the default: pairs for {} s of rounds", budget.as_secs()),
        Stop::Adaptive {
            target_ns: Some(t),
            budget,
        } => format!(
            "--target-ns {t}: p50 interval ≤ {t} ns at 360, 540, 810… pairs at 99% (270… at 95%), or {} s of rounds",
            budget.as_secs()
        ),
    }
}

/// The scenarios `--only` keeps.
fn scenarios(cfg: &Config) -> impl Iterator<Item = &'static Scenario> + '_ {
    SCENARIOS
        .iter()
        .filter(|s| s.name.contains(cfg.only.as_str()))
}

/// A/A: how often each quantile's interval holds 0, per scenario.
fn aa_table(cfg: &Config) {
    println!(
        "\nA/A: % of runs whose interval holds 0 (target ≥ {:.0})",
        100.0 * cfg.confidence
    );
    println!(
        "{:<28} {:>6} {:>6} {:>6} {:>6} | {:>8} {:>6} | P(≥19/20 p50)",
        "scenario", "p50", "p90", "p99", "p99.9", "width50", "pairs"
    );
    for s in scenarios(cfg) {
        let t = tally(s, cfg, 0.0);
        let c = |k: usize| pct(t.covers[k], t.runs);
        println!(
            "{:<28} {:>6.1} {:>6.1} {:>6.1} {:>6.1} | {:>8.1} {:>6.0} | {:.2}",
            s.name,
            c(0),
            c(1),
            c(2),
            c(3),
            median(t.widths.clone()),
            median(t.pairs.clone()),
            at_least(19, 20, c(0) / 100.0)
        );
    }
}

/// A treatment `effect` ns slower: power, wrong signs and coverage, per scenario.
fn effect_table(cfg: &Config, effect: f64) {
    println!(
        "\nTreatment +{effect} ns: power = % of runs whose p50 interval excludes 0 with lo > 0"
    );
    println!(
        "{:<28} {:>6} {:>6} | {:>6} {:>6} {:>6} {:>6} | {:>6} {:>8} {:>6} | P(≥9/10)",
        "scenario",
        "power",
        "wrong",
        "cov50",
        "cov90",
        "cov99",
        "cov999",
        "est50",
        "width50",
        "pairs"
    );
    for s in scenarios(cfg) {
        let t = tally(s, cfg, effect);
        let power = pct(t.detects, t.runs);
        let c = |k: usize| pct(t.covers[k], t.runs);
        println!(
            "{:<28} {:>6.1} {:>6} | {:>6.1} {:>6.1} {:>6.1} {:>6.1} | {:>6.1} {:>8.1} {:>6.0} | {:.2}",
            s.name,
            power,
            t.wrong_sign,
            c(0),
            c(1),
            c(2),
            c(3),
            median(t.estimates.clone()),
            median(t.widths.clone()),
            median(t.pairs.clone()),
            at_least(9, 10, power / 100.0)
        );
    }
}
