//! Samples with their call chains resolved to frames, replaying the recording the way
//! `perf script` does: records in time order update threads, mappings and kernel symbols,
//! and each sample's chain is walked with perf's rules (context markers switch between kernel
//! and user maps, an unknown marker discards the chain, at most 127 addresses).
//!
//! Each distinct address is resolved once per state of its address space and interned as a
//! [`FrameId`]; a sample is a slice of ids, so walking allocates nothing per sample.
//!
//! Source: `tools/perf/util/machine.c: thread__resolve_callchain_sample()`,
//! `add_callchain_ip()`, `machine__resolve()`; `tools/perf/util/event.c: thread__find_map()`.

use super::error::PerfDataError;
use super::events::{self, Entry};
use super::file::PerfData;
use super::kernel::{KernelHit, KernelMaps};
use super::maps::{Dsos, Extent};
use super::record::{self, cpumode, RawRecord};
use super::threads::{CommId, SpaceId, ThreadId, Threads};
use rustc_hash::FxHashMap;
use std::collections::HashMap;
use std::path::PathBuf;

/// Program id → the start address of each of its JIT-ed functions (`jited_ksyms` of the
/// header's BPF_PROG_INFO), for [`Samples::bpf_programs`].
pub type BpfPrograms = HashMap<u32, Vec<u64>>;

/// `PERF_MAX_STACK_DEPTH`: perf script resolves at most this many addresses per chain.
const MAX_STACK: usize = 127;
/// Callchain entries at or above this are context markers (`PERF_CONTEXT_MAX`).
const CONTEXT_MAX: u64 = -4095i64 as u64;
const CONTEXT_HV: u64 = -32i64 as u64;
const CONTEXT_KERNEL: u64 = -128i64 as u64;
const CONTEXT_USER: u64 = -512i64 as u64;

/// Where symbols come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SymbolOptions {
    /// The text of the kallsyms snapshot to name kernel addresses with, read by the caller
    /// from the file it checked; `None`: kernel frames stay unnamed (`[kernel.kallsyms]`).
    pub kallsyms: Option<std::sync::Arc<[u8]>>,
    /// perf's build-id cache; `None`: `$PERF_BUILDID_DIR`, else `$HOME/.debug`.
    pub buildid_dir: Option<PathBuf>,
    /// Read user-space binaries for symbols (false: user frames are `[dso basename]`).
    pub user_symbols: bool,
}

impl Default for SymbolOptions {
    fn default() -> SymbolOptions {
        SymbolOptions {
            kallsyms: None,
            buildid_dir: None,
            user_symbols: true,
        }
    }
}

/// What kind of code a frame is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum FrameKind {
    /// The kernel image, a module, or other kernel text named by a KSYMBOL (kprobe slots).
    Kernel,
    /// JIT-ed BPF code named by a KSYMBOL of type BPF (programs, trampolines, dispatchers).
    Bpf,
    /// A user-space mapping.
    User,
    /// An address in no known mapping.
    Unknown,
}

/// A resolved code location, shared by every address that resolves to it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Frame {
    /// What kind of code it is.
    pub kind: FrameKind,
    /// The symbol, as perf would print it (`None`: perf prints `[unknown]`).
    pub symbol: Option<String>,
    /// The DSO, as perf would print it (`[kernel.kallsyms]`, a BPF program's own name, a
    /// path, `[vdso]`); `None`: no mapping.
    pub dso: Option<String>,
    /// Where the symbol starts: the absolute address for kernel and BPF frames (for BPF, the
    /// KSYMBOL's address), the offset in the file for user frames.
    pub symbol_start: Option<u64>,
    /// For a BPF frame: the id of the program that was loaded there at the sample's time,
    /// when [`Samples::bpf_programs`] was given and the recording has its BPF_EVENT.
    pub bpf_prog: Option<u32>,
}

impl Frame {
    fn unknown() -> Frame {
        Frame {
            kind: FrameKind::Unknown,
            symbol: None,
            dso: None,
            symbol_start: None,
            bpf_prog: None,
        }
    }
}

/// A handle on a [`Frame`] in a [`FrameTable`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FrameId(pub u32);

/// Every distinct frame met so far.
#[derive(Debug, Default)]
pub struct FrameTable {
    frames: Vec<Frame>,
    ids: HashMap<Frame, FrameId>,
}

impl FrameTable {
    fn intern(&mut self, frame: Frame) -> FrameId {
        if let Some(&id) = self.ids.get(&frame) {
            return id;
        }
        let id = FrameId(self.frames.len() as u32);
        self.frames.push(frame.clone());
        self.ids.insert(frame, id);
        id
    }

    /// The frame behind `id`.
    pub fn get(&self, id: FrameId) -> Option<&Frame> {
        self.frames.get(id.0 as usize)
    }

    /// Number of frames.
    pub fn len(&self) -> usize {
        self.frames.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.frames.is_empty()
    }
}

/// One sample, resolved. Borrowed from [`Samples`] until the next call.
#[derive(Debug, Clone, Copy)]
pub struct ResolvedSample<'s> {
    /// Index of the sample's event in [`PerfData::attrs`].
    pub attr: usize,
    pub time: Option<u64>,
    pub pid: i32,
    pub tid: i32,
    pub cpu: Option<u32>,
    /// The sample's period (`None` when samples carry none; perf then counts 1).
    pub period: Option<u64>,
    /// The thread's name at the sample's time, as perf knows it (`:TID` when unknown).
    pub comm: &'s [u8],
    pub(crate) comm_id: CommId,
    /// The call chain's addresses, leaf first, context markers removed.
    pub ips: &'s [u64],
    /// The frame of each address in `ips`.
    pub frames: &'s [FrameId],
    /// The table the ids refer to.
    pub table: &'s FrameTable,
}

/// The fields of the sample being returned.
#[derive(Debug, Clone, Copy)]
struct Current {
    attr: usize,
    time: Option<u64>,
    pid: i32,
    tid: i32,
    cpu: Option<u32>,
    period: Option<u64>,
    comm: CommId,
}

/// Walks a recording's samples in time order, resolving their call chains.
pub struct Samples<'d> {
    data: &'d PerfData,
    entries: Vec<Entry>,
    pos: usize,
    threads: Threads,
    dsos: Dsos,
    kernel: KernelMaps,
    table: FrameTable,
    kcache: FxHashMap<u64, FrameId>,
    kgen: u64,
    ucache: FxHashMap<SpaceId, SpaceCache>,
    ips: Vec<u64>,
    frames: Vec<FrameId>,
    first_event_only: bool,
    chosen: Option<String>,
    /// Each attr's [`EventAttr::filter_key`](super::EventAttr::filter_key), computed once.
    keys: Vec<String>,
    skipped: u64,
    current: Option<Current>,
    /// The functions of each BPF program, to name the program of a BPF frame.
    bpf_programs: BpfPrograms,
}

/// The frames of one address space's addresses, valid while the space's generation is the
/// one they were found in.
#[derive(Debug, Default)]
struct SpaceCache {
    generation: u64,
    frames: FxHashMap<u64, FrameId>,
}

/// perf's build-id cache directory.
fn default_buildid_dir() -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os("PERF_BUILDID_DIR") {
        return Some(PathBuf::from(dir));
    }
    std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".debug"))
}

impl<'d> Samples<'d> {
    /// Index `data` and prepare symbol sources; reads the kallsyms file now.
    pub fn new(data: &'d PerfData, opts: &SymbolOptions) -> Result<Samples<'d>, PerfDataError> {
        let kallsyms = opts.kallsyms.as_ref().map(|text| text.to_vec());
        let build_ids = data
            .build_ids()
            .into_iter()
            .map(|entry| (entry.filename, entry.build_id))
            .collect();
        let dir = opts.buildid_dir.clone().or_else(default_buildid_dir);
        let mut dsos = Dsos::new(build_ids, dir);
        dsos.load_symbols = opts.user_symbols;
        Ok(Samples {
            data,
            entries: events::index(data)?,
            pos: 0,
            threads: Threads::new(),
            dsos,
            kernel: KernelMaps::new(kallsyms),
            table: FrameTable::default(),
            kcache: FxHashMap::default(),
            kgen: 0,
            ucache: FxHashMap::default(),
            ips: Vec::new(),
            frames: Vec::new(),
            first_event_only: false,
            chosen: None,
            keys: data.attrs().iter().map(|attr| attr.filter_key()).collect(),
            skipped: 0,
            current: None,
            bpf_programs: BpfPrograms::new(),
        })
    }

    /// Only yield samples of the first sampled event (by name, as inferno filters).
    pub fn first_event_only(mut self) -> Samples<'d> {
        self.first_event_only = true;
        self
    }

    /// Name the program of each BPF frame ([`Frame::bpf_prog`]) from the recording's
    /// PERF_RECORD_BPF_EVENTs and these functions of each program: two loads of one object,
    /// the second JIT-ed over the first's place, are then told apart by the time of the sample.
    pub fn bpf_programs(mut self, programs: BpfPrograms) -> Samples<'d> {
        self.bpf_programs = programs;
        self
    }

    /// The next sample, or `None` at the end.
    pub fn next_sample(&mut self) -> Option<ResolvedSample<'_>> {
        self.current = None;
        while self.current.is_none() && self.pos < self.entries.len() {
            let entry = self.entries[self.pos];
            self.pos += 1;
            self.apply(entry);
        }
        let current = self.current?;
        Some(ResolvedSample {
            attr: current.attr,
            time: current.time,
            pid: current.pid,
            tid: current.tid,
            cpu: current.cpu,
            period: current.period,
            comm: self.threads.comm_bytes(current.comm),
            comm_id: current.comm,
            ips: &self.ips,
            frames: &self.frames,
            table: &self.table,
        })
    }

    /// The file offset of the record last replayed (for progress).
    pub fn offset(&self) -> u64 {
        self.pos
            .checked_sub(1)
            .and_then(|last| self.entries.get(last))
            .map_or(0, |entry| entry.offset)
    }

    /// The frames met so far.
    pub fn frames(&self) -> &FrameTable {
        &self.table
    }

    /// The name of the event samples are filtered on (after the first sample).
    pub fn event_key(&self) -> Option<&str> {
        self.chosen.as_deref()
    }

    /// Samples left out so far because they belong to another event.
    pub fn skipped_other_events(&self) -> u64 {
        self.skipped
    }

    /// Why kernel frames are unnamed, when they are.
    pub fn kernel_symbols_missing(&self) -> Option<&str> {
        self.kernel.failure()
    }

    fn apply(&mut self, entry: Entry) {
        let Some(raw) = self.data.record_at(entry.offset) else {
            return;
        };
        let Some(attr) = self.data.attrs().get(entry.attr as usize) else {
            return;
        };
        let endian = self.data.endian();
        let trailer = attr.trailer_len();
        match raw.kind {
            record::SAMPLE => self.sample(&raw, entry.attr as usize),
            record::MMAP | record::MMAP2 => {
                if let Some(mmap) = record::parse_mmap(&raw, trailer, endian) {
                    self.mmap(&raw, &mmap);
                }
            }
            record::COMM => {
                if let Some(comm) = record::parse_comm(&raw, trailer, endian) {
                    let thread = self.threads.findnew(comm.pid as i32, comm.tid as i32);
                    self.threads.set_comm(thread, comm.comm);
                }
            }
            record::FORK => {
                if let Some(task) = record::parse_task(raw.body, endian) {
                    let exec_fork = raw.misc & record::MISC_FORK_EXEC != 0;
                    let id = |value: u32| value as i32;
                    self.threads.fork(
                        id(task.pid),
                        id(task.tid),
                        id(task.ppid),
                        id(task.ptid),
                        exec_fork,
                    );
                }
            }
            record::EXIT => {
                if let Some(task) = record::parse_task(raw.body, endian) {
                    self.threads.exit(task.pid as i32, task.tid as i32);
                }
            }
            record::KSYMBOL => {
                if let Some(ksym) = record::parse_ksymbol(&raw, trailer, endian) {
                    self.ksymbol(&ksym);
                }
            }
            record::BPF_EVENT => {
                // An unload needs nothing: its KSYMBOLs unregister the maps.
                let load = record::parse_bpf_event(raw.body, endian)
                    .filter(|event| event.kind == record::BPF_EVENT_PROG_LOAD);
                if let Some(event) = load {
                    if let Some(funcs) = self.bpf_programs.get(&event.id) {
                        self.kernel.bpf_loaded(event.id, funcs);
                    }
                }
            }
            _ => {}
        }
    }

    fn ksymbol(&mut self, ksym: &record::Ksymbol<'_>) {
        let name = String::from_utf8_lossy(ksym.name);
        let bpf = ksym.ksym_type == record::KSYMBOL_TYPE_BPF;
        self.kernel
            .ksymbol(ksym.addr, ksym.len, bpf, ksym.unregister(), &name);
    }

    fn mmap(&mut self, raw: &RawRecord<'_>, mmap: &record::Mmap<'_>) {
        let name = String::from_utf8_lossy(mmap.filename);
        let mode = raw.misc & cpumode::MASK;
        if mode == cpumode::KERNEL || mode == cpumode::GUEST_KERNEL {
            self.kernel.mmap(&name, mmap.start, mmap.len, mmap.pgoff);
            return;
        }
        let thread = self.threads.findnew(mmap.pid as i32, mmap.tid as i32);
        let exec = match mmap.prot {
            Some(prot) => prot & record::PROT_EXEC != 0,
            None => raw.misc & record::MISC_MMAP_DATA == 0,
        };
        if let Some(id) = mmap.build_id {
            self.dsos.set_build_id(&name, id);
        }
        let extent = Extent {
            start: mmap.start,
            len: mmap.len,
            pgoff: mmap.pgoff,
        };
        let map = self
            .dsos
            .map(&name, self.threads.ns_pid(thread), exec, extent);
        self.threads.insert_map(thread, map);
    }

    fn sample(&mut self, raw: &RawRecord<'_>, attr_index: usize) {
        let Some(attr) = self.data.attrs().get(attr_index) else {
            return;
        };
        let Some(sample) = record::parse_sample(raw.body, attr, self.data.endian()) else {
            return;
        };
        let pid = sample.pid as i32;
        let tid = sample.tid as i32;
        if tid == -1 {
            // A task caught exiting, its ids already gone: perf script drops the sample.
            self.skipped += 1;
            return;
        }
        let thread = self.threads.findnew(pid, tid);
        if self.first_event_only {
            let key = self.keys.get(attr_index).map_or("", String::as_str);
            if self.chosen.get_or_insert_with(|| key.to_string()) != key {
                self.skipped += 1;
                return;
            }
        }
        let mode = raw.misc & cpumode::MASK;
        let leaf = self.resolve(mode, thread, sample.ip);
        self.ips.clear();
        self.frames.clear();
        match sample.callchain {
            Some(chain) => self.walk(thread, chain),
            None => {
                self.ips.push(sample.ip);
                self.frames.push(leaf);
            }
        }
        self.current = Some(Current {
            attr: attr_index,
            time: sample.time,
            pid,
            tid,
            cpu: sample.cpu,
            period: sample.period,
            comm: self.threads.comm(thread),
        });
    }

    /// `thread__resolve_callchain_sample` for a frame-pointer chain, callee first.
    fn walk(&mut self, thread: ThreadId, raw: &[u8]) {
        let mut mode = cpumode::USER;
        for ip in record::callchain_entries(raw, self.data.endian()) {
            if self.ips.len() >= MAX_STACK {
                break;
            }
            if ip >= CONTEXT_MAX {
                mode = match ip {
                    CONTEXT_HV => cpumode::HYPERVISOR,
                    CONTEXT_KERNEL => cpumode::KERNEL,
                    CONTEXT_USER => cpumode::USER,
                    _ => {
                        // "invalid callchain context": perf discards the whole chain.
                        self.ips.clear();
                        self.frames.clear();
                        return;
                    }
                };
                continue;
            }
            let frame = self.resolve(mode, thread, ip);
            self.ips.push(ip);
            self.frames.push(frame);
        }
    }

    /// The frame of `ip` in `mode` for `thread`, cached per address-space state.
    fn resolve(&mut self, mode: u16, thread: ThreadId, ip: u64) -> FrameId {
        match mode {
            cpumode::KERNEL => self.resolve_kernel(ip),
            cpumode::USER => self.resolve_user(thread, ip),
            _ => self.table.intern(Frame::unknown()),
        }
    }

    fn resolve_kernel(&mut self, ip: u64) -> FrameId {
        if self.kernel.generation != self.kgen {
            self.kcache.clear();
            self.kgen = self.kernel.generation;
        }
        if let Some(&id) = self.kcache.get(&ip) {
            return id;
        }
        let hit = self.kernel.resolve(ip);
        if self.kernel.generation != self.kgen {
            self.kcache.clear();
            self.kgen = self.kernel.generation;
        }
        let frame = match hit {
            KernelHit::Kernel(sym, dso) => Frame {
                kind: FrameKind::Kernel,
                symbol_start: sym.as_ref().map(|sym| sym.1),
                symbol: sym.map(|sym| sym.0),
                dso: Some(dso),
                bpf_prog: None,
            },
            KernelHit::Ksym(sym, dso, bpf, prog) => Frame {
                kind: if bpf {
                    FrameKind::Bpf
                } else {
                    FrameKind::Kernel
                },
                symbol_start: sym.as_ref().map(|sym| sym.1),
                symbol: sym.map(|sym| sym.0),
                dso: Some(dso),
                bpf_prog: prog,
            },
            KernelHit::None => Frame::unknown(),
        };
        let id = self.table.intern(frame);
        self.kcache.insert(ip, id);
        id
    }

    fn resolve_user(&mut self, thread: ThreadId, ip: u64) -> FrameId {
        let (space_id, space) = self.threads.space(thread);
        let generation = self
            .threads
            .space_generation
            .get(space_id)
            .copied()
            .unwrap_or(0);
        let cache = self.ucache.entry(space_id).or_default();
        if cache.generation != generation {
            cache.frames.clear();
            cache.generation = generation;
        }
        if let Some(&id) = cache.frames.get(&ip) {
            return id;
        }
        let frame = match space.find(ip).copied() {
            None => Frame::unknown(),
            Some(map) => {
                let sym = self.dsos.symbol(map.dso, map.map_ip(ip));
                Frame {
                    kind: FrameKind::User,
                    symbol_start: sym.as_ref().map(|sym| sym.1),
                    symbol: sym.map(|sym| sym.0),
                    dso: Some(self.dsos.name(map.dso).to_string()),
                    bpf_prog: None,
                }
            }
        };
        let id = self.table.intern(frame);
        self.ucache
            .entry(space_id)
            .or_default()
            .frames
            .insert(ip, id);
        id
    }
}
