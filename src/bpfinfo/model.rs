//! The data model: one [`ProgInfo`] per BPF program, with its JIT-ed functions
//! ([`FuncInfo`]) and each function's share of the program's line info ([`LineEntry`]).
//!
//! [`ProgParts`] is the plain content of a `struct bpf_prog_info` and its arrays
//! (`include/uapi/linux/bpf.h`), whether it came from perf.data (feature 25) or from the
//! kernel live (libbpf-rs); `ProgInfo::from_parts` (in `funcs.rs`) turns it into the model.

use std::ops::Range;

use super::BpfInfoError;

/// A `struct bpf_func_info`: the first xlated instruction of a function and its BTF FUNC type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RawFuncInfo {
    /// First xlated instruction of the function.
    pub insn_off: u32,
    /// Its BTF type id (a FUNC).
    pub type_id: u32,
}

/// A `struct bpf_line_info`: where in the source an xlated instruction comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RawLineInfo {
    /// Xlated instruction offset, program-wide.
    pub insn_off: u32,
    /// BTF string offset of the file name.
    pub file_name_off: u32,
    /// BTF string offset of the source line's text.
    pub line_off: u32,
    /// `line << 10 | column`.
    pub line_col: u32,
}

/// The content of one `struct bpf_prog_info` with its arrays, before any cross-checking.
/// Arrays that were absent (or invalid, see `problems`) are empty.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProgParts {
    /// Kernel program id.
    pub id: u32,
    /// `enum bpf_prog_type`.
    pub prog_type: u32,
    /// Tag of the whole program.
    pub tag: [u8; 8],
    /// The kernel's copy of the name (15 bytes at most).
    pub name: String,
    /// BTF object id of the program's BTF, 0 if none.
    pub btf_id: u32,
    /// When it was loaded: `CLOCK_BOOTTIME` ns (`bpf_prog_info.load_time`).
    pub load_time: u64,
    /// Start address of each JIT-ed function.
    pub jited_ksyms: Vec<u64>,
    /// Length of each JIT-ed function.
    pub jited_func_lens: Vec<u32>,
    /// Tag of each function (computed over that function alone).
    pub prog_tags: Vec<[u8; 8]>,
    /// One per function when the program has BTF.
    pub func_info: Vec<RawFuncInfo>,
    /// Line info, program-wide, in xlated instruction order.
    pub line_info: Vec<RawLineInfo>,
    /// JIT address of the first machine instruction of each `line_info` entry.
    pub jited_line_info: Vec<u64>,
    /// The JIT-ed code: each function's bytes, in function order, back to back.
    pub jited_insns: Vec<u8>,
    /// What was wrong with the input while reading it.
    pub problems: Vec<BpfInfoError>,
}

/// One line info entry of a function, with the JIT address where its code starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LineEntry {
    /// The raw record.
    pub raw: RawLineInfo,
    /// JIT address of its first machine instruction, when known.
    pub addr: Option<u64>,
}

impl LineEntry {
    /// Source line number (`BPF_LINE_INFO_LINE_NUM`).
    pub fn line(&self) -> u32 {
        self.raw.line_col >> 10
    }

    /// Source column (`BPF_LINE_INFO_LINE_COL`).
    pub fn col(&self) -> u32 {
        self.raw.line_col & 0x3ff
    }
}

/// One JIT-ed function (sub-program) of a program.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FuncInfo {
    /// Start address (`jited_ksyms[i]`).
    pub addr: u64,
    /// Length in bytes (`jited_func_lens[i]`).
    pub len: u32,
    /// Tag of this function (`prog_tags[i]`), if the program had a tag per function.
    pub tag: Option<[u8; 8]>,
    /// Its `func_info` record, when the program has BTF.
    pub func_info: Option<RawFuncInfo>,
    /// The BTF FUNC name, once resolved against the program's BTF.
    pub btf_name: Option<String>,
    /// The symbol name as perf synthesizes it: `bpf_prog_<tag>[_<name>]`.
    pub sym_name: String,
    /// This function's line info entries, in order.
    pub lines: Vec<LineEntry>,
    /// Where its bytes are in [`ProgInfo::jited_insns`].
    pub code: Option<Range<usize>>,
}

impl FuncInfo {
    /// Whether `addr` is inside the function.
    pub fn contains(&self, addr: u64) -> bool {
        addr >= self.addr && addr - self.addr < u64::from(self.len)
    }

    /// One past the last byte.
    pub fn end(&self) -> u64 {
        self.addr.saturating_add(u64::from(self.len))
    }
}

/// How a program's line info was assigned to functions and JIT addresses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LineMapping {
    /// The program has no line info (built without `-g`, or perf did not store it).
    Absent,
    /// Split by JIT addresses as libbpf's `dissect_jited_func` does; lines have addresses.
    JitedAddresses,
    /// Split by `func_info[].insn_off`; lines have addresses (libbpf's rules failed).
    InsnOffsets,
    /// Split by `func_info[].insn_off`, but the JIT addresses are missing or inconsistent:
    /// the lines are known, the machine code they start at is not.
    NoAddresses,
}

/// One BPF program: what perf's `bpf_prog_info` feature or the kernel says about it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProgInfo {
    /// Kernel program id.
    pub id: u32,
    /// `enum bpf_prog_type`.
    pub prog_type: u32,
    /// Tag of the whole program.
    pub tag: [u8; 8],
    /// The kernel's copy of the name (15 bytes at most).
    pub name: String,
    /// BTF object id, 0 if none.
    pub btf_id: u32,
    /// When it was loaded: `CLOCK_BOOTTIME` ns, set as the load began (before verification).
    pub load_time: u64,
    /// JIT-ed functions, main program first.
    pub funcs: Vec<FuncInfo>,
    /// How `funcs[].lines` were derived.
    pub line_mapping: LineMapping,
    /// The JIT-ed code of all functions back to back (`jited_prog_insns`); empty if absent.
    pub jited_insns: Vec<u8>,
    /// What was wrong with this program's data; what is left is usable.
    pub problems: Vec<BpfInfoError>,
}

impl ProgInfo {
    /// The JIT-ed bytes of function `index`, which start at `funcs[index].addr`.
    pub fn func_code(&self, index: usize) -> Option<&[u8]> {
        let range = self.funcs.get(index)?.code.clone()?;
        self.jited_insns.get(range)
    }

    /// Whether any function has line info with JIT addresses, so IPs map to lines.
    pub fn has_line_addresses(&self) -> bool {
        matches!(
            self.line_mapping,
            LineMapping::JitedAddresses | LineMapping::InsnOffsets
        )
    }

    /// The tag as 16 lowercase hex digits.
    pub fn tag_hex(&self) -> String {
        crate::host::notes::hex(&self.tag)
    }
}
