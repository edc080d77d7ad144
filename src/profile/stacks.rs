//! The typed profile that `flame`, `report`, `diff` and the exports read: each distinct frame
//! once, with its kind decided when it is interned, and stacks as sequences of frame ids with
//! their weights. The loader makes it once per input: from the built-in reader's stacks, or by
//! parsing folded text (a folded file, or inferno's collapse of `perf script` text) here, the
//! one parser of folded lines. Text is made again only for inferno and for `flame --folded`.

use super::folded::bare;
use super::frames::{self, Kind};
use super::prognames::ProgramNames;
use rustc_hash::FxHashMap;

/// A frame's index in its profile's frame table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FrameId(u32);

impl FrameId {
    /// Its place in the frame table, for tables kept beside it.
    pub(crate) fn index(self) -> usize {
        self.0 as usize
    }
}

/// One distinct frame of a profile.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame {
    /// The frame as folded: `do_syscall_64_[k]`, `bpf_prog_<tag>_<name>`, `bench`.
    pub name: String,
    /// What it is, decided once from its name.
    pub kind: Kind,
}

impl Frame {
    /// The frame of `name` as every output shows it: control characters escaped (a process
    /// name with a terminal escape reaches no terminal, `\x1b[2J` is shown as text), and a `;`
    /// written as `:`, as inferno's collapser writes it in function names, so that the folded
    /// line still holds one frame per name.
    fn new(name: String) -> Frame {
        let shown = crate::out::escape_controls(&name, crate::out::Keep::Nothing);
        let name = match shown.contains(';') {
            true => shown.replace(';', ":"),
            false => shown.into_owned(),
        };
        Frame {
            kind: frames::kind(&name),
            name,
        }
    }

    /// The name without inferno's `_[k]`/`_[j]` annotation.
    pub(crate) fn bare(&self) -> &str {
        bare(&self.name)
    }

    /// The name a person reads ([`frames::display`]).
    pub(crate) fn display(&self) -> String {
        frames::display(&self.name)
    }
}

/// One stack: frame ids from the root (the command) to the leaf, and its weight.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stack {
    pub frames: Vec<FrameId>,
    pub count: u64,
}

/// A profile's stacks over its table of frames, with the number of folded lines that could
/// not be read.
#[derive(Debug, Clone, Default)]
pub struct Stacks {
    table: Vec<Frame>,
    index: FxHashMap<String, FrameId>,
    pub stacks: Vec<Stack>,
    pub skipped: usize,
}

impl Stacks {
    /// The id of the frame named `name`, interned (and classified) on first sight.
    pub(crate) fn intern(&mut self, name: &str) -> FrameId {
        let name = frames::canonical(name);
        let name = name.as_ref();
        if let Some(&id) = self.index.get(name) {
            return id;
        }
        let id = FrameId(self.table.len() as u32);
        self.table.push(Frame::new(name.to_string()));
        self.index.insert(name.to_string(), id);
        id
    }

    /// The frame of an id this profile gave out.
    pub(crate) fn frame(&self, id: FrameId) -> &Frame {
        &self.table[id.0 as usize]
    }

    /// The frames of a stack, root first.
    pub(crate) fn frames_of(&self, stack: &Stack) -> Vec<&Frame> {
        stack.frames.iter().map(|&id| self.frame(id)).collect()
    }

    /// Add a stack of frames named root first.
    pub(crate) fn push<'n>(&mut self, names: impl IntoIterator<Item = &'n str>, count: u64) {
        let frames = names.into_iter().map(|name| self.intern(name)).collect();
        self.stacks.push(Stack { frames, count });
    }

    /// The same frame table with other stacks (of ids from this table).
    pub(crate) fn with_stacks(&self, stacks: Vec<Stack>) -> Stacks {
        Stacks {
            table: self.table.clone(),
            index: self.index.clone(),
            stacks,
            skipped: self.skipped,
        }
    }

    /// A profile from a table of frame names and stacks of indices into it (root first, with
    /// their counts), as the built-in perf.data reader makes them.
    pub(crate) fn from_table(
        names: Vec<String>,
        stacks: impl IntoIterator<Item = (Vec<u32>, u64)>,
    ) -> Stacks {
        let table: Vec<Frame> = names
            .into_iter()
            .map(|name| Frame::new(frames::canonical(&name).into_owned()))
            .collect();
        let index = table
            .iter()
            .enumerate()
            .map(|(at, frame)| (frame.name.clone(), FrameId(at as u32)))
            .collect();
        let stacks = stacks
            .into_iter()
            .map(|(ids, count)| Stack {
                frames: ids.into_iter().map(FrameId).collect(),
                count,
            })
            .collect();
        Stacks {
            table,
            index,
            stacks,
            skipped: 0,
        }
    }

    /// Parse folded text (`frame;frame COUNT` lines); lines that are not folded stacks are
    /// counted in `skipped`, as inferno skips them. Counts are read as inferno reads them: a
    /// fractional part is dropped. `Err` names the line at which the counts add up past 2^64,
    /// or whose count does not fit in 64 bits (the flame graph, `report` and `diff` all sum
    /// them).
    pub fn parse(text: &str) -> Result<Stacks, String> {
        #[cfg(test)]
        PARSES.with(|parses| parses.set(parses.get() + 1));
        let mut parsed = Stacks::default();
        let mut total = 0u64;
        for (index, line) in text.lines().enumerate() {
            if line.trim().is_empty() {
                continue;
            }
            let Some((stack, count)) = split_line(line) else {
                parsed.skipped += 1;
                continue;
            };
            let count = count.map_err(|digits| too_big(index + 1, digits))?;
            total = total
                .checked_add(count)
                .ok_or_else(|| past_u64(index + 1))?;
            parsed.push(stack.split(';'), count);
        }
        Ok(parsed)
    }

    /// The sum of the counts, checked: `Err` names the stack (its line in [`Stacks::to_text`])
    /// at which they add up past 2^64.
    pub fn checked_total(&self) -> Result<u64, String> {
        let mut total = 0u64;
        for (index, stack) in self.stacks.iter().enumerate() {
            total = total
                .checked_add(stack.count)
                .ok_or_else(|| past_u64(index + 1))?;
        }
        Ok(total)
    }

    /// Total weight (saturating: the loader refuses counts that add up past 2^64 before).
    pub fn total(&self) -> u64 {
        self.stacks
            .iter()
            .fold(0, |sum, stack| sum.saturating_add(stack.count))
    }

    /// Folded text, one `frame;frame COUNT` line per stack in order, each frame written as
    /// `label` names it.
    pub(crate) fn to_text_labelled<'s>(
        &'s self,
        label: impl Fn(FrameId, &'s Frame) -> &'s str,
    ) -> String {
        let mut text = String::new();
        for stack in &self.stacks {
            for (at, &id) in stack.frames.iter().enumerate() {
                if at > 0 {
                    text.push(';');
                }
                text.push_str(label(id, self.frame(id)));
            }
            text.push(' ');
            text.push_str(&stack.count.to_string());
            text.push('\n');
        }
        text
    }

    /// Each BPF program frame renamed with the name to show for it (`bpf_prog_<tag>_<name>`
    /// with the whole name, or the kernel's marked as cut: [`ProgramNames::renamed`]), so that
    /// every reader of the profile shows the same name. Frames that come to share a name are
    /// one frame; the stacks keep their order and counts.
    pub(crate) fn rename_programs(&mut self, names: &ProgramNames) {
        let renamed: Vec<Option<String>> = self
            .table
            .iter()
            .map(|frame| match frame.kind {
                Kind::Program => names.renamed(frame.bare()),
                _ => None,
            })
            .collect();
        if renamed.iter().all(Option::is_none) {
            return;
        }
        let old = std::mem::take(&mut self.table);
        self.index.clear();
        let new_ids: Vec<FrameId> = old
            .into_iter()
            .zip(renamed)
            .map(|(frame, name)| match name {
                Some(name) => self.intern(&name),
                None => self.intern(&frame.name),
            })
            .collect();
        for stack in &mut self.stacks {
            for id in &mut stack.frames {
                *id = new_ids[id.index()];
            }
        }
    }

    /// Back to folded text (`flame --folded`).
    pub fn to_text(&self) -> String {
        self.to_text_labelled(|_, frame| frame.name.as_str())
    }
}

#[cfg(test)]
thread_local! {
    /// How many times this thread parsed folded text, for the tests that hold a run to one.
    pub(crate) static PARSES: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// A folded line taken apart: its stack and its count (`Err`: digits too many for 64 bits);
/// `None` for a line that is not `frames COUNT`.
fn split_line(line: &str) -> Option<(&str, Result<u64, &str>)> {
    let (stack, field) = line.trim_end().rsplit_once(' ')?;
    let digits = field.split_once('.').map_or(field, |(whole, _)| whole);
    if stack.is_empty() || digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some((stack, digits.parse().map_err(|_| digits)))
}

fn too_big(line: usize, digits: &str) -> String {
    format!(
        "line {line}: the count {digits} does not fit in 64 bits; this is not a profile perf or ebpf-prof wrote"
    )
}

fn past_u64(line: usize) -> String {
    format!(
        "line {line}: the counts add up past 2^64 (18446744073709551615); this is not a profile perf or ebpf-prof wrote"
    )
}

/// The 1-based number of the first non-empty line that is not a folded stack, and how many
/// such lines there are, if any.
pub(crate) fn first_malformed(text: &str) -> Option<(usize, usize)> {
    let mut bad = text
        .lines()
        .enumerate()
        .filter(|(_, line)| !line.trim().is_empty() && split_line(line).is_none())
        .map(|(index, _)| index + 1);
    let first = bad.next()?;
    Some((first, 1 + bad.count()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn folded_round_trip_and_bad_lines() {
        let parsed = Stacks::parse("a;b 3\nnot a line\na;c 2\n;x\n").unwrap();
        assert_eq!(parsed.stacks.len(), 2);
        assert_eq!(parsed.skipped, 2);
        assert_eq!(parsed.total(), 5);
        assert_eq!(parsed.to_text(), "a;b 3\na;c 2\n");
        let first = parsed.stacks[0].frames[0];
        assert_eq!(
            first, parsed.stacks[1].frames[0],
            "one id per distinct frame"
        );
    }

    #[test]
    fn kinds_are_decided_when_frames_are_interned() {
        let parsed =
            Stacks::parse("b;do_syscall_64_[k];bpf_prog_0123456789abcdef_hook 4\n").unwrap();
        let kinds: Vec<Kind> = parsed
            .frames_of(&parsed.stacks[0])
            .iter()
            .map(|frame| frame.kind)
            .collect();
        assert_eq!(kinds, [Kind::Other, Kind::Kernel, Kind::Program]);
    }

    /// Counts near u64::MAX wrapped silently and showed as "1844674407370955161600.0 %".
    #[test]
    fn regression_counts_near_u64_max_are_one_clear_error() {
        let parsed = Stacks::parse("a;b 3\nnot a line\na;c 2.9\n").unwrap();
        assert_eq!(
            parsed.checked_total(),
            Ok(5),
            "a fraction is dropped, as inferno does"
        );
        let e = Stacks::parse("a;b 18446744073709551615\na;c 10\n").unwrap_err();
        assert!(e.starts_with("line 2: the counts add up past 2^64"), "{e}");
        let e = Stacks::parse("x 1\na;b 99999999999999999999\n").unwrap_err();
        assert!(
            e.starts_with("line 2: the count 99999999999999999999 does not fit"),
            "{e}"
        );
        let mut built = Stacks::default();
        built.push(["a"], u64::MAX);
        built.push(["b"], 1);
        assert!(built.checked_total().unwrap_err().starts_with("line 2:"));
        assert_eq!(first_malformed("a 1\n\nbad\nb 2\nworse\n"), Some((3, 2)));
        assert_eq!(first_malformed("a 1\n"), None);
    }

    #[test]
    fn names_with_controls_or_semicolons_stay_one_frame_and_inert() {
        let names = vec!["ev;il\x1b]0;x\x07".to_string(), "leaf\n".to_string()];
        let stacks = Stacks::from_table(names, [(vec![0, 1], 3)]);
        let text = stacks.to_text();
        assert_eq!(text, "ev:il\\x1b]0:x\\x07;leaf\\x0a 3\n");
        let again = Stacks::parse(&text).unwrap();
        assert_eq!(again.frames_of(&again.stacks[0]).len(), 2);
    }

    #[test]
    fn a_table_of_names_keeps_its_ids() {
        let names = vec!["bench".to_string(), "vfs_open_[k]".to_string()];
        let built = Stacks::from_table(names, [(vec![0, 1], 7), (vec![0], 2)]);
        assert_eq!(built.to_text(), "bench;vfs_open_[k] 7\nbench 2\n");
        assert_eq!(built.frame(built.stacks[0].frames[1]).kind, Kind::Kernel);
    }
}
