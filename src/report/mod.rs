//! `report`: "reading the output" of the reference (README.md, "The reference"), computed from
//! folded stacks.
//!
//! From one profile it works out the share of samples inside BPF programs; each program's
//! inclusive and self share (named without its tag, grouped with its sub-functions by stack
//! position); each attach point and the hook's share of its parent and grandparent; the kernel
//! functions the programs spend their time in, by pattern, with a hint where one pattern
//! dominates; the unresolved frames, named from the run's kallsyms snapshot where possible; and
//! whether enough samples fell inside BPF to say anything.
//!
//! Shares are of the total weight of all stacks: folded counts are sample periods when perf.data
//! went through `perf script` (as in `perf report`'s percentages), plain sample counts in a
//! folded file without a run record.

mod assemble;
pub mod delta;
pub mod filter;
pub mod hooks;
mod kinds;
pub mod lines;
mod packet_hints;
pub mod resolve;
#[cfg(test)]
mod tests;
mod text;
mod walk;

use crate::host::kallsyms::{self, Symbol};
use crate::profile::stacks::Stacks;
use crate::profile::Profile;
use crate::runrecord::RunRecord;
use crate::stats::pct;
use serde::Serialize;
use std::path::Path;

/// `*slot += n`, saturating: a count adds up once per frame of a recursive stack, which can go
/// past the profile's total (checked below 2^64 on loading).
pub(crate) fn add(slot: &mut u64, n: u64) {
    *slot = slot.saturating_add(n);
}

/// The report on a loaded profile; its bare addresses are named from the kallsyms the profile
/// was read with, when that was taken at the recording's time (`--kallsyms`, the snapshot
/// beside it, perf's build-id cache); `own_code_line` backs the own-code hint
/// ([`lines::own_code_hint_line`]).
pub fn report_on(
    p: &Profile,
    input: &Path,
    top: usize,
    own_code_line: Option<String>,
) -> anyhow::Result<Report> {
    let stacks = &p.stacks;
    // The snapshot only names frames left as bare addresses: a perf.data without any is not
    // read twice (its reader named every kernel frame from the snapshot already).
    let bare = stacks.stacks.iter().any(|stack| {
        stack
            .frames
            .iter()
            .any(|&id| crate::profile::frames::address(&stacks.frame(id).name).is_some())
    });
    let symbols = &p.kernel_symbols;
    // The snapshot's text as read when it was checked, never the file again.
    let syms = match &symbols.text {
        Some(text) if bare && symbols.source.from_recording_time() => {
            Some(kallsyms::parse(&String::from_utf8_lossy(text)))
        }
        _ => None,
    };
    Ok(build(&Input {
        name: input.display().to_string(),
        stacks,
        record: p.record.as_ref(),
        kallsyms: syms.as_deref(),
        kernel_symbols_note: symbols.note.as_deref(),
        top,
        own_code_line,
        counted: p.samples,
        event: p.sampled.event.as_deref(),
    }))
}

pub use kinds::{Category, Hint, ACTION_SHARE, HINT_SHARE};
pub use walk::Role;

/// Fewer samples inside BPF than this and the shares are too rough to act on: a share p from
/// n samples is known to about ±1.96·√(p(1−p)/n); at n = 400 that is ±5 points at worst.
pub const MIN_BPF_SAMPLES: u64 = 400;

/// What a report is computed from.
#[derive(Debug, Clone)]
pub struct Input<'a> {
    /// How to name the input in the report (its path).
    pub name: String,
    pub stacks: &'a Stacks,
    /// The run's `perf.data.json`, when it sits beside the input.
    pub record: Option<&'a RunRecord>,
    /// The run's kallsyms snapshot, to name unresolved addresses.
    pub kallsyms: Option<&'a [Symbol]>,
    /// Why kernel frames are unnamed or unchecked, when they are (no kallsyms of the
    /// recording's kernel build).
    pub kernel_symbols_note: Option<&'a str>,
    /// How many kernel functions and unresolved frames to list.
    pub top: usize,
    /// The hottest source line in the programs' own code (from the profile's BPF line
    /// information, `ebpf-prof annotate`'s), to back the own-code hint; `None` without it.
    pub own_code_line: Option<String>,
    /// The samples counted in `perf script`'s output, when the profile went through it.
    pub counted: Option<u64>,
    /// The sampled event the profile itself names (a perf.data's attr), for when no run
    /// record says it.
    pub event: Option<&'a str>,
}

/// Where the sample count comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SamplesSource {
    /// perf record's closing line, kept in the run record.
    PerfRecord,
    /// The folded counts themselves: small counts, read as samples (no run record).
    FoldedCounts,
    /// Counted in the profile itself (by the built-in reader, or in `perf script`'s output, one
    /// event line per sample): no run record.
    Counted,
    /// Period-weighted counts and no run record.
    Unknown,
}

/// The share of samples inside BPF.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BpfShare {
    /// Stacks through a BPF frame (programs or glue), % of all.
    pub percent: f64,
    /// Stacks through a named program, % of all.
    pub programs_percent: f64,
    /// Stacks that stop in glue (trampolines, dispatchers, unresolved frames above programs).
    pub glue_percent: f64,
    /// Stacks with an unresolved frame right under a BPF runner and no named BPF below it.
    pub unresolved_under_runners_percent: f64,
    /// Samples inside BPF, estimated from the share when counts are periods.
    pub samples: Option<u64>,
    /// The count below which the shares are too rough (see [`MIN_BPF_SAMPLES`]).
    pub min_samples: u64,
}

/// A frame above an attach point, and how much of it the hook takes.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Ancestor {
    pub name: String,
    /// Its inclusive share of all samples.
    pub percent: f64,
    /// The attach point's inclusive weight over this frame's (%).
    pub hook_share: f64,
}

/// Where programs are entered from: the nearest non-BPF frame above them.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AttachPoint {
    pub name: String,
    /// Inclusive share of all samples (perf report's "children").
    pub percent: f64,
    /// Share of all samples inside BPF under it.
    pub bpf_percent: f64,
    /// How much of the attach point's own time is BPF (%).
    pub bpf_share_of_it: f64,
    pub parent: Option<Ancestor>,
    pub grandparent: Option<Ancestor>,
    /// Programs entered from it.
    pub programs: Vec<String>,
    /// Glue frames between it and the programs (a trampoline, resolved or not).
    pub via: Vec<String>,
    /// Of the programs entered here, those the recording's program list shows attached
    /// nowhere (tail-call targets); `None` when the recording does not say.
    pub attached_nowhere: Option<Vec<String>>,
}

/// A packet hook the programs were entered from, read from the callers above the attach
/// points ([`hooks`]): several attach points can be one hook (`cls_bpf_classify` and, for
/// samples that lost that frame, `__tcf_classify`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PacketHookShare {
    pub hook: hooks::PacketHook,
    /// What it is and which kernel functions run it.
    pub what: String,
    /// Share of all samples inside BPF entered from it.
    pub bpf_percent: f64,
    /// The attach points (nearest non-BPF frames) it was read from.
    pub attach_points: Vec<String>,
}

/// A function of a program: its entry or a sub-function.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Function {
    pub name: String,
    /// Frames below the entry (0 for the entry), when seen in place.
    pub depth: Option<usize>,
    /// The frame above it most often.
    pub called_from: Option<String>,
    pub percent: f64,
    pub self_percent: f64,
    /// Share of samples where it sat right under the attach point instead of below its caller
    /// (sampled in its prologue: frame-pointer unwinding loses the caller there).
    pub unwound_short_percent: f64,
}

/// A BPF program, by name.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Program {
    pub name: String,
    /// Its id, from the run record.
    pub id: Option<u32>,
    /// Tags seen for it (in stacks, and in the run record).
    pub tags: Vec<String>,
    pub percent: f64,
    /// Samples in its own JIT-ed code (any of its functions), not in helpers.
    pub self_percent: f64,
    pub attach_points: Vec<String>,
    /// The entry first, then sub-functions by depth.
    pub functions: Vec<Function>,
}

/// A program in the run record that no sampled stack shows.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NotSampled {
    pub name: String,
    pub id: Option<u32>,
}

/// Who called a kernel function, and how much of it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Caller {
    pub name: String,
    pub percent: f64,
}

/// A kernel function the programs spend time in (a helper, or what a helper calls).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct KernelFunction {
    pub name: String,
    /// Inclusive share of all samples, counting only time under BPF code.
    pub percent: f64,
    pub self_percent: f64,
    pub category: Option<Category>,
    pub called_from: Vec<Caller>,
}

/// A category's part of the time inside BPF.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CategoryShare {
    pub category: Category,
    /// % of all samples.
    pub percent: f64,
    /// % of the samples inside BPF.
    pub share_of_bpf: f64,
}

/// An unresolved frame, where it sits.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Unresolved {
    pub frame: String,
    pub role: Role,
    pub parent: String,
    pub percent: f64,
    /// The nearest snapshot symbol below its address, when its end is unknown.
    pub nearest: Option<String>,
}

/// Everything `report` says about one profile.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Report {
    /// The version of this document ([`crate::out::JSON_SCHEMA`]).
    pub schema: u32,
    pub input: String,
    /// The event perf sampled (from the run record).
    pub event: Option<String>,
    /// What the folded counts are: `ns`, `cycles`, `samples`, `unknown`.
    pub count_unit: String,
    /// The sum of all folded counts.
    pub total_weight: u64,
    pub samples: Option<u64>,
    pub samples_source: SamplesSource,
    pub bpf: BpfShare,
    pub attach_points: Vec<AttachPoint>,
    /// The packet hooks (XDP, tc, tcx, cgroup_skb, socket filter) the attach points are.
    pub packet_hooks: Vec<PacketHookShare>,
    pub programs: Vec<Program>,
    pub not_sampled: Vec<NotSampled>,
    pub kernel_functions: Vec<KernelFunction>,
    pub breakdown: Vec<CategoryShare>,
    pub hints: Vec<Hint>,
    /// Unresolved frames the snapshot named.
    pub resolved: Vec<resolve::Outcome>,
    pub unresolved: Vec<Unresolved>,
    /// Whether the recording's programs ran under its benchmark, as `record` checked just
    /// before perf started (from the run record).
    pub programs_ran: Option<crate::runrecord::ProgramsRan>,
    pub warnings: Vec<String>,
}

/// Compute the report.
pub fn build(input: &Input<'_>) -> Report {
    assemble::build(input)
}

impl Report {
    /// The report as text for a person.
    pub fn to_text(&self) -> String {
        text::render(self)
    }
}
