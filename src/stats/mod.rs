//! Percentiles, summaries, and the baseline-vs-attached comparison of `overhead`. Pure
//! functions (no I/O), table-driven tests.
//!
//! # Percentile definition
//! Nearest rank, as `perf`/HdrHistogram report it: for sorted samples `x[0..n]`, the p-th
//! percentile is `x[ceil(p/100 * n) - 1]` (and `x[0]` for p = 0). It is always an observed
//! value; p50 of an even count is the lower middle, not an average.
//!
//! # The comparison ([`compare`])
//! The arms run interleaved — base 1, treat 1, base 2, treat 2, … — so round i of each arm is a
//! *pair*, adjacent in time. Per quantile q:
//! 1. Each round's q-th percentile: the nearest rank, read at the middle of that rank on the
//!    empirical CDF with each run of tied values spread evenly over the half-gaps to its
//!    neighbours. Clock readings come in steps (~10 ns on the test VM), so thousands of samples
//!    tie at p50; spreading them lets a 3 ns shift move the estimate by 3 ns instead of by 0 or
//!    10. Without ties this is the nearest-rank value itself (± a quarter of the neighbouring
//!    gaps). Per pair, `D_i = treat_i − base_i`: drift both rounds share cancels. The arm figures
//!    are means over the rounds, so `delta = mean(D_i) = treat − base`. (The per-arm summary,
//!    [`Summary`], stays plain nearest rank over pooled samples; the two differ by a fraction of
//!    a clock step plus the drift.)
//! 2. `se_between = sd(D_i) / √R` over the R pairs sees the drift a pair does *not* share plus
//!    the sampling noise. Resampling within rounds alone cannot see drift at all (at p50 a
//!    90,000-sample round has ~0.5 ns of sampling noise, the drift is ±20 ns): in simulation
//!    such an interval held 0 in only 7–26% of A/A runs with drift.
//! 3. `se_within`: a bootstrap that resamples every round within itself (the method).
//!    A replicate needs no n draws: the k-th order statistic of n draws with replacement from
//!    sorted `s` is `s[floor(U n)]` with U ~ Beta(k, n − k + 1) — exact, since the inverse
//!    empirical CDF is monotone — so each round costs one Beta draw (read on the same smoothed
//!    CDF, at position U·n).
//! 4. Interval: `delta ± t(R − 1) · max(se_between, se_within)`. With 5 pairs `sd(D_i)` has only
//!    4 degrees of freedom, so the multiplier is Student's t (2.776 for 95%), exact for normal
//!    `D_i`. A percentile bootstrap over 5 pairs uses ~1.96 and a variance shrunk by (R−1)/R —
//!    an interval ~0.63× as wide that covered 81–89% in simulation. `se_within` is only a floor,
//!    for when four degrees of freedom happen to give a tiny `sd(D_i)`; it makes the interval a
//!    little conservative when there is no drift. With one pair only `se_within` exists (normal
//!    multiplier, and a note says drift is not covered).
//!    From 10 pairs on (`--rounds 10` and more), the centre is the 20% trimmed mean of the
//!    `D_i` with Yuen's winsorized standard error and h − 1 degrees of freedom (h = pairs kept):
//!    measured on the test VM, interference comes in bursts of tens to hundreds of ms that lift
//!    a round's p50 by 200–400 ns; with many short rounds a burst spoils a few pairs, which the
//!    trimmed mean sets aside instead of letting them widen the interval for everyone.
//! 5. `pct = 100 · delta / base`, its interval the ns interval over the same `base` (the level
//!    is known far better than the difference).
//!
//! Assumptions: pair deltas independent and roughly normal — true for stationary or random-walk
//! drift; one wild round widens the interval, as it should. A *steady* trend through the run is
//! not cancelled: with base always first, each delta carries one round's worth of the trend
//! (2 ns per round cut A/A coverage to 86% in simulation). Alternating the order within pairs
//! (base-treat, treat-base, …; `compare` does not need to know) cancels it (97%); [`compare`]
//! notes a monotone trend. Coverage, power and speed are checked by simulation:
//! `cargo run --release --example stats_coverage`.
//!
//! The Mann-Whitney test ([`mann_whitney`]) on the pooled samples is reported too, but with
//! ~450,000 samples per arm it finds "significance" in shifts far below a clock step, and it
//! treats samples as independent, ignoring drift between rounds: the interval is the decision
//! basis.

mod compare;
pub mod dist;
mod notes;
mod rank;
pub mod rng;
mod verdict;

pub use compare::{compare, CompareOptions, Comparison, QuantileDiff, TRIM_FROM_PAIRS};
pub use notes::{round_notes, STALL_NS};
pub use rank::{mann_whitney, mann_whitney_sorted, RankTest};
pub use verdict::{gate_ns, gate_pct, q_label, verdict, GateResult};

/// The percentile `p` (0..=100) of already sorted samples; `None` when empty.
pub fn percentile_sorted(sorted: &[u64], p: f64) -> Option<u64> {
    if sorted.is_empty() {
        return None;
    }
    let n = sorted.len();
    let rank = ((p / 100.0) * n as f64).ceil() as usize;
    Some(sorted[rank.clamp(1, n) - 1])
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

impl Summary {
    /// Summarise samples (any order); `None` when empty.
    pub fn of(samples: &[u64]) -> Option<Summary> {
        let mut s = samples.to_vec();
        s.sort_unstable();
        Summary::of_sorted(&s)
    }

    /// Summarise already sorted samples.
    pub fn of_sorted(s: &[u64]) -> Option<Summary> {
        let p = |q| percentile_sorted(s, q);
        Some(Summary {
            n: s.len(),
            min: *s.first()?,
            p50: p(50.0)?,
            p90: p(90.0)?,
            p99: p(99.0)?,
            p999: p(99.9)?,
            max: *s.last()?,
        })
    }
}

impl std::fmt::Display for Summary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
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
}
