//! Sentences about rounds and caveats: noted, never used to drop data.
//!
//! A round is noted when
//! - its p50 is far from its arm's other rounds: more than 3.5 robust standard deviations
//!   (1.4826 × MAD, the modified z-score of Iglewicz & Hoaglin, 1993) from the median of the
//!   arm's round p50s, *and* more than 5% of that median (on this VM rounds drift by ±20 ns at
//!   ~1.2 µs, under 2%; the 5% floor keeps a MAD of 0 — all rounds on the same clock step —
//!   from flagging a one-step difference);
//! - its longest sample is at least 10 ms: far above the rare 10 µs–5 ms outliers of a healthy
//!   round, and the size of an RT-throttling stall (with the default
//!   `kernel.sched_rt_runtime_us = 950000` of a 1 s period, a SCHED_FIFO task that spins is
//!   parked for up to 50 ms each second).

use super::compare::Comparison;
use super::percentile_sorted;

/// A round whose longest sample is at least this long is noted as a likely RT-throttling stall.
pub const STALL_NS: u64 = 10_000_000;
/// The floor of "far", as a fraction of the median round p50.
const FAR_FRACTION: f64 = 0.05;
/// The modified z-score beyond which a round's p50 is far.
const FAR_Z: f64 = 3.5;

/// Rounds to note (not drop): a round whose p50 is far from its arm's other rounds
/// (median/MAD), or whose longest sample (≥ 10 ms) suggests RT throttling; a sentence each.
pub fn round_notes(arm: &str, rounds: &[Vec<u64>]) -> Vec<String> {
    let mut notes = Vec::new();
    let stats: Vec<Option<(u64, u64)>> = rounds.iter().map(|r| p50_max(r)).collect();
    let p50s: Vec<f64> = stats.iter().flatten().map(|s| s.0 as f64).collect();
    let (median, spread) = median_and_robust_sd(&p50s);
    for (i, s) in stats.iter().enumerate() {
        let Some((p50, max)) = *s else {
            notes.push(format!("{arm} round {}: no samples.", i + 1));
            continue;
        };
        let dev = p50 as f64 - median;
        if p50s.len() >= 3 && dev.abs() > (FAR_Z * spread).max(FAR_FRACTION * median) {
            notes.push(format!(
                "{arm} round {}: p50 {p50} ns is {:.0} ns {} the median of the arm's rounds \
                 ({median:.0} ns, robust spread {spread:.0} ns) — did something else run then? \
                 Kept: its pair widens the interval.",
                i + 1,
                dev.abs(),
                if dev > 0.0 { "above" } else { "below" },
            ));
        }
        if max >= STALL_NS {
            notes.push(format!(
                "{arm} round {}: longest sample {:.1} ms — a stall this long is what RT throttling \
                 does (`sysctl kernel.sched_rt_runtime_us kernel.sched_rt_period_us`); kept.",
                i + 1,
                max as f64 / 1e6
            ));
        }
    }
    notes
}

/// The round's p50 (nearest rank) and longest sample, in O(n) (a selection, not a sort).
fn p50_max(round: &[u64]) -> Option<(u64, u64)> {
    let max = *round.iter().max()?;
    let mut s = round.to_vec();
    let k = (s.len() as f64 * 0.5).ceil().max(1.0) as usize - 1;
    Some((*s.select_nth_unstable(k).1, max))
}

/// Median and 1.4826 × MAD (a standard deviation for normal data, robust to one wild round).
fn median_and_robust_sd(xs: &[f64]) -> (f64, f64) {
    let mid = median(xs.to_vec());
    let mad = median(xs.iter().map(|x| (x - mid).abs()).collect());
    (mid, 1.4826 * mad)
}

fn median(mut xs: Vec<f64>) -> f64 {
    if xs.is_empty() {
        return f64::NAN;
    }
    xs.sort_by(f64::total_cmp);
    let n = xs.len();
    if n % 2 == 1 {
        xs[n / 2]
    } else {
        (xs[n / 2 - 1] + xs[n / 2]) / 2.0
    }
}

/// Caveats about the comparison as a whole: one pair only, a steady drift, and a rank test
/// that disagrees with the p50 interval.
pub(super) fn comparison_notes(c: &Comparison, pairs: &[(Vec<u64>, Vec<u64>)]) -> Vec<String> {
    let mut notes = Vec::new();
    if c.rounds == 1 {
        notes.push(
            "Only one pair of rounds: the intervals cover sampling noise, not drift between rounds; \
             run more rounds for an interval you can trust."
                .to_string(),
        );
    }
    notes.extend(trend_note(pairs));
    let Some(p50) = c.diff(50.0) else {
        return notes;
    };
    if p50.lo <= 0.0 && 0.0 <= p50.hi && c.rank_test.p_value < 0.05 {
        notes.push(format!(
            "The rank test calls the arms different (p = {:.1e}) although the p50 interval \
             [{:.0}, {:.0}] holds 0: with {} samples per arm it detects shifts far below what \
             matters and counts drift between rounds as signal. The interval is the decision basis.",
            c.rank_test.p_value, p50.lo, p50.hi, c.n_base
        ));
    }
    notes
}

/// A note when the p50 level (mean of a pair's two rounds) moves the same way at every pair of
/// five or more: a steady drift adds about half a pair's drift to each delta, since every
/// treatment round runs right after its baseline round.
fn trend_note(pairs: &[(Vec<u64>, Vec<u64>)]) -> Option<String> {
    if pairs.len() < 5 {
        return None;
    }
    let level = |p: &(Vec<u64>, Vec<u64>)| {
        (percentile_sorted(&p.0, 50.0).unwrap_or(0) + percentile_sorted(&p.1, 50.0).unwrap_or(0))
            as f64
            / 2.0
    };
    let levels: Vec<f64> = pairs.iter().map(level).collect();
    let steps: Vec<f64> = levels.windows(2).map(|w| w[1] - w[0]).collect();
    if !(steps.iter().all(|&s| s > 0.0) || steps.iter().all(|&s| s < 0.0)) {
        return None;
    }
    let per_round = (levels[levels.len() - 1] - levels[0]) / (2.0 * steps.len() as f64);
    Some(format!(
        "The p50 moved steadily through the run ({:.0} → {:.0} ns over {} pairs, {per_round:+.1} ns \
         per round). If every attached round ran right after its baseline round, a steady drift \
         adds about {per_round:+.1} ns to each delta that the interval does not cover; alternating \
         the order within pairs (base-attached, attached-base, …) cancels it.",
        levels[0],
        levels[levels.len() - 1],
        pairs.len()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A round of 1000 samples: p50 at `p50`, plus one sample of `max`.
    fn round(p50: u64, max: u64) -> Vec<u64> {
        let mut r: Vec<u64> = (0..999).map(|i| p50 - 50 + i / 10).collect();
        r.push(max);
        r
    }

    #[test]
    fn flags_table() {
        // (what, rounds as (p50, max), what the notes name, in order; rounds are 1-based)
        type Case<'a> = (&'a str, &'a [(u64, u64)], &'a [&'a str]);
        let cases: &[Case] = &[
            ("steady", &[(1200, 9000); 5], &[]),
            (
                "±20 ns drift is normal",
                &[
                    (1200, 9000),
                    (1220, 9000),
                    (1180, 9000),
                    (1210, 9000),
                    (1190, 9000),
                ],
                &[],
            ),
            (
                "one far round",
                &[
                    (1200, 9000),
                    (1210, 9000),
                    (1700, 9000),
                    (1190, 9000),
                    (1200, 9000),
                ],
                &["round 3: p50"],
            ),
            (
                "one far low round",
                &[
                    (1200, 9000),
                    (1210, 9000),
                    (1200, 9000),
                    (1190, 9000),
                    (900, 9000),
                ],
                &["round 5: p50"],
            ),
            (
                "a throttled round",
                &[(1200, 9000), (1200, 48_000_000), (1200, 9000)],
                &["round 2: longest sample 48.0 ms"],
            ),
        ];
        for (what, spec, flagged) in cases {
            let rounds: Vec<Vec<u64>> = spec.iter().map(|&(p, m)| round(p, m)).collect();
            let notes = round_notes("baseline", &rounds);
            assert_eq!(notes.len(), flagged.len(), "{what}: {notes:?}");
            for (n, f) in notes.iter().zip(*flagged) {
                assert!(n.starts_with("baseline ") && n.contains(f), "{what}: {n}");
            }
        }
    }

    #[test]
    fn p50_is_nearest_rank() {
        type Case<'a> = (&'a [u64], Option<(u64, u64)>);
        let cases: &[Case] = &[
            (&[5, 1, 4, 2, 3], Some((3, 5))),
            (&[2, 1], Some((1, 2))),
            (&[], None),
        ];
        for (r, want) in cases {
            assert_eq!(p50_max(r), *want, "{r:?}");
        }
    }

    #[test]
    fn empty_round_is_noted() {
        let notes = round_notes("attached", &[round(1200, 2000), vec![]]);
        assert_eq!(notes, vec!["attached round 2: no samples.".to_string()]);
    }
}
