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
    /// `(start, end, prog index, func index)` of every function, by start address.
    index: Vec<(u64, u64, usize, usize)>,
    /// Length of the longest function, to bound the search among overlapping ones.
    max_len: u64,
    /// Lowest start and highest end of all functions: most addresses (kernel text, user
    /// code) fall outside and need no search.
    span: (u64, u64),
    /// Whether any two functions overlap (a program JIT-ed where an unloaded one was).
    overlaps: bool,
}

/// What is known of a BPF frame, to choose among programs JIT-ed at one place in turn
/// ([`BpfInfo::func_at_named`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Seen<'a> {
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
        for (p, prog) in progs.iter().enumerate() {
            for (f, func) in prog.funcs.iter().enumerate().filter(|(_, f)| f.len > 0) {
                index.push((func.addr, func.end(), p, f));
            }
        }
        index.sort_unstable();
        let max_len = index.iter().map(|&(s, e, _, _)| e - s).max().unwrap_or(0);
        let span = (
            index.first().map_or(u64::MAX, |f| f.0),
            index.iter().map(|f| f.1).max().unwrap_or(0),
        );
        let mut end = 0;
        let overlaps = index.iter().any(|&(s, e, ..)| {
            let over = s < end;
            end = end.max(e);
            over
        });
        BpfInfo {
            progs,
            btfs,
            index,
            max_len,
            span,
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
        self.progs.iter().find(|p| p.id == id)
    }

    /// The BTF of a program.
    pub fn btf_of(&self, prog: &ProgInfo) -> Option<&Btf> {
        self.btfs.get(prog.btf_id)
    }

    /// `(prog index, func index)` of the function holding `addr`. If functions of two
    /// programs overlap (one unloaded and another JIT-ed at its address while recording), the
    /// higher program id, the later load, wins: [`BpfInfo::func_at_named`] tells them apart.
    pub fn func_at(&self, addr: u64) -> Option<(usize, usize)> {
        self.func_at_named(addr, Seen::default())
    }

    /// Program id → the start of each of its functions, for the perf.data reader to name the
    /// program of each BPF frame ([`crate::profile::perfdata::Samples::bpf_programs`]).
    pub fn programs(&self) -> crate::profile::perfdata::BpfPrograms {
        self.progs
            .iter()
            .map(|p| (p.id, p.funcs.iter().map(|f| f.addr).collect()))
            .collect()
    }

    /// Whether any two functions overlap (a program JIT-ed where an unloaded one was): only
    /// then does [`BpfInfo::func_at_named`] have a choice to make.
    pub fn overlaps(&self) -> bool {
        self.overlaps
    }

    /// Whether `addr` lies between the lowest and the highest known BPF function: false means
    /// [`BpfInfo::func_at`] is `None`, without the search (most kernel addresses).
    #[inline]
    pub fn spans(&self, addr: u64) -> bool {
        addr >= self.span.0 && addr < self.span.1
    }

    /// As [`BpfInfo::func_at`], but when several functions hold `addr` (programs unloaded and
    /// others JIT-ed over their place while recording), the one that was there at the
    /// sample's time, from what is known of the frame ([`Seen`]), in this order:
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
    pub fn func_at_named(&self, addr: u64, seen: Seen<'_>) -> Option<(usize, usize)> {
        if !self.spans(addr) {
            return None;
        }
        let upto = self.index.partition_point(|&(s, ..)| s <= addr);
        let floor = addr.saturating_sub(self.max_len);
        let mut holding = self.index[..upto]
            .iter()
            .rev()
            .take_while(|&&(s, ..)| s >= floor)
            .filter(|&&(_, e, ..)| addr < e)
            .map(|&(_, _, p, f)| (p, f));
        let first = holding.next()?;
        let Some(second) = holding.next() else {
            // One function holds it (the usual case): nothing to choose.
            return Some(first);
        };
        let all: Vec<(usize, usize)> = [first, second].into_iter().chain(holding).collect();
        Some(self.choose(&all, seen))
    }

    /// Rules 1–4 of [`BpfInfo::func_at_named`] among the functions `all` that hold an address.
    fn choose(&self, all: &[(usize, usize)], seen: Seen<'_>) -> (usize, usize) {
        let load = |p: usize| self.progs[p].load_time;
        let by_then = |p: usize| seen.time.is_some_and(|t| load(p) <= t);
        let named = all
            .iter()
            .find(|&&(p, _)| Some(self.progs[p].id) == seen.prog);
        let trusted =
            named.filter(|&&(r, _)| !all.iter().any(|&(q, _)| by_then(q) && load(q) > load(r)));
        let name_tag = seen
            .name
            .and_then(ProgSymbol::parse)
            .and_then(|symbol| symbol.tag_bytes());
        let tagged = |p: usize, f: usize| {
            let prog = &self.progs[p];
            name_tag.is_some_and(|t| prog.tag == t || prog.funcs[f].tag == Some(t))
        };
        let key = |&&(p, f): &&(usize, usize)| {
            let trust = trusted.is_some_and(|&(r, _)| r == p);
            (
                trust,
                tagged(p, f),
                by_then(p).then(|| load(p)),
                self.progs[p].id,
            )
        };
        all.iter().max_by_key(key).copied().unwrap_or(all[0])
    }

    /// Program, function and source line of `ip`; a [`IpKind::Return`] address is looked up
    /// at `ip - 1`. `None` when no known BPF function holds it.
    pub fn lookup(&self, ip: u64, kind: IpKind) -> Option<Location<'_>> {
        self.lookup_named(ip, kind, Seen::default())
    }

    /// As [`BpfInfo::lookup`], choosing among overlapping programs by what is known of the
    /// frame ([`BpfInfo::func_at_named`]).
    pub fn lookup_named(&self, ip: u64, kind: IpKind, seen: Seen<'_>) -> Option<Location<'_>> {
        let addr = effective_addr(ip, kind);
        let (p, f) = self.func_at_named(addr, seen)?;
        let prog = &self.progs[p];
        let func = &prog.funcs[f];
        let line = line_index(func, addr).map(|j| self.source_line(prog, f, j));
        Some(Location {
            prog,
            func_index: f,
            offset: ip.wrapping_sub(func.addr),
            line,
        })
    }

    /// Entry `index` of function `func` of `prog`, with its strings (empty when the BTF or
    /// the string is missing).
    pub fn source_line(&self, prog: &ProgInfo, func: usize, index: usize) -> SourceLine {
        let f = &prog.funcs[func];
        let entry = f.lines[index];
        let btf = self.btf_of(prog);
        let text = |off| {
            btf.and_then(|b| b.string(off))
                .map(|s| s.into_owned())
                .unwrap_or_default()
        };
        SourceLine {
            index,
            file: text(entry.raw.file_name_off),
            line: entry.line(),
            col: entry.col(),
            text: text(entry.raw.line_off),
            addr_range: entry_range(f, index),
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
        .partition_point(|l| l.addr.is_some_and(|a| a <= addr));
    after.checked_sub(1)
}

/// JIT addresses of entry `index`: from its address to the next entry's, or the function end.
pub(crate) fn entry_range(func: &FuncInfo, index: usize) -> Range<u64> {
    let addr = |e: Option<&LineEntry>| e.and_then(|e| e.addr);
    let start = addr(func.lines.get(index)).unwrap_or(func.addr);
    let end = addr(func.lines.get(index + 1)).unwrap_or(func.end());
    start..end.max(start)
}
