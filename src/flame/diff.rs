//! The differential flame graph of `diff`: inferno's differential mode (frames sized by the
//! hooked profile, red where it spends more than the base normalised to the same total, blue
//! where less), with frames that the base profile does not have at all marked `(new)`: a
//! whole new BPF subtree is otherwise drawn in the palest red, as if it changed little.

use crate::profile::folded::{parse_line, sanitize};
use anyhow::{Context, Result};
use inferno::{differential, flamegraph};
use std::collections::HashSet;
use std::io::Write;

/// The label appended to a frame the base profile has nowhere on that path.
pub(crate) const NEW: &str = " (new)";

/// Render the differential graph of `base` → `hooked` (folded texts) into `out`. Only the
/// lines that are folded stacks go to inferno (the loader warns about the others as skipped;
/// inferno's merge would count some, a count with no stack say); counts that add up past 2^64
/// in either are an error (inferno would add them unchecked).
pub fn render_diff(
    base: &str,
    hooked: &str,
    title: &str,
    count_name: &str,
    out: impl Write,
) -> Result<()> {
    let [base, hooked] = stacks_for_inferno([base, hooked])?;
    let (base, hooked) = mark_new(&base, &hooked);
    let mut lines = Vec::new();
    let opts = differential::Options {
        normalize: true,
        strip_hex: false,
    };
    differential::from_readers(opts, base.as_bytes(), hooked.as_bytes(), &mut lines)
        .context("cannot merge the two profiles")?;
    let text = String::from_utf8_lossy(&lines);
    let clean = sanitize(&text);
    let mut options = flamegraph::Options::default();
    options.title = sanitize(title).into_owned();
    options.subtitle = Some(format!(
        "width: hooked profile; red: more than in the base (normalised to the same total), blue: less;{NEW}: not in the base at all"
    ));
    options.count_name = count_name.to_string();
    options.deterministic = true;
    flamegraph::from_lines(&mut options, clean.lines(), out)
        .context("cannot render the differential flame graph")
}

/// A frame's count difference goes through inferno's colour arithmetic multiplied by 150 in an
/// `isize`: profiles whose total is above this (2^52 ns is 52 days of CPU time) are scaled down
/// by a power of two first, which keeps every share.
const COUNT_LIMIT: u64 = 1 << 52;

/// The folded stacks of `texts` (other lines dropped), each total checked, scaled below
/// [`COUNT_LIMIT`] together.
fn stacks_for_inferno(texts: [&str; 2]) -> Result<[String; 2]> {
    use crate::profile::folded::{checked_total, Folded};
    let mut max = 0;
    for text in texts {
        max = max.max(checked_total(text).map_err(anyhow::Error::msg)?);
    }
    let mut parsed = texts.map(Folded::parse);
    let shift = (u64::BITS - max.leading_zeros()).saturating_sub(COUNT_LIMIT.trailing_zeros());
    for folded in &mut parsed {
        folded.stacks.iter_mut().for_each(|s| s.count >>= shift);
    }
    Ok(parsed.map(|folded| folded.to_text()))
}

/// The hooked stacks with every frame whose path (root to that frame) the base never has
/// labelled [`NEW`], and the base as it is.
fn mark_new(base: &str, hooked: &str) -> (String, String) {
    let mut seen: HashSet<String> = HashSet::new();
    for stack in base.lines().filter_map(parse_line) {
        let mut path = String::new();
        for frame in &stack.frames {
            path.push(';');
            path.push_str(frame);
            seen.insert(path.clone());
        }
    }
    let mut out = String::with_capacity(hooked.len());
    for stack in hooked.lines().filter_map(parse_line) {
        let mut path = String::new();
        let mut new = false;
        let frames: Vec<String> = stack
            .frames
            .iter()
            .map(|frame| {
                path.push(';');
                path.push_str(frame);
                new = new || !seen.contains(&path);
                if new {
                    format!("{frame}{NEW}")
                } else {
                    frame.clone()
                }
            })
            .collect();
        out.push_str(&frames.join(";"));
        out.push_str(&format!(" {}\n", stack.count));
    }
    (base.to_string(), out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn differential_svg_marks_the_hook_as_grown_and_new() {
        let base = "b;sys_[k];open_[k] 60\nb;sys_[k];close_[k] 40\n";
        let hooked = "b;sys_[k];open_[k] 60\nb;sys_[k];close_[k] 40\nb;sys_[k];trace_call_bpf_[k];bpf_prog_0123456789abcdef_hook 100\n";
        let mut svg = Vec::new();
        render_diff(base, hooked, "t", "samples", &mut svg).unwrap();
        let svg = String::from_utf8(svg).unwrap();
        assert!(svg.contains("bpf_prog_0123456789abcdef_hook (new)"));
        assert!(svg.contains("trace_call_bpf_[k] (new)"));
        assert!(!svg.contains("open_[k] (new)"), "open is in the base");
        assert!(svg.contains("+50.00%"), "the hook's delta is shown");
    }

    #[test]
    fn only_the_first_new_frame_and_those_below_are_marked() {
        let (_, h) = mark_new("a;b 1\n", "a;b;c 2\na;x;b 1\n");
        assert_eq!(h, "a;b;c (new) 2\na;x (new);b (new) 1\n");
    }
}
