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
use super::maps::Dsos;
use super::record::{self, cpumode, RawRecord};
use super::threads::{CommId, SpaceId, Threads};
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
    /// The kallsyms snapshot to name kernel addresses with; `None`: kernel frames stay
    /// unnamed (`[kernel.kallsyms]`).
    pub kallsyms: Option<PathBuf>,
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
    fn intern(&mut self, f: Frame) -> FrameId {
        if let Some(&id) = self.ids.get(&f) {
            return id;
        }
        let id = FrameId(self.frames.len() as u32);
        self.frames.push(f.clone());
        self.ids.insert(f, id);
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
    ucache: FxHashMap<SpaceId, (u64, FxHashMap<u64, FrameId>)>,
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

/// perf's build-id cache directory.
fn default_buildid_dir() -> Option<PathBuf> {
    if let Some(d) = std::env::var_os("PERF_BUILDID_DIR") {
        return Some(PathBuf::from(d));
    }
    std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".debug"))
}

impl<'d> Samples<'d> {
    /// Index `data` and prepare symbol sources; reads the kallsyms file now.
    pub fn new(data: &'d PerfData, opts: &SymbolOptions) -> Result<Samples<'d>, PerfDataError> {
        let kallsyms = match &opts.kallsyms {
            Some(p) => Some(std::fs::read(p).map_err(|source| PerfDataError::Io {
                path: p.clone(),
                source,
            })?),
            None => None,
        };
        let build_ids = data
            .build_ids()
            .into_iter()
            .map(|b| (b.filename, b.build_id))
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
            keys: data.attrs().iter().map(|a| a.filter_key()).collect(),
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
            let e = self.entries[self.pos];
            self.pos += 1;
            self.apply(e);
        }
        let c = self.current?;
        Some(ResolvedSample {
            attr: c.attr,
            time: c.time,
            pid: c.pid,
            tid: c.tid,
            cpu: c.cpu,
            period: c.period,
            comm: self.threads.comm_bytes(c.comm),
            comm_id: c.comm,
            ips: &self.ips,
            frames: &self.frames,
            table: &self.table,
        })
    }

    /// The file offset of the record last replayed (for progress).
    pub fn offset(&self) -> u64 {
        self.pos
            .checked_sub(1)
            .and_then(|i| self.entries.get(i))
            .map_or(0, |e| e.offset)
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

    fn apply(&mut self, e: Entry) {
        let Some(r) = self.data.record_at(e.offset) else {
            return;
        };
        let Some(attr) = self.data.attrs().get(e.attr as usize) else {
            return;
        };
        let (endian, trailer) = (self.data.endian(), attr.trailer_len());
        match r.kind {
            record::SAMPLE => self.sample(&r, e.attr as usize),
            record::MMAP | record::MMAP2 => {
                if let Some(m) = record::parse_mmap(&r, trailer, endian) {
                    self.mmap(&r, &m);
                }
            }
            record::COMM => {
                if let Some(c) = record::parse_comm(&r, trailer, endian) {
                    let th = self.threads.findnew(c.pid as i32, c.tid as i32);
                    self.threads.set_comm(th, c.comm);
                }
            }
            record::FORK => {
                if let Some(t) = record::parse_task(r.body, endian) {
                    let exec_fork = r.misc & record::MISC_BIT13 != 0;
                    let id = |v: u32| v as i32;
                    self.threads
                        .fork(id(t.pid), id(t.tid), id(t.ppid), id(t.ptid), exec_fork);
                }
            }
            record::EXIT => {
                if let Some(t) = record::parse_task(r.body, endian) {
                    self.threads.exit(t.pid as i32, t.tid as i32);
                }
            }
            record::KSYMBOL => {
                if let Some(k) = record::parse_ksymbol(&r, trailer, endian) {
                    let name = String::from_utf8_lossy(k.name);
                    self.kernel
                        .ksymbol(k.addr, k.len, k.ksym_type == 1, k.unregister(), &name);
                }
            }
            record::BPF_EVENT => {
                // PROG_LOAD (1); an unload needs nothing: its KSYMBOLs unregister the maps.
                let load = record::parse_bpf_event(r.body, endian).filter(|b| b.kind == 1);
                if let Some(b) = load {
                    if let Some(funcs) = self.bpf_programs.get(&b.id) {
                        self.kernel.bpf_loaded(b.id, funcs);
                    }
                }
            }
            _ => {}
        }
    }

    fn mmap(&mut self, r: &RawRecord<'_>, m: &record::Mmap<'_>) {
        let name = String::from_utf8_lossy(m.filename);
        let mode = r.misc & cpumode::MASK;
        if mode == cpumode::KERNEL || mode == 4 {
            self.kernel.mmap(&name, m.start, m.len, m.pgoff);
            return;
        }
        let th = self.threads.findnew(m.pid as i32, m.tid as i32);
        let exec = match m.prot {
            Some(p) => p & 4 != 0,
            None => r.misc & record::MISC_BIT13 == 0,
        };
        if let Some(id) = m.build_id {
            self.dsos.set_build_id(&name, id);
        }
        let um = self.dsos.map(
            &name,
            self.threads.ns_pid(th),
            exec,
            m.start,
            m.len,
            m.pgoff,
        );
        self.threads.insert_map(th, um);
    }

    fn sample(&mut self, r: &RawRecord<'_>, attr_idx: usize) {
        let Some(attr) = self.data.attrs().get(attr_idx) else {
            return;
        };
        let Some(s) = record::parse_sample(r.body, attr, self.data.endian()) else {
            return;
        };
        let (pid, tid) = (s.pid as i32, s.tid as i32);
        if tid == -1 {
            // A task caught exiting, its ids already gone: perf script drops the sample.
            self.skipped += 1;
            return;
        }
        let th = self.threads.findnew(pid, tid);
        if self.first_event_only {
            let key = self.keys.get(attr_idx).map_or("", String::as_str);
            if self.chosen.get_or_insert_with(|| key.to_string()) != key {
                self.skipped += 1;
                return;
            }
        }
        let mode = r.misc & cpumode::MASK;
        let leaf = self.resolve(mode, th, s.ip);
        self.ips.clear();
        self.frames.clear();
        match s.callchain {
            Some(raw) => self.walk(th, raw),
            None => {
                self.ips.push(s.ip);
                self.frames.push(leaf);
            }
        }
        self.current = Some(Current {
            attr: attr_idx,
            time: s.time,
            pid,
            tid,
            cpu: s.cpu,
            period: s.period,
            comm: self.threads.comm(th),
        });
    }

    /// `thread__resolve_callchain_sample` for a frame-pointer chain, callee first.
    fn walk(&mut self, th: usize, raw: &[u8]) {
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
            let f = self.resolve(mode, th, ip);
            self.ips.push(ip);
            self.frames.push(f);
        }
    }

    /// The frame of `ip` in `mode` for thread `th`, cached per address-space state.
    fn resolve(&mut self, mode: u16, th: usize, ip: u64) -> FrameId {
        match mode {
            cpumode::KERNEL => self.resolve_kernel(ip),
            cpumode::USER => self.resolve_user(th, ip),
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
                symbol_start: sym.as_ref().map(|s| s.1),
                symbol: sym.map(|s| s.0),
                dso: Some(dso),
                bpf_prog: None,
            },
            KernelHit::Ksym(sym, dso, bpf, prog) => Frame {
                kind: if bpf {
                    FrameKind::Bpf
                } else {
                    FrameKind::Kernel
                },
                symbol_start: sym.as_ref().map(|s| s.1),
                symbol: sym.map(|s| s.0),
                dso: Some(dso),
                bpf_prog: prog,
            },
            KernelHit::None => Frame::unknown(),
        };
        let id = self.table.intern(frame);
        self.kcache.insert(ip, id);
        id
    }

    fn resolve_user(&mut self, th: usize, ip: u64) -> FrameId {
        let (sid, space) = self.threads.space(th);
        let generation = self.threads.space_generation.get(sid).copied().unwrap_or(0);
        let cache = self.ucache.entry(sid).or_default();
        if cache.0 != generation {
            cache.1.clear();
            cache.0 = generation;
        }
        if let Some(&id) = cache.1.get(&ip) {
            return id;
        }
        let frame = match space.find(ip).copied() {
            None => Frame::unknown(),
            Some(m) => {
                let sym = self.dsos.symbol(m.dso, m.map_ip(ip));
                Frame {
                    kind: FrameKind::User,
                    symbol_start: sym.as_ref().map(|s| s.1),
                    symbol: sym.map(|s| s.0),
                    dso: Some(self.dsos.name(m.dso).to_string()),
                    bpf_prog: None,
                }
            }
        };
        let id = self.table.intern(frame);
        self.ucache.entry(sid).or_default().1.insert(ip, id);
        id
    }
}
