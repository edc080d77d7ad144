//! Rendering folded stacks into a flame graph with inferno, BPF frames in a colour of their own.
//!
//! Colours: BPF programs, their sub-functions, trampolines and dispatchers are blue-violet;
//! kernel frames (inferno's `_[k]` annotation) take the classic warm palette; user-space and
//! unannotated frames are green. Every frame's colour is fixed up front in a palette map, so the
//! picture is the same every time for the same input.

mod diff;
mod diff_colour;
pub mod export;
pub mod lines;

pub use diff::render_diff;

use crate::profile::folded::{bare, sanitize};
use crate::profile::frames::{kind, Kind};
use crate::profile::stacks::Stacks;
use anyhow::{Context, Result};
use inferno::flamegraph::color::{BasicPalette, Color, Palette, PaletteMap};
use inferno::flamegraph::{self, Options};
use std::borrow::Cow;
use std::collections::{HashMap, HashSet};
use std::io::Write;

/// The label the differential graph appends to a frame the base profile has nowhere.
const NEW: &str = " (new)";

/// The colour key, for subtitles.
pub(crate) const LEGEND: &str = "blue-violet: BPF, warm: kernel, green: user space";

/// The most characters of a title that stay clear of "Reset Zoom" and "Search" in a window
/// 1000 px wide (the title is 17 px Verdana, centred; `scripts/svg-screenshots.sh` measures it).
pub const TITLE_CHARS: usize = 72;
/// The most characters of a subtitle (12 px Verdana) that fit across a window 1000 px wide.
pub const SUBTITLE_CHARS: usize = 130;

/// `text` cut from the right to at most `chars` characters, with "…" where it was cut.
pub fn cut_right(text: &str, chars: usize) -> String {
    if text.chars().count() <= chars {
        return text.to_string();
    }
    let kept: String = text.chars().take(chars.saturating_sub(1)).collect();
    format!("{}…", kept.trim_end())
}

/// A title that fits: [`cut_right`] at [`TITLE_CHARS`].
pub(crate) fn fit_title(title: &str) -> String {
    cut_right(title, TITLE_CHARS)
}

/// `items` joined by ", " into at most `chars` characters: as many as fit whole, then "+N more";
/// only how many there are when not even the first fits.
pub fn list_within(items: &[&str], chars: usize) -> String {
    let mut shown = String::new();
    for (index, item) in items.iter().enumerate() {
        let rest = items.len() - index - 1;
        let more = match rest {
            0 => String::new(),
            _ => format!(", +{rest} more"),
        };
        let separator = if index == 0 { "" } else { ", " };
        let next = format!("{shown}{separator}{item}");
        if next.chars().count() + more.chars().count() > chars {
            let left = items.len() - index;
            return match index {
                0 => items.len().to_string(),
                _ => format!("{shown}, +{left} more"),
            };
        }
        shown = next;
    }
    shown
}

fn hash(text: &str) -> u32 {
    text.bytes().fold(2166136261u32, |acc, byte| {
        (acc ^ u32::from(byte)).wrapping_mul(16777619)
    })
}

/// The colour of a frame: a hue for its kind, a shade from its name.
pub fn colour(frame: &str) -> Color {
    shade(frame, kind(frame))
}

/// The colour of a frame named `frame` of kind `kind`; a source-line frame of `--lines` takes
/// the BPF hue.
fn shade(frame: &str, kind: Kind) -> Color {
    let hashed = hash(bare(frame));
    let first = (hashed & 0xff) as u8;
    let second = ((hashed >> 8) & 0xff) as u8;
    let kind = if lines::is_line_frame(frame) {
        Kind::Program
    } else {
        kind
    };
    match kind {
        Kind::Program | Kind::Glue => Color {
            r: 110 + first % 50,
            g: 80 + second % 50,
            b: 230 + first % 25,
        },
        Kind::Kernel => Color {
            r: 205 + first % 50,
            g: 80 + second % 130,
            b: 40 + first % 40,
        },
        Kind::Unresolved | Kind::Other => Color {
            r: 90 + first % 50,
            g: 190 + second % 50,
            b: 90 + first % 40,
        },
    }
}

/// Title and subtitle of the graph.
#[derive(Debug, Clone, Default)]
pub struct FlameOptions {
    pub title: String,
    pub subtitle: Option<String>,
    /// What the counts are (`ns`, `cycles`, `samples`).
    pub count_name: String,
}

/// Render stacks as an SVG into `out`: the one place they are written as text for inferno,
/// each frame under its label. Counts that add up past 2^64 are an error (inferno would add
/// them unchecked).
pub fn render(stacks: &Stacks, opts: &FlameOptions, out: impl Write) -> Result<()> {
    stacks.checked_total().map_err(anyhow::Error::msg)?;
    let labels = labels(stacks);
    let mut palette = PaletteMap::default();
    for label in labels.iter().flatten() {
        if palette.get(&label.text).is_none() {
            palette.insert(&label.text, label.colour);
        }
    }
    let text = stacks.to_text_labelled(|id, _| {
        labels[id.index()]
            .as_ref()
            .map_or("", |label| label.text.as_str())
    });
    let mut options = Options::default();
    options.colors = Palette::Basic(BasicPalette::Hot);
    options.title = fit_title(&sanitize(&opts.title));
    options.subtitle = opts
        .subtitle
        .as_deref()
        .map(|s| cut_right(&sanitize(s), SUBTITLE_CHARS));
    options.text_truncate_direction = flamegraph::TextTruncateDirection::Right;
    options.count_name = if opts.count_name.is_empty() {
        "samples".into()
    } else {
        opts.count_name.clone()
    };
    options.deterministic = true;
    options.palette_map = Some(&mut palette);
    flamegraph::from_lines(&mut options, text.lines(), out).context("cannot render the flame graph")
}

/// What a frame is drawn as.
struct Label {
    /// Its text, without the characters XML cannot hold.
    text: String,
    colour: Color,
}

/// For each frame of the table that a stack uses, by id, what it is drawn as.
fn labels(stacks: &Stacks) -> Vec<Option<Label>> {
    let mut used: Vec<Option<(Cow<'_, str>, Kind)>> = Vec::new();
    for stack in &stacks.stacks {
        for &id in &stack.frames {
            if used.len() <= id.index() {
                used.resize(id.index() + 1, None);
            }
            if used[id.index()].is_none() {
                let frame = stacks.frame(id);
                used[id.index()] = Some((sanitize(&frame.name), frame.kind));
            }
        }
    }
    let short = short_labels(
        used.iter()
            .flatten()
            .map(|(name, kind)| (name.as_ref(), *kind)),
    );
    used.into_iter()
        .map(|frame| {
            let (name, kind) = frame?;
            Some(Label {
                text: short
                    .get(name.as_ref())
                    .cloned()
                    .unwrap_or_else(|| name.to_string()),
                colour: shade(&name, kind),
            })
        })
        .collect()
}

/// What each frame of `profiles` is drawn as, by its name: the flame graph's labels, decided
/// over all of them together so one frame is drawn alike in each (the differential graph).
/// Names with what XML cannot hold are keyed without those characters.
pub(crate) fn shared_labels(profiles: &[&Stacks]) -> HashMap<String, String> {
    let mut names: Vec<(Cow<'_, str>, Kind)> = Vec::new();
    let mut seen = HashSet::new();
    for stacks in profiles {
        for stack in &stacks.stacks {
            for frame in stacks.frames_of(stack) {
                if seen.insert(frame.name.as_str()) {
                    names.push((sanitize(&frame.name), frame.kind));
                }
            }
        }
    }
    let short = short_labels(names.iter().map(|(name, kind)| (name.as_ref(), *kind)));
    names
        .into_iter()
        .map(|(name, _)| {
            let label = short.get(name.as_ref()).cloned();
            let name = name.into_owned();
            (name.clone(), label.unwrap_or(name))
        })
        .collect()
}

/// Labels for BPF program frames: `bpf_prog_<tag>_<name>` drawn as `<name>` when no other
/// program of that name (another tag) is in the profile — the 16 hex digits add nothing then,
/// and a program's colour already says what it is. Other frames keep their names (a kernel
/// frame nobody could name is already `[unknown]_[k]` in the profile, drawn as `[unknown]`). From and to names with what XML cannot hold dropped, each with its kind.
fn short_labels<'f>(frames: impl Iterator<Item = (&'f str, Kind)>) -> HashMap<String, String> {
    let mut tags: HashMap<String, HashSet<String>> = HashMap::new();
    let mut programs: HashMap<String, String> = HashMap::new();
    for (name, kind) in frames {
        let bare_name = bare(name);
        if kind != Kind::Program {
            continue;
        }
        if let Some(symbol) = crate::host::kallsyms::ProgSymbol::parse(bare_name) {
            let program = symbol.name.to_string();
            tags.entry(program.clone())
                .or_default()
                .insert(symbol.tag.to_string());
            programs.insert(name.to_string(), program);
        }
    }
    programs
        .into_iter()
        .filter(|(_, program)| tags.get(program).is_some_and(|t| t.len() == 1))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::stacks::Frame;

    fn labels_of(folded: &str) -> HashMap<String, String> {
        let parsed = Stacks::parse(folded).unwrap();
        let frames: Vec<&Frame> = parsed
            .stacks
            .iter()
            .flat_map(|stack| parsed.frames_of(stack))
            .collect();
        short_labels(frames.iter().map(|frame| (frame.name.as_str(), frame.kind)))
    }

    #[test]
    fn program_labels_drop_the_tag_unless_two_programs_share_a_name() {
        let folded = "b;trace_call_bpf_[k];bpf_prog_0123456789abcdef_hook 5\n\
                      b;trace_call_bpf_[k];bpf_prog_1111111111111111_twin 2\n\
                      b;trace_call_bpf_[k];bpf_prog_2222222222222222_twin 3\n";
        let parsed = Stacks::parse(folded).unwrap();
        let l = labels_of(folded);
        assert_eq!(
            l.get("bpf_prog_0123456789abcdef_hook").map(String::as_str),
            Some("hook")
        );
        assert!(!l.contains_key("bpf_prog_1111111111111111_twin"), "{l:?}");
        let mut svg = Vec::new();
        render(&parsed, &FlameOptions::default(), &mut svg).unwrap();
        let svg = String::from_utf8(svg).unwrap();
        assert!(
            svg.contains(">hook<") || svg.contains("hook ("),
            "{}",
            &svg[..400]
        );
        assert!(svg.contains("bpf_prog_2222222222222222_twin"));
        let parsed = Stacks::parse("b;[[kernel.kallsyms]]_[k];bpf_prog_0123456789abcdef_hook 5\n");
        let names: Vec<String> = parsed
            .unwrap()
            .to_text()
            .lines()
            .map(String::from)
            .collect();
        assert_eq!(
            names,
            ["b;[unknown]_[k];bpf_prog_0123456789abcdef_hook 5"],
            "an unnamed kernel frame is drawn as perf prints it"
        );
    }

    #[test]
    fn bpf_colour_is_distinct_from_kernel_and_user() {
        let bpf = colour("bpf_prog_0123456789abcdef_x");
        let k = colour("do_syscall_64_[k]");
        let u = colour("main");
        assert!(bpf.b > bpf.r && bpf.b > bpf.g, "{bpf:?}");
        assert!(k.r > k.b, "{k:?}");
        assert!(u.g > u.r && u.g > u.b, "{u:?}");
    }

    #[test]
    fn hostile_names_give_a_valid_inert_svg() {
        let folded =
            "bench;<script>alert(1)</script>_[k];a\x1b[31m&b 5\nbench;do_syscall_64_[k] 3\n";
        let mut out = Vec::new();
        render(
            &Stacks::parse(folded).unwrap(),
            &FlameOptions {
                title: "t <x>".into(),
                ..Default::default()
            },
            &mut out,
        )
        .unwrap();
        let svg = String::from_utf8(out).unwrap();
        assert!(!svg.contains("<script>alert"), "frame name must be escaped");
        assert!(!svg.contains('\x1b'));
        assert!(svg.contains("&lt;script&gt;alert(1)&lt;/script&gt;"));
        assert!(svg.contains("do_syscall_64"));
    }

    /// A label too long for its frame keeps its start ("htab_ma.."), the subtitle's list of
    /// programs ends in "+N more" within its width, and a long title is cut before "Search".
    #[test]
    fn labels_are_cut_from_the_right_and_headings_fit() {
        let folded =
            "bench;do_syscall_64_[k];htab_map_hash_[k] 12\nbench;do_syscall_64_[k];x 200\n";
        let programs: Vec<String> = (0..20)
            .map(|n| format!("path_check_callback_{n}"))
            .collect();
        let names: Vec<&str> = programs.iter().map(String::as_str).collect();
        let list = list_within(&names, 80);
        assert!(
            list.chars().count() <= 80 && list.ends_with(" more"),
            "{list}"
        );
        assert!(
            list.starts_with("path_check_callback_0, path_check_callback_1, "),
            "{list}"
        );
        assert_eq!(list_within(&["a", "b"], 80), "a, b");
        assert_eq!(list_within(&names, 12), "20");
        let mut svg = Vec::new();
        let opts = FlameOptions {
            title: "cpu-clock:k on Linux 6.18.44-fc-v1098 — ebpf-prof bench --path /etc/hostname -n 100000".into(),
            subtitle: Some(format!("programs: {}", names.join(", "))),
            count_name: "ns".into(),
        };
        render(&Stacks::parse(folded).unwrap(), &opts, &mut svg).unwrap();
        let svg = String::from_utf8(svg).unwrap();
        assert!(svg.contains("truncate_text_right = true"));
        let heading = |id: &str| {
            let at = svg.find(&format!("<text id=\"{id}\"")).unwrap();
            let text = &svg[at..];
            text[text.find('>').unwrap() + 1..text.find("</text>").unwrap()].to_string()
        };
        let (title, subtitle) = (heading("title"), heading("subtitle"));
        assert!(
            title.chars().count() <= TITLE_CHARS && title.ends_with('…'),
            "{title}"
        );
        assert!(subtitle.chars().count() <= SUBTITLE_CHARS, "{subtitle}");
        // Inferno cuts from the right when it writes the SVG; its script cuts again as the
        // window changes, from the side `truncate_text_right` names.
        let cut = svg
            .split("<text ")
            .filter_map(|text| text.split('>').nth(1))
            .find(|text| text.ends_with("..</text"));
        assert!(cut.is_some_and(|text| text.starts_with("htab_")), "{cut:?}");
    }
}
