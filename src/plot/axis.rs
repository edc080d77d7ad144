//! Log-scaled latency axes and the panels that use them: the mappings and the ticks.

use super::text::fmt_duration;

/// A logarithmic scale over `lo..=hi` nanoseconds (both > 0).
#[derive(Debug, Clone, Copy)]
pub(super) struct LogScale {
    pub lo: f64,
    pub hi: f64,
}

impl LogScale {
    /// A scale over `lo..=hi`, widened when the two meet or are not positive.
    pub fn new(lo: f64, hi: f64) -> LogScale {
        let lo = lo.max(1.0);
        let hi = hi.max(lo * 1.2);
        LogScale { lo, hi }
    }

    /// Where `v` falls, 0 at `lo` and 1 at `hi` (outside for values out of range).
    pub fn frac(&self, ns: f64) -> f64 {
        (ns.max(1e-3).ln() - self.lo.ln()) / (self.hi.ln() - self.lo.ln())
    }
}

/// The deepest tail shown: p99.99.
pub(super) const TAIL_FLOOR: f64 = 1e-4;

/// How a panel maps F (the cumulative fraction) to height.
#[derive(Clone, Copy)]
pub(super) enum YScale {
    /// F from 0 (bottom) to 1 (top).
    Cdf,
    /// 1 − F on a log scale, from 0.5 (top) to `TAIL_FLOOR` (bottom).
    Tail,
}

/// A plotting area and its scales.
pub(super) struct Panel {
    pub id: &'static str,
    pub title: &'static str,
    pub left: f64,
    pub right: f64,
    pub top: f64,
    pub bottom: f64,
    pub x: LogScale,
    pub y: YScale,
}

impl Panel {
    /// The x of latency `ns`.
    pub fn px(&self, ns: f64) -> f64 {
        let at = self.left + self.x.frac(ns) * (self.right - self.left);
        at.clamp(-1e4, 1e4)
    }

    /// The y of cumulative fraction `f`.
    pub fn py(&self, fraction: f64) -> f64 {
        let down = match self.y {
            YScale::Cdf => 1.0 - fraction,
            YScale::Tail => {
                let survival = (1.0 - fraction).max(TAIL_FLOOR / 100.0);
                (survival.log10() - 0.5f64.log10()) / (TAIL_FLOOR.log10() - 0.5f64.log10())
            }
        };
        (self.top + down * (self.bottom - self.top)).clamp(-1e4, 1e4)
    }
}

/// One tick of the latency axis: a gridline, and a label unless thinned out.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Tick {
    pub value: f64,
    pub label: Option<String>,
}

/// Ticks for a log axis `width` pixels wide. With at least three 1-2-5 values in range, labels
/// go on 1-2-5, or on decades (every k-th) when those would crowd, with unlabelled gridlines at
/// the other multiples; a range under a decade (e.g. 1.0–2.2 µs) gets evenly spaced "nice" values
/// instead. Labels stay at least `MIN_GAP` px apart.
pub(super) fn ticks(scale: &LogScale, width: f64) -> Vec<Tick> {
    let fits = |vs: &[f64]| {
        vs.windows(2)
            .all(|w| (scale.frac(w[1]) - scale.frac(w[0])) * width >= MIN_GAP)
    };
    let (labelled, gridlines) = if decade_multiples(scale, &[1.0, 2.0, 5.0]).len() >= 3 {
        let candidates = std::iter::once(decade_multiples(scale, &[1.0, 2.0, 5.0]))
            .chain((1..=6).map(|k| every_kth_decade(scale, k)));
        let labelled = last_or_first_fit(candidates, fits);
        (
            labelled,
            decade_multiples(scale, &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0]),
        )
    } else {
        let step0 = nice_step((scale.hi - scale.lo) / 6.0);
        let candidates = [1.0, 2.0, 2.5, 5.0, 10.0].map(|m| linear(scale.lo, scale.hi, step0 * m));
        (last_or_first_fit(candidates.into_iter(), fits), Vec::new())
    };
    let mut out: Vec<Tick> = gridlines
        .into_iter()
        .filter(|v| !labelled.contains(v))
        .map(|value| Tick { value, label: None })
        .collect();
    out.extend(labelled.into_iter().map(|value| Tick {
        value,
        label: Some(fmt_duration(value)),
    }));
    out
}

const MIN_GAP: f64 = 46.0;

/// The first candidate that fits, else the last one.
fn last_or_first_fit(
    cands: impl Iterator<Item = Vec<f64>>,
    fits: impl Fn(&[f64]) -> bool,
) -> Vec<f64> {
    let mut last = Vec::new();
    for candidate in cands {
        if fits(&candidate) {
            return candidate;
        }
        last = candidate;
    }
    last
}

/// m × 10^e within the scale, for each multiplier m.
fn decade_multiples(scale: &LogScale, mults: &[f64]) -> Vec<f64> {
    let first = scale.lo.log10().floor() as i32;
    let last = scale.hi.log10().ceil() as i32;
    let mut out = Vec::new();
    for exponent in first..=last {
        for multiplier in mults {
            let value = multiplier * 10f64.powi(exponent);
            if value >= scale.lo * 0.999_999 && value <= scale.hi * 1.000_001 {
                out.push(value);
            }
        }
    }
    out
}

fn every_kth_decade(scale: &LogScale, every: i32) -> Vec<f64> {
    let decades = decade_multiples(scale, &[1.0]);
    decades
        .into_iter()
        .filter(|v| (v.log10().round() as i32) % every == 0)
        .collect()
}

/// The 1, 2 or 5 × 10^e at or above `raw`.
pub(super) fn nice_step(raw: f64) -> f64 {
    let mag = 10f64.powf(raw.log10().floor());
    [1.0, 2.0, 5.0, 10.0]
        .iter()
        .map(|multiplier| multiplier * mag)
        .find(|step| *step >= raw * 0.999)
        .unwrap_or(10.0 * mag)
}

/// Multiples of `step` in `lo..=hi`.
fn linear(lo: f64, hi: f64, step: f64) -> Vec<f64> {
    let first = (lo / step).ceil() as i64;
    let last = (hi / step).floor() as i64;
    (first..=last).map(|index| index as f64 * step).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tick_table() {
        // (lo, hi, axis width px, labels expected)
        let cases: &[(f64, f64, f64, &[&str])] = &[
            (
                900.0,
                20_000.0,
                500.0,
                &["1 µs", "2 µs", "5 µs", "10 µs", "20 µs"],
            ),
            // Under a decade: evenly spaced values.
            (
                1000.0,
                2200.0,
                500.0,
                &[
                    "1 µs", "1.2 µs", "1.4 µs", "1.6 µs", "1.8 µs", "2 µs", "2.2 µs",
                ],
            ),
            // 1-2-5 would crowd: decades only.
            (
                10.0,
                1e7,
                500.0,
                &[
                    "10 ns", "100 ns", "1 µs", "10 µs", "100 µs", "1 ms", "10 ms",
                ],
            ),
            // Narrow axis: every other decade.
            (10.0, 1e7, 200.0, &["100 ns", "10 µs", "1 ms"]),
        ];
        for (lo, hi, width, want) in cases {
            let got: Vec<String> = ticks(&LogScale::new(*lo, *hi), *width)
                .into_iter()
                .filter_map(|t| t.label)
                .collect();
            assert_eq!(got, *want, "{lo}..{hi} on {width} px");
        }
    }

    #[test]
    fn scale_maps_decades_evenly() {
        let s = LogScale::new(100.0, 10_000.0);
        assert!((s.frac(1000.0) - 0.5).abs() < 1e-12 && s.frac(100.0).abs() < 1e-12);
    }
}
