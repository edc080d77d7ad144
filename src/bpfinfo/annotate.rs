//! `annotate`'s reading of a perf.data: the BPF program info of its header
//! ([`super::source::read_features`]), its samples ([`super::source::for_each_sample`]) put
//! through the [`Aggregator`], and the result per BPF function (a program's main function,
//! its sub-programs, tail-called programs: each under its own name) as [`Annotation`], with
//! what could not be mapped explained in `notes`.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::Result;
use serde::Serialize;

use super::source::{for_each_sample, read_features, RawFrame, SampleSource};
use super::{Aggregator, BpfInfo, Frame, FrameKind, LineCost, LineMapping};
use crate::error::usage;

/// A helper, kfunc or other kernel function a line called, with its share.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Helper {
    /// Its symbol (`bpf_probe_read_user_str`).
    pub name: String,
    /// % of all samples' weight spent below the line in it.
    pub percent: f64,
}

/// One JIT-ed instruction of a hot line (`--asm`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AsmInsn {
    /// Offset in the function.
    pub offset: u64,
    /// Intel syntax.
    pub text: String,
    /// % of all samples with the IP at this instruction.
    pub self_percent: f64,
    /// % of all samples in what this instruction called (its return address was on the stack).
    pub call_percent: f64,
}

/// One source line of a function (or one offset, without line info).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Line {
    /// Source file as clang recorded it.
    pub file: String,
    /// Line number; 0 for code clang gave no line, and without line info.
    pub line: u32,
    /// The source text of the line.
    pub source: String,
    /// Without line info: the offset in the function (`+0x19b`).
    pub offset: Option<String>,
    /// % of all samples' weight with the IP in the line's JIT-ed code.
    pub self_percent: f64,
    /// % of all samples' weight whose innermost BPF frame is in this line.
    pub incl_percent: f64,
    /// The line's inclusive weight over its function's (%).
    pub function_percent: f64,
    /// What it called, heaviest first.
    pub helpers: Vec<Helper>,
    /// Its instructions, with `--asm`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub asm: Option<Vec<AsmInsn>>,
}

/// One BPF function with samples: a program, a sub-program or a tail-called program.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Program {
    /// Its name without `bpf_prog_<tag>_` (the BTF or kernel name).
    pub name: String,
    /// Kernel program id.
    pub id: u32,
    /// Index of the function in the program (0: its main function).
    pub function_index: usize,
    /// Symbol as perf named the frames (`bpf_prog_<tag>_<name>`).
    pub symbol: String,
    /// For a sub-program (BPF-to-BPF call target): the program's main function.
    pub subprogram_of: Option<String>,
    /// % of all samples' weight whose innermost BPF frame is in this function.
    pub percent: f64,
    /// % of all samples' weight with the IP in this function's code.
    pub self_percent: f64,
    /// False when the program was built without `-g` (offsets stand in for lines).
    pub line_info: bool,
    /// Its hottest lines, by inclusive share.
    pub lines: Vec<Line>,
}

/// What `annotate` says about one perf.data.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Annotation {
    /// The version of this document ([`crate::out::JSON_SCHEMA`]).
    pub schema: u32,
    pub input: String,
    /// Sum of all samples' periods.
    pub total_weight: u64,
    /// % of the weight whose innermost BPF frame is in a program the header describes.
    pub bpf_percent: f64,
    /// % of the weight in BPF code the header has no program info for.
    pub unmapped_bpf_percent: f64,
    /// Functions, heaviest first.
    pub programs: Vec<Program>,
    /// What could not be mapped, and why.
    pub notes: Vec<String>,
}

/// What `annotate` is asked.
#[derive(Debug, Clone)]
pub struct Request<'a> {
    /// perf.data, kallsyms snapshot, perf.
    pub source: SampleSource<'a>,
    /// Only functions whose name (or symbol) is this.
    pub prog: Option<String>,
    /// Lines per function.
    pub top: usize,
    /// Disassemble the shown lines.
    pub asm: bool,
}

/// The program info of the perf.data, with its architecture; an error explains a file
/// without it.
pub fn load_info(input: &Path) -> Result<(BpfInfo, Option<String>)> {
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
pub fn frame<'a>(info: &BpfInfo, f: &RawFrame<'a>) -> Frame<'a> {
    let bpf = f.sym.is_some_and(|s| s.starts_with("bpf_prog_")) || info.func_at(f.ip).is_some();
    let kind = if bpf {
        FrameKind::Bpf
    } else if f.ip >= 0xffff_8000_0000_0000 {
        FrameKind::Kernel
    } else {
        FrameKind::User
    };
    Frame {
        ip: f.ip,
        kind,
        name: f.sym,
    }
}

/// Reads the samples of `input` through `info`.
pub fn aggregate(src: &SampleSource<'_>, info: &BpfInfo) -> Result<Aggregator> {
    let mut agg = Aggregator::default();
    for_each_sample(src, |s| feed(info, &mut agg, s.frames, s.weight))?;
    Ok(agg)
}

/// Add one sample (its call chain, innermost first, and weight) to `agg`.
pub fn feed(info: &BpfInfo, agg: &mut Aggregator, chain: &[RawFrame<'_>], weight: u64) {
    // Only the frames up to the innermost BPF one matter; most samples have none.
    let Some(i) = chain
        .iter()
        .position(|f| frame(info, f).kind == FrameKind::Bpf)
    else {
        agg.add(info, &[], weight);
        return;
    };
    let frames: Vec<Frame<'_>> = chain[..=i].iter().map(|f| frame(info, f)).collect();
    agg.add(info, &frames, weight);
}

/// [`feed`] for a sample of the built-in reader. Most samples never touch BPF code: their
/// weight is counted without building their call chain.
pub fn feed_resolved(
    info: &BpfInfo,
    agg: &mut Aggregator,
    s: &crate::profile::perfdata::ResolvedSample<'_>,
) {
    use crate::profile::perfdata::FrameKind as Kind;
    let weight = s.period.unwrap_or(1);
    let bpf = |(&ip, id): (&u64, &crate::profile::perfdata::FrameId)| {
        info.func_at(ip).is_some() || s.table.get(*id).is_some_and(|f| f.kind == Kind::Bpf)
    };
    if !s.ips.iter().zip(s.frames).any(bpf) {
        return feed(info, agg, &[], weight);
    }
    feed(info, agg, &super::source::raw_frames(s), weight);
}

/// Runs the whole reading.
pub fn annotate(req: &Request<'_>) -> Result<Annotation> {
    let (info, arch) = load_info(req.source.input)?;
    let agg = aggregate(&req.source, &info)?;
    annotate_from(req, &info, arch.as_deref(), agg)
}

/// The reading from samples already aggregated (e.g. while `report` folded them in the same
/// pass).
pub fn annotate_from(
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
    let mut a = super::annotate_build::build(info, &report, req)?;
    if req.asm {
        super::annotate_build::add_asm(&mut a, info, &by_ip, arch, report.total);
    }
    Ok(a)
}

/// Lines grouped by `(prog id, func index)`, in report order.
pub(crate) fn by_function(lines: &[LineCost]) -> BTreeMap<(u32, usize), Vec<&LineCost>> {
    let mut m: BTreeMap<(u32, usize), Vec<&LineCost>> = BTreeMap::new();
    for l in lines {
        m.entry((l.prog_id, l.func_index)).or_default().push(l);
    }
    m
}

/// Whether a program's functions have usable line info.
pub(crate) fn has_lines(info: &BpfInfo, id: u32) -> bool {
    info.prog(id)
        .is_some_and(|p| p.line_mapping != LineMapping::Absent && p.has_line_addresses())
}
