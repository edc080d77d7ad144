//! Tests of the plotter: both plots (the CDFs and the sweep) are well-formed XML with their text
//! escaped (held by a small checker, itself tested), markers sit on their values, long curves
//! are downsampled, and the sweep marks its cliff.
use super::*;

/// A small XML well-formedness check: balanced, properly nested tags, one root, quoted
/// attributes, and no bare `<` or `&` in text or attribute values.
fn check_xml(doc: &str) -> Result<(), String> {
    let mut stack: Vec<&str> = Vec::new();
    let mut roots = 0;
    let mut rest = doc.trim_start();
    if let Some(r) = rest.strip_prefix("<?xml") {
        rest = &r[r.find("?>").ok_or("unterminated declaration")? + 2..];
    }
    while let Some(open) = rest.find('<') {
        check_text(&rest[..open])?;
        let close = tag_end(&rest[open..]).ok_or("unterminated tag")? + open;
        let tag = &rest[open + 1..close];
        if let Some(name) = tag.strip_prefix('/') {
            let top = stack
                .pop()
                .ok_or(format!("</{name}> without an open tag"))?;
            if top != name.trim() {
                return Err(format!("<{top}> closed by </{name}>"));
            }
        } else {
            let self_closing = tag.ends_with('/');
            let body = tag.trim_end_matches('/');
            let name = body.split_whitespace().next().ok_or("empty tag")?;
            check_attributes(&body[name.len()..])?;
            if stack.is_empty() {
                roots += 1;
            }
            if !self_closing {
                stack.push(name);
            }
        }
        rest = &rest[close + 1..];
    }
    check_text(rest)?;
    match (stack.last(), roots) {
        (Some(open), _) => Err(format!("<{open}> never closed")),
        (None, 1) => Ok(()),
        (None, n) => Err(format!("{n} root elements")),
    }
}

/// The index of the `>` closing the tag that starts `s`, skipping quoted values.
fn tag_end(s: &str) -> Option<usize> {
    let mut quote = None;
    for (i, c) in s.char_indices() {
        match (quote, c) {
            (None, '"' | '\'') => quote = Some(c),
            (Some(q), c) if c == q => quote = None,
            (None, '>') => return Some(i),
            _ => {}
        }
    }
    None
}

fn check_attributes(mut s: &str) -> Result<(), String> {
    loop {
        s = s.trim_start();
        if s.is_empty() {
            return Ok(());
        }
        let eq = s.find('=').ok_or(format!("attribute without value: {s}"))?;
        let name = s[..eq].trim();
        if name.is_empty() || name.contains(char::is_whitespace) {
            return Err(format!("bad attribute name {name:?}"));
        }
        let after = s[eq + 1..].trim_start();
        let q = after
            .chars()
            .next()
            .filter(|c| *c == '"' || *c == '\'')
            .ok_or("unquoted attribute")?;
        let end = after[1..].find(q).ok_or("unterminated attribute")? + 1;
        check_text(&after[1..end])?;
        s = &after[end + 1..];
    }
}

fn check_text(t: &str) -> Result<(), String> {
    if t.contains('<') {
        return Err(format!("bare < in {t:?}"));
    }
    for (i, _) in t.match_indices('&') {
        let ent = &t[i..t[i..].find(';').map_or(t.len(), |e| i + e + 1)];
        let ok =
            matches!(ent, "&amp;" | "&lt;" | "&gt;" | "&quot;" | "&apos;") || ent.starts_with("&#");
        if !ok {
            return Err(format!("bad entity {ent:?}"));
        }
    }
    Ok(())
}

#[test]
fn the_checker_rejects_what_it_should() {
    let cases = [
        ("<a><b/></a>", true),
        (
            "<?xml version=\"1.0\"?>\n<a x=\"1 &lt; 2\">t &amp; u</a>",
            true,
        ),
        ("<a><b></a>", false),
        ("<a>x < y</a>", false),
        ("<a>R&D</a>", false),
        ("<a x=1/>", false),
        ("<a/><b/>", false),
        ("<a>", false),
    ];
    for (doc, ok) in cases {
        assert_eq!(check_xml(doc).is_ok(), ok, "{doc}: {:?}", check_xml(doc));
    }
}

fn series(label: &str, samples: Vec<u64>) -> CdfSeries {
    CdfSeries {
        label: label.to_string(),
        samples,
    }
}

/// Attribute `name` of every `<circle class="{class}"` element, in document order.
fn circle_attr(svg: &str, class: &str, name: &str) -> Vec<f64> {
    let pat = format!(r#"<circle class="{class}""#);
    svg.match_indices(&pat)
        .map(|(i, _)| {
            let tag = &svg[i..i + svg[i..].find('>').unwrap_or(0)];
            let at = tag.find(&format!(" {name}=\"")).unwrap_or(0) + name.len() + 3;
            tag[at..at + tag[at..].find('"').unwrap_or(0)]
                .parse()
                .unwrap_or(f64::NAN)
        })
        .collect()
}

/// The x of the tick label reading exactly `label`.
fn tick_x(svg: &str, label: &str) -> Option<f64> {
    let end = svg.find(&format!(">{label}</text>"))?;
    let start =
        svg[..end].rfind(r#"<text class="xtick" x=""#)? + r#"<text class="xtick" x=""#.len();
    svg[start..start + svg[start..].find('"')?].parse().ok()
}

#[test]
fn p50_markers_sit_on_their_values() {
    // 1..=1000: p50 = 500 ns; 2, 4, … 2000: p50 = 1000 ns (nearest rank).
    let a = series("baseline", (1..=1000).rev().collect());
    let b = series("attached", (1..=1000).map(|x| 2 * x).collect());
    let svg = cdf_svg(&[a, b], &PlotOptions::default());
    let xs = circle_attr(&svg, "p50", "cx");
    assert_eq!(xs.len(), 2, "{svg}");
    let (at500, at1000) = (
        tick_x(&svg, "500 ns").unwrap(),
        tick_x(&svg, "1 µs").unwrap(),
    );
    assert!(
        (xs[0] - at500).abs() < 0.01,
        "p50 of 1..=1000 at {}, the 500 ns tick at {at500}",
        xs[0]
    );
    assert!(
        (xs[1] - at1000).abs() < 0.01,
        "p50 of 2..=2000 at {}, the 1 µs tick at {at1000}",
        xs[1]
    );
    // Both on the body panel's p50 line.
    let ys = circle_attr(&svg, "p50", "cy");
    assert_eq!(ys[0], ys[1]);
}

#[test]
fn output_is_well_formed_and_escaped() {
    let labels = ["base <before> & \"quoted\"", "attached 'R&D'"];
    let mut rng = crate::stats::rng::Rng::new(1);
    let mut draw = |shift: f64| -> Vec<u64> {
        (0..50_000)
            .map(|_| (1100.0 + shift + 150.0 * (-rng.uniform().ln()).powf(1.6)) as u64)
            .collect()
    };
    let all = [series(labels[0], draw(0.0)), series(labels[1], draw(200.0))];
    let opts = PlotOptions {
        title: "openat <x> & y".into(),
        legend_note: "Δp50 +200 ns [190, 210] & more".into(),
    };
    let cases: [(&str, &[CdfSeries]); 4] = [
        ("two series", &all),
        (
            "one empty series",
            &[series("empty", vec![]), series("one", vec![1500])],
        ),
        ("no series", &[]),
        ("all equal, zeros", &[series("flat", vec![0; 100])]),
    ];
    for (what, s) in cases {
        let svg = cdf_svg(s, &opts);
        assert_eq!(check_xml(&svg), Ok(()), "{what}:\n{svg}");
        assert!(
            svg.contains("openat &lt;x&gt; &amp; y") && !svg.contains("NaN"),
            "{what}"
        );
    }
    let svg = cdf_svg(&all, &opts);
    assert!(svg.contains("base &lt;before&gt; &amp; &quot;quoted&quot;"));
}

#[test]
fn curves_are_downsampled() {
    let big = series("big", (0..1_000_000).collect());
    let svg = cdf_svg(&[big], &PlotOptions::default());
    for line in svg.lines().filter(|l| l.starts_with("<polyline")) {
        let points = line.matches(',').count();
        assert!(points <= 2002, "{points} points");
    }
}

#[test]
fn sweep_plot_is_well_formed_and_marks_the_cliff() {
    let pt = |value, d: f64, full: &[&str]| SweepPoint {
        value,
        p50: Some((d, d - 20.0, d + 20.0)),
        p99: Some((2.0 * d, 1.5 * d, 2.5 * d)),
        full_maps: full.iter().map(|s| s.to_string()).collect(),
    };
    let plot = SweepPlot {
        title: "sweep <x> & y".into(),
        param: "paths".into(),
        confidence: 0.99,
        points: vec![
            pt(1, 600.0, &[]),
            pt(100, 650.0, &[]),
            pt(1000, 2200.0, &["verdict_cache"]),
        ],
    };
    let svg = sweep_svg(&plot);
    check_xml(&svg).unwrap();
    assert!(svg.contains("verdict_cache full"), "the cliff is marked");
    assert!(svg.contains("99% interval") && svg.contains("sweep &lt;x&gt; &amp; y"));
    assert!(
        svg.contains(COLORS[0]) && svg.contains(COLORS[1]),
        "the one palette"
    );
}

/// The y attribute of every element of `svg` whose line holds `marker`.
fn ys_of(svg: &str, marker: &str) -> Vec<f64> {
    svg.lines()
        .filter(|line| line.contains(marker))
        .filter_map(|line| {
            let at = line.find(" y=\"")? + 4;
            line[at..].split('"').next()?.parse().ok()
        })
        .collect()
}

/// Maps full at neighbouring points get labels on rows of their own, and a map that stays full
/// is labelled once, where it filled.
#[test]
fn sweep_full_labels_never_overlap() {
    let pt = |value, full: &[&str]| SweepPoint {
        value,
        p50: Some((100.0, 80.0, 120.0)),
        p99: Some((300.0, 200.0, 400.0)),
        full_maps: full.iter().map(|s| s.to_string()).collect(),
    };
    let plot = SweepPlot {
        title: "t".into(),
        param: "paths".into(),
        confidence: 0.99,
        points: vec![
            pt(1000, &["verdict_cache"]),
            pt(1100, &["verdict_cache", "path_seen"]),
            pt(1200, &["verdict_cache", "path_seen"]),
            pt(1300, &["verdict_cache", "path_seen", "deny_list"]),
        ],
    };
    let svg = sweep_svg(&plot);
    check_xml(&svg).unwrap();
    assert_eq!(svg.matches("verdict_cache").count(), 1, "{svg}");
    assert_eq!(svg.matches(" full</text>").count(), 3, "{svg}");
    let mut rows = ys_of(&svg, " full</text>");
    rows.sort_by(f64::total_cmp);
    rows.dedup();
    assert_eq!(rows.len(), 3, "each label on a row of its own: {rows:?}");
    assert!(
        rows.windows(2).all(|pair| pair[1] - pair[0] >= 14.0),
        "{rows:?}"
    );
}

/// The y scale is the p50's: a p99 twenty times larger is cut off, and the p50's step from
/// 100 to 900 ns spans most of the plot's height instead of a sliver of it.
#[test]
fn sweep_scale_follows_the_p50() {
    let pt = |value, d: f64| SweepPoint {
        value,
        p50: Some((d, d - 30.0, d + 30.0)),
        p99: Some((20.0 * d, 5.0 * d, 40.0 * d)),
        full_maps: Vec::new(),
    };
    let plot = SweepPlot {
        title: "t".into(),
        param: "paths".into(),
        confidence: 0.99,
        points: vec![pt(10, 100.0), pt(100, 110.0), pt(1000, 900.0)],
    };
    let svg = sweep_svg(&plot);
    check_xml(&svg).unwrap();
    let p50_line = svg
        .lines()
        .find(|line| line.starts_with("<polyline") && line.contains(COLORS[0]))
        .unwrap();
    let heights: Vec<f64> = p50_line
        .split('"')
        .nth(1)
        .unwrap()
        .split(' ')
        .map(|pair| pair.split(',').nth(1).unwrap().parse().unwrap())
        .collect();
    let step = heights[0] - heights[2];
    assert!(step > 0.6 * 390.0, "the p50 step spans {step:.0} px of 390");
    assert!(svg.contains("Δp99 (cut off: the scale is the p50's)"));
    assert!(svg.contains(r#"clip-path="url(#plot-area)""#));
}

/// Each marker label's extent, estimated at 7 px a character: (left, right, text).
fn marker_labels(svg: &str) -> Vec<(f64, f64, String)> {
    svg.lines()
        .filter(|line| line.starts_with("<text ") && line.contains("paint-order"))
        .map(|line| {
            let attr = |name: &str| {
                let at = line.find(&format!(" {name}=\"")).unwrap() + name.len() + 3;
                line[at..].split('"').next().unwrap().to_string()
            };
            let x: f64 = attr("x").parse().unwrap();
            let text = line[line.find('>').unwrap() + 1..line.find("</text>").unwrap()].to_string();
            let width = 7.0 * text.chars().count() as f64;
            match attr("text-anchor").as_str() {
                "end" => (x - width, x, text),
                _ => (x, x + width, text),
            }
        })
        .collect()
}

/// Markers at the right edge of the tail panel and the left edge of the CDF keep their labels
/// inside their panels (the tail panel ends at 880 px, the CDF starts at 70 px).
#[test]
fn marker_labels_stay_inside_their_panels() {
    let arm = |level: u64| -> Vec<u64> {
        (0..2000u64)
            .map(|i| level + (i % 97) * 3 + if i % 50 == 0 { 4000 } else { 0 })
            .collect()
    };
    let svg = cdf_svg(
        &[series("base", arm(1840)), series("treat", arm(2050))],
        &PlotOptions::default(),
    );
    check_xml(&svg).unwrap();
    let labels = marker_labels(&svg);
    assert_eq!(labels.len(), 4, "{labels:?}");
    for (left, right, text) in &labels {
        let (low, high) = if text.starts_with("p99") {
            (672.0, 880.0)
        } else {
            (70.0, 585.0)
        };
        assert!(
            *left >= low && *right <= high,
            "{text}: {left:.0}–{right:.0} px"
        );
    }
}
