//! Percentiles and summaries of latency samples. Pure functions, table-driven tests.
//!
//! Percentile definition (nearest rank, as `perf`/HdrHistogram report it): for sorted samples
//! `x[0..n]`, the p-th percentile is `x[ceil(p/100 * n) - 1]` (and `x[0]` for p = 0). It is always
//! an observed value; p50 of an even count is the lower middle, not an average.

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
