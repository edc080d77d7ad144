//! A native reader of perf.data files (file mode, either byte order) that produces the folded
//! stacks `perf script | inferno-collapse-perf` produces, without running perf.
//!
//! What it owns: the container ([`PerfData`]: header, attrs and ids, data records, the
//! feature table with raw access to every feature section, BPF_PROG_INFO and BPF_BTF
//! included), replaying the records as `perf script` does (threads, comms, mappings, KSYMBOL
//! maps, in time order), naming addresses as perf 6.1 names them (kallsyms snapshot, KSYMBOL
//! names verbatim, ELF `.symtab`/`.dynsym` of user binaries), and inferno's folding rules.
//!
//! - [`fold`] / [`fold_data`]: folded text plus event name, sample counts and warnings.
//! - [`fold_file`]: what the profile loader calls (`--via-perf` skips it); [`Native::Fallback`]
//!   names why `perf script` must read the file instead.
//! - [`Samples`]: the resolved samples one by one (frames with kinds, raw addresses,
//!   period, time, pid/tid), for exporters; given each BPF program's function addresses
//!   ([`Samples::bpf_programs`]), each BPF frame also names the program loaded there at the
//!   sample's time ([`Frame::bpf_prog`]), which tells apart two loads JIT-ed at one place.
//! - [`PerfData`]: the container, for other readers of feature sections.
//!
//! **Raw samples and feature sections** (the interface `annotate` uses to map BPF
//! instruction addresses to source lines, with no symbolisation on the way):
//! - [`for_each_sample`]`(path, |s: &`[`RawSample`]`| …)` → the [`PerfData`]: every sample in
//!   file order, `s.ips` its call chain addresses leaf first without `PERF_CONTEXT_*` markers,
//!   `s.weight` its period (1 when none), `s.pid`, `s.tid`, `s.attr`;
//!   [`PerfData::for_each_sample`] on a file already open.
//! - [`PerfData::feature_section`]`(id) -> Option<&[u8]>`: a header feature section's raw bytes
//!   as perf wrote them, e.g. [`feature::BPF_PROG_INFO`] (25) and [`feature::BPF_BTF`] (26).
//!
//! Refused with [`PerfDataError::Unsupported`] (fall back to `perf script`): pipe-mode files,
//! compressed recordings (`-z`), directory-format recordings (`--threads`), recordings of
//! another architecture, the pre-2011 format, and several events without sample ids.
//!
//! Known differences from `perf script` (documented where they are made, tested in
//! `tests/native.rs` and `tests/native_prop.rs`): C++ names are demangled by `cpp_demangle`
//! where perf 6.1 uses libiberty (long templates may print differently); OCaml and Java
//! symbols stay mangled; 32-bit ELF binaries get no symbols; module symbols come from
//! kallsyms (perf prefers the `.ko` file's); where perf's rb-trees hold overlapping symbols or
//! maps, the nearest preceding one that holds the address wins; a comm beginning with `#` or
//! with an all-digit first word (on which inferno chokes) is dropped or kept whole. As root,
//! binaries and perf map files are opened without following a symbolic link.
//!
//! Layouts and behaviour follow perf 6.1's sources (`tools/perf/util/header.c`, `session.c`,
//! `machine.c`, `symbol.c`, `symbol-elf.c`, `map.c`, `maps.c`, `thread.c`, `evsel.c`,
//! `builtin-script.c`) and `include/uapi/linux/perf_event.h`; each submodule names its files.

mod attr;
mod buildid;
pub(crate) mod cursor;
mod demangle;
mod elf;
mod error;
mod events;
mod file;
mod fold;
mod header;
mod inferno;
mod kallsyms;
mod kernel;
mod load;
mod maps;
mod progress;
mod raw;
mod record;
mod resolve;
mod symtab;
mod threads;

pub use attr::{read_format, sample, EventAttr};
pub use buildid::{hex, BuildIdEntry};
pub use cursor::Endian;
pub use error::PerfDataError;
pub use file::PerfData;
pub use fold::{
    fold, fold_data, fold_data_observed, fold_data_with, Decorate, FoldHooks, FoldOptions,
    FoldedProfile, FoldedStack, FoldedStacks, Observer,
};
pub use header::{feature, incomplete, is_perf_data, read_at, unfinished};
pub(crate) use kernel::KERNEL_DSO;
pub use load::{fold_file, Native};
pub use raw::{for_each_sample, RawSample};
pub use record::{
    BpfEvent, Comm, Ksymbol, Mmap, RawRecord, Record, Records, Sample, SampleId, Task,
};
pub use resolve::{
    BpfPrograms, Frame, FrameId, FrameKind, FrameTable, ResolvedSample, Samples, SymbolOptions,
};
