//! Samples to source lines: for each BPF program, function and source line, the weight of
//! samples whose CPU was in the line's JIT-ed code (self) and of samples whose stack went
//! through it (inclusive), with what the line called (a helper, a kfunc, a BPF function) and
//! how much of the inclusive weight each callee took.
//!
//! Only the innermost BPF frame of a sample counts: its IP when the sample is in JIT-ed code
//! (self and inclusive), its return address − 1 ([`IpKind::Return`]) when the sample is in a
//! helper or kfunc below it (inclusive, with the callee named), so that a helper's time goes
//! to the line that called it. A caller BPF function (BPF-to-BPF call) is not charged again:
//! each function's lines add up to the time spent in that function and what it called outside
//! BPF. Functions are named with the KSYMBOL name perf gave their frames, because for a program
//! loaded before the recording the name of func 0 differs from the one its tag gives.

use std::collections::BTreeMap;
use std::ops::Range;

use super::lookup::{effective_addr, entry_range, line_index, BpfInfo, FuncRef, IpKind};

/// What kind of code a stack frame is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FrameKind {
    /// JIT-ed BPF code.
    Bpf,
    /// Other kernel code (helpers, kfuncs, the BPF trampoline, the tracepoint …).
    Kernel,
    /// User space.
    User,
}

/// One frame of a sample's stack.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Frame<'n> {
    /// The sample IP for frame 0, a return address for the others.
    pub ip: u64,
    /// What the address is in.
    pub kind: FrameKind,
    /// The symbol of a non-BPF frame (`bpf_probe_read_user_str`); used to name callees.
    pub name: Option<&'n str>,
    /// For a BPF frame: the id of the program loaded there at the sample's time, when the
    /// perf.data reader knows it (it picks among programs JIT-ed at one place in turn).
    pub prog: Option<u32>,
}

/// One sample: its stack, innermost frame first, and its weight (period or count).
#[derive(Debug, Clone)]
pub struct Sample<S> {
    /// Frames, innermost first.
    pub frames: S,
    /// Weight.
    pub weight: u64,
}

/// The cost of one source line of one BPF function (or of a whole function without line info).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LineCost {
    /// Program id.
    pub prog_id: u32,
    /// Function index in the program.
    pub func_index: usize,
    /// The function's symbol name.
    pub func_name: String,
    /// True when the program has no line info: this entry is the whole function.
    pub line_info_missing: bool,
    /// Source file.
    pub file: String,
    /// Line number: 0 without line info, and also for code clang gave no line (its
    /// `line_col == 0` entries, compiler-generated: spills, loop set-up).
    pub line: u32,
    /// Source text of the line.
    pub text: String,
    /// JIT address ranges of the line's code (a line can be split by the compiler).
    pub ranges: Vec<Range<u64>>,
    /// Weight of samples whose IP was in the line's code.
    pub self_weight: u64,
    /// Weight of samples whose innermost BPF frame is in this line.
    pub inclusive_weight: u64,
    /// Without line info: the offset in the function (`+0x19b`) this entry stands for.
    pub offset: Option<u64>,
    /// What the line called, with the inclusive weight spent there; heaviest first.
    pub callees: Vec<(String, u64)>,
}

/// Per-line costs of a set of samples.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LineReport {
    /// Weight of all samples.
    pub total: u64,
    /// Weight of samples with at least one BPF frame found in the program info.
    pub in_bpf: u64,
    /// Weight of samples whose innermost BPF frame is in no known program.
    pub unknown_bpf: u64,
    /// Lines by program id, function and line number.
    pub lines: Vec<LineCost>,
}

/// Where in a function a sample is charged.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Place {
    /// A source line: the BTF offset of its file name, and its number.
    Line { file_name_off: u32, line: u32 },
    /// For a function without line info, the offset of the address in it.
    Offset(u32),
}

/// The line of a function that a sample is charged to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct LineKey {
    func: FuncRef,
    place: Place,
}

#[derive(Default)]
struct Acc {
    self_weight: u64,
    inclusive: u64,
    callees: BTreeMap<String, u64>,
}

/// The weight charged at one JIT address, for `--asm`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AddressWeight {
    /// Of the samples whose IP was this address.
    pub at_ip: u64,
    /// Of the samples whose innermost BPF frame returns here: the instruction after a call.
    pub returning: u64,
}

/// Samples added one at a time (a profile is not held in memory), then [`Aggregator::finish`].
#[derive(Default)]
pub struct Aggregator {
    report: LineReport,
    lines: BTreeMap<LineKey, Acc>,
    /// KSYMBOL names seen per function.
    names: BTreeMap<FuncRef, String>,
    /// The weight per address in BPF code, for `--asm`.
    by_ip: BTreeMap<u64, AddressWeight>,
}

impl Aggregator {
    /// Adds one sample (frames innermost first).
    pub fn add(&mut self, info: &BpfInfo, frames: &[Frame<'_>], weight: u64) {
        self.report.total += weight;
        let Some(depth) = frames.iter().position(|frame| frame.kind == FrameKind::Bpf) else {
            return;
        };
        let Some(key) = key_at(info, frames, depth) else {
            self.report.unknown_bpf += weight;
            return;
        };
        self.report.in_bpf += weight;
        let frame = frames[depth];
        if let Some(name) = frame.name {
            self.names
                .entry(key.func)
                .or_insert_with(|| name.to_string());
        }
        let at = self.by_ip.entry(frame.ip).or_default();
        let entry = self.lines.entry(key).or_default();
        entry.inclusive += weight;
        if depth == 0 {
            entry.self_weight += weight;
            at.at_ip += weight;
            return;
        }
        at.returning += weight;
        // A callee without a symbol (no kallsyms of the recording's kernel) is shown by its
        // address, as perf annotate shows what it cannot name.
        let callee_frame = frames[depth - 1];
        let callee = match callee_frame.name {
            Some(name) => std::borrow::Cow::Borrowed(name),
            None => std::borrow::Cow::Owned(format!("{:#x}", callee_frame.ip)),
        };
        match entry.callees.get_mut(callee.as_ref()) {
            Some(callee_weight) => *callee_weight += weight,
            None => {
                entry.callees.insert(callee.into_owned(), weight);
            }
        }
    }

    /// The per-line report, and the weight per address.
    pub fn finish(self, info: &BpfInfo) -> (LineReport, BTreeMap<u64, AddressWeight>) {
        let mut report = self.report;
        let names = self.names;
        report.lines = self
            .lines
            .into_iter()
            .map(|(key, acc)| finish(info, key, acc, &names))
            .collect();
        report
            .lines
            .sort_by_key(|line| (line.prog_id, line.func_index, line.line, line.offset));
        (report, self.by_ip)
    }
}

/// Aggregates samples per BPF source line. See [`LineCost`] for what is counted.
pub fn aggregate_lines<'n, S, I>(info: &BpfInfo, samples: I) -> LineReport
where
    S: AsRef<[Frame<'n>]>,
    I: IntoIterator<Item = Sample<S>>,
{
    let mut agg = Aggregator::default();
    for sample in samples {
        agg.add(info, sample.frames.as_ref(), sample.weight);
    }
    agg.finish(info).0
}

/// The line key of the BPF frame at `depth`: its program, function and source line, or the
/// offset in the function when it has no line info. The innermost frame is looked up at its
/// IP, one that called into a helper at the call site (return address − 1). No strings are
/// built: this runs per sample.
fn key_at(info: &BpfInfo, frames: &[Frame<'_>], depth: usize) -> Option<LineKey> {
    let frame = frames
        .get(depth)
        .filter(|frame| frame.kind == FrameKind::Bpf)?;
    let kind = match depth {
        0 => IpKind::Sample,
        _ => IpKind::Return,
    };
    let addr = effective_addr(frame.ip, kind);
    let hints = super::lookup::FrameHints {
        name: frame.name,
        prog: frame.prog,
        time: None,
    };
    let at = info.func_at_hinted(addr, hints)?;
    let func = &info.progs[at.prog].funcs[at.func];
    let place = match line_index(func, addr) {
        Some(index) => Place::Line {
            file_name_off: func.lines[index].raw.file_name_off,
            line: func.lines[index].line(),
        },
        None => Place::Offset(frame.ip.wrapping_sub(func.addr).min(u64::from(u32::MAX)) as u32),
    };
    Some(LineKey { func: at, place })
}

/// The report line of one key: strings from the first entry of the line, and every range.
fn finish(info: &BpfInfo, key: LineKey, acc: Acc, names: &BTreeMap<FuncRef, String>) -> LineCost {
    let prog = &info.progs[key.func.prog];
    let func = &prog.funcs[key.func.func];
    let entries: Vec<usize> = match key.place {
        Place::Line {
            file_name_off,
            line,
        } => (0..func.lines.len())
            .filter(|&index| {
                let entry = &func.lines[index];
                entry.raw.file_name_off == file_name_off && entry.line() == line
            })
            .collect(),
        Place::Offset(_) => Vec::new(),
    };
    let first = entries
        .first()
        .map(|&index| info.source_line(prog, key.func.func, index));
    let mut callees: Vec<(String, u64)> = acc.callees.into_iter().collect();
    callees.sort_by(|left, right| right.1.cmp(&left.1).then_with(|| left.0.cmp(&right.0)));
    let (line, offset) = match key.place {
        Place::Line { line, .. } => (line, None),
        Place::Offset(offset) => (0, Some(u64::from(offset))),
    };
    LineCost {
        prog_id: prog.id,
        func_index: key.func.func,
        func_name: names.get(&key.func).unwrap_or(&func.sym_name).clone(),
        line_info_missing: matches!(key.place, Place::Offset(_)),
        file: first
            .as_ref()
            .map(|line| line.file.clone())
            .unwrap_or_default(),
        line,
        offset,
        text: first.map(|line| line.text).unwrap_or_default(),
        ranges: merge(entries.iter().map(|&index| entry_range(func, index))),
        self_weight: acc.self_weight,
        inclusive_weight: acc.inclusive,
        callees,
    }
}

/// Ranges in address order with touching ones joined; empty ones dropped.
fn merge(ranges: impl Iterator<Item = Range<u64>>) -> Vec<Range<u64>> {
    let mut all: Vec<Range<u64>> = ranges.filter(|range| !range.is_empty()).collect();
    all.sort_by_key(|range| range.start);
    let mut out: Vec<Range<u64>> = Vec::new();
    for range in all {
        match out.last_mut() {
            Some(last) if last.end >= range.start => last.end = last.end.max(range.end),
            _ => out.push(range),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bpfinfo::testbuf::{btf_section, prog_section, sample_btf, sample_prog, BASE, SUB};

    fn bpf(ip: u64) -> Frame<'static> {
        Frame {
            ip,
            kind: FrameKind::Bpf,
            name: None,
            prog: None,
        }
    }

    fn kernel(ip: u64, name: &'static str) -> Frame<'static> {
        Frame {
            ip,
            kind: FrameKind::Kernel,
            name: Some(name),
            prog: None,
        }
    }

    fn info() -> BpfInfo {
        let (blob, strs) = sample_btf(true);
        let progs = prog_section(&[sample_prog(strs)], true);
        BpfInfo::from_sections(&progs, &btf_section(&[(7, blob)], true), true).unwrap()
    }

    #[test]
    fn self_inclusive_and_callees_per_line() {
        let helper = kernel(0xffff_ffff_8100_0000, "bpf_probe_read_user_str");
        let samples = vec![
            Sample {
                frames: vec![bpf(BASE + 0x12)],
                weight: 10,
            },
            // In the helper, called from sub_fn line 21, called from main_fn line 6.
            Sample {
                frames: vec![helper, bpf(SUB + 0x25), bpf(BASE + 0x15)],
                weight: 5,
            },
            // In sub_fn's own code on line 21 (a return address of 0x20 is charged to line 20).
            Sample {
                frames: vec![bpf(SUB + 0x30), bpf(BASE + 0x15)],
                weight: 2,
            },
            Sample {
                frames: vec![kernel(1, "x")],
                weight: 3,
            },
            Sample {
                frames: vec![kernel(1, "x"), bpf(0xdead)],
                weight: 4,
            },
        ];
        let report = aggregate_lines(&info(), samples);
        assert_eq!(
            (report.total, report.in_bpf, report.unknown_bpf),
            (24, 17, 4)
        );
        let got: Vec<_> = report
            .lines
            .iter()
            .map(|l| {
                (
                    l.func_index,
                    l.line,
                    l.self_weight,
                    l.inclusive_weight,
                    l.callees.clone(),
                )
            })
            .collect();
        let helper = "bpf_probe_read_user_str".to_string();
        assert_eq!(
            got,
            [(0, 6, 10, 10, vec![]), (1, 21, 2, 7, vec![(helper, 5)]),]
        );
        let l21 = &report.lines[1];
        assert_eq!(l21.file, "/src/hook.bpf.c");
        assert_eq!(l21.ranges.len(), 1);
        assert_eq!(l21.ranges[0], SUB + 0x20..SUB + 0x80);
        assert!(l21.text.contains("bpf_probe_read_user_str(buf, 128, p)"));
        assert_eq!(l21.func_name, "bpf_prog_2222222222222222_sub_fn");
    }

    #[test]
    fn without_line_info_the_function_is_one_entry() {
        let (_, strs) = sample_btf(true);
        let mut p = sample_prog(strs);
        p.line_info = vec![];
        p.jited_line_info = vec![];
        let info = BpfInfo::from_sections(&prog_section(&[p], true), &[], true).unwrap();
        let report = aggregate_lines(
            &info,
            [Sample {
                frames: [bpf(BASE + 1)],
                weight: 3,
            }],
        );
        let l = &report.lines[0];
        assert!(l.line_info_missing);
        assert_eq!(
            (l.func_name.as_str(), l.line, l.self_weight),
            ("bpf_prog_1111111111111111_F", 0, 3)
        );
    }

    #[test]
    fn touching_ranges_merge() {
        let merged = merge([5..9, 1..3, 3..4, 9..9].into_iter());
        assert_eq!(merged, [1..4, 5..9]);
    }
}
