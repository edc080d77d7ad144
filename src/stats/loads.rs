//! Two levels of repetition: pairs of rounds within a load of the objects, and loads.
//!
//! Where the kernel places a JIT image and its maps moves a program's cost by a few ns, and
//! the order in which two objects are loaded moves it further: the one loaded second can run
//! slower, whichever file it is (docs/overhead-method.md has the figures). An interval over the
//! pairs of rounds of one load describes that load only: a second run, with new loads, lands
//! outside it. So `overhead` loads the objects afresh several times in a run, each load a
//! block of pairs of rounds, and the interval is taken over loads, the level that varies
//! (Kalibera & Jones, "Rigorous benchmarking in reasonable time", ISMM 2013: the
//! repetitions at the highest level that varies set the interval).
//!
//! Per load, the estimate is what a single-level comparison of its pairs gives: the median of
//! its pair differences, or of its tail blocks' differences ([`super::compare`]). Across loads:
//! - with two objects, the order of loading alternates from load to load, so that each order
//!   is used equally often; the estimate is the mean of the two orders' mean estimates, which
//!   is free of the order's effect however large it is, and the spread is taken within each
//!   order (a factor of the design, not noise): Student's t with `loads − 2` degrees of freedom;
//! - with one object against nothing attached, the mean of the loads' estimates and Student's
//!   t with `loads − 1` degrees of freedom.
//!
//! Each load's estimate is a median of hundreds of pair differences or an average of a few
//! tail blocks, and so close to normal; the spread between loads is measured, not assumed.
//! `examples/stats_coverage.rs` checks the coverage with load effects and an order effect.
//!
//! The share of the interval's variance that comes from load to load is the spread between
//! loads less what the rounds within a load explain (each load's own sampling variance, from
//! the robust spread of its differences): when it is large, more loads narrow the interval and
//! more rounds per load do not.

use super::dist::t_quantile;
use super::modes::{median_and_robust_sd, median_of};
use serde::Serialize;

/// The fewest loads for an interval across loads: two per order, and one degree of freedom
/// left after the two orders' means.
pub const MIN_LOADS: usize = 4;

/// `π/2`: the variance of a sample median is about this times a sample mean's, for normal data.
const MEDIAN_VARIANCE_FACTOR: f64 = std::f64::consts::FRAC_PI_2;

/// Which object was loaded first in one load of the two arms.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum LoadOrder {
    /// One arm loads an object, the other nothing: there is no order.
    OneObject,
    /// The base arm's object first, then the treatment's.
    BaseFirst,
    /// The treatment's object first.
    TreatFirst,
}

impl LoadOrder {
    /// The other order of two objects (one object has no other).
    pub fn swapped(self) -> LoadOrder {
        match self {
            LoadOrder::BaseFirst => LoadOrder::TreatFirst,
            LoadOrder::TreatFirst => LoadOrder::BaseFirst,
            LoadOrder::OneObject => LoadOrder::OneObject,
        }
    }
}

/// One load of the arms' objects: the pairs of rounds it held and the order it was made in.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Load {
    /// The index of its first pair among all pairs.
    pub first_pair: usize,
    /// How many pairs of rounds it held.
    pub pairs: usize,
    pub order: LoadOrder,
}

/// One load's estimate of a difference.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LoadEstimate {
    /// The load's own estimate (ns).
    pub value: f64,
    /// Its sampling variance from the rounds within the load (ns²), when it can be told.
    pub sampling_variance: Option<f64>,
    pub order: LoadOrder,
}

impl LoadEstimate {
    /// The estimate of a load whose differences were `deltas` and whose estimate `value` is
    /// their median: the sampling variance from their robust spread.
    pub fn of_median(value: f64, deltas: &[f64], order: LoadOrder) -> LoadEstimate {
        let finite: Vec<f64> = deltas.iter().copied().filter(|d| d.is_finite()).collect();
        let sampling_variance = (finite.len() >= 3).then(|| {
            let (_, spread) = median_and_robust_sd(&finite);
            MEDIAN_VARIANCE_FACTOR * spread * spread / finite.len() as f64
        });
        LoadEstimate {
            value,
            sampling_variance,
            order,
        }
    }
}

/// A difference estimated across loads, with its interval.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct AcrossLoads {
    pub estimate: f64,
    pub lo: f64,
    pub hi: f64,
    /// The interval's confidence (the asked one).
    pub confidence: f64,
    /// Student's t degrees of freedom behind the interval.
    pub degrees_of_freedom: usize,
    /// The share of the estimate's variance that comes from load to load (0..1), when the
    /// loads' own sampling variances are known.
    pub load_share: Option<f64>,
    /// With two objects: half the difference between the loads made in one order and in the
    /// other (positive: the treatment costs more when the base was loaded first), ns.
    pub order_effect: Option<f64>,
}

/// The estimate across `loads` and its interval at `confidence`; `None` with fewer than
/// [`MIN_LOADS`] finite estimates, or with two objects and fewer than two loads in either order.
pub fn across_loads(loads: &[LoadEstimate], confidence: f64) -> Option<AcrossLoads> {
    let finite: Vec<&LoadEstimate> = loads.iter().filter(|l| l.value.is_finite()).collect();
    if finite.len() < MIN_LOADS {
        return None;
    }
    let in_order = |order: LoadOrder| -> Vec<f64> {
        finite
            .iter()
            .filter(|l| l.order == order)
            .map(|l| l.value)
            .collect()
    };
    let single = in_order(LoadOrder::OneObject);
    let fit = if single.len() == finite.len() {
        one_object(&single)
    } else {
        let base_first = in_order(LoadOrder::BaseFirst);
        let treat_first = in_order(LoadOrder::TreatFirst);
        if base_first.len() + treat_first.len() != finite.len() {
            return None;
        }
        two_orders(&base_first, &treat_first)?
    };
    let t = t_quantile(0.5 + confidence / 2.0, fit.degrees_of_freedom as f64);
    let half_width = t * fit.variance.sqrt();
    Some(AcrossLoads {
        estimate: fit.estimate,
        lo: fit.estimate - half_width,
        hi: fit.estimate + half_width,
        confidence,
        degrees_of_freedom: fit.degrees_of_freedom,
        load_share: load_share(&finite, fit.variance),
        order_effect: fit.order_effect,
    })
}

/// An estimate across loads before its interval: the variance of the estimate and the degrees
/// of freedom it rests on.
struct Fit {
    estimate: f64,
    variance: f64,
    degrees_of_freedom: usize,
    order_effect: Option<f64>,
}

/// One object against nothing: the mean of the loads' estimates.
fn one_object(values: &[f64]) -> Fit {
    let (mean, squares) = mean_and_squares(values);
    let count = values.len() as f64;
    Fit {
        estimate: mean,
        variance: squares / (count - 1.0) / count,
        degrees_of_freedom: values.len() - 1,
        order_effect: None,
    }
}

/// Two objects: the mean of the two orders' means, its variance from the spread within each
/// order; `None` with fewer than two loads in either order.
fn two_orders(base_first: &[f64], treat_first: &[f64]) -> Option<Fit> {
    if base_first.len() < 2 || treat_first.len() < 2 {
        return None;
    }
    let (mean_base_first, squares_base_first) = mean_and_squares(base_first);
    let (mean_treat_first, squares_treat_first) = mean_and_squares(treat_first);
    let degrees_of_freedom = base_first.len() + treat_first.len() - 2;
    let pooled = (squares_base_first + squares_treat_first) / degrees_of_freedom as f64;
    let per_order = 1.0 / base_first.len() as f64 + 1.0 / treat_first.len() as f64;
    Some(Fit {
        estimate: (mean_base_first + mean_treat_first) / 2.0,
        variance: pooled / 4.0 * per_order,
        degrees_of_freedom,
        order_effect: Some((mean_base_first - mean_treat_first) / 2.0),
    })
}

/// The share of `variance` (of the estimate across the loads) that the loads' own sampling
/// variances do not explain.
fn load_share(loads: &[&LoadEstimate], variance: f64) -> Option<f64> {
    let sampling: Option<Vec<f64>> = loads.iter().map(|l| l.sampling_variance).collect();
    let sampling = sampling?;
    let count = loads.len() as f64;
    // Each load's estimate carries its sampling variance; the estimate across loads averages
    // them, so it carries their mean over the number of loads.
    let from_rounds = sampling.iter().sum::<f64>() / count / count;
    if variance.is_nan() || variance <= 0.0 {
        return None;
    }
    Some(((variance - from_rounds) / variance).clamp(0.0, 1.0))
}

/// The mean and the sum of squared deviations from it.
fn mean_and_squares(xs: &[f64]) -> (f64, f64) {
    let mean = xs.iter().sum::<f64>() / xs.len() as f64;
    (mean, xs.iter().map(|x| (x - mean) * (x - mean)).sum())
}

/// The orders of `count` loads of two objects: in couples of loads, one of each order, the
/// first order of each couple drawn by `coin` (true: base first); with one object, no order.
pub fn orders(count: usize, two_objects: bool, mut coin: impl FnMut() -> bool) -> Vec<LoadOrder> {
    if !two_objects {
        return vec![LoadOrder::OneObject; count];
    }
    let mut out = Vec::with_capacity(count);
    while out.len() < count {
        let first = if coin() {
            LoadOrder::BaseFirst
        } else {
            LoadOrder::TreatFirst
        };
        out.push(first);
        if out.len() < count {
            out.push(first.swapped());
        }
    }
    out
}

/// The median of `xs` with what [`LoadEstimate::of_median`] needs: for tests and callers that
/// hold the differences only.
pub fn median_estimate(deltas: &[f64], order: LoadOrder) -> LoadEstimate {
    LoadEstimate::of_median(median_of(deltas.to_vec()), deltas, order)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::rng::Rng;

    fn estimate(value: f64, order: LoadOrder) -> LoadEstimate {
        LoadEstimate {
            value,
            sampling_variance: Some(0.01),
            order,
        }
    }

    #[test]
    fn an_order_effect_is_taken_out_of_the_estimate_and_of_the_spread() {
        // Loads made base-first cost 10 ns more than treat-first ones; the code costs 3 ns.
        let loads: Vec<LoadEstimate> = (0..12)
            .map(|i| {
                let order = [LoadOrder::BaseFirst, LoadOrder::TreatFirst][i % 2];
                let effect = if i % 2 == 0 { 10.0 } else { -10.0 };
                estimate(3.0 + effect + [0.5, -0.5, 0.2][i % 3], order)
            })
            .collect();
        let a = across_loads(&loads, 0.99).unwrap();
        assert!((a.estimate - 3.0).abs() < 0.2, "{a:?}");
        assert!(a.hi - a.lo < 3.0, "the order's ±10 ns is not spread: {a:?}");
        assert!((a.order_effect.unwrap() - 10.0).abs() < 0.3, "{a:?}");
        assert_eq!(a.degrees_of_freedom, 10);
    }

    #[test]
    fn one_object_is_a_plain_t_interval() {
        let values = [1.0, 2.0, 3.0, 4.0, 5.0];
        let loads: Vec<LoadEstimate> = values
            .iter()
            .map(|&v| estimate(v, LoadOrder::OneObject))
            .collect();
        let a = across_loads(&loads, 0.95).unwrap();
        // mean 3, sd 1.5811, se 0.7071, t(0.975, 4) = 2.7764
        assert!((a.estimate - 3.0).abs() < 1e-12);
        assert!(
            (a.hi - 3.0 - 2.776_445 * std::f64::consts::FRAC_1_SQRT_2).abs() < 1e-4,
            "{a:?}"
        );
        assert_eq!((a.degrees_of_freedom, a.order_effect), (4, None));
    }

    #[test]
    fn too_few_loads_or_one_order_give_no_interval() {
        let three = vec![estimate(1.0, LoadOrder::OneObject); 3];
        assert!(across_loads(&three, 0.99).is_none());
        let one_order = vec![estimate(1.0, LoadOrder::BaseFirst); 6];
        assert!(across_loads(&one_order, 0.99).is_none());
        let mut with_nan = vec![estimate(1.0, LoadOrder::OneObject); 4];
        with_nan[0].value = f64::NAN;
        assert!(across_loads(&with_nan, 0.99).is_none());
    }

    #[test]
    fn the_load_share_is_what_the_rounds_do_not_explain() {
        let spread = [-2.0, 2.0, -1.0, 1.0, 0.0, 0.5, -0.5, 0.0];
        let with = |sampling| -> AcrossLoads {
            let loads: Vec<LoadEstimate> = spread
                .iter()
                .map(|&v| LoadEstimate {
                    value: v,
                    sampling_variance: Some(sampling),
                    order: LoadOrder::OneObject,
                })
                .collect();
            across_loads(&loads, 0.99).unwrap()
        };
        // The loads' values vary with a sample variance of 1.5; rounds that explain almost none
        // of it leave it to the loads, rounds that explain all of it leave nothing.
        assert!(with(0.01).load_share.unwrap() > 0.99);
        assert_eq!(with(100.0).load_share, Some(0.0));
        let half = with(1.5 / 2.0).load_share.unwrap();
        assert!((half - 0.5).abs() < 0.02, "{half}");
    }

    #[test]
    fn orders_come_in_couples_of_each() {
        let mut rng = Rng::new(7);
        for count in [1, 2, 5, 12] {
            let o = orders(count, true, || rng.uniform() < 0.5);
            assert_eq!(o.len(), count);
            for couple in o.chunks(2).filter(|c| c.len() == 2) {
                assert_eq!(couple[1], couple[0].swapped(), "{o:?}");
            }
        }
        assert_eq!(orders(3, false, || true), vec![LoadOrder::OneObject; 3]);
    }

    #[test]
    fn a_load_median_has_the_sampling_variance_of_a_median() {
        let mut rng = Rng::new(3);
        let deltas: Vec<f64> = (0..400).map(|_| 5.0 + 2.0 * rng.normal()).collect();
        let e = median_estimate(&deltas, LoadOrder::OneObject);
        assert!((e.value - 5.0).abs() < 0.5);
        // π/2 · 4 / 400 = 0.0157
        let v = e.sampling_variance.unwrap();
        assert!((v - 0.0157).abs() < 0.004, "{v}");
        assert_eq!(
            median_estimate(&[1.0, 2.0], LoadOrder::OneObject).sampling_variance,
            None
        );
    }
}
