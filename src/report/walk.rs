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
use crate::profile::folded::{bare, Stack};
use crate::profile::frames::{self, display, Kind};
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

fn parent(frames: &[String], i: usize) -> &str {
    i.checked_sub(1).map_or("", |p| bare(&frames[p]))
}

fn is_code(frame: &str) -> bool {
    matches!(
        frames::kind(frame),
        Kind::Program | Kind::Glue | Kind::Unresolved
    )
}

/// Unresolved frames that sit right above BPF frames (through other glue) in some stack.
pub(crate) fn glue_frames(stacks: &[Stack]) -> GlueSet {
    let mut glue = GlueSet::new();
    for s in stacks {
        let f = &s.frames;
        for i in 0..f.len() {
            if frames::kind(&f[i]) != Kind::Unresolved {
                continue;
            }
            let mut j = i;
            while j < f.len() && matches!(frames::kind(&f[j]), Kind::Unresolved | Kind::Glue) {
                j += 1;
            }
            if j < f.len() && frames::kind(&f[j]) == Kind::Program {
                glue.insert((parent(f, i).to_string(), bare(&f[i]).to_string()));
            }
        }
    }
    glue
}

/// The BPF part of a stack, if it has one.
pub(crate) fn segment(f: &[String], glue: &GlueSet) -> Option<Segment> {
    let start = (0..f.len()).find(|&i| match frames::kind(&f[i]) {
        Kind::Program | Kind::Glue => true,
        Kind::Unresolved => glue.contains(&(parent(f, i).to_string(), bare(&f[i]).to_string())),
        _ => false,
    })?;
    let code_end = (start..f.len())
        .find(|&i| !is_code(&f[i]))
        .unwrap_or(f.len());
    let entry = (start..code_end).find(|&i| frames::kind(&f[i]) == Kind::Program);
    Some(Segment {
        start,
        entry,
        code_end,
    })
}

/// Sub-functions seen more often below a program than as entries: name → that program.
fn homes(stacks: &[Stack], glue: &GlueSet) -> HashMap<String, String> {
    let mut as_entry: HashMap<String, u64> = HashMap::new();
    let mut below: HashMap<String, HashMap<String, u64>> = HashMap::new();
    for s in stacks {
        let Some(Segment {
            entry: Some(e),
            code_end,
            ..
        }) = segment(&s.frames, glue)
        else {
            continue;
        };
        let prog = display(&s.frames[e]);
        crate::report::add(as_entry.entry(prog.clone()).or_default(), s.count);
        for f in &s.frames[e + 1..code_end] {
            let slot = below
                .entry(display(f))
                .or_default()
                .entry(prog.clone())
                .or_default();
            crate::report::add(slot, s.count);
        }
    }
    below
        .into_iter()
        .filter_map(|(name, progs)| {
            let (prog, n) = progs.into_iter().max_by_key(|(p, n)| (*n, p.clone()))?;
            (prog != name && n > as_entry.get(&name).copied().unwrap_or(0)).then_some((name, prog))
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
    pub attach: BTreeSet<String>,
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
    pub categories: BTreeMap<Category, u64>,
    pub unresolved: BTreeMap<(String, String), (Role, u64)>,
    /// Stacks with an unresolved frame right under a BPF runner.
    pub under_runner: u64,
    /// Stacks without a single named kernel or BPF frame (kernel names hidden).
    pub no_kernel: u64,
}

/// Tally all stacks.
pub fn tally(stacks: &[Stack]) -> Tally {
    let glue = glue_frames(stacks);
    let homes = homes(stacks, &glue);
    let mut t = Tally::default();
    for s in stacks {
        crate::report::add(&mut t.total, s.count);
        let names: BTreeSet<&str> = s.frames.iter().map(|f| bare(f)).collect();
        for n in names {
            crate::report::add(t.incl.entry(n.to_string()).or_default(), s.count);
        }
        let seg = segment(&s.frames, &glue);
        unresolved(&mut t, &s.frames, s.count, seg, &glue);
        if let Some(seg) = seg {
            in_bpf(&mut t, &s.frames, s.count, seg, &homes);
        }
    }
    ancestors(&mut t, stacks);
    t
}

/// For each attach point, its heaviest parent and grandparent and the weight of the stacks
/// through both it and each of them.
fn ancestors(t: &mut Tally, stacks: &[Stack]) {
    for (name, a) in t.attach.iter_mut() {
        let Some(((p, g), _)) = a
            .lineage
            .iter()
            .max_by(|x, y| x.1.cmp(y.1).then_with(|| y.0.cmp(x.0)))
        else {
            continue;
        };
        let joint = |anc: &str| -> Option<(String, u64)> {
            if anc.is_empty() {
                return None;
            }
            let n = stacks
                .iter()
                .filter(|s| {
                    let has = |x: &str| s.frames.iter().any(|f| bare(f) == x);
                    has(name) && has(anc)
                })
                .map(|s| s.count)
                .fold(0u64, u64::saturating_add);
            Some((anc.to_string(), n))
        };
        a.ancestors = [joint(p), joint(g)];
    }
}

fn in_bpf(t: &mut Tally, f: &[String], n: u64, seg: Segment, homes: &HashMap<String, String>) {
    crate::report::add(&mut t.bpf, n);
    let attach = match seg.start.checked_sub(1) {
        Some(i) if frames::kind(&f[i]) == Kind::Kernel => display(&f[i]),
        _ => CALLER_LOST.to_string(),
    };
    let a = t.attach.entry(attach.clone()).or_default();
    crate::report::add(&mut a.bpf, n);
    if attach != CALLER_LOST {
        let name = |back: usize| {
            seg.start
                .checked_sub(back)
                .map_or_else(String::new, |i| display(&f[i]))
        };
        crate::report::add(a.lineage.entry((name(2), name(3))).or_default(), n);
    }
    let code_stop = seg.entry.unwrap_or(seg.code_end);
    a.via
        .extend(f[seg.start..code_stop].iter().map(|g| display(g)));
    if let Some(e) = seg.entry {
        crate::report::add(&mut t.programs, n);
        let name = display(&f[e]);
        let home = homes.get(&name).cloned().unwrap_or_else(|| name.clone());
        a.programs.insert(home.clone());
        program(t, f, n, seg, e, &home, &attach);
    }
    kernel_functions(t, f, n, seg.code_end);
    let below = f[seg.code_end..].iter().map(|x| bare(x));
    let slot = t
        .categories
        .entry(kinds::of_sample(below, seg.entry.is_some()))
        .or_default();
    crate::report::add(slot, n);
}

fn program(t: &mut Tally, f: &[String], n: u64, seg: Segment, e: usize, home: &str, at: &str) {
    let rehomed = display(&f[e]) != home;
    let p = t.progs.entry(home.to_string()).or_default();
    crate::report::add(&mut p.incl, n);
    p.attach.insert(at.to_string());
    if !rehomed {
        p.tags.extend(frames::tag(&f[e]));
    }
    let leaf_in_code = seg.code_end == f.len();
    // The program's self time: samples in its own code, not in its sub-functions'.
    if leaf_in_code && f.len() == e + 1 && !rehomed {
        crate::report::add(&mut p.own, n);
    }
    let mut seen = BTreeSet::new();
    for i in e..seg.code_end {
        let name = display(&f[i]);
        let fun = p.functions.entry(name.clone()).or_default();
        if seen.insert(name) {
            crate::report::add(&mut fun.incl, n);
        }
        if leaf_in_code && i + 1 == f.len() {
            crate::report::add(&mut fun.own, n);
        }
        if rehomed {
            crate::report::add(&mut fun.unwound_short, u64::from(i == e) * n);
            continue;
        }
        let depth = i - e;
        fun.depth = Some(fun.depth.map_or(depth, |d| d.min(depth)));
        if i > e {
            crate::report::add(fun.callers.entry(display(&f[i - 1])).or_default(), n);
        }
    }
}

fn kernel_functions(t: &mut Tally, f: &[String], n: u64, from: usize) {
    let mut seen = BTreeSet::new();
    for i in from..f.len() {
        if frames::kind(&f[i]) != Kind::Kernel {
            continue;
        }
        let name = display(&f[i]);
        let k = t.kfuncs.entry(name.clone()).or_default();
        if seen.insert(name) {
            crate::report::add(&mut k.incl, n);
            crate::report::add(k.callers.entry(display(&f[i - 1])).or_default(), n);
        }
        if i + 1 == f.len() {
            crate::report::add(&mut k.own, n);
        }
    }
}

fn unresolved(t: &mut Tally, f: &[String], n: u64, seg: Option<Segment>, glue: &GlueSet) {
    let Some(kernel_from) = f
        .iter()
        .position(|x| !matches!(frames::kind(x), Kind::Other | Kind::Unresolved))
    else {
        crate::report::add(&mut t.no_kernel, n);
        return;
    };
    let mut seen = BTreeSet::new();
    let mut runner = false;
    for i in kernel_from..f.len() {
        if frames::kind(&f[i]) != Kind::Unresolved {
            continue;
        }
        let key = (bare(&f[i]).to_string(), display_parent(f, i));
        let role = role_of(f, i, seg, glue);
        runner |= role == Role::UnderRunner;
        if seen.insert(key.clone()) {
            crate::report::add(&mut t.unresolved.entry(key).or_insert((role, 0)).1, n);
        }
    }
    crate::report::add(&mut t.under_runner, u64::from(runner) * n);
}

fn display_parent(f: &[String], i: usize) -> String {
    i.checked_sub(1)
        .map_or_else(String::new, |p| display(&f[p]))
}

fn role_of(f: &[String], i: usize, seg: Option<Segment>, glue: &GlueSet) -> Role {
    let key = (parent(f, i).to_string(), bare(&f[i]).to_string());
    match seg {
        Some(s) if i >= s.start && i < s.code_end => {
            if glue.contains(&key) && s.entry.is_none_or(|e| i < e) {
                Role::Glue
            } else {
                Role::InProgram
            }
        }
        _ if frames::is_runner(parent(f, i)) => Role::UnderRunner,
        _ => Role::Kernel,
    }
}
