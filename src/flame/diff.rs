//! The differential flame graph of `diff`: inferno's differential mode (frames sized by the
//! hooked profile, red where it spends more than the base normalised to the same total, blue
//! where less), with frames that the base profile does not have at all marked `(new)`: a
//! whole new BPF subtree is otherwise drawn in the palest red, as if it changed little.

use crate::profile::folded::sanitize;
use crate::profile::stacks::Stacks;
use anyhow::{Context, Result};
use inferno::{differential, flamegraph};
use std::collections::HashSet;
use std::io::Write;

/// The label appended to a frame the base profile has nowhere on that path.
pub(crate) const NEW: &str = " (new)";

/// Render the differential graph of `base` → `hooked` into `out`; their stacks are written as
/// text here, for inferno. Counts that add up past 2^64 in either are an error (inferno would
/// add them unchecked).
pub fn render_diff(
    base: &Stacks,
    hooked: &Stacks,
    title: &str,
    count_name: &str,
    out: impl Write,
) -> Result<()> {
    let shift = scale([base, hooked])?;
    let (base, hooked) = mark_new(base, hooked, shift);
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

/// The shift that brings both totals (each checked) below [`COUNT_LIMIT`] together.
fn scale(profiles: [&Stacks; 2]) -> Result<u32> {
    let mut max = 0;
    for stacks in profiles {
        max = max.max(stacks.checked_total().map_err(anyhow::Error::msg)?);
    }
    Ok((u64::BITS - max.leading_zeros()).saturating_sub(COUNT_LIMIT.trailing_zeros()))
}

/// The folded text of the base, and of the hooked stacks with every frame whose path (root to
/// that frame) the base never has labelled [`NEW`]; counts shifted right by `shift`.
fn mark_new(base: &Stacks, hooked: &Stacks, shift: u32) -> (String, String) {
    let mut seen: HashSet<String> = HashSet::new();
    let mut base_text = String::new();
    for stack in &base.stacks {
        let mut path = String::new();
        let names: Vec<&str> = base
            .frames_of(stack)
            .into_iter()
            .map(|frame| frame.name.as_str())
            .collect();
        for name in &names {
            path.push(';');
            path.push_str(name);
            seen.insert(path.clone());
        }
        push_line(&mut base_text, &names.join(";"), stack.count >> shift);
    }
    let mut out = String::new();
    for stack in &hooked.stacks {
        let mut path = String::new();
        let mut new = false;
        let frames: Vec<String> = hooked
            .frames_of(stack)
            .into_iter()
            .map(|frame| {
                path.push(';');
                path.push_str(&frame.name);
                new = new || !seen.contains(&path);
                match new {
                    true => format!("{}{NEW}", frame.name),
                    false => frame.name.clone(),
                }
            })
            .collect();
        push_line(&mut out, &frames.join(";"), stack.count >> shift);
    }
    (base_text, out)
}

fn push_line(out: &mut String, stack: &str, count: u64) {
    out.push_str(stack);
    out.push(' ');
    out.push_str(&count.to_string());
    out.push('\n');
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn differential_svg_marks_the_hook_as_grown_and_new() {
        let base = "b;sys_[k];open_[k] 60\nb;sys_[k];close_[k] 40\n";
        let hooked = "b;sys_[k];open_[k] 60\nb;sys_[k];close_[k] 40\nb;sys_[k];trace_call_bpf_[k];bpf_prog_0123456789abcdef_hook 100\n";
        let mut svg = Vec::new();
        let [base, hooked] = [base, hooked].map(|text| Stacks::parse(text).unwrap());
        render_diff(&base, &hooked, "t", "samples", &mut svg).unwrap();
        let svg = String::from_utf8(svg).unwrap();
        assert!(svg.contains("bpf_prog_0123456789abcdef_hook (new)"));
        assert!(svg.contains("trace_call_bpf_[k] (new)"));
        assert!(!svg.contains("open_[k] (new)"), "open is in the base");
        assert!(svg.contains("+50.00%"), "the hook's delta is shown");
    }

    #[test]
    fn only_the_first_new_frame_and_those_below_are_marked() {
        let [base, hooked] =
            ["a;b 1\n", "a;b;c 2\na;x;b 1\n"].map(|text| Stacks::parse(text).unwrap());
        let (_, h) = mark_new(&base, &hooked, 0);
        assert_eq!(h, "a;b;c (new) 2\na;x (new);b (new) 1\n");
    }
}
