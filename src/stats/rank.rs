//! The median of paired differences and its sign-test interval.
//!
//! For differences `d_1..d_n` sorted as `d_(1) ≤ … ≤ d_(n)`, the interval `[d_(k), d_(n+1−k)]`
//! holds the median of their distribution with probability `1 − 2 P(B ≤ k − 1)`, B ~ Bin(n, ½),
//! for *any* continuous distribution of independent differences: each difference lies below
//! the median with probability ½ (Thompson 1936; Hollander, Wolfe & Chicken, *Nonparametric
//! Statistical Methods*, 3rd ed., §3.6). `k` is the largest count whose coverage still meets the
//! asked confidence, from the exact binomial up to [`EXACT_UP_TO`] differences and the normal
//! approximation (with continuity correction) above. With five or fewer differences no `k`
//! reaches 95%: the interval is then `[min, max]` and [`ShiftInterval::confidence`] says what it
//! achieves (93.8% for 5, 50% for 2).
//!
//! It asks less than the Wilcoxon signed-rank interval around the Hodges–Lehmann estimate,
//! which also needs the differences to be *symmetric* about the shift. When bursts of
//! interference hit one arm's rounds more often than the other's, as they do with a hook
//! attached, the differences are skewed and the Walsh averages follow the skew.
//! `examples/stats_coverage.rs` simulates that, and docs/overhead-method.md gives what it
//! found: the sign interval keeps its coverage where the signed-rank interval loses some, for
//! an interval somewhat wider where nothing is skewed.

use super::dist::{normal_quantile, normal_sf};

/// Up to this many differences the binomial is summed exactly.
pub(crate) const EXACT_UP_TO: usize = 1000;

/// A shift estimate and its interval.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct ShiftInterval {
    /// The median of the differences.
    pub estimate: f64,
    /// Lower end of the interval.
    pub lo: f64,
    /// Upper end of the interval.
    pub hi: f64,
    /// The coverage the interval achieves (the asked confidence, or less with few differences).
    pub confidence: f64,
}

/// The median of `diffs` and its sign-test interval at `confidence` (e.g. 0.95); `None` when
/// `diffs` is empty or holds a NaN.
pub(crate) fn median_interval(diffs: &[f64], confidence: f64) -> Option<ShiftInterval> {
    if diffs.is_empty() || diffs.iter().any(|diff| diff.is_nan()) {
        return None;
    }
    let mut sorted = diffs.to_vec();
    sorted.sort_by(f64::total_cmp);
    let count = sorted.len();
    let (rank, achieved) = critical_rank(count, confidence);
    let estimate = if count % 2 == 1 {
        sorted[count / 2]
    } else {
        (sorted[count / 2 - 1] + sorted[count / 2]) / 2.0
    };
    Some(ShiftInterval {
        estimate,
        lo: sorted[rank - 1],
        hi: sorted[count - rank],
        confidence: achieved,
    })
}

/// The 1-based rank `k` of the interval `[d_(k), d_(n+1−k)]` for `count` (n) differences, and
/// the coverage it achieves: the largest `k ≥ 1` with `2 P(B ≤ k − 1) ≤ 1 − confidence`, or 1.
pub(crate) fn critical_rank(count: usize, confidence: f64) -> (usize, f64) {
    let alpha_half = (1.0 - confidence) / 2.0;
    if count == 0 {
        return (1, 0.0);
    }
    if count <= EXACT_UP_TO {
        // P(B = 0) = 2^-n, then P(B = j + 1) = P(B = j) (n − j) / (j + 1), j counting up.
        let mut pmf = 0.5f64.powi(count as i32);
        let mut cdf = 0.0;
        let mut rank = 0;
        let mut tail_at_k = pmf;
        for below in 0..count {
            cdf += pmf;
            if cdf > alpha_half {
                break;
            }
            rank = below + 1;
            tail_at_k = cdf;
            pmf *= (count - below) as f64 / (below + 1) as f64;
        }
        return if rank == 0 {
            (1, 1.0 - 2.0 * tail_at_k)
        } else {
            (rank, 1.0 - 2.0 * tail_at_k)
        };
    }
    let nf = count as f64;
    let z_score = normal_quantile(1.0 - alpha_half);
    let rank = ((nf / 2.0 - z_score * nf.sqrt() / 2.0 + 0.5).floor() as usize).max(1);
    let tail = 1.0 - normal_sf((rank as f64 - 0.5 - nf / 2.0) / (nf.sqrt() / 2.0));
    (rank, 1.0 - 2.0 * tail)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn critical_ranks_match_tables() {
        // (n, k, achieved coverage): the order statistics of the 95% median interval as tables
        // give them (Hollander, Wolfe & Chicken, table A.1; P(B ≤ k − 1) by hand).
        let cases = [
            (6, 1, 1.0 - 2.0 / 64.0),
            (10, 2, 1.0 - 2.0 * 11.0 / 1024.0),
            (20, 6, 0.958_610_5),
            (40, 14, 0.961_522_7),
        ];
        for (n, k_want, conf) in cases {
            let (k, c) = critical_rank(n, 0.95);
            assert_eq!(k, k_want, "n = {n}");
            assert!((c - conf).abs() < 1e-6, "n = {n}: {c} vs {conf}");
        }
    }

    #[test]
    fn exact_and_normal_agree_where_they_meet() {
        let (k_exact, c_exact) = critical_rank(EXACT_UP_TO, 0.95);
        let (k_normal, c_normal) = critical_rank(EXACT_UP_TO + 1, 0.95);
        assert!(k_exact.abs_diff(k_normal) <= 1, "{k_exact} vs {k_normal}");
        assert!((0.95..0.96).contains(&c_exact) && (0.949..0.96).contains(&c_normal));
    }

    #[test]
    fn few_differences_say_what_they_achieve() {
        // (n, achieved confidence of [min, max])
        for (n, want) in [(1, 0.0), (2, 0.5), (5, 1.0 - 2.0 / 32.0)] {
            let (k, conf) = critical_rank(n, 0.95);
            assert_eq!(k, 1, "n = {n}");
            assert!((conf - want).abs() < 1e-12, "n = {n}: {conf}");
        }
        let i = median_interval(&[3.0, 1.0], 0.95).unwrap();
        assert_eq!((i.lo, i.hi, i.estimate), (1.0, 3.0, 2.0));
    }

    #[test]
    fn medians_and_intervals_known_answers() {
        // 10 differences: k = 2, so the interval is [d(2), d(9)].
        let d = [5.0, -1.0, 3.0, 8.0, 2.0, 4.0, 100.0, 3.5, 2.5, -40.0];
        let i = median_interval(&d, 0.95).unwrap();
        assert_eq!((i.estimate, i.lo, i.hi), (3.25, -1.0, 8.0));
        assert!(median_interval(&[], 0.95).is_none());
        assert!(median_interval(&[1.0, f64::NAN], 0.95).is_none());
    }

    #[test]
    fn wild_differences_move_little() {
        // 30 differences around 35 ns; then three of them spoiled by 400 ns bursts.
        let clean: Vec<f64> = (0..30)
            .map(|i| 35.0 + ((i * 7) % 11) as f64 - 5.0)
            .collect();
        let mut spoiled = clean.clone();
        spoiled[3] += 400.0;
        spoiled[11] += 380.0;
        spoiled[20] += 450.0;
        let a = median_interval(&clean, 0.95).unwrap();
        let b = median_interval(&spoiled, 0.95).unwrap();
        assert!((a.estimate - b.estimate).abs() <= 1.0, "{a:?} {b:?}");
        assert!(b.lo > 29.0 && b.hi < 41.0, "{b:?}");
    }
}
