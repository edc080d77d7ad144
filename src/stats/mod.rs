//! Percentiles, summaries, and the baseline-vs-attached comparison of `overhead`. Pure
//! functions (no I/O), table-driven tests.
//!
//! # Percentile definition
//! Nearest rank, as `perf`/HdrHistogram report it: for sorted samples `x[0..n]`, the p-th
//! percentile is `x[ceil(p/100 * n) - 1]` (and `x[0]` for p = 0). It is always an observed
//! value; p50 of an even count is the lower middle, not an average.
//!
//! # The comparison ([`compare`])
//! The arms run interleaved in pairs of rounds, the order within each pair drawn by a fair coin
//! (`overhead`'s rounds, see there why not strict alternation), so round i of each arm is a
//! *pair*, adjacent in time, and nothing the machine does can favour one arm. Per quantile q:
//! 1. **Per round**, the q-th *mid-quantile*: the nearest rank read at the middle of its rank
//!    on the mid-distribution function, each run of tied values spread evenly over the
//!    half-gaps to its neighbours ([`compare::mid_quantile`]; Parzen, "Quantile probability and
//!    statistical data modeling", Statist. Sci. 2004, and Ma, Genton & Parzen, "Asymptotic
//!    properties of sample quantiles of discrete distributions", AISM 2011). Clock readings
//!    come in steps of several ns on a VM, so thousands of samples tie at p50 and a plain
//!    order statistic — or a Harrell–Davis or band mean, whose window is narrower than a
//!    step — moves only when the median crosses a step: in simulation they saw
//!    a 3 ns shift as 1 ns. The mid-quantile saw it as 2.8 ns (a shift of s ns reads as
//!    0.93–1.0 s), from 9,000 samples a round; over 2,000 pairs of `overhead`'s rounds of 225
//!    it resolves shifts of 3 and 5 ns to within 1 ns (the tests of [`compare`]).
//! 2. **Per pair**, `D_i = treat_i − base_i`: drift both rounds of a pair share cancels.
//! 3. **Across pairs**, the shift is the median of the `D_i` and its interval the sign-test
//!    interval `[D_(k), D_(R+1−k)]` ([`rank`]; Thompson 1936), exact from the binomial. Its
//!    coverage needs the `D_i − shift` to be as likely positive as negative, independently:
//!    with the order of each pair drawn by a coin and the effect a shift of the round, that
//!    holds whatever the noise looks like — not normal, not symmetric, not even independent
//!    between pairs (a randomization argument: the coin decides each sign). Why not a t interval:
//!    on a shared VM, bursts of interference lift a whole round by hundreds of ns in a few
//!    percent of rounds. One such round stretches a t interval over every pair, while a burst
//!    moves the median by at most one place (docs/overhead-method.md has the figures).
//!    Kalibera & Jones ("Rigorous benchmarking in reasonable time", ISMM 2013) show that such run-level variation, not the samples within a
//!    run, sets how many repetitions a benchmark needs: here, many short rounds. Why not the
//!    Hodges–Lehmann shift with its Wilcoxon signed-rank interval (Hodges & Lehmann 1963), 1.3×
//!    narrower when nothing is skewed: it needs the `D_i` symmetric, and bursts that strike the
//!    attached rounds more often skew them — its coverage fell to 87–90% in that simulation,
//!    the sign interval's stayed at 93–96%.
//! 4. **Arm levels** are the medians over the paired rounds of each arm's per-round quantile;
//!    `pct = 100 · delta / base` and its interval the ns interval over the same `base` (the
//!    level is known far better than the difference). With fewer than 6 pairs no sign interval
//!    reaches 95%: the interval is then `[min, max]` of the `D_i` and the `confidence` of each
//!    difference says what it achieves (50% for 2 pairs, 94% for 5).
//!
//! Rounds that sit in another mode than the rest of their arm are found and reported
//! ([`modes`]) — how many, how far, which rounds — and kept: the median is how they are
//! handled (a minority of spoiled pairs moves it by at most their count in places). p90, p99
//! and p99.9 go through the same steps; their per-round quantiles carry more sampling noise,
//! which the spread of their `D_i` carries into their intervals. Where a round holds fewer
//! than [`compare::TAIL_SAMPLES`] samples beyond a quantile (p99.9 of `overhead`'s rounds of
//! 250 rests on a quarter of one), the quantile is compared over blocks of consecutive pairs,
//! each arm's rounds of a block pooled ([`compare::block_pairs`]): a block's difference is as
//! likely positive as negative under no effect for the reason a pair's is — each pair's order
//! is a coin's, and flipping them all negates it — so the sign-test interval over blocks keeps
//! its coverage.
//!
//! **Two levels.** All of the above is about the pairs of rounds of one load of the objects.
//! Where the kernel places an object, and which of two is loaded first, move a cost for as long
//! as they stay loaded, so `overhead` loads them afresh several times a run and takes the
//! interval across loads, each load's estimate made as above ([`loads`]).
//!
//! **How many pairs** (`overhead` without `--rounds`): as many as the time budget holds, so
//! that the count depends on the clock and never on what the pairs showed, which keeps the
//! coverage exact. `--target-ns` stops early once the p50 interval is that narrow, looked at
//! once every quantile's interval can reach the level (360 pairs of rounds of 250 at 99%, at
//! least 100), then every half as many again; stopping on the *width* depends on the spread of the `D_i` and
//! hardly on where they lie (Chow & Robbins, "On the asymptotic theory of fixed-width
//! sequential confidence intervals for the mean", Ann. Math. Statist. 1965), but a little:
//! runs whose spread came out small stop first, and their intervals can be slightly too
//! narrow (simulated A/A coverage at a 95% level: 94.8–97.2% at p50, 93.5–98.8% at the other
//! quantiles, with those looks; 91.5–94.8% at p50 with looks from 30 pairs). `cargo run --release --example stats_coverage` checks all of it — the coverage of
//! every quantile and the power, on rounds with bursts, clock steps, drift and state changes.

pub mod compare;
pub mod comparison;
pub mod dist;
pub mod loads;
pub mod modes;
mod notes;
pub mod rank;
pub mod rng;
mod verdict;

pub use compare::{
    compare, compare_loads, compare_rounds, compare_summaries, shift_interval,
    shift_interval_loads, CompareOptions,
};
pub(crate) use comparison::METHOD_LOADS;
pub use comparison::{Comparison, QuantileDiff, RoundSummary};
pub use loads::{Load, LoadOrder};
pub use modes::Mode;
pub use rank::ShiftInterval;
pub(crate) use verdict::{gate_ns, gate_pct, q_label, shows_interval};
pub use verdict::{verdict, GateResult};

/// The percentile `p` (0..=100) of already sorted samples; `None` when empty.
pub(crate) fn percentile_sorted(sorted: &[u64], percentile: f64) -> Option<u64> {
    if sorted.is_empty() {
        return None;
    }
    let count = sorted.len();
    let rank = ((percentile / 100.0) * count as f64).ceil() as usize;
    Some(sorted[rank.clamp(1, count) - 1])
}

/// The summary the bench prints: n, min, p50, p90, p99, p99.9, max (ns).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Summary {
    pub n: usize,
    pub min: u64,
    pub p50: u64,
    pub p90: u64,
    pub p99: u64,
    pub p999: u64,
    pub max: u64,
}

/// `part` as a percentage of `whole`, to two decimals (0 when `whole` is 0).
pub fn pct(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        return 0.0;
    }
    (part as f64 * 10000.0 / whole as f64).round() / 100.0
}

impl Summary {
    /// Summarise samples (any order); `None` when empty.
    pub fn of(samples: &[u64]) -> Option<Summary> {
        let mut sorted = samples.to_vec();
        sorted.sort_unstable();
        Summary::of_sorted(&sorted)
    }

    /// Summarise already sorted samples.
    pub fn of_sorted(sorted: &[u64]) -> Option<Summary> {
        let at = |percentile| percentile_sorted(sorted, percentile);
        Some(Summary {
            n: sorted.len(),
            min: *sorted.first()?,
            p50: at(50.0)?,
            p90: at(90.0)?,
            p99: at(99.0)?,
            p999: at(99.9)?,
            max: *sorted.last()?,
        })
    }
}

impl std::fmt::Display for Summary {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            formatter,
            "n={} min={} p50={} p90={} p99={} p99.9={} max={} (ns)",
            self.n, self.min, self.p50, self.p90, self.p99, self.p999, self.max
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_table() {
        let one_to_100: Vec<u64> = (1..=100).collect();
        let ten: Vec<u64> = (1..=10).collect();
        let cases: &[(&[u64], f64, Option<u64>)] = &[
            (&[], 50.0, None),
            (&[7], 0.0, Some(7)),
            (&[7], 99.9, Some(7)),
            (&one_to_100, 50.0, Some(50)),
            (&one_to_100, 99.0, Some(99)),
            (&one_to_100, 99.9, Some(100)),
            (&one_to_100, 100.0, Some(100)),
            (&ten, 50.0, Some(5)),
            (&ten, 90.0, Some(9)),
            (&ten, 91.0, Some(10)),
            (&[1, 2], 50.0, Some(1)),
        ];
        for (s, p, want) in cases {
            assert_eq!(percentile_sorted(s, *p), *want, "p{p} of {s:?}");
        }
    }

    #[test]
    fn summary_is_order_independent() {
        let a = Summary::of(&[5, 1, 4, 2, 3]).unwrap();
        assert_eq!((a.n, a.min, a.p50, a.max), (5, 1, 3, 5));
        assert_eq!(Summary::of(&[]), None);
    }

    #[test]
    fn pct_rounds_to_two_decimals_and_zero_of_nothing() {
        assert_eq!(pct(1, 3), 33.33);
        assert_eq!(pct(2, 3), 66.67);
        assert_eq!(pct(5, 5), 100.0);
        assert_eq!(pct(7, 0), 0.0);
    }

    fn round(n: usize, p50: f64, max: u64) -> RoundSummary {
        RoundSummary {
            n,
            quantiles: vec![p50, p50 + 10.0, p50 + 100.0, p50 + 1000.0],
            max,
        }
    }

    #[test]
    /// The notes a comparison carries (stats/notes.rs), through [`compare_summaries`].
    fn comparison_notes_table() {
        let ok = |p| round(1000, p, 9000);
        let steady: Vec<RoundSummary> = (0..8).map(|i| ok(1200.0 + i as f64)).collect();
        let mut stalls = steady.clone();
        stalls[1].max = 48_000_000;
        stalls[2].max = 12_000_000;
        let mut empty = steady.clone();
        empty[4].n = 0;
        // (what, base, treat, fragments the notes hold, how many notes)
        type Case<'a> = (
            &'a str,
            &'a [RoundSummary],
            &'a [RoundSummary],
            &'a [&'a str],
        );
        let cases: &[Case] = &[
            ("steady", &steady, &steady, &[]),
            (
                "stalls",
                &steady,
                &stalls,
                &["attached: 2 of 8 rounds (round 2–3) had a sample of 10 ms or more (longest 48.0 ms)"],
            ),
            ("an empty round", &empty, &steady, &["Round 5 is left out"]),
            ("unequal arms", &steady, &steady[..6], &["only the first 6 pairs"]),
            ("few pairs", &steady[..3], &steady[..3], &["With 3 pairs no interval reaches 95%: each interval shown spans the whole range of the pair differences, a 75% interval"]),
        ];
        let opts = CompareOptions {
            confidence: 0.95,
            ..CompareOptions::default()
        };
        for (what, b, t, want) in cases {
            let c = compare_summaries(b, t, &opts);
            assert_eq!(c.notes.len(), want.len(), "{what}: {:?}", c.notes);
            for (n, w) in c.notes.iter().zip(*want) {
                assert!(n.contains(w), "{what}: {n}");
            }
        }
    }
}
