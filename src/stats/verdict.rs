//! The comparison in words, and the CI gates (`--max-p50-ns` and friends).
//!
//! A gate is exceeded only when the *lower* end of the interval is above the limit: the hook is
//! then confidently over it, and noise alone does not make CI flap. A gate on a quantile that
//! was not compared (or had no samples) fails closed, with a message saying so.

use super::comparison::{Comparison, QuantileDiff};

/// The outcome of one `--max-…` limit.
#[derive(Debug, Clone, serde::Serialize)]
pub struct GateResult {
    /// The limit as the user wrote it, e.g. "--max-p50-ns 100".
    pub limit: String,
    /// The percentile the limit is on.
    pub q: f64,
    /// The lower end of the interval, in the limit's unit (ns or %).
    pub lower_bound: f64,
    /// The limit, in its unit.
    pub limit_value: f64,
    /// True when `lower_bound > limit_value` (or the quantile could not be checked).
    pub exceeded: bool,
    /// One sentence: which limit, and by how much it is over or under.
    pub message: String,
}

/// "p50", "p99.9".
pub(crate) fn q_label(quantile: f64) -> String {
    format!("p{quantile}")
}

/// "+212 ns at p50 [196, 228], +14.6%; p99 +410 ns [380, 440], +20.1%", or, when the p50
/// interval holds zero, "no difference detectable above N ns at p50 …". `resolution_ns` (the
/// measured cost of one clock reading, or its step) is mentioned when the figures come near it.
pub fn verdict(comparison: &Comparison, resolution_ns: f64) -> String {
    let Some(p50) = comparison.diff(50.0).filter(|diff| diff.lo.is_finite()) else {
        return "no comparison: no pair of rounds with samples in both arms".to_string();
    };
    let conf = comparison.confidence * 100.0;
    let (mut text, near) = if holds_zero(p50) {
        let bound = p50.lo.abs().max(p50.hi.abs());
        let head = format!(
            "no difference detectable above {bound:.0} ns at p50 (the farther end of its {conf:.0}% \
             interval [{:.0}, {:.0}]; estimate {:+.0} ns)",
            p50.lo, p50.hi, p50.delta
        );
        (head, bound)
    } else {
        let head = format!(
            "{:+.0} ns at p50 [{:.0}, {:.0}], {:+.1}%",
            p50.delta, p50.lo, p50.hi, p50.pct
        );
        (head, p50.delta.abs().min(p50.lo.abs()))
    };
    for diff in comparison
        .diffs
        .iter()
        .filter(|diff| diff.q != 50.0 && diff.lo.is_finite())
    {
        text.push_str(&format!("; {}", tail_part(diff)));
    }
    if resolution_ns > 0.0 && near < 3.0 * resolution_ns {
        text.push_str(&format!(
            " — near the clock's resolution ({resolution_ns:.0} ns a reading), the finest step this \
             measurement can show"
        ));
    }
    text
}

fn holds_zero(diff: &QuantileDiff) -> bool {
    diff.lo <= 0.0 && 0.0 <= diff.hi
}

/// Whether `d` has an interval to show: one difference alone (a tail compared over a single
/// block of pairs) gives the estimate only, a 0% "interval".
pub fn shows_interval(d: &QuantileDiff) -> bool {
    d.confidence > 0.0
}

/// "p99 +410 ns [380, 440], +20.1%", with "(holds 0)" when its interval does; "p99.9 +47942
/// ns, +12.0% (one block of pairs: no interval)" without one.
fn tail_part(diff: &QuantileDiff) -> String {
    if !shows_interval(diff) {
        return format!(
            "{} {:+.0} ns, {:+.1}% (one block of pairs: no interval)",
            q_label(diff.q),
            diff.delta,
            diff.pct
        );
    }
    let zero = if holds_zero(diff) { " (holds 0)" } else { "" };
    format!(
        "{} {:+.0} ns [{:.0}, {:.0}], {:+.1}%{zero}",
        q_label(diff.q),
        diff.delta,
        diff.lo,
        diff.hi,
        diff.pct
    )
}

/// `--max-pQ-ns max_ns`: exceeded when the interval's lower end is above `max_ns`.
pub(crate) fn gate_ns(comparison: &Comparison, quantile: f64, max_ns: f64) -> GateResult {
    let limit = format!("--max-{}-ns {max_ns}", q_label(quantile));
    gate(
        comparison,
        quantile,
        limit,
        max_ns,
        |diff| (diff.lo, diff.delta, diff.hi),
        "ns",
    )
}

/// `--max-pQ-pct max_pct`: exceeded when the interval's lower end, in % of the baseline's
/// quantile, is above `max_pct`.
pub(crate) fn gate_pct(comparison: &Comparison, quantile: f64, max_pct: f64) -> GateResult {
    let limit = format!("--max-{}-pct {max_pct}", q_label(quantile));
    gate(
        comparison,
        quantile,
        limit,
        max_pct,
        |diff| (diff.pct_lo, diff.pct, diff.pct_hi),
        "%",
    )
}

fn gate(
    comparison: &Comparison,
    quantile: f64,
    limit: String,
    max: f64,
    pick: fn(&QuantileDiff) -> (f64, f64, f64),
    unit: &str,
) -> GateResult {
    let found = comparison
        .diff(quantile)
        .map(pick)
        .filter(|found_at| found_at.0.is_finite());
    let Some((lo, est, hi)) = found else {
        let message = format!(
            "{limit} cannot be checked: {} was not measured (no samples, or not among the compared \
             quantiles); failing closed",
            q_label(quantile)
        );
        return GateResult {
            limit,
            q: quantile,
            lower_bound: f64::NAN,
            limit_value: max,
            exceeded: true,
            message,
        };
    };
    let label = q_label(quantile);
    let sp = if unit == "%" { "" } else { " " };
    let fig = |x: f64| format!("{x:.1}{sp}{unit}");
    let span = format!("{:+.1}{sp}{unit} [{:.1}, {:.1}]", est, lo, hi);
    let message = if lo > max {
        format!("{label} over {limit} by {}: the difference is {span}, and even its lower end is above the limit", fig(lo - max))
    } else if est > max {
        format!("{label} within {limit}, not confidently over: the difference {span} is above the limit, but its interval reaches {} below it", fig(max - lo))
    } else {
        format!(
            "{label} within {limit}: the difference is {span}; its lower end is {} below the limit",
            fig(max - lo)
        )
    };
    GateResult {
        limit,
        q: quantile,
        lower_bound: lo,
        limit_value: max,
        exceeded: lo > max,
        message,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn diff(q: f64, delta: f64, lo: f64, hi: f64, base: f64) -> QuantileDiff {
        let pct = |x: f64| 100.0 * x / base;
        QuantileDiff {
            q,
            base,
            treat: base + delta,
            delta,
            lo,
            hi,
            pct: pct(delta),
            pct_lo: pct(lo),
            pct_hi: pct(hi),
            confidence: 0.95,
            pair_deltas: vec![],
            block: 1,
            block_deltas: vec![],
            load_deltas: vec![],
            load_share: None,
            order_effect: None,
            method: crate::stats::comparison::METHOD,
        }
    }

    fn comparison(diffs: Vec<QuantileDiff>) -> Comparison {
        Comparison {
            method: crate::stats::comparison::METHOD,
            diffs,
            modes: vec![],
            notes: vec![],
            rounds: 5,
            n_base: 10,
            n_treat: 10,
            confidence: 0.95,
            loads: 1,
        }
    }

    #[test]
    fn verdict_table() {
        let shifted = comparison(vec![
            diff(50.0, 212.0, 196.0, 228.0, 1452.0),
            diff(99.0, 410.0, 380.0, 440.0, 2040.0),
        ]);
        let null = comparison(vec![
            diff(50.0, 2.0, -8.0, 12.0, 1200.0),
            diff(99.0, -5.0, -40.0, 30.0, 2000.0),
        ]);
        let tiny = comparison(vec![diff(50.0, 14.0, 6.0, 22.0, 1200.0)]);
        let mut one_block = diff(99.9, 47942.0, 47942.0, 47942.0, 50000.0);
        one_block.confidence = 0.0;
        let short = comparison(vec![diff(50.0, 212.0, 196.0, 228.0, 1452.0), one_block]);
        let cases = [
            (&shifted, 10.0, "+212 ns at p50 [196, 228], +14.6%; p99 +410 ns [380, 440], +20.1%"),
            (
                &null,
                0.0,
                "no difference detectable above 12 ns at p50 (the farther end of its 95% interval [-8, 12]; \
                 estimate +2 ns); p99 -5 ns [-40, 30], -0.2% (holds 0)",
            ),
            (&tiny, 10.0, "+14 ns at p50 [6, 22], +1.2% — near the clock's resolution (10 ns a reading)"),
            (&null, 10.0, "holds 0) — near the clock's resolution (10 ns"),
            (
                &short,
                0.0,
                "; p99.9 +47942 ns, +95.9% (one block of pairs: no interval)",
            ),
        ];
        for (c, res, want) in cases {
            let v = verdict(c, res);
            assert!(v.contains(want), "got {v:?}\nwant {want:?}");
        }
        assert!(
            !verdict(&short, 0.0).contains("[47942"),
            "no 0% interval printed"
        );
    }

    #[test]
    fn gate_table() {
        let c = comparison(vec![
            diff(50.0, 212.0, 196.0, 228.0, 1452.0),
            diff(99.0, 110.0, 90.0, 130.0, 2000.0),
        ]);
        // (gate, exceeded, message fragment)
        let cases = [
            (
                gate_ns(&c, 50.0, 100.0),
                true,
                "p50 over --max-p50-ns 100 by 96.0 ns",
            ),
            (gate_ns(&c, 50.0, 196.0), false, "not confidently over"),
            (
                gate_ns(&c, 50.0, 300.0),
                false,
                "its lower end is 104.0 ns below the limit",
            ),
            (gate_ns(&c, 99.0, 100.0), false, "reaches 10.0 ns below it"),
            (
                gate_ns(&c, 99.0, 80.0),
                true,
                "p99 over --max-p99-ns 80 by 10.0 ns",
            ),
            (
                gate_pct(&c, 50.0, 10.0),
                true,
                "p50 over --max-p50-pct 10 by 3.5%",
            ),
            (gate_pct(&c, 99.0, 5.0), false, "reaches 0.5% below it"),
            (gate_ns(&c, 99.9, 100.0), true, "p99.9 was not measured"),
        ];
        for (g, exceeded, fragment) in cases {
            assert_eq!(g.exceeded, exceeded, "{}", g.message);
            assert!(g.message.contains(fragment), "{}", g.message);
        }
        assert_eq!(gate_ns(&c, 50.0, 100.0).limit, "--max-p50-ns 100");
        assert_eq!(gate_ns(&c, 50.0, 100.0).lower_bound, 196.0);
    }
}
