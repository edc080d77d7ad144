//! Rounds that sit in a different mode from the rest of their arm, reported, never dropped.
//!
//! On a shared VM, interference comes in bursts that lift a whole round's p50 by hundreds of
//! ns, and now and then the machine changes state for a while, so that both arms move together
//! (docs/overhead-method.md has the figures). A round is in another mode when its p50 is more than 3.5 robust standard
//! deviations (1.4826 × MAD, the modified z-score of Iglewicz & Hoaglin, 1993) from the median
//! of its arm's round p50s *and* more than 3% of that median away (the floor keeps a tiny MAD,
//! rounds that agree to a nanosecond, from flagging a one-step difference). The comparison
//! keeps such rounds: the median of the pair differences and its sign interval
//! ([`super::rank`]) move by at most one place for each spoiled pair, which is how the method
//! handles them.

use serde::Serialize;

/// The modified z-score beyond which a round is in another mode.
const FAR_Z: f64 = 3.5;
/// The floor of "far", as a fraction of the median round p50.
const FAR_FRACTION: f64 = 0.03;

/// The rounds of one arm that sit above (or below) the rest.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Mode {
    /// The arm's name.
    pub arm: String,
    /// `true`: above the rest; `false`: below.
    pub above: bool,
    /// The rounds, 0-based, in order.
    pub rounds: Vec<usize>,
    /// Rounds in the arm.
    pub of: usize,
    /// Median distance of these rounds' p50s from the arm's median round p50 (ns, signed).
    pub offset_ns: f64,
    /// Smallest and largest distance (ns, signed).
    pub range_ns: (f64, f64),
}

/// The rounds of `arm` whose p50 (one value per round, NaN for an empty round) sits in another
/// mode: at most two groups, the rounds above and those below. Needs five rounds.
pub fn find(arm: &str, p50s: &[f64]) -> Vec<Mode> {
    let finite: Vec<f64> = p50s.iter().copied().filter(|x| x.is_finite()).collect();
    if finite.len() < 5 {
        return Vec::new();
    }
    let (median, spread) = median_and_robust_sd(&finite);
    let far = (FAR_Z * spread).max(FAR_FRACTION * median.abs());
    [true, false]
        .into_iter()
        .filter_map(|above| {
            let hits: Vec<(usize, f64)> = p50s
                .iter()
                .enumerate()
                .map(|(i, p)| (i, p - median))
                .filter(|(_, dev)| dev.is_finite() && dev.abs() > far && (*dev > 0.0) == above)
                .collect();
            (!hits.is_empty()).then(|| {
                let devs: Vec<f64> = hits.iter().map(|h| h.1).collect();
                Mode {
                    arm: arm.to_string(),
                    above,
                    rounds: hits.iter().map(|h| h.0).collect(),
                    of: p50s.len(),
                    offset_ns: median_of(devs.clone()),
                    range_ns: (
                        devs.iter().copied().fold(f64::INFINITY, f64::min),
                        devs.iter().copied().fold(f64::NEG_INFINITY, f64::max),
                    ),
                }
            })
        })
        .collect()
}

/// Median and 1.4826 × MAD (a standard deviation for normal data, robust to wild rounds).
pub(crate) fn median_and_robust_sd(xs: &[f64]) -> (f64, f64) {
    let mid = median_of(xs.to_vec());
    let mad = median_of(xs.iter().map(|x| (x - mid).abs()).collect());
    (mid, 1.4826 * mad)
}

/// The median (NaN when empty).
pub(crate) fn median_of(mut xs: Vec<f64>) -> f64 {
    if xs.is_empty() {
        return f64::NAN;
    }
    xs.sort_by(f64::total_cmp);
    let count = xs.len();
    if count % 2 == 1 {
        xs[count / 2]
    } else {
        (xs[count / 2 - 1] + xs[count / 2]) / 2.0
    }
}

/// Round numbers (1-based) as ranges: "3, 7–9, 12".
pub(crate) fn round_list(rounds: &[usize]) -> String {
    let mut out: Vec<String> = Vec::new();
    let mut first = 0;
    while first < rounds.len() {
        let mut last = first;
        while last + 1 < rounds.len() && rounds[last + 1] == rounds[last] + 1 {
            last += 1;
        }
        out.push(if last > first {
            format!("{}–{}", rounds[first] + 1, rounds[last] + 1)
        } else {
            format!("{}", rounds[first] + 1)
        });
        first = last + 1;
    }
    out.join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes_table() {
        let steady: Vec<f64> = (0..20).map(|i| 1840.0 + (i % 5) as f64 * 4.0).collect();
        let mut bursts = steady.clone();
        bursts[3] += 400.0;
        bursts[11] += 250.0;
        bursts[15] -= 180.0;
        let mut regime = steady.clone();
        for x in regime.iter_mut().take(4) {
            *x += 440.0;
        }
        // (what, p50s, expected (above, rounds) groups)
        type Case<'a> = (&'a str, &'a [f64], &'a [(bool, &'a [usize])]);
        let cases: &[Case] = &[
            ("steady", &steady, &[]),
            (
                "bursts both ways",
                &bursts,
                &[(true, &[3, 11]), (false, &[15])],
            ),
            ("a regime at the start", &regime, &[(true, &[0, 1, 2, 3])]),
            ("too few rounds", &steady[..4], &[]),
        ];
        for (what, p50s, want) in cases {
            let got = find("attached", p50s);
            let got: Vec<(bool, Vec<usize>)> =
                got.iter().map(|m| (m.above, m.rounds.clone())).collect();
            let want: Vec<(bool, Vec<usize>)> =
                want.iter().map(|(a, r)| (*a, r.to_vec())).collect();
            assert_eq!(got, want, "{what}");
        }
        let m = &find("attached", &bursts)[0];
        assert_eq!((m.of, m.arm.as_str()), (20, "attached"));
        assert!(m.offset_ns > 240.0 && m.range_ns.1 > 390.0, "{m:?}");
    }

    #[test]
    fn an_empty_round_is_not_a_mode() {
        let mut p: Vec<f64> = vec![1000.0; 8];
        p[2] = f64::NAN;
        assert!(find("base", &p).is_empty());
    }

    #[test]
    fn round_lists() {
        assert_eq!(round_list(&[2, 6, 7, 8, 11]), "3, 7–9, 12");
        assert_eq!(round_list(&[]), "");
    }
}
