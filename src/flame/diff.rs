//! The differential flame graph of `diff`: inferno's differential mode (frames sized by the
//! hooked profile; each frame's own time compared with the base's, normalised to the same
//! total), drawn the way a person reads it. Frames carry the flame graph's labels (a BPF
//! program without its tag, a kernel frame without `_[k]`), a frame whose name the base never
//! has is marked `(new)`, and the colours are this module's: red for more, blue for less,
//! deeper for a bigger change, grey for little or none ([`super::diff_colour`]).

use super::diff_colour::recolour;
use super::NEW;
use crate::profile::folded::{bare, sanitize};
use crate::profile::stacks::Stacks;
use anyhow::{Context, Result};
use inferno::{differential, flamegraph};
use std::collections::{HashMap, HashSet};
use std::io::Write;

/// The key under the title.
const SUBTITLE: &str = "width: hooked profile; own time against the base at equal totals: red more, blue less, deeper for more; grey: about the same";

/// Render the differential graph of `base` → `hooked` into `out`; their stacks are written as
/// text here, for inferno. Counts that add up past 2^64 in either are an error (inferno would
/// add them unchecked).
pub fn render_diff(
    base: &Stacks,
    hooked: &Stacks,
    title: &str,
    count_name: &str,
    mut out: impl Write,
) -> Result<()> {
    let shift = scale([base, hooked])?;
    let labels = super::shared_labels(&[base, hooked]);
    let (base, hooked) = (
        Folded::of(base, &labels, shift),
        Folded::of(hooked, &labels, shift),
    );
    let hooked = hooked.marked_new(&base.labels);
    let mut lines = Vec::new();
    let opts = differential::Options {
        normalize: true,
        strip_hex: false,
    };
    differential::from_readers(opts, base.text.as_bytes(), hooked.as_bytes(), &mut lines)
        .context("cannot merge the two profiles")?;
    let text = String::from_utf8_lossy(&lines);
    let clean = sanitize(&text);
    let mut options = flamegraph::Options::default();
    options.title = super::fit_title(&sanitize(title));
    options.subtitle = Some(super::cut_right(SUBTITLE, super::SUBTITLE_CHARS));
    options.count_name = count_name.to_string();
    options.deterministic = true;
    options.text_truncate_direction = flamegraph::TextTruncateDirection::Right;
    let mut svg = Vec::new();
    flamegraph::from_lines(&mut options, clean.lines(), &mut svg)
        .context("cannot render the differential flame graph")?;
    out.write_all(recolour(&String::from_utf8_lossy(&svg)).as_bytes())
        .context("cannot write the differential flame graph")
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

/// One profile's stacks as labelled lines, and every label it uses.
struct Folded {
    /// Each stack: its labels root first, and its count.
    stacks: Vec<(Vec<String>, u64)>,
    labels: HashSet<String>,
    text: String,
}

impl Folded {
    /// The stacks of `profile` under their `labels`, counts shifted right by `shift`.
    fn of(profile: &Stacks, labels: &HashMap<String, String>, shift: u32) -> Folded {
        let mut folded = Folded {
            stacks: Vec::new(),
            labels: HashSet::new(),
            text: String::new(),
        };
        for stack in &profile.stacks {
            let names: Vec<String> = profile
                .frames_of(stack)
                .into_iter()
                .map(|frame| {
                    let name = sanitize(&frame.name);
                    labels
                        .get(name.as_ref())
                        .cloned()
                        .unwrap_or(name.into_owned())
                })
                .collect();
            folded.labels.extend(names.iter().cloned());
            push_line(&mut folded.text, &names.join(";"), stack.count >> shift);
            folded.stacks.push((names, stack.count >> shift));
        }
        folded
    }

    /// The text of these stacks with every frame whose label `base` never uses marked
    /// [`NEW`]: only a frame the base has nowhere, not one the base has under other callers.
    fn marked_new(&self, base: &HashSet<String>) -> String {
        let mut out = String::new();
        for (names, count) in &self.stacks {
            let marked: Vec<String> = names
                .iter()
                .map(|name| match base.contains(name) {
                    true => name.clone(),
                    false => with_new(name),
                })
                .collect();
            push_line(&mut out, &marked.join(";"), *count);
        }
        out
    }
}

/// `label` with [`NEW`] after its name and before an annotation such as `_[k]`, which inferno
/// takes off for display.
fn with_new(label: &str) -> String {
    let name = bare(label);
    format!("{name}{NEW}{}", &label[name.len()..])
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

    fn diff_svg(base: &str, hooked: &str) -> String {
        let [base, hooked] = [base, hooked].map(|text| Stacks::parse(text).unwrap());
        let mut svg = Vec::new();
        render_diff(&base, &hooked, "t", "samples", &mut svg).unwrap();
        String::from_utf8(svg).unwrap()
    }

    #[test]
    fn differential_svg_names_frames_as_the_flame_does() {
        let base = "b;sys_[k];open_[k] 60\nb;sys_[k];close_[k] 40\n";
        let hooked = "b;sys_[k];open_[k] 60\nb;sys_[k];close_[k] 40\nb;sys_[k];trace_call_bpf_[k];bpf_prog_0123456789abcdef_hook 100\n";
        let svg = diff_svg(base, hooked);
        assert!(svg.contains("<title>hook (new) (100 samples"), "no tag");
        assert!(svg.contains("<title>trace_call_bpf (new) (100"), "no _[k]");
        assert!(!svg.contains("_[k]") && !svg.contains("0123456789abcdef"));
        assert!(!svg.contains("open (new)"), "open is in the base");
        assert!(svg.contains("+50.00%"), "the hook's delta is shown");
        assert!(
            svg.contains("truncate_text_right = true"),
            "labels cut from the right"
        );
    }

    /// Only a frame the base has nowhere is new: one the base has under other callers is not.
    #[test]
    fn only_frames_absent_from_the_base_are_new() {
        let labels = HashMap::new();
        let [base, hooked] =
            ["a;b 1\n", "a;b;c 2\na;x;b 1\nk_[k] 1\n"].map(|text| Stacks::parse(text).unwrap());
        let base = Folded::of(&base, &labels, 0);
        let marked = Folded::of(&hooked, &labels, 0).marked_new(&base.labels);
        assert_eq!(marked, "a;b;c (new) 2\na;x (new);b 1\nk (new)_[k] 1\n");
    }
}
