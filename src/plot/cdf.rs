//! Latency distributions as a self-contained SVG: what `overhead --plot` writes.
//!
//! Two panels share the series and colours. Left, the CDF over the body of the distributions
//! (x: latency on a log scale from p0.5 to p99.5, y: cumulative fraction 0–1), p50 marked and
//! labelled. Right, the tail: 1 − CDF on a log scale, labelled by percentile (p90, p99, p99.9,
//! p99.99), x from p50 to p99.99, p99 marked and labelled. Percentiles are nearest rank, as in
//! [`crate::stats`]. Each curve is downsampled to at most ~2000 points: evenly in rank for the
//! body, evenly in log(1 − F) for the tail. No scripts, no external fonts or files.

use super::axis::{ticks, LogScale, Panel, YScale};
use super::text::{esc, fmt_duration, text_width, thousands};
use super::COLORS;
use crate::stats::percentile_sorted;
use std::fmt::Write;

/// One distribution to draw.
#[derive(Debug, Clone)]
pub struct CdfSeries {
    /// Shown in the legend (any text; escaped).
    pub label: String,
    /// Latencies in ns, any order.
    pub samples: Vec<u64>,
}

/// Text around the plot.
#[derive(Debug, Clone, Default)]
pub struct PlotOptions {
    /// The heading.
    pub title: String,
    /// A line under the heading, e.g. "Δp50 +212 ns [196, 228]; Δp99 +410 ns [380, 440]".
    pub legend_note: String,
}

const WIDTH: f64 = 900.0;
const HEIGHT: f64 = 560.0;
/// Points per curve: half evenly in rank, half evenly in log(1 − F).
const HALF_POINTS: usize = 1000;

/// A series ready to draw.
struct Prepared {
    label: String,
    color: &'static str,
    sorted: Vec<u64>,
}

impl Prepared {
    fn pct(&self, percentile: f64) -> Option<f64> {
        percentile_sorted(&self.sorted, percentile).map(|v| v as f64)
    }
}

/// The SVG document: CDFs of `series` with p50/p99 marked, the legend, and `opts`' text.
pub fn cdf_svg(series: &[CdfSeries], opts: &PlotOptions) -> String {
    let prepared = prepare(series);
    let mut out = String::new();
    let _ = write!(
        out,
        r##"<?xml version="1.0" encoding="UTF-8"?>
<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" viewBox="0 0 {WIDTH} {HEIGHT}" font-family="Helvetica, Arial, sans-serif" font-size="12">
<rect width="100%" height="100%" fill="white"/>
"##
    );
    header(&mut out, opts);
    if prepared.iter().all(|shown| shown.sorted.is_empty()) {
        out.push_str("<text x=\"450\" y=\"300\" text-anchor=\"middle\" fill=\"#666\">no samples</text>\n</svg>\n");
        return out;
    }
    for panel in panels(&prepared) {
        frame(&mut out, &panel);
        for shown in prepared.iter().filter(|shown| !shown.sorted.is_empty()) {
            curve(&mut out, &panel, shown);
        }
        markers(&mut out, &panel, &prepared);
        if let YScale::Cdf = panel.y {
            legend(&mut out, &panel, &prepared);
        }
    }
    out.push_str("</svg>\n");
    out
}

fn prepare(series: &[CdfSeries]) -> Vec<Prepared> {
    let color = |index: usize| COLORS[index % COLORS.len()];
    let sorted = |input: &CdfSeries| {
        let mut samples = input.samples.clone();
        samples.sort_unstable();
        samples
    };
    series
        .iter()
        .enumerate()
        .map(|(index, input)| Prepared {
            label: input.label.clone(),
            color: color(index),
            sorted: sorted(input),
        })
        .collect()
}

/// The body panel (p0.5..p99.5 of all series) and the tail panel (p50..p99.99).
fn panels(series: &[Prepared]) -> [Panel; 2] {
    let range = |lo_p: f64, hi_p: f64| {
        let lo = series
            .iter()
            .filter_map(|s| s.pct(lo_p))
            .fold(f64::INFINITY, f64::min);
        let hi = series
            .iter()
            .filter_map(|s| s.pct(hi_p))
            .fold(0.0, f64::max);
        LogScale::new(lo * 0.97, hi * 1.05)
    };
    let top = 108.0;
    let bottom = 492.0;
    [
        Panel {
            id: "body",
            title: "CDF",
            left: 70.0,
            right: 585.0,
            top,
            bottom,
            x: range(0.5, 99.5),
            y: YScale::Cdf,
        },
        Panel {
            id: "tail",
            title: "tail: 1 − CDF (log)",
            left: 672.0,
            right: 880.0,
            top,
            bottom,
            x: range(50.0, 99.99),
            y: YScale::Tail,
        },
    ]
}

/// The title, and the note under it.
fn header(out: &mut String, opts: &PlotOptions) {
    let _ = writeln!(
        out,
        r##"<text x="24" y="32" font-size="18" font-weight="bold">{}</text>
<text x="24" y="56" font-size="14" fill="#222">{}</text>"##,
        esc(&opts.title),
        esc(&opts.legend_note)
    );
}

/// The legend, in the body panel's lower right (a CDF leaves that corner empty): per series
/// its colour and label, and under it p50, p99 and n.
fn legend(out: &mut String, panel: &Panel, series: &[Prepared]) {
    let lines: Vec<(String, String)> = series
        .iter()
        .map(|entry| (entry.label.clone(), figures(entry)))
        .collect();
    let widest = lines
        .iter()
        .map(|(l, f)| text_width(l, 12.0).max(text_width(f, 11.0)))
        .fold(0.0, f64::max);
    let box_width = widest + 48.0;
    let box_height = 34.0 * lines.len() as f64 + 12.0;
    let box_left = panel.right - 10.0 - box_width;
    let box_top = panel.bottom - 10.0 - box_height;
    let _ = writeln!(
        out,
        r##"<rect class="legend" x="{box_left:.1}" y="{box_top:.1}" width="{box_width:.1}" height="{box_height:.1}" rx="4" fill="white" fill-opacity="0.92" stroke="#bbb"/>"##
    );
    for (row, (entry, (label, figs))) in series.iter().zip(&lines).enumerate() {
        let top = box_top + 8.0 + 34.0 * row as f64;
        let _ = writeln!(
            out,
            r##"<line x1="{:.1}" y1="{:.1}" x2="{:.1}" y2="{:.1}" stroke="{}" stroke-width="3"/><text x="{:.1}" y="{:.1}" font-weight="bold">{}</text><text x="{:.1}" y="{:.1}" font-size="11" fill="#555">{}</text>"##,
            box_left + 10.0,
            top + 10.0,
            box_left + 32.0,
            top + 10.0,
            entry.color,
            box_left + 38.0,
            top + 14.0,
            esc(label),
            box_left + 38.0,
            top + 28.0,
            esc(figs)
        );
    }
}

/// "p50 1.16 µs · p99 1.63 µs · n 450,000", or "no samples".
fn figures(series: &Prepared) -> String {
    match (series.pct(50.0), series.pct(99.0)) {
        (Some(p50), Some(p99)) => format!(
            "p50 {} · p99 {} · n {}",
            fmt_duration(p50),
            fmt_duration(p99),
            thousands(series.sorted.len())
        ),
        _ => "no samples".to_string(),
    }
}

/// The panel's box, gridlines, tick labels and axis titles, and its clip path.
fn frame(out: &mut String, panel: &Panel) {
    let width = panel.right - panel.left;
    let height = panel.bottom - panel.top;
    let _ = writeln!(
        out,
        r##"<clipPath id="clip-{id}"><rect x="{l}" y="{t}" width="{width}" height="{height}"/></clipPath>
<text x="{l}" y="{ty}" font-weight="bold" fill="#333">{title}</text>
<rect x="{l}" y="{t}" width="{width}" height="{height}" fill="#fbfbfb" stroke="#999"/>"##,
        id = panel.id,
        l = panel.left,
        t = panel.top,
        ty = panel.top - 8.0,
        title = esc(panel.title),
    );
    for tick in ticks(&panel.x, width) {
        let at = panel.px(tick.value);
        let shade = if tick.label.is_some() {
            "#d4d4d4"
        } else {
            "#ececec"
        };
        let _ = writeln!(
            out,
            r##"<line x1="{at:.1}" y1="{}" x2="{at:.1}" y2="{}" stroke="{shade}"/>"##,
            panel.top, panel.bottom
        );
        if let Some(label) = tick.label {
            let _ = writeln!(
                out,
                r##"<text class="xtick" x="{at:.2}" y="{}" text-anchor="middle" fill="#444">{}</text>"##,
                panel.bottom + 16.0,
                esc(&label)
            );
        }
    }
    y_ticks(out, panel);
    let _ = writeln!(
        out,
        r##"<text x="{:.1}" y="{}" text-anchor="middle" fill="#444">latency (log scale)</text>"##,
        panel.left + width / 2.0,
        panel.bottom + 36.0
    );
}

/// Gridlines and labels of the F axis: fractions for the CDF, percentiles for the tail.
fn y_ticks(out: &mut String, panel: &Panel) {
    let marks: &[(f64, &str)] = match panel.y {
        YScale::Cdf => &[
            (0.0, "0"),
            (0.25, "0.25"),
            (0.5, "0.5"),
            (0.75, "0.75"),
            (1.0, "1"),
        ],
        YScale::Tail => &[
            (0.5, "p50"),
            (0.9, "p90"),
            (0.99, "p99"),
            (0.999, "p99.9"),
            (0.9999, "p99.99"),
        ],
    };
    for (fraction, label) in marks {
        let at = panel.py(*fraction);
        let dash = if *label == "0.5" || *label == "p99" {
            r##" stroke-dasharray="4 3""##
        } else {
            ""
        };
        let _ = writeln!(
            out,
            r##"<line x1="{}" y1="{at:.1}" x2="{}" y2="{at:.1}" stroke="#d4d4d4"{dash}/><text x="{}" y="{:.1}" text-anchor="end" fill="#444">{label}</text>"##,
            panel.left,
            panel.right,
            panel.left - 6.0,
            at + 4.0
        );
    }
    if let YScale::Cdf = panel.y {
        let _ = writeln!(
            out,
            r##"<text transform="translate(22 {:.1}) rotate(-90)" text-anchor="middle" fill="#444">cumulative fraction of calls</text>"##,
            (panel.top + panel.bottom) / 2.0
        );
    }
}

/// Indices of the points drawn: evenly spaced in rank, plus evenly spaced in log(1 − F).
fn sample_indices(count: usize) -> Vec<usize> {
    let even = (0..=HALF_POINTS).map(|step| step * (count - 1) / HALF_POINTS);
    let decades = (count as f64).log10();
    let tail = (0..=HALF_POINTS).map(|step| {
        let survival = 10f64.powf(-decades * step as f64 / HALF_POINTS as f64);
        count - ((survival * count as f64).ceil() as usize).clamp(1, count)
    });
    let mut idx: Vec<usize> = even.chain(tail).collect();
    idx.sort_unstable();
    idx.dedup();
    idx
}

/// One series' curve in a panel, at the middle of each step of its empirical CDF.
fn curve(out: &mut String, panel: &Panel, series: &Prepared) {
    let count = series.sorted.len();
    let mut points = String::new();
    for index in sample_indices(count) {
        let fraction = (index as f64 + 0.5) / count as f64;
        let _ = write!(
            points,
            "{:.1},{:.1} ",
            panel.px(series.sorted[index] as f64),
            panel.py(fraction)
        );
    }
    let _ = writeln!(
        out,
        r##"<polyline clip-path="url(#clip-{})" fill="none" stroke="{}" stroke-width="2" stroke-linejoin="round" points="{}"/>"##,
        panel.id,
        series.color,
        points.trim_end()
    );
}

/// p50 (body panel) or p99 (tail panel) of each series: a dot on the curve, a dashed drop line
/// to the axis, and the value. Labels alternate sides by rank so two series do not collide.
fn markers(out: &mut String, panel: &Panel, series: &[Prepared]) {
    let (percentile, name) = match panel.y {
        YScale::Cdf => (50.0, "p50"),
        YScale::Tail => (99.0, "p99"),
    };
    let mut at: Vec<(f64, &Prepared)> = series
        .iter()
        .filter_map(|shown| Some((shown.pct(percentile)?, shown)))
        .collect();
    at.sort_by(|a, b| a.0.total_cmp(&b.0));
    for (rank, (value, shown)) in at.iter().enumerate() {
        let dot_x = panel.px(*value);
        let dot_y = panel.py(percentile / 100.0);
        let text = format!("{name} {}", fmt_duration(*value));
        let (lx, ly, anchor) = label_at(panel, rank, (dot_x, dot_y), text.chars().count());
        let _ = writeln!(
            out,
            r##"<line x1="{dot_x:.2}" y1="{dot_y:.1}" x2="{dot_x:.2}" y2="{}" stroke="{c}" stroke-dasharray="3 3"/>
<circle class="{name}" data-series="{i}" cx="{dot_x:.2}" cy="{dot_y:.1}" r="4.5" fill="{c}" stroke="white" stroke-width="1.5"/>
<text x="{:.1}" y="{ly:.1}" text-anchor="{anchor}" fill="{c}" font-weight="bold" stroke="white" stroke-width="3" paint-order="stroke">{}</text>"##,
            panel.bottom,
            lx,
            esc(&text),
            c = shown.color,
            i = series
                .iter()
                .position(|o| std::ptr::eq(o, *shown))
                .unwrap_or(0),
        );
    }
}

/// The width of a marker's label: bold 12 px text, about 7 px a character.
const LABEL_CHAR_PX: f64 = 7.0;

/// Where the value label (`chars` long) of the `rank`-th lowest marker goes: on the CDF the
/// lowest to the left of its dot and the others to the right; in the narrow tail panel to the
/// right, the lowest above its dot and the others below theirs. A label that would leave its
/// panel goes on the dot's other side (the lowest on the CDF a row higher, clear of the next).
fn label_at(panel: &Panel, rank: usize, dot: (f64, f64), chars: usize) -> (f64, f64, &'static str) {
    let (dot_x, dot_y) = dot;
    let width = LABEL_CHAR_PX * chars as f64;
    let fits_right = dot_x + 7.0 + width <= panel.right;
    let (x, y, anchor) = match (panel.y, rank) {
        (YScale::Cdf, 0) if dot_x - 7.0 - width >= panel.left => (dot_x - 7.0, dot_y - 6.0, "end"),
        (YScale::Cdf, 0) => (dot_x + 7.0, dot_y - 21.0, "start"),
        (YScale::Cdf, nth) => (dot_x + 7.0, dot_y - 6.0 + 15.0 * (nth - 1) as f64, "start"),
        (YScale::Tail, 0) => (dot_x + 7.0, dot_y - 8.0, "start"),
        (YScale::Tail, nth) => (dot_x + 7.0, dot_y + 4.0 + 15.0 * nth as f64, "start"),
    };
    match (anchor, fits_right) {
        ("start", false) => (dot_x - 7.0, y, "end"),
        _ => (x, y, anchor),
    }
}
