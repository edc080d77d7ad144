//! The sweep's picture: latency delta (attached − baseline) against the swept value on a log
//! axis, p50 and p99 as lines with their intervals as bands, and the points where a map
//! filled marked — the cliff at a glance. The y scale is the p50's, as the cliff sentence is:
//! a p99 of a few rounds swings with whatever else runs on the box, and scaled to its band the
//! p50's step would look flat. The p99 is drawn clipped to the plot, and the legend says so.

use super::axis::nice_step;
use super::text::esc;
use super::COLORS;
use std::fmt::Write;

/// What the sweep plot shows: one point per swept value.
#[derive(Debug, Clone)]
pub struct SweepPlot {
    pub title: String,
    /// The swept parameter, for the x axis.
    pub param: String,
    /// Confidence of the intervals, e.g. 0.99.
    pub confidence: f64,
    pub points: Vec<SweepPoint>,
}

/// One swept value: the p50 and p99 differences `(delta, lo, hi)` and the maps full there.
#[derive(Debug, Clone)]
pub struct SweepPoint {
    pub value: usize,
    pub p50: Option<(f64, f64, f64)>,
    pub p99: Option<(f64, f64, f64)>,
    pub full_maps: Vec<String>,
}

const W: f64 = 900.0;
const H: f64 = 520.0;
const L: f64 = 80.0;
const R: f64 = 30.0;
const T: f64 = 60.0;
const B: f64 = 70.0;

struct Frame {
    x_lo: f64,
    x_hi: f64,
    y_lo: f64,
    y_hi: f64,
}

impl Frame {
    fn px(&self, ns: f64) -> f64 {
        let lowest = self.x_lo.log10();
        let highest = self.x_hi.log10();
        let fraction = if highest > lowest {
            (ns.max(1.0).log10() - lowest) / (highest - lowest)
        } else {
            0.5
        };
        L + fraction * (W - L - R)
    }

    fn py(&self, ns: f64) -> f64 {
        let fraction = if self.y_hi > self.y_lo {
            (ns - self.y_lo) / (self.y_hi - self.y_lo)
        } else {
            0.5
        };
        H - B - fraction * (H - T - B)
    }
}

fn frame(plot: &SweepPlot) -> Frame {
    let xs: Vec<f64> = plot.points.iter().map(|point| point.value as f64).collect();
    let ys = scaled_values(plot);
    let x_lo = xs.iter().copied().fold(f64::MAX, f64::min).max(1.0);
    let x_hi = xs.iter().copied().fold(1.0, f64::max);
    let y_lo = ys.iter().copied().fold(f64::MAX, f64::min);
    let y_hi = ys.iter().copied().fold(f64::MIN, f64::max);
    let pad = ((y_hi - y_lo) * 0.08).max(1.0);
    Frame {
        x_lo: x_lo / 1.3,
        x_hi: x_hi * 1.3,
        y_lo: y_lo - pad,
        y_hi: y_hi + pad,
    }
}

/// The values the y scale holds: zero and every p50 delta with its interval; the p99's only
/// when no point has a p50.
fn scaled_values(plot: &SweepPlot) -> Vec<f64> {
    let has_p50 = plot.points.iter().any(|point| point.p50.is_some());
    let mut ys: Vec<f64> = vec![0.0];
    for point in &plot.points {
        let scaled = if has_p50 { point.p50 } else { point.p99 };
        if let Some((delta, lo, hi)) = scaled {
            ys.extend(
                [lo, hi, delta]
                    .into_iter()
                    .filter(|value| value.is_finite()),
            );
        }
    }
    ys
}

/// Whether any of the p99's line or band leaves the y scale.
fn p99_clipped(plot: &SweepPlot, frame: &Frame) -> bool {
    plot.points
        .iter()
        .filter_map(|point| point.p99)
        .any(|(delta, lo, hi)| {
            [delta, lo, hi]
                .iter()
                .any(|v| *v < frame.y_lo || *v > frame.y_hi)
        })
}

/// One point of a series, in pixels: where it is on the x axis, its delta, and its
/// interval's low and high ends.
struct Drawn {
    x: f64,
    delta: f64,
    low: f64,
    high: f64,
}

fn series(
    plot: &SweepPlot,
    frame: &Frame,
    percentile: f64,
    colour: &str,
    label: &str,
    out: &mut String,
) {
    let points: Vec<Drawn> = plot
        .points
        .iter()
        .filter_map(|point| {
            let interval = if percentile == 50.0 {
                point.p50
            } else {
                point.p99
            };
            interval.map(|(delta, low, high)| Drawn {
                x: frame.px(point.value as f64),
                delta: frame.py(delta),
                low: frame.py(low),
                high: frame.py(high),
            })
        })
        .collect();
    let band: Vec<String> = points
        .iter()
        .map(|point| format!("{:.1},{:.1}", point.x, point.high))
        .chain(
            points
                .iter()
                .rev()
                .map(|point| format!("{:.1},{:.1}", point.x, point.low)),
        )
        .collect();
    let _ = writeln!(out, r#"<g clip-path="url(#plot-area)">"#);
    let _ = writeln!(
        out,
        r#"<polygon points="{}" fill="{colour}" fill-opacity="0.18" stroke="none"/>"#,
        band.join(" ")
    );
    let line: Vec<String> = points
        .iter()
        .map(|point| format!("{:.1},{:.1}", point.x, point.delta))
        .collect();
    let _ = writeln!(
        out,
        r#"<polyline points="{}" fill="none" stroke="{colour}" stroke-width="2.5"/>"#,
        line.join(" ")
    );
    for point in &points {
        let _ = writeln!(
            out,
            r#"<circle cx="{:.1}" cy="{:.1}" r="4" fill="{colour}"><title>{label}</title></circle>"#,
            point.x, point.delta
        );
    }
    let _ = writeln!(out, "</g>");
}

fn axes(plot: &SweepPlot, frame: &Frame, out: &mut String) {
    let _ = writeln!(
        out,
        r##"<line x1="{L}" y1="{:.1}" x2="{:.1}" y2="{:.1}" stroke="#888" stroke-dasharray="3,3"/>"##,
        frame.py(0.0),
        W - R,
        frame.py(0.0)
    );
    let _ = writeln!(
        out,
        r##"<rect x="{L}" y="{T}" width="{}" height="{}" fill="none" stroke="#444"/>"##,
        W - L - R,
        H - T - B
    );
    for point in &plot.points {
        let at = frame.px(point.value as f64);
        let _ = writeln!(
            out,
            r##"<text x="{at:.1}" y="{:.1}" font-size="12" text-anchor="middle">{}</text>"##,
            H - B + 18.0,
            point.value
        );
    }
    let step = nice_step(((frame.y_hi - frame.y_lo) / 6.0).max(1.0));
    let mut tick = (frame.y_lo / step).ceil() * step;
    while tick <= frame.y_hi {
        // A tick a rounding away from zero is zero, not "-0".
        let shown = if tick.abs() < step / 2.0 { 0.0 } else { tick };
        let _ = writeln!(
            out,
            r##"<text x="{:.1}" y="{:.1}" font-size="12" text-anchor="end">{shown:+.0}</text>"##,
            L - 6.0,
            frame.py(tick) + 4.0
        );
        let _ = writeln!(
            out,
            r##"<line x1="{L}" y1="{:.1}" x2="{:.1}" y2="{:.1}" stroke="#eee"/>"##,
            frame.py(tick),
            W - R,
            frame.py(tick)
        );
        tick += step;
    }
    let name = esc(&plot.param);
    let _ = writeln!(
        out,
        r##"<text x="{:.1}" y="{:.1}" font-size="13" text-anchor="middle">{name} (log scale)</text>"##,
        (L + W - R) / 2.0,
        H - B + 42.0
    );
    let _ = writeln!(
        out,
        r##"<text x="18" y="{:.1}" font-size="13" text-anchor="middle" transform="rotate(-90 18 {:.1})">latency delta, attached − baseline (ns)</text>"##,
        (T + H - B) / 2.0,
        (T + H - B) / 2.0
    );
}

/// Rows of cliff labels below the top of the plot before they start again from the top.
const LABEL_ROWS: usize = 6;

/// A dashed line at each point where a map is full, and a label where a map is full for the
/// first time, each label on a row of its own so that no two overlap.
fn cliffs(plot: &SweepPlot, frame: &Frame, out: &mut String) {
    let mut labelled: Vec<&str> = Vec::new();
    let mut row = 0;
    for point in plot
        .points
        .iter()
        .filter(|point| !point.full_maps.is_empty())
    {
        let at = frame.px(point.value as f64);
        let _ = writeln!(
            out,
            r##"<line x1="{at:.1}" y1="{T}" x2="{at:.1}" y2="{:.1}" stroke="#c00" stroke-dasharray="6,4"/>"##,
            H - B
        );
        let newly: Vec<&str> = point
            .full_maps
            .iter()
            .map(String::as_str)
            .filter(|name| !labelled.contains(name))
            .collect();
        if newly.is_empty() {
            continue;
        }
        labelled.extend(&newly);
        let (tx, anchor) = if at > W - R - 160.0 {
            (at - 4.0, "end")
        } else {
            (at + 4.0, "start")
        };
        let _ = writeln!(
            out,
            r##"<text x="{tx:.1}" y="{:.1}" font-size="12" fill="#c00" stroke="white" stroke-width="3" paint-order="stroke" text-anchor="{anchor}">{} full</text>"##,
            T + 50.0 + 16.0 * (row % LABEL_ROWS) as f64,
            esc(&newly.join(", "))
        );
        row += 1;
    }
}

/// The sweep plot as a self-contained SVG.
pub fn sweep_svg(plot: &SweepPlot) -> String {
    let bounds = frame(plot);
    let mut out = format!(
        r#"<?xml version="1.0" encoding="UTF-8"?>
<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" viewBox="0 0 {W} {H}" font-family="sans-serif">
<rect width="100%" height="100%" fill="white"/>
"#
    );
    let _ = writeln!(
        out,
        r#"<text x="{:.1}" y="28" font-size="17" text-anchor="middle">{}</text>"#,
        W / 2.0,
        esc(&plot.title)
    );
    let _ = writeln!(
        out,
        r#"<clipPath id="plot-area"><rect x="{L}" y="{T}" width="{}" height="{}"/></clipPath>"#,
        W - L - R,
        H - T - B
    );
    axes(plot, &bounds, &mut out);
    series(plot, &bounds, 50.0, COLORS[0], "p50", &mut out);
    series(plot, &bounds, 99.0, COLORS[1], "p99", &mut out);
    cliffs(plot, &bounds, &mut out);
    let conf = 100.0 * plot.confidence;
    let p99_note = match p99_clipped(plot, &bounds) {
        true => " (cut off: the scale is the p50's)",
        false => "",
    };
    let _ = writeln!(
        out,
        r##"<g font-size="13"><rect x="{:.1}" y="{:.1}" width="14" height="4" fill="{}"/><text x="{:.1}" y="{:.1}">Δp50 (band: {conf:.0}% interval)</text><rect x="{:.1}" y="{:.1}" width="14" height="4" fill="{}"/><text x="{:.1}" y="{:.1}">Δp99{p99_note}</text></g>"##,
        L + 10.0,
        T + 10.0,
        COLORS[0],
        L + 30.0,
        T + 15.0,
        L + 10.0,
        T + 28.0,
        COLORS[1],
        L + 30.0,
        T + 33.0
    );
    out.push_str("</svg>\n");
    out
}
