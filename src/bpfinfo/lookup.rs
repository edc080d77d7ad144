//! From an instruction pointer to the BPF program, function and source line it is in.
//!
//! The line is the one libbpf's `bpf_prog_linfo__lfind_addr_func()` in
//! `tools/lib/bpf/bpf_prog_linfo.c` gives: within the function, the last line info entry whose
//! JIT address is at or below the address. A return address, a BPF frame below which a helper
//! ran, is looked up at `ip - 1`. That way a call that ends a line is charged to that line, as
//! addr2line does.

use std::ops::Range;

use super::btf::{Btf, BtfSet};
use super::model::{FuncInfo, LineEntry};
use super::{parse_btf_section, parse_prog_info, BpfInfoError, ProgInfo};
use crate::host::kallsyms::ProgSymbol;

/// What an IP is: where the CPU was, or where a call returns to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IpKind {
    /// The sampled IP itself (the innermost frame).
    Sample,
    /// A return address (a caller's frame): the call instruction is at `ip - 1`.
    Return,
}

/// The BPF programs of a recording with their BTF, indexed by JIT address.
#[derive(Debug, Clone, Default)]
pub struct BpfInfo {
    /// Programs, as given.
    pub progs: Vec<ProgInfo>,
    /// Their BTF.
    pub btfs: BtfSet,
    /// Every function with its JIT addresses, by start address.
    index: Vec<IndexedFunc>,
    /// Length of the longest function, to bound the search among overlapping ones.
    max_len: u64,
    /// From the lowest start to the highest end of all functions: most addresses, kernel
    /// text and user code, fall outside and need no search.
    span: Range<u64>,
    /// Whether any two functions overlap (a program JIT-ed where an unloaded one was).
    overlaps: bool,
}

/// A function of [`BpfInfo::progs`]: the index of its program there, and its index in that
/// program's `funcs`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct FuncRef {
    pub prog: usize,
    pub func: usize,
}

/// One entry of [`BpfInfo`]'s index: a function and the JIT addresses it holds. Entries sort
/// by start address.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct IndexedFunc {
    start: u64,
    end: u64,
    func: FuncRef,
}

/// What is known of a BPF frame, to choose among programs JIT-ed at one place in turn
/// ([`BpfInfo::func_at_hinted`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FrameHints<'a> {
    /// The KSYMBOL name perf gave the frame (`bpf_prog_<tag>_<name>`).
    pub name: Option<&'a str>,
    /// The program the perf.data reader found there ([`crate::profile::perfdata::Frame::bpf_prog`]).
    pub prog: Option<u32>,
    /// The sample's `perf_clock` time.
    pub time: Option<u64>,
}

/// A source line, resolved against the program's BTF.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceLine {
    /// Index of the entry in the function's `lines`.
    pub index: usize,
    /// Source file name (BTF string at `file_name_off`).
    pub file: String,
    /// Line number.
    pub line: u32,
    /// Column.
    pub col: u32,
    /// The source text of the line, as clang recorded it (BTF string at `line_off`).
    pub text: String,
    /// JIT addresses of this entry's machine code: up to the next entry or the function end.
    pub addr_range: Range<u64>,
}

/// Where an address is: program, function, and line when the program has line info.
#[derive(Debug, Clone)]
pub struct Location<'a> {
    /// The program.
    pub prog: &'a ProgInfo,
    /// Index of the function in `prog.funcs`.
    pub func_index: usize,
    /// The IP as given minus the function start (perf's `sym+0x…`).
    pub offset: u64,
    /// The source line; `None` when the program has no usable line info.
    pub line: Option<SourceLine>,
}

impl Location<'_> {
    /// The function.
    pub fn func(&self) -> &FuncInfo {
        &self.prog.funcs[self.func_index]
    }

    /// True when there is no source line, so callers should show [`Location::symbol_offset`].
    pub fn line_info_missing(&self) -> bool {
        self.line.is_none()
    }

    /// `bpf_prog_<tag>_<name>+0x19b`.
    pub fn symbol_offset(&self) -> String {
        format!("{}+{:#x}", self.func().sym_name, self.offset)
    }
}

impl BpfInfo {
    /// Indexes `progs` and names their functions with `btfs`.
    pub fn new(mut progs: Vec<ProgInfo>, btfs: BtfSet) -> BpfInfo {
        for prog in &mut progs {
            prog.resolve_names(&btfs);
        }
        let mut index = Vec::new();
        for (prog_index, prog) in progs.iter().enumerate() {
            for (func_index, func) in prog.funcs.iter().enumerate() {
                if func.len == 0 {
                    continue;
                }
                index.push(IndexedFunc {
                    start: func.addr,
                    end: func.end(),
                    func: FuncRef {
                        prog: prog_index,
                        func: func_index,
                    },
                });
            }
        }
        index.sort_unstable();
        let max_len = index.iter().map(|entry| entry.end - entry.start).max();
        let lowest = index.first().map_or(u64::MAX, |entry| entry.start);
        let highest = index.iter().map(|entry| entry.end).max().unwrap_or(0);
        let mut end_so_far = 0;
        let overlaps = index.iter().any(|entry| {
            let over = entry.start < end_so_far;
            end_so_far = end_so_far.max(entry.end);
            over
        });
        BpfInfo {
            progs,
            btfs,
            index,
            max_len: max_len.unwrap_or(0),
            span: lowest..highest,
            overlaps,
        }
    }

    /// Parses the bodies of features 25 and 26 of a perf.data file and indexes them.
    pub fn from_sections(
        prog_info: &[u8],
        btf: &[u8],
        little_endian: bool,
    ) -> Result<BpfInfo, BpfInfoError> {
        let progs = parse_prog_info(prog_info, little_endian)?;
        let btfs = parse_btf_section(btf, little_endian)?;
        Ok(BpfInfo::new(progs, btfs))
    }

    /// The program with this id.
    pub fn prog(&self, id: u32) -> Option<&ProgInfo> {
        self.progs.iter().find(|prog| prog.id == id)
    }

    /// The BTF of a program.
    pub fn btf_of(&self, prog: &ProgInfo) -> Option<&Btf> {
        self.btfs.get(prog.btf_id)
    }

    /// The function holding `addr`. If functions of two programs overlap (one unloaded and
    /// another JIT-ed at its address while recording), the higher program id, the later load,
    /// wins: [`BpfInfo::func_at_hinted`] tells them apart.
    pub fn func_at(&self, addr: u64) -> Option<FuncRef> {
        self.func_at_hinted(addr, FrameHints::default())
    }

    /// Program id → the start of each of its functions, for the perf.data reader to name the
    /// program of each BPF frame ([`crate::profile::perfdata::Samples::bpf_programs`]).
    pub fn programs(&self) -> crate::profile::perfdata::BpfPrograms {
        self.progs
            .iter()
            .map(|prog| (prog.id, prog.funcs.iter().map(|func| func.addr).collect()))
            .collect()
    }

    /// Whether any two functions overlap (a program JIT-ed where an unloaded one was): only
    /// then does [`BpfInfo::func_at_hinted`] have a choice to make.
    pub fn overlaps(&self) -> bool {
        self.overlaps
    }

    /// Whether `addr` lies between the lowest and the highest known BPF function: false means
    /// [`BpfInfo::func_at`] is `None`, without the search (most kernel addresses).
    #[inline]
    pub fn spans(&self, addr: u64) -> bool {
        self.span.contains(&addr)
    }

    /// As [`BpfInfo::func_at`], but when several functions hold `addr` (programs unloaded and
    /// others JIT-ed over their place while recording), the one that was there at the
    /// sample's time, from what is known of the frame ([`FrameHints`]), in this order:
    /// 1. program `prog`, the id the perf.data reader found for the frame from the recording's
    ///    BPF_EVENTs, unless a later load over this place happened before the sample (by
    ///    `time` against the programs' `load_time`): a per-task recording has no KSYMBOL of
    ///    what another process loads or unloads, so the reader's map there can be stale;
    /// 2. the one whose tag `name` carries (the KSYMBOL name perf gave the frame,
    ///    `bpf_prog_<tag>_<name>`; it cannot tell two loads of one object apart);
    /// 3. the one loaded last at or before `time`, a sample's `perf_clock` time held against
    ///    the programs' `load_time` in `CLOCK_BOOTTIME`. The two clocks agree only to some
    ///    milliseconds, so a sample that close to a reload may go to the wrong load;
    /// 4. the highest program id.
    pub fn func_at_hinted(&self, addr: u64, hints: FrameHints<'_>) -> Option<FuncRef> {
        if !self.spans(addr) {
            return None;
        }
        let upto = self.index.partition_point(|entry| entry.start <= addr);
        let floor = addr.saturating_sub(self.max_len);
        let mut holding = self.index[..upto]
            .iter()
            .rev()
            .take_while(|entry| entry.start >= floor)
            .filter(|entry| addr < entry.end)
            .map(|entry| entry.func);
        let first = holding.next()?;
        let Some(second) = holding.next() else {
            // One function holds it (the usual case): nothing to choose.
            return Some(first);
        };
        let all: Vec<FuncRef> = [first, second].into_iter().chain(holding).collect();
        Some(self.choose(&all, hints))
    }

    /// Rules 1–4 of [`BpfInfo::func_at_hinted`] among the functions `all` that hold an address.
    fn choose(&self, all: &[FuncRef], hints: FrameHints<'_>) -> FuncRef {
        let load = |at: FuncRef| self.progs[at.prog].load_time;
        let by_then = |at: FuncRef| hints.time.is_some_and(|time| load(at) <= time);
        let named = all
            .iter()
            .find(|at| Some(self.progs[at.prog].id) == hints.prog);
        let trusted = named.filter(|&&named| {
            !all.iter()
                .any(|&other| by_then(other) && load(other) > load(named))
        });
        let name_tag = hints
            .name
            .and_then(ProgSymbol::parse)
            .and_then(|symbol| symbol.tag_bytes());
        let tagged = |at: FuncRef| {
            let prog = &self.progs[at.prog];
            name_tag.is_some_and(|tag| prog.tag == tag || prog.funcs[at.func].tag == Some(tag))
        };
        let key = |&&at: &&FuncRef| {
            let trust = trusted.is_some_and(|trusted| trusted.prog == at.prog);
            (
                trust,
                tagged(at),
                by_then(at).then(|| load(at)),
                self.progs[at.prog].id,
            )
        };
        all.iter().max_by_key(key).copied().unwrap_or(all[0])
    }

    /// Program, function and source line of `ip`; a [`IpKind::Return`] address is looked up
    /// at `ip - 1`. `None` when no known BPF function holds it.
    pub fn lookup(&self, ip: u64, kind: IpKind) -> Option<Location<'_>> {
        self.lookup_hinted(ip, kind, FrameHints::default())
    }

    /// As [`BpfInfo::lookup`], choosing among overlapping programs by what is known of the
    /// frame ([`BpfInfo::func_at_hinted`]).
    pub fn lookup_hinted(
        &self,
        ip: u64,
        kind: IpKind,
        hints: FrameHints<'_>,
    ) -> Option<Location<'_>> {
        let addr = effective_addr(ip, kind);
        let at = self.func_at_hinted(addr, hints)?;
        let prog = &self.progs[at.prog];
        let func = &prog.funcs[at.func];
        let line = line_index(func, addr).map(|entry| self.source_line(prog, at.func, entry));
        Some(Location {
            prog,
            func_index: at.func,
            offset: ip.wrapping_sub(func.addr),
            line,
        })
    }

    /// Entry `index` of function `func` of `prog`, with its strings (empty when the BTF or
    /// the string is missing).
    pub fn source_line(&self, prog: &ProgInfo, func: usize, index: usize) -> SourceLine {
        let func = &prog.funcs[func];
        let entry = func.lines[index];
        let btf = self.btf_of(prog);
        let text = |off| {
            btf.and_then(|btf| btf.string(off))
                .map(|text| text.into_owned())
                .unwrap_or_default()
        };
        SourceLine {
            index,
            file: text(entry.raw.file_name_off),
            line: entry.line(),
            col: entry.col(),
            text: text(entry.raw.line_off),
            addr_range: entry_range(func, index),
        }
    }
}

/// `ip` for a sample, `ip - 1` for a return address.
pub(crate) fn effective_addr(ip: u64, kind: IpKind) -> u64 {
    match kind {
        IpKind::Sample => ip,
        IpKind::Return => ip.saturating_sub(1),
    }
}

/// Index in `func.lines` of the last entry whose address is `<= addr` (libbpf's
/// `bpf_prog_linfo__lfind_addr_func`); `None` without addresses.
pub(crate) fn line_index(func: &FuncInfo, addr: u64) -> Option<usize> {
    let first = func.lines.first()?.addr?;
    if addr < first || !func.contains(addr) {
        return None;
    }
    let after = func
        .lines
        .partition_point(|line| line.addr.is_some_and(|at| at <= addr));
    after.checked_sub(1)
}

/// JIT addresses of entry `index`: from its address to the next entry's, or the function end.
pub(crate) fn entry_range(func: &FuncInfo, index: usize) -> Range<u64> {
    let addr = |entry: Option<&LineEntry>| entry.and_then(|entry| entry.addr);
    let start = addr(func.lines.get(index)).unwrap_or(func.addr);
    let end = addr(func.lines.get(index + 1)).unwrap_or(func.end());
    start..end.max(start)
}
