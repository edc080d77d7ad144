//! Baseline vs treatment, round by round: the quantile differences and their intervals.
//!
//! See the module documentation of [`stats`](super) for the method and why it is built so.

use super::comparison::{Comparison, QuantileDiff, RoundSummary, METHOD, METHOD_LOADS};
use super::loads::{across_loads, AcrossLoads, Load, LoadEstimate, MIN_LOADS};
use super::modes::{self, Mode};
use super::notes::comparison_notes;
use super::rank::{critical_rank, median_interval, ShiftInterval};

/// The two-sided confidence of intervals unless one is asked for (`--confidence`): 99%, not
/// the conventional 95%, because the answer is read as a decision ("did my change make it
/// cheaper?", a CI gate on the lower end), and at 95% an unchanged hook is called changed in one
/// run of twenty, a gate people learn to ignore. The intervals are 1.3× as wide; `--confidence 0.95` gives the usual level.
pub const DEFAULT_CONFIDENCE: f64 = 0.99;

/// What to compare.
#[derive(Debug, Clone)]
pub struct CompareOptions {
    /// Percentiles (0..=100) to compare; default p50, p90, p99, p99.9.
    pub quantiles: Vec<f64>,
    /// Two-sided confidence of the intervals; default [`DEFAULT_CONFIDENCE`], as `overhead`'s.
    pub confidence: f64,
    /// Names of the two arms in notes; default "baseline", "attached".
    pub arm_names: [String; 2],
}

impl Default for CompareOptions {
    fn default() -> Self {
        CompareOptions {
            quantiles: vec![50.0, 90.0, 99.0, 99.9],
            confidence: DEFAULT_CONFIDENCE,
            arm_names: ["baseline".into(), "attached".into()],
        }
    }
}

impl RoundSummary {
    /// Summarise a round's samples (any order) at `quantiles`.
    pub fn of(samples: &[u64], quantiles: &[f64]) -> RoundSummary {
        let mut sorted = samples.to_vec();
        sorted.sort_unstable();
        RoundSummary {
            n: sorted.len(),
            quantiles: quantiles
                .iter()
                .map(|&q| mid_quantile(&sorted, q))
                .collect(),
            max: sorted.last().copied().unwrap_or(0),
        }
    }
}

/// Samples a round should hold beyond a compared quantile for its own estimate of it; where
/// rounds hold fewer (p99.9 needs 10,000 samples a round, `overhead`'s hold a few hundred),
/// consecutive pairs are pooled ([`block_pairs`]).
pub const TAIL_SAMPLES: f64 = 10.0;

/// How many consecutive pairs to pool for percentile `quantile` when rounds keep `kept`
/// samples: 1 when a round holds [`TAIL_SAMPLES`] beyond it, else enough rounds to hold them together.
pub fn block_pairs(kept: usize, quantile: f64) -> usize {
    let beyond = kept as f64 * (1.0 - quantile / 100.0);
    if kept == 0 || beyond >= TAIL_SAMPLES {
        return 1;
    }
    (TAIL_SAMPLES / beyond.max(1e-9)).ceil().min(1e6) as usize
}

/// Baseline vs treatment from raw rounds: `base[i]` and `treat[i]` are the samples of round i
/// of each arm (paired by adjacency in time), in any order. A quantile the rounds are too short
/// to estimate alone ([`block_pairs`]) is compared over blocks of consecutive pairs, each arm's
/// rounds of a block pooled: the block's difference is as likely positive as negative under no
/// effect for the same reason a pair's is (each pair's order is a coin's; flipping them all
/// negates it), so the sign-test interval over blocks keeps its coverage.
pub fn compare(base: &[Vec<u64>], treat: &[Vec<u64>], opts: &CompareOptions) -> Comparison {
    let sum = |rounds: &[Vec<u64>]| -> Vec<RoundSummary> {
        rounds
            .iter()
            .map(|r| RoundSummary::of(r, &opts.quantiles))
            .collect()
    };
    compare_rounds((base, &sum(base)), (treat, &sum(treat)), opts)
}

/// [`compare`] of rounds already summarised at `opts.quantiles` (as `overhead` summarises each
/// round when it ends).
pub fn compare_rounds(
    base: (&[Vec<u64>], &[RoundSummary]),
    treat: (&[Vec<u64>], &[RoundSummary]),
    opts: &CompareOptions,
) -> Comparison {
    let (mut comparison, pooled_notes) = compare_pairs(base, treat, opts);
    comparison
        .notes
        .extend(pooled_notes.into_iter().map(|(_, note)| note));
    comparison
}

/// [`compare_rounds`], with the notes on tails pooled over too few blocks kept apart, each with
/// the index of its quantile.
fn compare_pairs(
    (base, base_sums): (&[Vec<u64>], &[RoundSummary]),
    (treat, treat_sums): (&[Vec<u64>], &[RoundSummary]),
    opts: &CompareOptions,
) -> (Comparison, Vec<(usize, String)>) {
    let mut comparison = compare_summaries(base_sums, treat_sums, opts);
    let pairs = raw_pairs(base, treat);
    let kept = kept_per_round(&pairs);
    let mut pooled_notes = Vec::new();
    for (index, &quantile) in opts.quantiles.iter().enumerate() {
        let block = block_pairs(kept, quantile);
        if block > 1 {
            let per_pair = std::mem::take(&mut comparison.diffs[index].pair_deltas);
            comparison.diffs[index] = QuantileDiff {
                pair_deltas: per_pair,
                ..pooled_diff(&pairs, block, quantile, opts.confidence)
            };
            if let Some(note) = pooled_note(&comparison.diffs[index], kept, comparison.confidence) {
                pooled_notes.push((index, note));
            }
        }
    }
    (comparison, pooled_notes)
}

/// The pairs of raw rounds whose rounds both have samples.
fn raw_pairs<'a>(base: &'a [Vec<u64>], treat: &'a [Vec<u64>]) -> Vec<(&'a Vec<u64>, &'a Vec<u64>)> {
    base.iter()
        .zip(treat)
        .filter(|(b, t)| !b.is_empty() && !t.is_empty())
        .collect()
}

/// The median count of samples a round of a pair keeps (the shorter round of each pair).
fn kept_per_round(pairs: &[(&Vec<u64>, &Vec<u64>)]) -> usize {
    let mut kept: Vec<usize> = pairs.iter().map(|(b, t)| b.len().min(t.len())).collect();
    kept.sort_unstable();
    kept.get(kept.len() / 2).copied().unwrap_or(0)
}

/// [`compare_rounds`] when the rounds came in several loads of the arms' objects: per quantile,
/// each load's own estimate, and the estimate and interval across loads ([`super::loads`]).
/// With fewer than [`MIN_LOADS`] loads the interval stays over the pairs, with a note saying
/// it leaves out the variation from load to load.
pub fn compare_loads(
    base: (&[Vec<u64>], &[RoundSummary]),
    treat: (&[Vec<u64>], &[RoundSummary]),
    loads: &[Load],
    opts: &CompareOptions,
) -> Comparison {
    let (mut result, mut pooled_notes) = compare_pairs(base, treat, opts);
    result.loads = loads.len().max(1);
    if loads.len() < MIN_LOADS {
        result
            .notes
            .extend(pooled_notes.into_iter().map(|(_, note)| note));
        if loads.len() > 1 {
            result.notes.push(format!(
                "{} loads of the objects are too few for an interval across loads (at least {MIN_LOADS}): the intervals are over the pairs of rounds and leave out how much a cost moves from one load to the next.",
                loads.len()
            ));
        }
        return result;
    }
    let kept = kept_per_round(&raw_pairs(base.0, treat.0));
    for (at, &quantile) in opts.quantiles.iter().enumerate() {
        let estimates: Vec<LoadEstimate> = loads
            .iter()
            .map(|load| load_estimate(base, treat, load, (at, quantile), kept, opts.confidence))
            .collect();
        let Some(across) = across_loads(&estimates, opts.confidence) else {
            continue;
        };
        // Across loads the interval has its asked confidence however few tail blocks a load has.
        pooled_notes.retain(|(noted, _)| *noted != at);
        let diff = &mut result.diffs[at];
        let pct = |value: f64| 100.0 * value / diff.base;
        *diff = QuantileDiff {
            delta: across.estimate,
            lo: across.lo,
            hi: across.hi,
            confidence: across.confidence,
            pct: pct(across.estimate),
            pct_lo: pct(across.lo),
            pct_hi: pct(across.hi),
            load_deltas: estimates.iter().map(|estimate| estimate.value).collect(),
            load_share: across.load_share,
            order_effect: across.order_effect,
            method: METHOD_LOADS,
            ..std::mem::replace(diff, empty_diff(quantile))
        };
    }
    result.method = METHOD_LOADS;
    result
        .notes
        .extend(pooled_notes.into_iter().map(|(_, note)| note));
    result
}

/// A placeholder while a difference is rebuilt.
fn empty_diff(quantile: f64) -> QuantileDiff {
    quantile_diff(&[], 0, quantile, 0.5)
}

/// One load's estimate of the difference at the `index`-th quantile `quantile`: over its pairs as a
/// single-level comparison takes it (the median pair difference, or over tail blocks).
fn load_estimate(
    (base, base_sums): (&[Vec<u64>], &[RoundSummary]),
    (treat, treat_sums): (&[Vec<u64>], &[RoundSummary]),
    load: &Load,
    (index, quantile): (usize, f64),
    kept: usize,
    confidence: f64,
) -> LoadEstimate {
    let range = pairs_of(load, base.len().min(treat.len()));
    let block = block_pairs(kept, quantile);
    if block > 1 {
        let pairs = raw_pairs(&base[range.clone()], &treat[range]);
        let diff = pooled_diff(&pairs, block, quantile, confidence);
        return LoadEstimate::of_median(diff.delta, &diff.block_deltas, load.order);
    }
    let pairs = paired(&base_sums[range.clone()], &treat_sums[range]);
    let diff = quantile_diff(&pairs, index, quantile, confidence);
    LoadEstimate::of_median(diff.delta, &diff.pair_deltas, load.order)
}

/// The indexes of `load`'s pairs among `available` pairs.
fn pairs_of(load: &Load, available: usize) -> std::ops::Range<usize> {
    let end = (load.first_pair + load.pairs).min(available);
    load.first_pair.min(end)..end
}

/// A sentence for a quantile compared over blocks whose count reaches no interval at the asked
/// `confidence`: what the interval shown achieves, and how many pairs would do.
fn pooled_note(diff: &QuantileDiff, kept: usize, confidence: f64) -> Option<String> {
    if diff.confidence >= confidence - 1e-9 {
        return None;
    }
    let enough = (1..64)
        .find(|&blocks| critical_rank(blocks, confidence).1 >= confidence)
        .unwrap_or(64);
    Some(format!(
        "{} is compared over blocks of {} pairs (a round of {kept} samples holds too few beyond \
         it): {} blocks reach no {:.0}% interval, the one shown is a {:.0}% interval; give at \
         least {} pairs for {:.0}%.",
        super::q_label(diff.q),
        diff.block,
        diff.block_deltas.len(),
        100.0 * confidence,
        100.0 * diff.confidence,
        enough * diff.block,
        100.0 * confidence
    ))
}

/// The difference at `quantile` over blocks of `block_len` consecutive pairs, each arm's rounds pooled.
fn pooled_diff(
    pairs: &[(&Vec<u64>, &Vec<u64>)],
    block_len: usize,
    quantile: f64,
    confidence: f64,
) -> QuantileDiff {
    type Pick = for<'a> fn(&(&'a Vec<u64>, &'a Vec<u64>)) -> &'a Vec<u64>;
    let pool = |block: &[(&Vec<u64>, &Vec<u64>)], arm: Pick| -> RoundSummary {
        let all: Vec<u64> = block
            .iter()
            .flat_map(|pair| arm(pair).iter().copied())
            .collect();
        RoundSummary::of(&all, &[quantile])
    };
    let base: Pick = |pair| pair.0;
    let treat: Pick = |pair| pair.1;
    let blocks: Vec<(RoundSummary, RoundSummary)> = blocks_of(pairs.len(), block_len)
        .map(|range| {
            (
                pool(&pairs[range.clone()], base),
                pool(&pairs[range], treat),
            )
        })
        .collect();
    let refs: Vec<(&RoundSummary, &RoundSummary)> = blocks
        .iter()
        .map(|(base_block, treat_block)| (base_block, treat_block))
        .collect();
    let diff = quantile_diff(&refs, 0, quantile, confidence);
    QuantileDiff {
        block: block_len,
        block_deltas: diff.pair_deltas.clone(),
        ..diff
    }
}

/// `pairs` consecutive pairs cut into blocks of `block`; a remainder under half a block joins the
/// block before it (a block of a pair or two would estimate a tail from far fewer samples).
fn blocks_of(pairs: usize, block: usize) -> impl Iterator<Item = std::ops::Range<usize>> {
    let mut count = pairs / block;
    if pairs % block >= block.div_ceil(2) || count == 0 {
        count += 1;
    }
    (0..count).map(move |index| {
        let end = if index + 1 == count {
            pairs
        } else {
            (index + 1) * block
        };
        index * block..end.min(pairs)
    })
}

/// Baseline vs treatment from round summaries made with the same `opts.quantiles`: per
/// quantile the shift and its interval (the method is in the [`stats`](super) module docs),
/// the rounds in another mode, and notes.
pub fn compare_summaries(
    base: &[RoundSummary],
    treat: &[RoundSummary],
    opts: &CompareOptions,
) -> Comparison {
    let pairs = paired(base, treat);
    let diffs: Vec<QuantileDiff> = opts
        .quantiles
        .iter()
        .enumerate()
        .map(|(index, &quantile)| quantile_diff(&pairs, index, quantile, opts.confidence))
        .collect();
    let p50 = opts.quantiles.iter().position(|&quantile| quantile == 50.0);
    let modes: Vec<Mode> = p50.map_or_else(Vec::new, |index| {
        let level = |rounds: &[RoundSummary]| -> Vec<f64> {
            rounds.iter().map(|round| round.quantiles[index]).collect()
        };
        let mut found = modes::find(&opts.arm_names[0], &level(base));
        found.extend(modes::find(&opts.arm_names[1], &level(treat)));
        found
    });
    let comparison = Comparison {
        method: METHOD,
        diffs,
        modes,
        notes: Vec::new(),
        rounds: pairs.len(),
        n_base: pairs.iter().map(|pair| pair.0.n).sum(),
        n_treat: pairs.iter().map(|pair| pair.1.n).sum(),
        confidence: opts.confidence,
        loads: 1,
    };
    let notes = comparison_notes(&comparison, base, treat, &opts.arm_names);
    Comparison {
        notes,
        ..comparison
    }
}

/// The p50 shift and its interval alone, for deciding when to stop adding pairs; `None`
/// without a pair. `index` is the index of 50 in the summaries' quantiles.
pub fn shift_interval(
    base: &[RoundSummary],
    treat: &[RoundSummary],
    index: usize,
    confidence: f64,
) -> Option<ShiftInterval> {
    let deltas: Vec<f64> = paired(base, treat)
        .iter()
        .map(|(base_round, treat_round)| treat_round.quantiles[index] - base_round.quantiles[index])
        .collect();
    median_interval(&deltas, confidence)
}

/// The p50 shift across loads and its interval alone ([`super::loads`]), for deciding when to
/// stop adding loads; `None` with fewer than [`MIN_LOADS`] loads. `index` is the index of 50 in
/// the summaries' quantiles.
pub fn shift_interval_loads(
    (base, treat): (&[RoundSummary], &[RoundSummary]),
    loads: &[Load],
    index: usize,
    confidence: f64,
) -> Option<AcrossLoads> {
    if loads.len() < MIN_LOADS {
        return None;
    }
    let estimates: Vec<LoadEstimate> = loads
        .iter()
        .map(|load| {
            let range = pairs_of(load, base.len().min(treat.len()));
            let pairs = paired(&base[range.clone()], &treat[range]);
            let diff = quantile_diff(&pairs, index, 50.0, confidence);
            LoadEstimate::of_median(diff.delta, &diff.pair_deltas, load.order)
        })
        .collect();
    across_loads(&estimates, confidence)
}

/// The pairs whose rounds both have samples.
fn paired<'a>(
    base: &'a [RoundSummary],
    treat: &'a [RoundSummary],
) -> Vec<(&'a RoundSummary, &'a RoundSummary)> {
    base.iter()
        .zip(treat)
        .filter(|(b, t)| b.n > 0 && t.n > 0)
        .collect()
}

fn quantile_diff(
    pairs: &[(&RoundSummary, &RoundSummary)],
    index: usize,
    quantile: f64,
    confidence: f64,
) -> QuantileDiff {
    let base: Vec<f64> = pairs.iter().map(|pair| pair.0.quantiles[index]).collect();
    let treat: Vec<f64> = pairs.iter().map(|pair| pair.1.quantiles[index]).collect();
    let pair_deltas: Vec<f64> = treat.iter().zip(&base).map(|(t, b)| t - b).collect();
    let nan = ShiftInterval {
        estimate: f64::NAN,
        lo: f64::NAN,
        hi: f64::NAN,
        confidence: 0.0,
    };
    let interval = median_interval(&pair_deltas, confidence).unwrap_or(nan);
    let level = modes::median_of(base);
    let pct = |x: f64| 100.0 * x / level;
    QuantileDiff {
        q: quantile,
        base: level,
        treat: modes::median_of(treat),
        delta: interval.estimate,
        lo: interval.lo,
        hi: interval.hi,
        confidence: interval.confidence,
        pct: pct(interval.estimate),
        pct_lo: pct(interval.lo),
        pct_hi: pct(interval.hi),
        pair_deltas,
        block: 1,
        block_deltas: Vec::new(),
        load_deltas: Vec::new(),
        load_share: None,
        order_effect: None,
        method: METHOD,
    }
}

/// 1-based nearest rank of percentile `quantile` among `count` samples (as [`percentile_sorted`](super::percentile_sorted)).
fn nearest_rank(count: usize, quantile: f64) -> usize {
    (((quantile / 100.0) * count as f64).ceil() as usize).clamp(1, count)
}

/// A round's q-th percentile read on the mid-distribution: the nearest rank, read at the middle
/// of its rank with every run of tied values spread evenly over the half-gaps to its neighbours
/// (see [`value_at`]); NaN when empty.
pub fn mid_quantile(sorted: &[u64], quantile: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    value_at(sorted, nearest_rank(sorted.len(), quantile) as f64 - 0.5)
}

/// The inverse of the empirical CDF at `position` in [0, n), with every run of equal values
/// spread evenly over the half-gaps to its neighbouring distinct values. Clock readings come in
/// steps of several ns on a VM, so thousands of samples tie at p50; spreading a tie run over its step lets
/// a shift smaller than the step move the estimate instead of snapping to the step. For a value
/// without ties this is the value itself, give or take a quarter of the neighbouring gaps.
fn value_at(sorted: &[u64], position: f64) -> f64 {
    let count = sorted.len();
    let index = (position.max(0.0) as usize).min(count - 1);
    let value = sorted[index];
    let tie_start = sorted[..index].partition_point(|&y| y < value);
    let tie_end = index + sorted[index..].partition_point(|&y| y <= value);
    let down = (tie_start > 0).then(|| (value - sorted[tie_start - 1]) as f64);
    let up = (tie_end < count).then(|| (sorted[tie_end] - value) as f64);
    let (down, up) = match (down, up) {
        (Some(below), Some(above)) => (below, above),
        (Some(gap), None) | (None, Some(gap)) => (gap, gap),
        (None, None) => (0.0, 0.0),
    };
    let frac = ((position - tie_start as f64) / (tie_end - tie_start) as f64).clamp(0.0, 1.0);
    value as f64 - down / 2.0 + (down + up) / 2.0 * frac
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::rng::Rng;

    /// `rounds` rounds of a skewed, 10 ns-stepped distribution, round i shifted by `drift[i]`.
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

    const DRIFT: [u64; 12] = [0, 20, 10, 30, 0, 5, 25, 15, 0, 10, 20, 5];

    #[test]
    fn known_answers_table() {
        let base = rounds(1, &DRIFT, 0);
        let same = base.clone();
        let other_draw = rounds(12, &DRIFT, 0);
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
            assert_eq!((c.rounds, c.n_base), (12, 240_000), "{what}");
            assert_eq!(c.method, METHOD);
            for d in &c.diffs {
                if let Some(w) = want {
                    assert!((d.delta - w).abs() < 1e-9, "{what} p{}: {d:?}", d.q);
                    assert!(d.lo <= *w && *w <= d.hi, "{what} p{}: {d:?}", d.q);
                }
                assert_eq!(d.lo <= 0.0 && 0.0 <= d.hi, *holds_zero, "{what} p{}", d.q);
                assert!(d.confidence >= 0.95, "{what}: {}", d.confidence);
            }
        }
    }

    #[test]
    fn mid_quantile_table() {
        // (sorted samples, q, expected): nearest rank read mid-rank, ties spread over half-gaps.
        let cases: &[(&[u64], f64, f64)] = &[
            (&[1, 2, 3, 4, 5], 50.0, 3.0),
            (&[10, 20, 20, 20, 30], 50.0, 20.0),
            (&[10, 20, 20, 20, 30], 40.0, 15.0 + 10.0 / 6.0),
            (&[7], 99.0, 7.0),
            (&[5, 5, 5, 5], 50.0, 5.0),
        ];
        for (s, q, want) in cases {
            let got = mid_quantile(s, *q);
            assert!((got - want).abs() < 1e-9, "p{q} of {s:?}: {got}");
        }
        assert!(mid_quantile(&[], 50.0).is_nan());
    }

    /// Rounds of 10 ns-stepped readings with a 1 ns jitter (1833/1834, 1843/1844 as on the
    /// test VM), the latency shifted by `plus` ns.
    fn stepped(rng: &mut Rng, plus: f64) -> Vec<u64> {
        stepped_n(rng, plus, 9_000)
    }

    fn stepped_n(rng: &mut Rng, plus: f64, n: usize) -> Vec<u64> {
        (0..n)
            .map(|_| {
                let lat = 1820.0 + plus + 5.0 * rng.gamma(4.0);
                let t0 = rng.uniform() * 1e6;
                let d = ((t0 + lat) / 10.0).floor() * 10.0 - (t0 / 10.0).floor() * 10.0;
                d as u64 + u64::from(rng.uniform() < 0.5)
            })
            .collect()
    }

    #[test]
    fn a_shift_below_the_clock_step_is_resolved() {
        let mut rng = Rng::new(8);
        for plus in [2.0, 3.0, 5.0] {
            let base: Vec<Vec<u64>> = (0..20).map(|_| stepped(&mut rng, 0.0)).collect();
            let treat: Vec<Vec<u64>> = (0..20).map(|_| stepped(&mut rng, plus)).collect();
            let p50 = compare(&base, &treat, &CompareOptions::default()).diffs[0].clone();
            assert!(
                (p50.delta - plus).abs() < 1.0 && p50.lo > 0.0,
                "+{plus} ns: {p50:?}"
            );
        }
    }

    #[test]
    fn a_shift_below_the_clock_step_is_resolved_in_short_rounds() {
        // overhead's default with --compare: rounds of 250 less the warm-up, thousands of pairs.
        let mut rng = Rng::new(9);
        for plus in [3.0, 5.0] {
            let base: Vec<Vec<u64>> = (0..2000).map(|_| stepped_n(&mut rng, 0.0, 225)).collect();
            let treat: Vec<Vec<u64>> = (0..2000).map(|_| stepped_n(&mut rng, plus, 225)).collect();
            let p50 = compare(&base, &treat, &CompareOptions::default()).diffs[0].clone();
            assert!(
                (p50.delta - plus).abs() < 1.0 && p50.lo > 0.0,
                "+{plus} ns: {p50:?}"
            );
        }
    }

    #[test]
    fn tails_of_short_rounds_are_compared_over_pooled_blocks() {
        // Rounds of 225: p99 and p99.9 hold 2.25 and 0.225 samples beyond them, so blocks of 5
        // and 45 pairs are pooled; a shift of the whole distribution shows at every quantile.
        assert_eq!(
            [50.0, 90.0, 99.0, 99.9].map(|q| block_pairs(225, q)),
            [1, 1, 5, 45]
        );
        assert_eq!(block_pairs(20_000, 99.9), 1);
        assert_eq!(block_pairs(0, 99.9), 1);
        let mut rng = Rng::new(10);
        let base: Vec<Vec<u64>> = (0..900).map(|_| stepped_n(&mut rng, 0.0, 225)).collect();
        let same: Vec<Vec<u64>> = (0..900).map(|_| stepped_n(&mut rng, 0.0, 225)).collect();
        let plus: Vec<Vec<u64>> = (0..900).map(|_| stepped_n(&mut rng, 40.0, 225)).collect();
        let opts = CompareOptions::default();
        let aa = compare(&base, &same, &opts);
        let shifted = compare(&base, &plus, &opts);
        for (k, want_block) in [(0, 1), (1, 1), (2, 5), (3, 45)] {
            let (a, d) = (&aa.diffs[k], &shifted.diffs[k]);
            assert_eq!((a.block, d.block), (want_block, want_block), "p{}", d.q);
            assert_eq!(d.pair_deltas.len(), 900, "p{}: per pair, always", d.q);
            let blocks = if want_block > 1 { 900 / want_block } else { 0 };
            assert_eq!(d.block_deltas.len(), blocks, "p{}", d.q);
            assert!(a.lo <= 0.0 && 0.0 <= a.hi, "A/A p{}: {a:?}", a.q);
            assert!(
                d.lo > 0.0 && d.lo <= 40.0 && 40.0 <= d.hi,
                "+40 p{}: {d:?}",
                d.q
            );
        }
    }

    #[test]
    fn blocks_cover_every_pair_and_a_short_remainder_joins_the_last() {
        // (pairs, block, the blocks' lengths)
        let cases: &[(usize, usize, &[usize])] = &[
            (90, 45, &[45, 45]),
            (100, 45, &[45, 55]),
            (80, 45, &[45, 35]),
            (20, 45, &[20]),
            (0, 45, &[0]),
            (11, 5, &[5, 6]),
            (13, 5, &[5, 5, 3]),
        ];
        for (n, g, want) in cases {
            let lens: Vec<usize> = blocks_of(*n, *g).map(|r| r.len()).collect();
            assert_eq!(lens, *want, "{n} pairs in blocks of {g}");
        }
    }

    #[test]
    fn a_pooled_tail_short_of_the_level_is_noted() {
        let mut rng = Rng::new(11);
        let base: Vec<Vec<u64>> = (0..40).map(|_| stepped_n(&mut rng, 0.0, 225)).collect();
        let treat: Vec<Vec<u64>> = (0..40).map(|_| stepped_n(&mut rng, 0.0, 225)).collect();
        let at_95 = CompareOptions {
            confidence: 0.95,
            ..CompareOptions::default()
        };
        let c = compare(&base, &treat, &at_95);
        let p999 = c.diff(99.9).unwrap();
        assert_eq!((p999.block, p999.block_deltas.len()), (45, 1));
        assert!(p999.confidence < 0.95, "{p999:?}");
        assert!(
            c.notes.iter().any(
                |n| n.starts_with("p99.9 is compared over blocks of 45 pairs")
                    && n.contains("give at least 270 pairs")
            ),
            "{:?}",
            c.notes
        );
        assert!(
            !c.notes.iter().any(|n| n.starts_with("p99 is")),
            "p99: 8 blocks, 95%"
        );
    }

    #[test]
    fn bursts_in_a_minority_of_rounds_do_not_widen_the_interval() {
        let drift: Vec<u64> = (0..40).map(|i| (i * 7 % 13) as u64).collect();
        let base = rounds(3, &drift, 0);
        let treat = rounds(4, &drift, 35);
        let mut bursty = treat.clone();
        for i in [3, 17, 29] {
            bursty[i].iter_mut().for_each(|x| *x += 400);
        }
        let opts = CompareOptions::default();
        let calm = compare(&base, &treat, &opts).diffs[0].clone();
        let hit = compare(&base, &bursty, &opts);
        let p50 = &hit.diffs[0];
        assert!(p50.lo > 20.0 && p50.hi < 50.0, "{p50:?}");
        assert!(
            p50.hi - p50.lo < 1.5 * (calm.hi - calm.lo) + 2.0,
            "{calm:?} {p50:?}"
        );
        let up = hit.modes.iter().find(|m| m.arm == "attached" && m.above);
        assert_eq!(up.map(|m| m.rounds.clone()), Some(vec![3, 17, 29]));
    }

    #[test]
    fn drift_between_pairs_widens_the_interval() {
        // The drifting rounds move ±20 ns around the same level as the steady ones.
        let steady_drift = [20; 12];
        let base = rounds(3, &steady_drift, 0);
        let steady = rounds(4, &steady_drift, 0);
        let drifting = rounds(4, &[0, 40, 0, 40, 20, 0, 40, 0, 40, 20, 10, 30], 0);
        let opts = CompareOptions::default();
        let width = |t: &[Vec<u64>]| {
            let d = &compare(&base, t, &opts).diffs[0];
            d.hi - d.lo
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
        assert!(
            c.notes.iter().any(|n| n.contains("0% interval")),
            "{:?}",
            c.notes
        );
        let none = compare(&[], &[], &CompareOptions::default());
        assert!(none.diffs[0].delta.is_nan() && none.rounds == 0);
    }

    #[test]
    fn the_stop_rule_sees_the_same_p50_interval() {
        let base = rounds(7, &DRIFT, 0);
        let treat = rounds(8, &DRIFT, 20);
        let opts = CompareOptions::default();
        let s = |r: &[Vec<u64>]| -> Vec<RoundSummary> {
            r.iter()
                .map(|x| RoundSummary::of(x, &opts.quantiles))
                .collect()
        };
        let i = shift_interval(&s(&base), &s(&treat), 0, opts.confidence).unwrap();
        let d = &compare(&base, &treat, &opts).diffs[0];
        assert_eq!((i.estimate, i.lo, i.hi), (d.delta, d.lo, d.hi));
    }
}
