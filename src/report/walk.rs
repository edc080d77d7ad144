//! Where each stack enters BPF, and the tallies `report` is built from.
//!
//! A stack's BPF part starts at its first BPF frame, or at an unresolved frame that sits right
//! above BPF frames somewhere in the profile. Such a frame is JIT glue with no symbol, like the
//! trampoline `0xffffffffc0288c18` in the profile of *Profiling eBPF Code*, the write-up this
//! tool automates. The frame above that start is the attach point. Then come the programs'
//! code frames, which are glue, programs, sub-functions and unresolved frames. After them come
//! the kernel functions the code called: helpers and what they call.
//!
//! Grouping follows stack position. The first program frame is the entry, and the program
//! frames below it are its sub-functions, because BPF-to-BPF calls nest. A tail call replaces
//! the caller's frame, so a tail-called program shows as an entry of its own. There is one
//! correction. A sample in a sub-function's prologue, before it pushed its frame pointer, loses
//! the caller's frame. So a sub-function seen more often below a program than directly under
//! the attach point is kept with that program.

use super::kinds::{self, Category};
use crate::profile::frames::{self, Kind};
use crate::profile::stacks::{Frame, Stacks};
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

/// The attach point of a stack whose kernel call chain stops at its BPF part: a sample in a
/// program's prologue, before it saved its frame pointer, loses its kernel callers (the user
/// part of the chain follows right after).
pub(crate) const CALLER_LOST: &str = "(caller lost)";

/// (parent, frame) pairs of unresolved frames found right above BPF frames.
pub(crate) type GlueSet = HashSet<(String, String)>;

/// The BPF part of one stack, as frame indices.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Segment {
    /// First frame of the BPF part; the attach point is the one above.
    pub start: usize,
    /// The first program frame.
    pub entry: Option<usize>,
    /// One past the programs' code frames: kernel functions start here.
    pub code_end: usize,
}

/// The bare name of the frame above frame `index`, or "" for the first frame.
fn parent<'f>(frames: &[&'f Frame], index: usize) -> &'f str {
    index
        .checked_sub(1)
        .map_or("", |above| frames[above].bare())
}

fn is_code(frame: &Frame) -> bool {
    matches!(frame.kind, Kind::Program | Kind::Glue | Kind::Unresolved)
}

/// The key of an unresolved frame in a [`GlueSet`]: its parent's bare name and its own.
fn glue_key(frames: &[&Frame], index: usize) -> (String, String) {
    (
        parent(frames, index).to_string(),
        frames[index].bare().to_string(),
    )
}

/// Unresolved frames that sit right above BPF frames (through other glue) in some stack.
pub fn glue_frames(stacks: &Stacks) -> GlueSet {
    let mut glue = GlueSet::new();
    for stack in &stacks.stacks {
        let frames = stacks.frames_of(stack);
        for index in 0..frames.len() {
            if frames[index].kind != Kind::Unresolved {
                continue;
            }
            let below_glue = frames[index..]
                .iter()
                .find(|frame| !matches!(frame.kind, Kind::Unresolved | Kind::Glue));
            if below_glue.is_some_and(|frame| frame.kind == Kind::Program) {
                glue.insert(glue_key(&frames, index));
            }
        }
    }
    glue
}

/// The BPF part of a stack, if it has one.
pub fn segment(frames: &[&Frame], glue: &GlueSet) -> Option<Segment> {
    let start = (0..frames.len()).find(|&index| match frames[index].kind {
        Kind::Program | Kind::Glue => true,
        Kind::Unresolved => glue.contains(&glue_key(frames, index)),
        _ => false,
    })?;
    let code_end = (start..frames.len())
        .find(|&index| !is_code(frames[index]))
        .unwrap_or(frames.len());
    let entry = (start..code_end).find(|&index| frames[index].kind == Kind::Program);
    Some(Segment {
        start,
        entry,
        code_end,
    })
}

/// Sub-functions seen more often below a program than as entries: name → that program.
fn homes(stacks: &Stacks, glue: &GlueSet) -> HashMap<String, String> {
    let mut as_entry: HashMap<String, u64> = HashMap::new();
    let mut below: HashMap<String, HashMap<String, u64>> = HashMap::new();
    for stack in &stacks.stacks {
        let frames = stacks.frames_of(stack);
        let Some(Segment {
            entry: Some(entry),
            code_end,
            ..
        }) = segment(&frames, glue)
        else {
            continue;
        };
        let prog = frames[entry].display();
        crate::report::add(as_entry.entry(prog.clone()).or_default(), stack.count);
        for frame in &frames[entry + 1..code_end] {
            let slot = below
                .entry(frame.display())
                .or_default()
                .entry(prog.clone())
                .or_default();
            crate::report::add(slot, stack.count);
        }
    }
    below
        .into_iter()
        .filter_map(|(name, progs)| {
            let (prog, weight) = progs
                .into_iter()
                .max_by_key(|(prog, weight)| (*weight, prog.clone()))?;
            let as_entry = as_entry.get(&name).copied().unwrap_or(0);
            (prog != name && weight > as_entry).then_some((name, prog))
        })
        .collect()
}

/// An attach point's tallies.
#[derive(Debug, Clone, Default)]
pub(crate) struct AttachTally {
    /// Samples inside BPF under it.
    pub bpf: u64,
    /// (parent, grandparent) names above it, with their weights.
    pub lineage: HashMap<(String, String), u64>,
    pub programs: BTreeSet<String>,
    /// Glue frames between it and the programs.
    pub via: BTreeSet<String>,
    /// The heaviest (parent, grandparent) of its lineage, each with the weight of the stacks
    /// that pass through both it and that ancestor (so its share of the ancestor is never
    /// over 100%, however often the ancestor runs it elsewhere).
    pub ancestors: [Option<(String, u64)>; 2],
}

/// A function of a program.
#[derive(Debug, Clone, Default)]
pub(crate) struct FuncTally {
    pub incl: u64,
    pub own: u64,
    /// Frames from the entry, when seen in place.
    pub depth: Option<usize>,
    pub callers: HashMap<String, u64>,
    /// Samples where it showed right under the attach point although it belongs below.
    pub unwound_short: u64,
}

/// A program (entry) and its functions.
#[derive(Debug, Clone, Default)]
pub(crate) struct ProgTally {
    pub incl: u64,
    pub own: u64,
    pub tags: BTreeSet<String>,
    /// Each attach point it was entered from, with the weight entered from it.
    pub attach: BTreeMap<String, u64>,
    pub functions: BTreeMap<String, FuncTally>,
}

/// A kernel function called (directly or not) from BPF code.
#[derive(Debug, Clone, Default)]
pub(crate) struct KfuncTally {
    pub incl: u64,
    pub own: u64,
    pub callers: HashMap<String, u64>,
}

/// Where an unresolved frame sits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// Between the attach point and the programs: a trampoline or dispatcher without a symbol.
    Glue,
    /// Among a program's frames.
    InProgram,
    /// Right under a kernel function that runs BPF programs, with no named BPF below it:
    /// probably a program perf could not name.
    UnderRunner,
    /// Anywhere else in kernel context.
    Kernel,
}

/// A packet hook's tallies.
#[derive(Debug, Clone, Default)]
pub struct HookTally {
    pub bpf: u64,
    pub attach: BTreeSet<String>,
}

/// Every count the report needs, in sample weights (periods, as folded).
#[derive(Debug, Clone, Default)]
pub struct Tally {
    pub total: u64,
    /// Inclusive weight by bare name, once per stack (perf report's "children").
    pub incl: HashMap<String, u64>,
    pub bpf: u64,
    pub programs: u64,
    pub attach: BTreeMap<String, AttachTally>,
    pub progs: BTreeMap<String, ProgTally>,
    pub kfuncs: BTreeMap<String, KfuncTally>,
    /// The weight inside BPF by packet hook, with the attach points it was read from.
    pub hooks: BTreeMap<super::hooks::PacketHook, HookTally>,
    pub categories: BTreeMap<Category, u64>,
    pub unresolved: BTreeMap<(String, String), (Role, u64)>,
    /// Stacks with an unresolved frame right under a BPF runner.
    pub under_runner: u64,
    /// Stacks without a single named kernel or BPF frame (kernel names hidden).
    pub no_kernel: u64,
}

/// Tally all stacks.
pub fn tally(stacks: &Stacks) -> Tally {
    let glue = glue_frames(stacks);
    let homes = homes(stacks, &glue);
    let mut tally = Tally::default();
    for stack in &stacks.stacks {
        crate::report::add(&mut tally.total, stack.count);
        let frames = stacks.frames_of(stack);
        let names: BTreeSet<&str> = frames.iter().map(|frame| frame.bare()).collect();
        for name in names {
            crate::report::add(tally.incl.entry(name.to_string()).or_default(), stack.count);
        }
        let segment = segment(&frames, &glue);
        let seen = SeenStack {
            frames: &frames,
            weight: stack.count,
            segment,
        };
        unresolved(&mut tally, &seen, &glue);
        if let Some(segment) = segment {
            in_bpf(&mut tally, &seen, segment, &homes);
        }
    }
    ancestors(&mut tally, stacks);
    tally
}

/// One stack as the tallies see it: its frames, its weight and its BPF part.
struct SeenStack<'a> {
    frames: &'a [&'a Frame],
    weight: u64,
    segment: Option<Segment>,
}

/// For each attach point, its heaviest parent and grandparent and the weight of the stacks
/// through both it and each of them.
fn ancestors(tally: &mut Tally, stacks: &Stacks) {
    for (name, attach) in tally.attach.iter_mut() {
        let heaviest = attach
            .lineage
            .iter()
            .max_by(|left, right| left.1.cmp(right.1).then_with(|| right.0.cmp(left.0)));
        let Some(((parent, grandparent), _)) = heaviest else {
            continue;
        };
        let joint = |ancestor: &str| -> Option<(String, u64)> {
            if ancestor.is_empty() {
                return None;
            }
            let weight = stacks
                .stacks
                .iter()
                .filter(|stack| {
                    let has = |wanted: &str| {
                        let mut names = stack.frames.iter().map(|&id| stacks.frame(id).bare());
                        names.any(|name| name == wanted)
                    };
                    has(name) && has(ancestor)
                })
                .map(|stack| stack.count)
                .fold(0u64, u64::saturating_add);
            Some((ancestor.to_string(), weight))
        };
        attach.ancestors = [joint(parent), joint(grandparent)];
    }
}

fn in_bpf(tally: &mut Tally, stack: &SeenStack<'_>, segment: Segment, homes: &Homes) {
    let frames = stack.frames;
    let weight = stack.weight;
    crate::report::add(&mut tally.bpf, weight);
    let attach_name = match segment.start.checked_sub(1) {
        Some(above) if frames[above].kind == Kind::Kernel => frames[above].display(),
        _ => CALLER_LOST.to_string(),
    };
    let attach = tally.attach.entry(attach_name.clone()).or_default();
    crate::report::add(&mut attach.bpf, weight);
    if attach_name != CALLER_LOST {
        let name = |back: usize| {
            segment
                .start
                .checked_sub(back)
                .map_or_else(String::new, |index| frames[index].display())
        };
        crate::report::add(
            attach.lineage.entry((name(2), name(3))).or_default(),
            weight,
        );
    }
    let code_stop = segment.entry.unwrap_or(segment.code_end);
    let via: Vec<String> = frames[segment.start..code_stop]
        .iter()
        .map(|frame| frame.display())
        .collect();
    packet_hook(tally, stack, segment, (&attach_name, &via));
    let attach = tally.attach.entry(attach_name.clone()).or_default();
    attach.via.extend(via);
    if let Some(entry) = segment.entry {
        crate::report::add(&mut tally.programs, weight);
        let name = frames[entry].display();
        let home = homes.get(&name).cloned().unwrap_or_else(|| name.clone());
        attach.programs.insert(home.clone());
        let place = Entry {
            at: entry,
            home: &home,
            attach: &attach_name,
        };
        program(tally, stack, segment, &place);
    }
    kernel_functions(tally, stack, segment.code_end);
    let below = frames[segment.code_end..].iter().map(|frame| frame.bare());
    let slot = tally
        .categories
        .entry(kinds::of_sample(below, segment.entry.is_some()))
        .or_default();
    crate::report::add(slot, weight);
}

/// Count the stack under its packet hook, when its callers show one ([`super::hooks`]).
fn packet_hook(
    tally: &mut Tally,
    stack: &SeenStack<'_>,
    segment: Segment,
    (attach_name, via): (&str, &[String]),
) {
    let callers = stack.frames[..segment.start]
        .iter()
        .rev()
        .filter(|frame| frame.kind == Kind::Kernel)
        .map(|frame| frame.bare());
    if let Some(hook) = super::hooks::classify(callers, via) {
        let h = tally.hooks.entry(hook).or_default();
        crate::report::add(&mut h.bpf, stack.weight);
        h.attach.insert(attach_name.to_string());
    }
}

/// Sub-functions kept with the program they are seen below ([`homes`]).
type Homes = HashMap<String, String>;

/// Where a stack enters a program: the entry frame's index, the program it is counted under
/// (its home) and the attach point above.
struct Entry<'a> {
    at: usize,
    home: &'a str,
    attach: &'a str,
}

fn program(tally: &mut Tally, stack: &SeenStack<'_>, segment: Segment, entry: &Entry<'_>) {
    let frames = stack.frames;
    let weight = stack.weight;
    let rehomed = frames[entry.at].display() != entry.home;
    let prog = tally.progs.entry(entry.home.to_string()).or_default();
    crate::report::add(&mut prog.incl, weight);
    crate::report::add(
        prog.attach.entry(entry.attach.to_string()).or_default(),
        weight,
    );
    if !rehomed {
        prog.tags.extend(frames::tag(&frames[entry.at].name));
    }
    let leaf_in_code = segment.code_end == frames.len();
    // The program's self time: samples in its own code, not in its sub-functions'.
    if leaf_in_code && frames.len() == entry.at + 1 && !rehomed {
        crate::report::add(&mut prog.own, weight);
    }
    let mut seen = BTreeSet::new();
    for index in entry.at..segment.code_end {
        let name = frames[index].display();
        let function = prog.functions.entry(name.clone()).or_default();
        if seen.insert(name) {
            crate::report::add(&mut function.incl, weight);
        }
        if leaf_in_code && index + 1 == frames.len() {
            crate::report::add(&mut function.own, weight);
        }
        if rehomed {
            // Only the entry frame itself sits under the attach point although it belongs
            // below another program.
            if index == entry.at {
                crate::report::add(&mut function.unwound_short, weight);
            }
            continue;
        }
        let depth = index - entry.at;
        function.depth = Some(function.depth.map_or(depth, |seen| seen.min(depth)));
        if index > entry.at {
            let caller = frames[index - 1].display();
            crate::report::add(function.callers.entry(caller).or_default(), weight);
        }
    }
}

fn kernel_functions(tally: &mut Tally, stack: &SeenStack<'_>, from: usize) {
    let frames = stack.frames;
    let weight = stack.weight;
    let mut seen = BTreeSet::new();
    for index in from..frames.len() {
        if frames[index].kind != Kind::Kernel {
            continue;
        }
        let name = frames[index].display();
        let kfunc = tally.kfuncs.entry(name.clone()).or_default();
        if seen.insert(name) {
            crate::report::add(&mut kfunc.incl, weight);
            let caller = frames[index - 1].display();
            crate::report::add(kfunc.callers.entry(caller).or_default(), weight);
        }
        if index + 1 == frames.len() {
            crate::report::add(&mut kfunc.own, weight);
        }
    }
}

fn unresolved(tally: &mut Tally, stack: &SeenStack<'_>, glue: &GlueSet) {
    let frames = stack.frames;
    let weight = stack.weight;
    let Some(kernel_from) = frames
        .iter()
        .position(|frame| !matches!(frame.kind, Kind::Other | Kind::Unresolved))
    else {
        crate::report::add(&mut tally.no_kernel, weight);
        return;
    };
    let mut seen = BTreeSet::new();
    let mut under_runner = false;
    for index in kernel_from..frames.len() {
        if frames[index].kind != Kind::Unresolved {
            continue;
        }
        let key = (
            frames[index].bare().to_string(),
            display_parent(frames, index),
        );
        let role = role_of(frames, index, stack.segment, glue);
        under_runner |= role == Role::UnderRunner;
        if seen.insert(key.clone()) {
            let slot = tally.unresolved.entry(key).or_insert((role, 0));
            crate::report::add(&mut slot.1, weight);
        }
    }
    if under_runner {
        crate::report::add(&mut tally.under_runner, weight);
    }
}

fn display_parent(frames: &[&Frame], index: usize) -> String {
    index
        .checked_sub(1)
        .map_or_else(String::new, |above| frames[above].display())
}

fn role_of(frames: &[&Frame], index: usize, segment: Option<Segment>, glue: &GlueSet) -> Role {
    match segment {
        Some(seg) if index >= seg.start && index < seg.code_end => {
            let before_entry = seg.entry.is_none_or(|entry| index < entry);
            if glue.contains(&glue_key(frames, index)) && before_entry {
                Role::Glue
            } else {
                Role::InProgram
            }
        }
        _ if frames::is_runner(parent(frames, index)) => Role::UnderRunner,
        _ => Role::Kernel,
    }
}
