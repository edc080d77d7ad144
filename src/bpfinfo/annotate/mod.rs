//! `annotate`'s reading of a perf.data: the BPF program info of its header
//! ([`super::source::read_features`]), its samples ([`super::source::for_each_sample`]) put
//! through the [`Aggregator`], and the result per BPF function (a program's main function,
//! its sub-programs, tail-called programs: each under its own name) as [`Annotation`], with
//! what could not be mapped explained in `notes`.

use std::path::Path;

use anyhow::Result;

pub mod build;
pub mod calls;
pub mod text;

use super::source::{for_each_sample, read_features, RawFrame, SampleSource};
use super::{Aggregator, BpfInfo, Frame, FrameKind, IpKind};
use crate::error::usage;
use crate::profile::perfdata::{FrameId, ResolvedSample};
pub use build::{Annotation, AsmInsn, Helper, Line, Program, Request};
use calls::CallNames;
use rustc_hash::FxHashMap;

/// The program info of the perf.data, with its architecture; an error explains a file
/// without it.
pub(crate) fn load_info(input: &Path) -> Result<(BpfInfo, Option<String>)> {
    let feats = read_features(input)?;
    let (Some(progs), btf) = (feats.prog_info, feats.btf) else {
        return Err(usage(format!(
            "{} has no BPF program info (perf.data header feature HEADER_BPF_PROG_INFO): it was recorded with --no-bpf-event, or by a perf older than 5.1 or built without libbpf; record again with `ebpf-prof record` (or `perf record` of perf ≥ 5.1 as root)",
            input.display()
        )));
    };
    if !feats.little_endian {
        return Err(usage(format!(
            "{} was recorded on a big-endian machine: its BPF program info is not read (perf does not read it either)",
            input.display()
        )));
    }
    let info = BpfInfo::from_sections(&progs, btf.as_deref().unwrap_or(&[]), true)
        .map_err(|e| usage(format!("{}: {e}", input.display())))?;
    if info.progs.is_empty() {
        return Err(usage(format!(
            "{} lists no BPF programs in its header: none was loaded when perf started or while it ran, or perf recorded with --no-bpf-event or without CAP_SYS_ADMIN; load the hook first and record with `ebpf-prof record`",
            input.display()
        )));
    }
    Ok((info, feats.arch))
}

/// A perf call-chain entry as an aggregator frame.
pub fn frame<'a>(info: &BpfInfo, raw: &RawFrame<'a>) -> Frame<'a> {
    let bpf = raw.sym.is_some_and(|s| s.starts_with("bpf_prog_")) || info.func_at(raw.ip).is_some();
    let kind = if bpf {
        FrameKind::Bpf
    } else if raw.ip >= 0xffff_8000_0000_0000 {
        FrameKind::Kernel
    } else {
        FrameKind::User
    };
    Frame {
        ip: raw.ip,
        kind,
        name: raw.sym,
        prog: raw.prog,
    }
}

/// Reads the samples of `input` through `info`.
pub(crate) fn aggregate(src: &SampleSource<'_>, info: &BpfInfo) -> Result<Aggregator> {
    let mut agg = Aggregator::default();
    for_each_sample(src, info.programs(), |sample| {
        feed(info, &mut agg, sample.frames, sample.weight, sample.time)
    })?;
    Ok(agg)
}

/// Where programs overlap (one JIT-ed over another's place while recording), BPF frame
/// `depth` (0: the sample IP) of a sample at `time` gets the id of the program that was there
/// ([`BpfInfo::func_at_hinted`]: by the reader's id, the tag, the time), so that the aggregator,
/// which sees no times, looks it up in that program.
pub(crate) fn by_time(info: &BpfInfo, frame: &mut Frame<'_>, depth: usize, time: Option<u64>) {
    if !info.overlaps() || frame.kind != FrameKind::Bpf {
        return;
    }
    let kind = if depth == 0 {
        IpKind::Sample
    } else {
        IpKind::Return
    };
    let hints = super::FrameHints {
        name: frame.name,
        prog: frame.prog,
        time,
    };
    let addr = super::lookup::effective_addr(frame.ip, kind);
    if let Some(at) = info.func_at_hinted(addr, hints) {
        frame.prog = Some(info.progs[at.prog].id);
    }
}

/// Add one sample (its call chain, innermost first, weight and time) to `agg`.
pub fn feed(
    info: &BpfInfo,
    agg: &mut Aggregator,
    chain: &[RawFrame<'_>],
    weight: u64,
    time: Option<u64>,
) {
    // Only the frames up to the innermost BPF one matter; most samples have none.
    let Some(index) = chain
        .iter()
        .position(|f| frame(info, f).kind == FrameKind::Bpf)
    else {
        agg.add(info, &[], weight);
        return;
    };
    let mut frames: Vec<Frame<'_>> = chain[..=index].iter().map(|f| frame(info, f)).collect();
    by_time(info, &mut frames[index], index, time);
    agg.add(info, &frames, weight);
}

/// [`feed`] for the samples of the built-in reader, which come by the hundred thousand but
/// through few distinct innermost BPF frames: each sample is reduced to what
/// [`Aggregator::add`] reads of it (the innermost BPF frame's address, name and program id,
/// and the name of the frame it called), and the weights of equal reductions are summed; [`ResolvedFeed::finish`]
/// adds each reduction once, in the order it was first seen, so the result is the one
/// per-sample feeding gives.
#[derive(Default)]
pub(crate) struct ResolvedFeed {
    /// Per frame id of the reader's table: 0 not yet looked at, 1 not BPF by name, 2 BPF.
    named_bpf: Vec<u8>,
    pending: FxHashMap<Reduction, Pending>,
    /// Weight of samples without a BPF frame.
    other: u64,
}

/// What [`ResolvedFeed`] keeps of a sample: the innermost BPF frame and what it called.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct Reduction {
    /// The innermost BPF frame's address and its id in the reader's frame table.
    bpf_ip: u64,
    bpf_frame: u32,
    callee: Callee,
    /// The id of the BPF program at that address, or `u32::MAX` when not known.
    prog: u32,
}

/// The frame an innermost BPF frame called.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Callee {
    /// None: the sample is in the BPF code itself.
    Nothing,
    /// A frame with a name, by its id in the reader's frame table.
    Named(u32),
    /// A frame without a name, by its address (shown as such).
    Unnamed(u64),
}

/// One reduction of [`ResolvedFeed`]: its weight, when it was first seen, and its names.
struct Pending {
    weight: u64,
    first: usize,
    name: Option<String>,
    prog: Option<u32>,
    callee: Option<String>,
}

impl ResolvedFeed {
    /// Whether frame `id` is named as BPF code (`bpf_prog_…`), as [`frame`] decides; the
    /// per-id memo is sized to the table already.
    fn named_bpf(&mut self, sample: &ResolvedSample<'_>, id: FrameId) -> bool {
        let memo = &mut self.named_bpf[id.0 as usize];
        if *memo == 0 {
            let sym = sample.table.get(id).and_then(|f| f.symbol.as_deref());
            *memo = 1 + u8::from(sym.is_some_and(|n| n.starts_with("bpf_prog_")));
        }
        *memo == 2
    }

    /// Adds one sample.
    pub fn add(&mut self, info: &BpfInfo, sample: &ResolvedSample<'_>) {
        let weight = sample.period.unwrap_or(1);
        if self.named_bpf.len() < sample.table.len() {
            self.named_bpf.resize(sample.table.len(), 0);
        }
        let in_bpf = |me: &mut Self, (&ip, &id): (&u64, &FrameId)| {
            me.named_bpf(sample, id) || (info.spans(ip) && info.func_at(ip).is_some())
        };
        let Some(depth) = sample
            .ips
            .iter()
            .zip(sample.frames)
            .position(|frame| in_bpf(self, frame))
        else {
            self.other += weight;
            return;
        };
        let sym = |id: FrameId| sample.table.get(id).and_then(|frame| frame.symbol.clone());
        let callee = match depth.checked_sub(1) {
            None => Callee::Nothing,
            Some(below) if sym(sample.frames[below]).is_some() => {
                Callee::Named(sample.frames[below].0)
            }
            Some(below) => Callee::Unnamed(sample.ips[below]),
        };
        let frame = sample.table.get(sample.frames[depth]);
        let mut bpf = Frame {
            ip: sample.ips[depth],
            kind: FrameKind::Bpf,
            name: frame.and_then(|frame| frame.symbol.as_deref()),
            prog: frame.and_then(|frame| frame.bpf_prog),
        };
        by_time(info, &mut bpf, depth, sample.time);
        let key = Reduction {
            bpf_ip: sample.ips[depth],
            bpf_frame: sample.frames[depth].0,
            callee,
            prog: bpf.prog.unwrap_or(u32::MAX),
        };
        let first = self.pending.len();
        let pending_line = self.pending.entry(key).or_insert_with(|| Pending {
            weight: 0,
            first,
            name: bpf.name.map(str::to_string),
            prog: bpf.prog,
            callee: depth
                .checked_sub(1)
                .and_then(|below| sym(sample.frames[below])),
        });
        pending_line.weight += weight;
    }

    /// Adds what was fed to `agg`.
    pub fn finish(self, info: &BpfInfo, agg: &mut Aggregator) {
        agg.add(info, &[], self.other);
        let mut pending: Vec<_> = self.pending.into_iter().collect();
        pending.sort_unstable_by_key(|(_, entry)| entry.first);
        for (key, entry) in pending {
            let bpf = Frame {
                ip: key.bpf_ip,
                kind: FrameKind::Bpf,
                name: entry.name.as_deref(),
                prog: entry.prog,
            };
            let callee_ip = match key.callee {
                Callee::Nothing => {
                    agg.add(info, &[bpf], entry.weight);
                    continue;
                }
                Callee::Named(_) => 0,
                Callee::Unnamed(ip) => ip,
            };
            let callee = Frame {
                ip: callee_ip,
                kind: FrameKind::Kernel,
                name: entry.callee.as_deref(),
                prog: None,
            };
            agg.add(info, &[callee, bpf], entry.weight);
        }
    }
}

/// Runs the whole reading.
pub fn annotate(req: &Request<'_>) -> Result<Annotation> {
    let (info, arch) = load_info(req.source.input)?;
    let agg = aggregate(&req.source, &info)?;
    annotate_from(req, &info, arch.as_deref(), agg)
}

/// The reading from samples already aggregated (e.g. while `report` folded them in the same
/// pass).
pub(crate) fn annotate_from(
    req: &Request<'_>,
    info: &BpfInfo,
    arch: Option<&str>,
    agg: Aggregator,
) -> Result<Annotation> {
    let (report, by_ip) = agg.finish(info);
    if report.total == 0 {
        return Err(usage(format!(
            "{} holds no samples (was the recording empty?)",
            req.source.input.display()
        )));
    }
    let mut annotation = build::build(info, &report, req)?;
    if req.asm {
        let calls = call_names(req, info, &mut annotation.notes)?;
        build::add_asm(&mut annotation, info, &by_ip, (arch, report.total), &calls);
    }
    Ok(annotation)
}

/// What `--asm` names call targets from: the BPF functions of the perf.data's program info,
/// under the names `annotate` shows, and the kernel's text symbols from a kallsyms of the
/// recording's time (the snapshot beside it, `--kallsyms`, perf's build-id cache). Without
/// one, a note says why calls into the kernel are not named.
fn call_names(req: &Request<'_>, info: &BpfInfo, notes: &mut Vec<String>) -> Result<CallNames> {
    let record = crate::profile::run_record_quiet(req.source.input);
    let names = crate::profile::prognames::ProgramNames::from_record(record.as_ref());
    let mut bpf = std::collections::HashMap::new();
    for prog in &info.progs {
        for (index, func) in prog.funcs.iter().enumerate() {
            let name = build::display_name(info, &names, (prog.id, index), &func.sym_name);
            bpf.entry(func.addr).or_insert(name);
        }
    }
    let input = req.source.input;
    let (file, _) = crate::profile::open_regular(input, crate::profile::Role::Profile, false)?;
    let symbols =
        crate::profile::kernel_symbols::choose(input, &file, req.source.kallsyms, record.as_ref())?;
    let kernel = match &symbols.text {
        Some(text) if symbols.source.from_recording_time() => {
            Some(crate::host::kallsyms::parse(&String::from_utf8_lossy(text)))
        }
        _ => None,
    };
    if kernel.is_none() {
        notes.push("--asm: calls into the kernel (helpers, kfuncs) are shown as (unknown target): no kallsyms taken when the profile was recorded is at hand (the INPUT.kallsyms snapshot `record` writes, or --kallsyms FILE); another boot's would give wrong names".to_string());
    }
    Ok(CallNames::new(kernel.as_deref(), bpf))
}
