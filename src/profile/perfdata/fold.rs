//! Folded stacks from a perf.data file, the stacks `folded::collapse_perf_script` makes of
//! `perf script` output: one `comm;root;…;leaf COUNT` per distinct stack, counts summed from
//! sample periods, in the order inferno sorts its lines. Frame names are formatted once per
//! distinct frame; stacks are aggregated as vectors of interned ids and stay so: text is made
//! only when asked for ([`FoldedStacks::to_text`]).

use super::error::PerfDataError;
use super::file::PerfData;
use super::inferno;
use super::resolve::{BpfPrograms, FrameId, FrameTable, ResolvedSample, Samples, SymbolOptions};
use rustc_hash::FxHashMap;
use std::path::{Path, PathBuf};

/// How to fold a recording.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FoldOptions {
    /// The kallsyms snapshot; `None`: `INPUT.kallsyms` beside the recording if it exists,
    /// else none (kernel frames stay `[unknown]`, with a warning).
    pub kallsyms: Option<PathBuf>,
    /// perf's build-id cache; `None`: `$PERF_BUILDID_DIR`, else `$HOME/.debug`.
    pub buildid_dir: Option<PathBuf>,
    /// Read user-space binaries for symbols (false: user frames are `[dso basename]`).
    pub user_symbols: bool,
}

impl Default for FoldOptions {
    fn default() -> FoldOptions {
        FoldOptions {
            kallsyms: None,
            buildid_dir: None,
            user_symbols: true,
        }
    }
}

/// A recording folded, with what callers want to know about it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FoldedProfile {
    /// The folded stacks, in the order of `folded::collapse_perf_script`'s lines.
    pub folded: FoldedStacks,
    /// The sampled event kept (`cpu-clock:k`), when the file names it.
    pub event: Option<String>,
    /// Samples behind the folded lines.
    pub samples: u64,
    /// Sum of the counts (sample periods: ns for cpu-clock, cycles for cycles).
    pub total_period: u64,
    /// Samples left out: of another event, or with no frame to show.
    pub skipped_samples: u64,
    /// The kallsyms file kernel frames were named from.
    pub kallsyms: Option<PathBuf>,
    /// Things the caller may want to tell the user (one line each).
    pub warnings: Vec<String>,
}

/// Distinct stacks over a table of frame names: each name once (no name holds a `;`), each
/// stack the indices of its names, the command first.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FoldedStacks {
    pub names: Vec<String>,
    pub stacks: Vec<FoldedStack>,
}

/// One distinct stack.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FoldedStack {
    /// Indices into [`FoldedStacks::names`], the command first.
    pub frames: Vec<u32>,
    /// Sum of the sample periods.
    pub count: u64,
    /// Samples behind it.
    pub samples: u64,
}

impl FoldedStacks {
    /// The folded text: the same `perf script | inferno-collapse-perf` prints.
    pub fn to_text(&self) -> String {
        let mut out = String::new();
        for stack in &self.stacks {
            push_joined(&mut out, &self.names, &stack.frames);
            out.push(' ');
            out.push_str(&stack.count.to_string());
            out.push('\n');
        }
        out
    }
}

fn push_joined(out: &mut String, names: &[String], frames: &[u32]) {
    for (at, &id) in frames.iter().enumerate() {
        if at > 0 {
            out.push(';');
        }
        out.push_str(&names[id as usize]);
    }
}

/// Fold the recording at `path` without running perf.
pub fn fold(path: &Path, opts: &FoldOptions) -> Result<FoldedProfile, PerfDataError> {
    let data = PerfData::open(path)?;
    let mut warnings = Vec::new();
    let kallsyms = opts.kallsyms.clone().or_else(|| {
        let mut beside = path.as_os_str().to_owned();
        beside.push(".kallsyms");
        let beside = PathBuf::from(beside);
        if beside.exists() {
            return Some(beside);
        }
        warnings.push(format!(
            "no kallsyms snapshot beside {}: kernel frames stay [unknown] (give one with --kallsyms)",
            path.display()
        ));
        None
    });
    // Read once, through the opener that refuses a FIFO or a device and caps the size.
    let text = match &kallsyms {
        Some(file) => Some(read_kallsyms(file)?),
        None => None,
    };
    let sym = SymbolOptions {
        kallsyms: text,
        buildid_dir: opts.buildid_dir.clone(),
        user_symbols: opts.user_symbols,
    };
    let mut p = fold_data(&data, &sym)?;
    p.kallsyms = kallsyms;
    p.warnings.splice(0..0, warnings);
    Ok(p)
}

/// Fold an opened recording with explicit symbol sources.
pub fn fold_data(data: &PerfData, opts: &SymbolOptions) -> Result<FoldedProfile, PerfDataError> {
    fold_data_observed(data, opts, None)
}

/// Something that sees every resolved sample of the folded event as it is folded (`report`'s
/// hot lines, read in the same pass).
pub type Observer<'o> = &'o mut dyn FnMut(&ResolvedSample<'_>);

/// A source-line frame for a call-chain entry (`flame --lines`): from its address, its place
/// in the chain (0: the sample IP, else a return address), its symbol and its BPF program id
/// ([`super::Frame::bpf_prog`]), the name of a frame to put between it and what it called
/// (`hook.bpf.c:42`), drawn as perf script's text rewritten by `crate::flame::lines` draws it
/// (DSO `bpf-source`).
pub type Decorate<'d> = &'d dyn Fn(u64, usize, Option<&str>, Option<u32>) -> Option<String>;

/// What a caller adds to a fold.
#[derive(Default)]
pub struct FoldHooks<'h> {
    /// Shown every folded sample.
    pub observe: Option<Observer<'h>>,
    /// Source-line frames.
    pub decorate: Option<Decorate<'h>>,
    /// The functions of each BPF program, to name each BPF frame's program
    /// ([`Samples::bpf_programs`]); empty: not named.
    pub bpf_programs: BpfPrograms,
}

/// [`fold_data`], showing each folded sample to `observe` as well.
pub fn fold_data_observed(
    data: &PerfData,
    opts: &SymbolOptions,
    observe: Option<Observer<'_>>,
) -> Result<FoldedProfile, PerfDataError> {
    let hooks = FoldHooks {
        observe,
        ..FoldHooks::default()
    };
    fold_data_with(data, opts, hooks)
}

/// [`fold_data`] with what `hooks` add.
pub fn fold_data_with(
    data: &PerfData,
    opts: &SymbolOptions,
    hooks: FoldHooks<'_>,
) -> Result<FoldedProfile, PerfDataError> {
    let mut progress = super::progress::Progress::new("reading perf.data", data.len() as u64);
    let mut samples = Samples::new(data, opts)?
        .first_event_only()
        .bpf_programs(hooks.bpf_programs);
    let mut observe = hooks.observe;
    let mut agg = Aggregator {
        decorate: hooks.decorate,
        ..Aggregator::default()
    };
    let mut skipped = 0;
    while let Some(s) = samples.next_sample() {
        if let Some(o) = observe.as_mut() {
            o(&s);
        }
        if !agg.add(&s) {
            skipped += 1;
        }
        progress.update(samples.offset());
    }
    drop(progress);
    let mut p = agg.finish();
    p.skipped_samples = skipped + samples.skipped_other_events();
    p.event = samples.event_key().and_then(|k| {
        data.attrs()
            .iter()
            .find(|a| a.filter_key() == k)
            .and_then(|a| a.name.clone())
    });
    // Without a kallsyms the caller chose to have none, and has said why.
    if let Some(why) = samples
        .kernel_symbols_missing()
        .filter(|_| opts.kallsyms.is_some())
    {
        p.warnings.push(format!("kernel frames are unnamed: {why}"));
    }
    Ok(p)
}

/// The text of the kallsyms snapshot at `path`, read through one checked open.
fn read_kallsyms(path: &Path) -> Result<std::sync::Arc<[u8]>, PerfDataError> {
    crate::input::read_whole(path, crate::input::Role::Kallsyms)
        .map(Into::into)
        .map_err(|err| PerfDataError::Io {
            path: path.to_path_buf(),
            source: std::io::Error::other(format!("{err:#}")),
        })
}

/// Stacks as id vectors: `[comm text, frame texts root first…]` → (count, samples).
#[derive(Default)]
struct Aggregator<'d> {
    texts: Names,
    /// Text of each frame by [`FrameId`] (ids are dense): outside java, then inside.
    frame_texts: [Vec<Option<Option<u32>>>; 2],
    comm_texts: FxHashMap<(u32, i32), Option<u32>>,
    stacks: FxHashMap<Vec<u32>, (u64, u64)>,
    key: Vec<u32>,
    decorate: Option<Decorate<'d>>,
    /// Text of the source-line frame by (address, is the sample IP, frame, java).
    line_texts: FxHashMap<(u64, bool, FrameId, bool), Option<u32>>,
}

impl Aggregator<'_> {
    fn text_id(&mut self, text: String) -> u32 {
        self.texts.id(&text)
    }

    fn comm(&mut self, s: &ResolvedSample<'_>) -> Option<u32> {
        if let Some(&t) = self.comm_texts.get(&(s.comm_id, s.tid)) {
            return t;
        }
        let t = inferno::comm_frame(s.comm, s.tid).map(|c| self.text_id(c));
        self.comm_texts.insert((s.comm_id, s.tid), t);
        t
    }

    fn frame(&mut self, table: &FrameTable, id: FrameId, java: bool) -> Option<u32> {
        let (slot, side) = (id.0 as usize, usize::from(java));
        if let Some(Some(t)) = self.frame_texts[side].get(slot) {
            return *t;
        }
        let f = table.get(id)?;
        let text = inferno::frame_text(
            f.symbol.as_deref().map(str::as_bytes),
            f.dso.as_deref().map(str::as_bytes),
            java,
        );
        let t = text.map(|x| self.text_id(x));
        let texts = &mut self.frame_texts[side];
        if texts.len() <= slot {
            texts.resize(slot + 1, None);
        }
        texts[slot] = Some(t);
        t
    }

    /// The source-line frame under call-chain entry `depth` of `s`, if [`Decorate`] gives one.
    fn line_frame(&mut self, s: &ResolvedSample<'_>, depth: usize, java: bool) -> Option<u32> {
        let decorate = self.decorate?;
        let (ip, f) = (*s.ips.get(depth)?, s.frames[depth]);
        let key = (ip, depth == 0, f, java);
        if let Some(&t) = self.line_texts.get(&key) {
            return t;
        }
        let frame = s.table.get(f);
        let sym = frame.and_then(|x| x.symbol.as_deref());
        let text = decorate(ip, depth, sym, frame.and_then(|x| x.bpf_prog))
            .and_then(|n| inferno::frame_text(Some(n.as_bytes()), Some(b"bpf-source"), java));
        let t = text.map(|x| self.text_id(x));
        self.line_texts.insert(key, t);
        t
    }

    /// Count one sample; false when inferno would show nothing for it.
    fn add(&mut self, s: &ResolvedSample<'_>) -> bool {
        let Some(comm) = self.comm(s) else {
            return false;
        };
        let java = self
            .texts
            .table
            .get(comm as usize)
            .is_some_and(|c| c.starts_with("java"));
        let mut key = std::mem::take(&mut self.key);
        key.clear();
        key.push(comm);
        for (depth, &f) in s.frames.iter().enumerate().rev() {
            if let Some(t) = self.frame(s.table, f, java) {
                key.push(t);
            }
            if let Some(t) = self.line_frame(s, depth, java) {
                key.push(t);
            }
        }
        let shown = key.len() > 1;
        if shown {
            let count = s.period.unwrap_or(1);
            match self.stacks.get_mut(key.as_slice()) {
                Some(v) => *v = (v.0.saturating_add(count), v.1 + 1),
                None => {
                    self.stacks.insert(key.clone(), (count, 1));
                }
            }
        }
        self.key = key;
        shown
    }

    fn finish(self) -> FoldedProfile {
        // A frame inferno splits on `->` is one text with a `;` in it: its parts become
        // frames of their own, as they are once the text is read back.
        let mut names = Names::default();
        let parts: Vec<Vec<u32>> = self
            .texts
            .table
            .iter()
            .map(|text| text.split(';').map(|part| names.id(part)).collect())
            .collect();
        let mut stacks: Vec<FoldedStack> = self
            .stacks
            .into_iter()
            .map(|(key, (count, samples))| FoldedStack {
                frames: key
                    .iter()
                    .flat_map(|&text| parts[text as usize].iter().copied())
                    .collect(),
                count,
                samples,
            })
            .collect();
        stacks.sort_by(|left, right| {
            text_order(&names.table, &left.frames, &right.frames)
                .then(left.count.cmp(&right.count))
                .then(left.samples.cmp(&right.samples))
        });
        // Two id vectors can spell the same stack (a frame inferno split on `->`): merge them
        // as inferno's map of strings would.
        stacks.dedup_by(|later, kept| {
            let same = later.frames == kept.frames;
            if same {
                kept.count = kept.count.saturating_add(later.count);
                kept.samples += later.samples;
            }
            same
        });
        let mut p = FoldedProfile::default();
        for stack in &stacks {
            p.samples += stack.samples;
            p.total_period = p.total_period.saturating_add(stack.count);
        }
        p.folded = FoldedStacks {
            names: names.table,
            stacks,
        };
        p
    }
}

/// Frame names, each once.
#[derive(Default)]
struct Names {
    table: Vec<String>,
    ids: FxHashMap<String, u32>,
}

impl Names {
    fn id(&mut self, name: &str) -> u32 {
        if let Some(&id) = self.ids.get(name) {
            return id;
        }
        let id = self.table.len() as u32;
        self.table.push(name.to_string());
        self.ids.insert(name.to_string(), id);
        id
    }
}

/// How the folded lines of two stacks sort (as strings, byte by byte), without writing them.
fn text_order(names: &[String], left: &[u32], right: &[u32]) -> std::cmp::Ordering {
    let shared = left
        .iter()
        .zip(right)
        .take_while(|(one, other)| one == other)
        .count();
    let after = shared > 0;
    joined_bytes(names, &left[shared..], after).cmp(joined_bytes(names, &right[shared..], after))
}

/// The bytes of frames' names joined by `;`, with a `;` first when `after` other frames.
fn joined_bytes<'n>(
    names: &'n [String],
    frames: &'n [u32],
    after: bool,
) -> impl Iterator<Item = u8> + 'n {
    frames.iter().enumerate().flat_map(move |(at, &id)| {
        let separator = (at > 0 || after).then_some(b';');
        separator.into_iter().chain(names[id as usize].bytes())
    })
}
