//! BPF program info for "hot lines": which line of BPF C source a JIT-ed address belongs to.
//!
//! This module reads perf.data feature sections 25 (`HEADER_BPF_PROG_INFO`, see
//! [`parse_prog_info`]) and 26 (`HEADER_BPF_BTF`, see [`parse_btf_section`]) from their raw
//! bytes. It models a program and its JIT-ed functions as [`ProgInfo`] and [`FuncInfo`], looks
//! up which program, function and line an instruction pointer is in with [`BpfInfo::lookup`],
//! disassembles the JIT-ed code with [`disassemble`] and adds up samples per source line with
//! [`aggregate_lines`]. [`live`] reads the same data from the running kernel, so that tests can
//! hold the two readings against each other. [`source`] gives the samples and header sections
//! of a perf.data, read by the built-in reader or by `perf script`, and [`annotate`] is the
//! `annotate` command's reading of them.
//!
//! The layouts come from perf's `tools/perf/util/header.c`, `bpf-utils.c` and `bpf-event.c`,
//! libbpf's `tools/lib/bpf/bpf_prog_linfo.c`, and the kernel's `include/uapi/linux/bpf.h` and
//! `btf.h`. The unit tests build each layout byte by byte, and the tests in `tests/bpfinfo.rs`
//! read real recordings.

mod aggregate;
pub mod annotate;
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

pub use aggregate::{
    aggregate_lines, AddressWeight, Aggregator, Frame, FrameKind, LineCost, LineReport, Sample,
};
pub(crate) use btf::parse_btf_section;
pub use btf::{Btf, BtfError, BtfSet};
pub use disasm::{disassemble, Insn};
pub use error::BpfInfoError;
pub(crate) use lookup::entry_range;
pub use lookup::{BpfInfo, FrameHints, FuncRef, IpKind, Location, SourceLine};
pub use model::{FuncInfo, LineEntry, LineMapping, ProgInfo, ProgParts, RawFuncInfo, RawLineInfo};
pub(crate) use proginfo::parse_prog_info;
