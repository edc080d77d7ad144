//! BPF program info for "hot lines": which line of BPF C source a JIT-ed address belongs to.
//!
//! Owns the reading of perf.data feature sections 25 (`HEADER_BPF_PROG_INFO`, [`parse_prog_info`])
//! and 26 (`HEADER_BPF_BTF`, [`parse_btf_section`]) from their raw bytes, the model of a program
//! and its JIT-ed functions ([`ProgInfo`], [`FuncInfo`]), the IP → program/function/line lookup
//! ([`BpfInfo::lookup`]), disassembly of the JIT-ed code ([`disassemble`]), the aggregation of
//! samples per source line ([`aggregate_lines`]), and reading the same data from the running
//! kernel ([`live`]); the samples and header sections of a perf.data ([`source`], the one seam
//! to swap for a native reader) and `annotate`'s reading of them ([`annotate`]).
//!
//! References: perf `tools/perf/util/header.c`, `bpf-utils.c`, `bpf-event.c`; libbpf
//! `tools/lib/bpf/bpf_prog_linfo.c`; the kernel's `include/uapi/linux/bpf.h` and `btf.h`.
//! The layouts, with offsets checked on real files, are in /work/notes/perfdata-research.md
//! §3–5.

mod aggregate;
pub mod annotate;
pub mod annotate_build;
pub mod annotate_text;
mod btf;
mod bytes;
mod disasm;
mod error;
mod funcs;
pub mod live;
mod lookup;
mod model;
mod proginfo;
pub mod source;
mod split;
#[cfg(test)]
mod testbuf;
#[cfg(test)]
mod tests;

pub use aggregate::{aggregate_lines, Aggregator, Frame, FrameKind, LineCost, LineReport, Sample};
pub use btf::{parse_btf_section, Btf, BtfSet, KIND_FUNC};
pub use disasm::{disassemble, Insn};
pub use error::BpfInfoError;
pub use lookup::{entry_range, line_index, BpfInfo, IpKind, Location, Seen, SourceLine};
pub use model::{FuncInfo, LineEntry, LineMapping, ProgInfo, ProgParts, RawFuncInfo, RawLineInfo};
pub use proginfo::parse_prog_info;
