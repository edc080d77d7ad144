//! Baseline vs treatment, round by round: the quantile differences and their intervals.
//!
//! See the module documentation of [`stats`](super) for the method and why it is built so.

use super::dist::{normal_quantile, t_quantile};
use super::notes::{comparison_notes, round_notes};
use super::rank::{mann_whitney_sorted, RankTest};
use super::rng::Rng;

/// What to compare and how hard to resample.
#[derive(Debug, Clone)]
pub struct CompareOptions {
    /// Percentiles (0..=100) to compare; default p50, p90, p99, p99.9.
    pub quantiles: Vec<f64>,
    /// Within-round bootstrap replicates (the floor of the standard error); default 2000.
    pub resamples: usize,
    /// Two-sided confidence of the intervals; default 0.95.
    pub confidence: f64,
    /// Seed of the bootstrap, so a run's figures are reproducible.
    pub seed: u64,
    /// Names of the two arms in notes; default "baseline", "attached".
    pub arm_names: [String; 2],
}

impl Default for CompareOptions {
    fn default() -> Self {
        CompareOptions {
            quantiles: vec![50.0, 90.0, 99.0, 99.9],
            resamples: 2000,
            confidence: 0.95,
            seed: 0x5EED_0FBE_4DEA_D000,
            arm_names: ["baseline".into(), "attached".into()],
        }
    }
}

/// One quantile, both arms, and the difference treat − base with its interval (ns).
#[derive(Debug, Clone, serde::Serialize)]
pub struct QuantileDiff {
    /// The percentile, e.g. 99.9.
    pub q: f64,
    /// Mean over the paired rounds of the baseline's per-round quantile.
    pub base: f64,
    /// Mean over the paired rounds of the treatment's per-round quantile.
    pub treat: f64,
    /// `treat - base`: the mean of the per-pair differences.
    pub delta: f64,
    /// Lower end of the interval of `delta`.
    pub lo: f64,
    /// Upper end of the interval of `delta`.
    pub hi: f64,
    /// `delta` in percent of `base`.
    pub pct: f64,
    /// `lo` in percent of `base`.
    pub pct_lo: f64,
    /// `hi` in percent of `base`.
    pub pct_hi: f64,
    /// Per pair of rounds: treat quantile − base quantile (ns), in round order.
    pub pair_deltas: Vec<f64>,
    /// Standard error from the spread of `pair_deltas` (sees drift and sampling noise).
    pub se_between: f64,
    /// Standard error from resampling within rounds (sampling noise and clock-step ties only).
    pub se_within: f64,
}

/// Everything `overhead` reports about baseline vs treatment.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Comparison {
    /// One entry per requested quantile, in the order asked.
    pub diffs: Vec<QuantileDiff>,
    /// Mann-Whitney U of all treatment samples against all baseline samples.
    pub rank_test: RankTest,
    /// Rounds worth a look, mismatched rounds, and caveats, one sentence each.
    pub notes: Vec<String>,
    /// Pairs of rounds compared.
    pub rounds: usize,
    /// Baseline samples in the paired rounds.
    pub n_base: usize,
    /// Treatment samples in the paired rounds.
    pub n_treat: usize,
    /// Confidence of the intervals, e.g. 0.95.
    pub confidence: f64,
}

impl Comparison {
    /// The entry for percentile `q`, if it was compared.
    pub fn diff(&self, q: f64) -> Option<&QuantileDiff> {
        self.diffs.iter().find(|d| (d.q - q).abs() < 1e-9)
    }
}

/// A pair of rounds adjacent in time, each sorted.
type Pair = (Vec<u64>, Vec<u64>);

/// Baseline vs treatment: per quantile the difference and its interval (the method is in the
/// [`stats`](super) module docs), the pooled rank test, and notes on rounds worth a look.
/// `base[i]` and `treat[i]` are the kept samples of round i of each arm (paired by adjacency in
/// time); samples in any order.
pub fn compare(base: &[Vec<u64>], treat: &[Vec<u64>], opts: &CompareOptions) -> Comparison {
    let (pairs, mut notes) = sorted_pairs(base, treat, &opts.arm_names);
    let mut rng = Rng::new(opts.seed);
    let diffs: Vec<QuantileDiff> = opts
        .quantiles
        .iter()
        .map(|&q| quantile_diff(&pairs, q, opts.confidence, opts.resamples, &mut rng))
        .collect();
    let (pooled_base, pooled_treat) = pooled(&pairs);
    let c = Comparison {
        rank_test: mann_whitney_sorted(&pooled_base, &pooled_treat),
        rounds: pairs.len(),
        n_base: pooled_base.len(),
        n_treat: pooled_treat.len(),
        confidence: opts.confidence,
        diffs,
        notes: Vec::new(),
    };
    notes.extend(round_notes(&opts.arm_names[0], base));
    notes.extend(round_notes(&opts.arm_names[1], treat));
    notes.extend(comparison_notes(&c, &pairs));
    Comparison { notes, ..c }
}

/// Sort the rounds that have a partner with samples; note the rest.
fn sorted_pairs(
    base: &[Vec<u64>],
    treat: &[Vec<u64>],
    names: &[String; 2],
) -> (Vec<Pair>, Vec<String>) {
    let mut notes = Vec::new();
    if base.len() != treat.len() {
        notes.push(format!(
            "{} has {} rounds and {} has {}: only the first {} pairs are compared.",
            names[0],
            base.len(),
            names[1],
            treat.len(),
            base.len().min(treat.len())
        ));
    }
    let mut pairs = Vec::new();
    for (i, (b, t)) in base.iter().zip(treat).enumerate() {
        if b.is_empty() || t.is_empty() {
            notes.push(format!(
                "Round {} is left out: one of its arms has no samples.",
                i + 1
            ));
            continue;
        }
        pairs.push((sorted(b), sorted(t)));
    }
    (pairs, notes)
}

fn sorted(v: &[u64]) -> Vec<u64> {
    let mut s = v.to_vec();
    s.sort_unstable();
    s
}

/// All samples of each arm, sorted (the stable sort merges the already sorted rounds).
fn pooled(pairs: &[Pair]) -> (Vec<u64>, Vec<u64>) {
    let mut b: Vec<u64> = pairs.iter().flat_map(|p| p.0.iter().copied()).collect();
    let mut t: Vec<u64> = pairs.iter().flat_map(|p| p.1.iter().copied()).collect();
    b.sort();
    t.sort();
    (b, t)
}

/// From this many pairs on, the delta is a 20% trimmed mean (Yuen), not the mean.
pub const TRIM_FROM_PAIRS: usize = 10;

/// The centre of the pair deltas, its standard error and degrees of freedom: the mean with
/// `sd/√R` and R − 1 for few pairs; from [`TRIM_FROM_PAIRS`] pairs on, the 20% trimmed mean with
/// Yuen's winsorized standard error and h − 1 degrees of freedom (h pairs kept), so a burst of
/// interference that spoils a few pairs moves neither the estimate nor the width much.
fn center(d: &[f64]) -> (f64, f64, usize) {
    let r = d.len();
    if r < TRIM_FROM_PAIRS {
        let (m, sd) = mean_sd(d);
        return (m, sd / (r as f64).sqrt(), r.saturating_sub(1));
    }
    let mut s = d.to_vec();
    s.sort_by(f64::total_cmp);
    let g = (0.2 * r as f64).floor() as usize;
    let h = r - 2 * g;
    let trimmed = s[g..r - g].iter().sum::<f64>() / h as f64;
    let wins: Vec<f64> = s.iter().map(|&x| x.clamp(s[g], s[r - g - 1])).collect();
    let (_, sw) = mean_sd(&wins);
    let se = ((r - 1) as f64 * sw * sw / (h as f64 * (h - 1) as f64)).sqrt();
    (trimmed, se, h - 1)
}

/// The interval's multiplier: Student t with `df` degrees of freedom; with none (one pair) only
/// the within-round noise is known, so the normal quantile.
fn multiplier(df: usize, confidence: f64) -> f64 {
    let p = 0.5 + confidence / 2.0;
    match df {
        0 => normal_quantile(p),
        n => t_quantile(p, n as f64),
    }
}

/// 1-based nearest rank of percentile `q` among `n` samples (as [`percentile_sorted`](super::percentile_sorted)).
fn nearest_rank(n: usize, q: f64) -> usize {
    (((q / 100.0) * n as f64).ceil() as usize).clamp(1, n)
}

/// A round's q-th percentile: the nearest rank, read at the middle of its rank on the smoothed
/// empirical CDF (see [`value_at`]).
fn quantile(sorted: &[u64], q: f64) -> f64 {
    value_at(sorted, nearest_rank(sorted.len(), q) as f64 - 0.5)
}

/// The inverse of the empirical CDF at position `x` in [0, n), with every run of equal values
/// spread evenly over the half-gaps to its neighbouring distinct values. Clock readings come in
/// steps (10 ns here), so thousands of samples tie at p50; spreading a tie run over its step lets
/// a shift smaller than the step move the estimate instead of snapping to the step. For a value
/// without ties this is the value itself, give or take a quarter of the neighbouring gaps.
fn value_at(sorted: &[u64], x: f64) -> f64 {
    let n = sorted.len();
    let i = (x.max(0.0) as usize).min(n - 1);
    let v = sorted[i];
    let a = sorted[..i].partition_point(|&y| y < v);
    let b = i + sorted[i..].partition_point(|&y| y <= v);
    let down = (a > 0).then(|| (v - sorted[a - 1]) as f64);
    let up = (b < n).then(|| (sorted[b] - v) as f64);
    let (down, up) = match (down, up) {
        (Some(d), Some(u)) => (d, u),
        (Some(g), None) | (None, Some(g)) => (g, g),
        (None, None) => (0.0, 0.0),
    };
    let frac = ((x - a as f64) / (b - a) as f64).clamp(0.0, 1.0);
    v as f64 - down / 2.0 + (down + up) / 2.0 * frac
}

fn quantile_diff(
    pairs: &[Pair],
    q: f64,
    confidence: f64,
    resamples: usize,
    rng: &mut Rng,
) -> QuantileDiff {
    let base: Vec<f64> = pairs.iter().map(|p| quantile(&p.0, q)).collect();
    let treat: Vec<f64> = pairs.iter().map(|p| quantile(&p.1, q)).collect();
    let pair_deltas: Vec<f64> = treat.iter().zip(&base).map(|(t, b)| t - b).collect();
    let (delta, se_between, df) = center(&pair_deltas);
    let se_within = within_se(pairs, q, resamples, rng);
    let half = multiplier(df, confidence) * se_between.max(se_within);
    let base_level = mean_sd(&base).0;
    let pct = |x: f64| 100.0 * x / base_level;
    QuantileDiff {
        q,
        base: base_level,
        treat: mean_sd(&treat).0,
        delta,
        lo: delta - half,
        hi: delta + half,
        pct: pct(delta),
        pct_lo: pct(delta - half),
        pct_hi: pct(delta + half),
        pair_deltas,
        se_between,
        se_within,
    }
}

/// Mean and sample standard deviation (0 for fewer than two values; NaN mean when empty).
fn mean_sd(xs: &[f64]) -> (f64, f64) {
    let n = xs.len() as f64;
    let mean = xs.iter().sum::<f64>() / n;
    if xs.len() < 2 {
        return (mean, 0.0);
    }
    let ss: f64 = xs.iter().map(|x| (x - mean).powi(2)).sum();
    (mean, (ss / (n - 1.0)).sqrt())
}

/// Standard deviation of the mean pair delta over bootstrap replicates that resample every round
/// within itself. Each replicate draws a round's quantile directly: the k-th order statistic of n
/// draws with replacement from sorted `s` is `s[floor(U n)]`, U ~ Beta(k, n − k + 1).
fn within_se(pairs: &[Pair], q: f64, resamples: usize, rng: &mut Rng) -> f64 {
    if resamples < 2 || pairs.is_empty() {
        return 0.0;
    }
    let reps: Vec<f64> = (0..resamples)
        .map(|_| {
            let sum: f64 = pairs
                .iter()
                .map(|(b, t)| resampled_quantile(t, q, rng) - resampled_quantile(b, q, rng))
                .sum();
            sum / pairs.len() as f64
        })
        .collect();
    mean_sd(&reps).1
}

/// The q-th percentile of a resample of `sorted`: position U·n, U ~ Beta(k, n − k + 1), read on
/// the same smoothed inverse CDF as the estimate.
fn resampled_quantile(sorted: &[u64], q: f64, rng: &mut Rng) -> f64 {
    let n = sorted.len();
    let k = nearest_rank(n, q);
    let u = rng.beta(k as f64, (n - k + 1) as f64);
    value_at(sorted, u * n as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn many_pairs_trim_a_burst() {
        // 20 pairs: +35 ns each, but three spoiled by a +400 ns burst in the treat round.
        let mut d = vec![35.0; 20];
        for (i, x) in d.iter_mut().enumerate() {
            *x += [-4.0, 3.0, 1.0, -2.0][i % 4];
        }
        d[3] += 400.0;
        d[9] += 380.0;
        d[15] -= 350.0;
        let (c, se, df) = center(&d);
        assert!((c - 35.0).abs() < 3.0, "trimmed centre {c}");
        assert!(se < 3.0, "the burst does not widen it: se {se}");
        assert_eq!(df, 11);
        let (m, se_few, df_few) = center(&d[..5]);
        assert_eq!(df_few, 4);
        assert!(
            m > 100.0 && se_few > 50.0,
            "few pairs: plain mean, widened ({m}, {se_few})"
        );
    }

    /// Five rounds of a skewed, 10 ns-stepped distribution, each round shifted by `drift[i]`.
    fn rounds(seed: u64, drift: &[u64], plus: u64) -> Vec<Vec<u64>> {
        let mut rng = Rng::new(seed);
        let one = |rng: &mut Rng, d: u64| {
            let body = 1000.0 + 150.0 * (-rng.uniform().ln()).powf(0.8);
            (body as u64 + d) / 10 * 10 + plus
        };
        drift
            .iter()
            .map(|&d| (0..20_000).map(|_| one(&mut rng, d)).collect())
            .collect()
    }

    #[test]
    fn known_answers_table() {
        let drift = [0, 20, 10, 30, 0];
        let base = rounds(1, &drift, 0);
        let same = base.clone();
        let other_draw = rounds(2, &drift, 0);
        let plus100: Vec<Vec<u64>> = base
            .iter()
            .map(|r| r.iter().map(|x| x + 100).collect())
            .collect();
        // (what, treatment, expected delta (the interval must hold it), interval holds 0)
        type Case<'a> = (&'a str, &'a [Vec<u64>], Option<f64>, bool);
        let cases: &[Case] = &[
            ("identical samples", &same, Some(0.0), true),
            ("same distribution, other draw", &other_draw, None, true),
            ("every sample +100 ns", &plus100, Some(100.0), false),
        ];
        let opts = CompareOptions::default();
        for (what, treat, want, holds_zero) in cases {
            let c = compare(&base, treat, &opts);
            assert_eq!((c.rounds, c.n_base), (5, 100_000), "{what}");
            for d in &c.diffs {
                if let Some(w) = want {
                    assert!((d.delta - w).abs() < 1e-9, "{what} p{}: {d:?}", d.q);
                    assert!(d.lo <= *w && *w <= d.hi, "{what} p{}: {d:?}", d.q);
                }
                assert_eq!(
                    d.lo <= 0.0 && 0.0 <= d.hi,
                    *holds_zero,
                    "{what} p{}: {d:?}",
                    d.q
                );
            }
        }
    }

    #[test]
    fn smoothed_quantile_table() {
        // (sorted samples, q, expected): nearest rank read mid-rank, ties spread over half-gaps.
        let cases: &[(&[u64], f64, f64)] = &[
            (&[1, 2, 3, 4, 5], 50.0, 3.0),
            (&[10, 20, 20, 20, 30], 50.0, 20.0),
            (&[10, 20, 20, 20, 30], 40.0, 15.0 + 10.0 / 6.0),
            (&[7], 99.0, 7.0),
            (&[5, 5, 5, 5], 50.0, 5.0),
        ];
        for (s, q, want) in cases {
            assert!(
                (quantile(s, *q) - want).abs() < 1e-9,
                "p{q} of {s:?}: {}",
                quantile(s, *q)
            );
        }
    }

    #[test]
    fn a_shift_below_the_clock_step_is_resolved() {
        let mut rng = Rng::new(8);
        let mut draw = |plus: f64| -> Vec<u64> {
            let one = |r: &mut Rng| 1000.0 + plus + 150.0 * (-r.uniform().ln()).powf(0.8);
            (0..50_000)
                .map(|_| (one(&mut rng) / 10.0).floor() as u64 * 10)
                .collect()
        };
        let base: Vec<Vec<u64>> = (0..5).map(|_| draw(0.0)).collect();
        let treat: Vec<Vec<u64>> = (0..5).map(|_| draw(3.0)).collect();
        let p50 = &compare(&base, &treat, &CompareOptions::default()).diffs[0];
        assert!((p50.delta - 3.0).abs() < 1.0 && p50.lo > 0.0, "{p50:?}");
    }

    #[test]
    fn drift_between_pairs_widens_the_interval() {
        let base = rounds(3, &[0, 0, 0, 0, 0], 0);
        let steady = rounds(4, &[0, 0, 0, 0, 0], 0);
        let drifting = rounds(4, &[0, 40, 0, 40, 20], 0);
        let opts = CompareOptions::default();
        let width = |t: &[Vec<u64>]| {
            compare(&base, t, &opts).diffs[0].hi - compare(&base, t, &opts).diffs[0].lo
        };
        assert!(width(&drifting) > 2.0 * width(&steady));
        assert!(compare(&base, &drifting, &opts).diffs[0].lo < 0.0);
    }

    #[test]
    fn mismatched_and_empty_rounds_are_noted_not_fatal() {
        let base = rounds(5, &[0, 0, 0], 0);
        let mut treat = rounds(6, &[0, 0], 0);
        treat[1].clear();
        let c = compare(&base, &treat, &CompareOptions::default());
        assert_eq!(c.rounds, 1);
        assert!(c.notes.iter().any(|n| n.contains("only the first 2 pairs")));
        assert!(c.notes.iter().any(|n| n.contains("Round 2 is left out")));
        let none = compare(&[], &[], &CompareOptions::default());
        assert!(none.diffs[0].delta.is_nan() && none.rounds == 0);
    }
}
