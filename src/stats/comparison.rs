//! What a comparison of two arms is made of: each round reduced to its quantiles, and per
//! quantile the difference with its interval (the data; `compare.rs` computes them).

use super::modes::Mode;

/// The short name of the method, as `--json` gives it.
pub(crate) const METHOD: &str = "median-pair-difference-sign-test";

/// The short name of the method across loads ([`super::loads`]).
pub(crate) const METHOD_LOADS: &str = "median-pair-difference-per-load-mean-across-loads-t";

/// One round reduced to what the comparison needs: computed once, when the round ends.
#[derive(Debug, Clone, PartialEq)]
pub struct RoundSummary {
    /// Samples in the round.
    pub n: usize,
    /// The round's mid-quantile at each of the compared percentiles (NaN when empty).
    pub quantiles: Vec<f64>,
    /// The longest sample (0 when empty).
    pub max: u64,
}

/// One quantile, both arms, and the difference treat − base with its interval (ns).
#[derive(Debug, Clone, serde::Serialize)]
pub struct QuantileDiff {
    /// The percentile, e.g. 99.9.
    pub q: f64,
    /// Median over the paired rounds of the baseline's per-round quantile.
    pub base: f64,
    /// Median over the paired rounds of the treatment's per-round quantile.
    pub treat: f64,
    /// The shift treat − base: the median of the pair differences.
    pub delta: f64,
    /// Lower end of the interval of `delta`.
    pub lo: f64,
    /// Upper end of the interval of `delta`.
    pub hi: f64,
    /// The coverage the interval achieves: the asked confidence, less with very few pairs.
    pub confidence: f64,
    /// `delta` in percent of `base`.
    pub pct: f64,
    /// `lo` in percent of `base`.
    pub pct_lo: f64,
    /// `hi` in percent of `base`.
    pub pct_hi: f64,
    /// Per pair of rounds: treat quantile − base quantile (ns), in round order.
    pub pair_deltas: Vec<f64>,
    /// Consecutive pairs pooled into each difference: 1 where a round alone holds enough
    /// samples beyond the quantile, more for the tails of short rounds.
    pub block: usize,
    /// With `block` > 1, the differences the shift and its interval come from: per block of
    /// consecutive pairs, each arm's rounds pooled, in round order (empty otherwise).
    pub block_deltas: Vec<f64>,
    /// Per load of the objects, the load's own estimate (ns), in load order; empty when the
    /// interval is over the pairs of a single load.
    pub load_deltas: Vec<f64>,
    /// The share of the interval's variance that comes from load to load (0..1), when the
    /// interval is across loads and the loads' own spread is known.
    pub load_share: Option<f64>,
    /// Across loads of two objects: half the difference between the loads made base first
    /// and those made treatment first (ns); the estimate is free of it.
    pub order_effect: Option<f64>,
    /// The method ([`METHOD`] or [`METHOD_LOADS`]).
    pub method: &'static str,
}

/// Everything `overhead` reports about baseline vs treatment.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Comparison {
    /// The method ([`METHOD`]), the same for every quantile.
    pub method: &'static str,
    /// One entry per requested quantile, in the order asked.
    pub diffs: Vec<QuantileDiff>,
    /// Rounds of either arm that sat in another mode (kept, and reported).
    pub modes: Vec<Mode>,
    /// Mismatched or empty rounds, stalls and caveats, one sentence each.
    pub notes: Vec<String>,
    /// Pairs of rounds compared.
    pub rounds: usize,
    /// Baseline samples in the paired rounds.
    pub n_base: usize,
    /// Treatment samples in the paired rounds.
    pub n_treat: usize,
    /// Confidence asked of the intervals, e.g. 0.95.
    pub confidence: f64,
    /// The loads of each arm's object the intervals are taken over (1: one load, the interval
    /// is over its pairs of rounds).
    pub loads: usize,
}

impl Comparison {
    /// The entry for percentile `quantile`, if it was compared.
    pub fn diff(&self, quantile: f64) -> Option<&QuantileDiff> {
        self.diffs
            .iter()
            .find(|diff| (diff.q - quantile).abs() < 1e-9)
    }
}
