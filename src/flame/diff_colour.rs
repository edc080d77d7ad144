//! The colours of the differential flame graph. Inferno colours a frame by how its own time
//! moved, scaled to the largest move, from white: every frame that moved a little is drawn a
//! near-white pastel, and a reader cannot tell more from less. Here, as in Brendan Gregg's
//! differential flame graphs, red is more and blue is less with depth by size, but from a
//! floor a person can see: a frame that moved is at least a clear pink or light blue, and a
//! frame that moved under [`UNCHANGED_SHARE`] of the largest move is grey. A frame the base has
//! nowhere is red at least at the floor, even when its own time is small. The move is read
//! back from each frame's tooltip, which inferno writes as `name (count unit, share%; ±move%)`.

use super::NEW;
use inferno::flamegraph::color::Color;

/// Moves under this share of the largest are drawn as no change.
const UNCHANGED_SHARE: f64 = 0.05;
/// The colour of a frame whose own time did not move (or hardly).
pub(super) const GREY: Color = Color {
    r: 214,
    g: 214,
    b: 214,
};
/// Red from the smallest visible move to the largest.
const RED: [Color; 2] = [
    Color {
        r: 250,
        g: 170,
        b: 160,
    },
    Color {
        r: 215,
        g: 40,
        b: 30,
    },
];
/// Blue from the smallest visible move to the largest.
const BLUE: [Color; 2] = [
    Color {
        r: 170,
        g: 188,
        b: 250,
    },
    Color {
        r: 45,
        g: 85,
        b: 215,
    },
];

/// How one frame's own time moved, read from its tooltip.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Move {
    /// The move in percentage points of the total, signed.
    points: f64,
    /// Whether the frame is marked [`NEW`].
    new: bool,
}

/// The move in a tooltip `name (count unit, share%; ±move%)`; `None` for the root's, which has
/// no move.
fn move_of(tooltip: &str) -> Option<Move> {
    let figures_at = tooltip.rfind(" (")?;
    let (name, figures) = tooltip.split_at(figures_at);
    let (_, moved) = figures.rsplit_once("; ")?;
    let points = moved.strip_suffix("%)")?.parse::<f64>().ok()?;
    Some(Move {
        points,
        new: name.ends_with(NEW),
    })
}

/// The colour of a frame that moved by `moved` when the largest move is `largest` points.
pub(super) fn shade(points: f64, new: bool, largest: f64) -> Color {
    let share = match largest > 0.0 {
        true => (points.abs() / largest).min(1.0),
        false => 0.0,
    };
    if share < UNCHANGED_SHARE {
        return if new { RED[0] } else { GREY };
    }
    let depth = (share - UNCHANGED_SHARE) / (1.0 - UNCHANGED_SHARE);
    let [light, deep] = if points > 0.0 { RED } else { BLUE };
    let mix = |from: u8, to: u8| {
        (f64::from(from) + (f64::from(to) - f64::from(from)) * depth).round() as u8
    };
    Color {
        r: mix(light.r, deep.r),
        g: mix(light.g, deep.g),
        b: mix(light.b, deep.b),
    }
}

/// Each frame of an inferno SVG: where its tooltip text is and where its `fill` value is.
fn frames(svg: &str) -> Vec<(std::ops::Range<usize>, std::ops::Range<usize>)> {
    const TITLE: &str = "<g><title>";
    const FILL: &str = " fill=\"";
    let mut found = Vec::new();
    let mut at = 0;
    while let Some(start) = svg[at..].find(TITLE).map(|i| at + i + TITLE.len()) {
        let Some(end) = svg[start..].find("</title>").map(|i| start + i) else {
            break;
        };
        let rect_end = svg[end..].find("/>").map_or(svg.len(), |i| end + i);
        let fill = svg[end..rect_end].find(FILL).map(|i| end + i + FILL.len());
        if let Some(fill_start) = fill {
            let fill_end = svg[fill_start..]
                .find('"')
                .map_or(rect_end, |i| fill_start + i);
            found.push((start..end, fill_start..fill_end));
        }
        at = rect_end;
    }
    found
}

/// The SVG with every frame's fill set by [`shade`] from its tooltip's move.
pub(super) fn recolour(svg: &str) -> String {
    let frames = frames(svg);
    let moves: Vec<Option<Move>> = frames
        .iter()
        .map(|(tooltip, _)| move_of(&svg[tooltip.clone()]))
        .collect();
    let largest = moves
        .iter()
        .flatten()
        .map(|m| m.points.abs())
        .fold(0.0, f64::max);
    let mut out = String::with_capacity(svg.len());
    let mut copied = 0;
    for ((_, fill), moved) in frames.iter().zip(&moves) {
        let Some(moved) = moved else { continue };
        let colour = shade(moved.points, moved.new, largest);
        out.push_str(&svg[copied..fill.start]);
        out.push_str(&format!("rgb({},{},{})", colour.r, colour.g, colour.b));
        copied = fill.end;
    }
    out.push_str(&svg[copied..]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tooltips_give_the_move() {
        let cases = [
            ("open (1,000 ns, 0.33%; +0.33%)", Some((0.33, false))),
            ("f (x) (new) (5 ns, 1.00%; 0.00%)", Some((0.0, true))),
            ("close (7 samples, 2.00%; -1.25%)", Some((-1.25, false))),
            ("all (1,000 ns, 100%)", None),
        ];
        for (tooltip, want) in cases {
            let got = move_of(tooltip).map(|m| (m.points, m.new));
            assert_eq!(got, want, "{tooltip}");
        }
    }

    /// Red more, blue less, deeper for more; a small move still far from white; no move grey.
    #[test]
    fn shades_tell_more_from_less_and_grow_with_the_move() {
        let far_from_white = |c: Color| c.r.min(c.g).min(c.b) <= 190;
        let small_more = shade(0.5, false, 10.0);
        let big_more = shade(10.0, false, 10.0);
        let small_less = shade(-0.5, false, 10.0);
        let big_less = shade(-8.0, false, 10.0);
        for (what, c) in [("small more", small_more), ("small less", small_less)] {
            assert!(far_from_white(c), "{what}: {c:?}");
        }
        assert!(small_more.r > small_more.b + 60 && big_more.r > big_more.b + 150);
        assert!(small_less.b > small_less.r + 60 && big_less.b > big_less.r + 100);
        assert!(big_more.g < small_more.g, "deeper for more: {big_more:?}");
        assert!(big_less.r < small_less.r, "deeper for more: {big_less:?}");
        assert_eq!(shade(0.2, false, 10.0), GREY, "under 5% of the largest");
        assert_eq!(shade(0.0, true, 10.0), RED[0], "a new frame is never grey");
        assert_eq!(shade(0.0, false, 0.0), GREY, "two equal profiles");
    }
}
