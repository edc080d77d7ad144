//! Mann-Whitney U rank test on pooled samples, in O(n log n).
//!
//! U counts the pairs (a, b) with b > a, ties counting one half, so U / (n_a n_b) estimates
//! P(B > A) + P(B = A) / 2. The p-value is two-sided from the normal approximation with the tie
//! correction σ² = n_a n_b / 12 · (N + 1 − Σ(t³ − t) / (N (N − 1))) and no continuity
//! correction (immaterial at the 10⁵ samples an `overhead` run has; small cases are only for
//! the hand-checked tests).
//!
//! Read it with care: with ~450,000 samples per arm the test calls a shift of a nanosecond
//! "significant", and it treats every sample as independent, so it cannot see round-to-round
//! drift. It is reported for completeness; the decision rests on the interval of
//! [`compare`](super::compare).

use super::dist::normal_sf;

/// The Mann-Whitney U test of `b` against `a`.
#[derive(Debug, Clone, serde::Serialize)]
pub struct RankTest {
    /// U of `b`: pairs with b > a, plus half the tied pairs.
    pub u: f64,
    /// Standardized U (positive when `b` tends to be larger).
    pub z: f64,
    /// Two-sided p-value of the normal approximation.
    pub p_value: f64,
    /// U / (n_a n_b): P(b > a) + P(b = a) / 2 — for `compare`, P(treat > base).
    pub prob_greater: f64,
}

/// Mann-Whitney U of `b` against `a` (samples in any order).
pub fn mann_whitney(a: &[u64], b: &[u64]) -> RankTest {
    let mut a = a.to_vec();
    let mut b = b.to_vec();
    a.sort_unstable();
    b.sort_unstable();
    mann_whitney_sorted(&a, &b)
}

/// Mann-Whitney U of `b` against `a`, both sorted ascending: one merge pass.
pub fn mann_whitney_sorted(a: &[u64], b: &[u64]) -> RankTest {
    let (na, nb) = (a.len() as f64, b.len() as f64);
    let n = na + nb;
    let (rank_sum_b, ties) = merged_ranks(a, b);
    let u = rank_sum_b - nb * (nb + 1.0) / 2.0;
    let mean = na * nb / 2.0;
    let var = if n > 1.0 {
        na * nb / 12.0 * ((n + 1.0) - ties / (n * (n - 1.0)))
    } else {
        0.0
    };
    let z = if var > 0.0 {
        (u - mean) / var.sqrt()
    } else {
        0.0
    };
    RankTest {
        u,
        z,
        p_value: (2.0 * normal_sf(z.abs())).min(1.0),
        prob_greater: if na * nb > 0.0 { u / (na * nb) } else { 0.5 },
    }
}

/// Walk both sorted slices group by group of equal values: the sum of `b`'s mid-ranks
/// (1-based) and Σ(t³ − t) over tie groups.
fn merged_ranks(a: &[u64], b: &[u64]) -> (f64, f64) {
    let (mut i, mut j) = (0, 0);
    let (mut below, mut rank_sum_b, mut ties) = (0.0, 0.0, 0.0);
    while i < a.len() || j < b.len() {
        let v = match (a.get(i), b.get(j)) {
            (Some(&x), Some(&y)) => x.min(y),
            (Some(&x), None) => x,
            (None, Some(&y)) => y,
            (None, None) => break,
        };
        let ca = run_len(&a[i..], v);
        let cb = run_len(&b[j..], v);
        let t = (ca + cb) as f64;
        rank_sum_b += cb as f64 * (below + (t + 1.0) / 2.0);
        ties += t * t * t - t;
        below += t;
        i += ca;
        j += cb;
    }
    (rank_sum_b, ties)
}

/// How many leading elements of `s` equal `v`.
fn run_len(s: &[u64], v: u64) -> usize {
    s.partition_point(|&x| x <= v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hand_computed_table() {
        // (a, b, U of b, z) computed by hand: U = #(b > a) + ties / 2;
        // z = (U - na nb / 2) / sqrt(na nb / 12 (N + 1 - Σ(t³-t) / (N (N-1)))).
        let cases: &[(&[u64], &[u64], f64, f64)] = &[
            (&[1, 2, 3], &[4, 5, 6], 9.0, 4.5 / 5.25f64.sqrt()),
            (&[4, 5, 6], &[1, 2, 3], 0.0, -4.5 / 5.25f64.sqrt()),
            (&[1, 3, 5], &[2, 4, 6], 6.0, 1.5 / 5.25f64.sqrt()),
            // One tie group of 2 (the 2s): Σ = 6, var = 4/12 (5 - 6/12) = 1.5.
            (&[1, 2], &[2, 3], 3.5, 1.5 / 1.5f64.sqrt()),
            // All equal: U = half the pairs, variance 0 → z = 0.
            (&[7, 7], &[7, 7, 7], 3.0, 0.0),
        ];
        for (a, b, u, z) in cases {
            let r = mann_whitney(a, b);
            assert!((r.u - u).abs() < 1e-12, "U of {b:?} vs {a:?}: {}", r.u);
            assert!((r.z - z).abs() < 1e-12, "z of {b:?} vs {a:?}: {}", r.z);
        }
    }

    #[test]
    fn identical_samples_are_even_odds() {
        let a: Vec<u64> = (0..1000).map(|i| (i * 7919) % 1013).collect();
        let r = mann_whitney(&a, &a);
        assert!((r.prob_greater - 0.5).abs() < 1e-12 && r.z.abs() < 1e-12);
        assert!((r.p_value - 1.0).abs() < 1e-6);
    }

    #[test]
    fn large_shift_is_significant_and_unsorted_input_is_fine() {
        let a: Vec<u64> = (0..5000).rev().collect();
        let b: Vec<u64> = (0..5000).map(|x| x + 100).collect();
        let r = mann_whitney(&a, &b);
        assert!(r.z > 3.0 && r.p_value < 1e-3 && r.prob_greater > 0.5);
    }
}
