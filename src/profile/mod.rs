//! Reading profiles into the typed stacks ([`stacks::Stacks`]) that `flame`, `report`, `diff`
//! and the exports share: a perf.data (by the built-in reader, or through `perf script` and
//! inferno's collapser), `perf script` text, or folded stacks, told apart by content; with the
//! run record (`INPUT.json`) beside it. Each input is parsed once, here.

pub mod folded;
pub mod frames;
pub mod kernel_symbols;
pub mod perfdata;
pub mod prognames;
pub mod scan;
pub mod stacks;

pub use crate::input::{open_regular, read_sidecar, Role};

use crate::error::usage;
use crate::out::say;
use crate::perf::script::Script;
use crate::perf::PerfChoice;
use crate::runfiles::RunFiles;
use crate::runrecord::RunRecord;
use anyhow::{Context, Result};
use folded::InputKind;
use kernel_symbols::KernelSymbols;
use prognames::ProgramNames;
use stacks::Stacks;
use std::fs::File;
use std::io::Read;
use std::path::Path;

/// A rewrite of `perf script`'s text on its way to the collapser (`flame --lines`).
pub type ScriptRewrite<'r, 'a> = &'r dyn Fn(Box<dyn Read + 'a>) -> Box<dyn Read + 'a>;

/// A profile read into typed stacks, with what is known of its run.
#[derive(Debug, Clone)]
pub struct Profile {
    pub stacks: Stacks,
    pub record: Option<RunRecord>,
    pub kind: InputKind,
    /// The number of samples, counted in the profile (perf.data by the built-in reader or perf
    /// script, and script text).
    pub samples: Option<u64>,
    /// The kallsyms its kernel frames were named from (a perf.data), or that names its bare
    /// addresses (text inputs): see [`kernel_symbols`].
    pub kernel_symbols: KernelSymbols,
    /// What the profile itself says of its samples (a perf.data read by the built-in reader).
    pub sampled: Sampled,
    /// The name to show for each BPF program's frames, from the run record: its frames are
    /// renamed with it when read.
    pub names: ProgramNames,
}

/// What a perf.data says of its samples beyond the stacks: known without a run record.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Sampled {
    /// The sampled event, from the file's own attr (`cpu-clock:k`).
    pub event: Option<String>,
    /// Samples behind each stack, in the order of [`Profile::stacks`].
    pub per_stack: Option<Vec<u64>>,
}

impl Profile {
    /// The unit of the stacks' counts: the run record's event, else the file's own, else
    /// samples (folded stacks count samples) or unknown periods.
    pub fn count_unit(&self) -> &'static str {
        match (&self.record, &self.sampled.event, self.kind) {
            (Some(r), _, _) => r.count_unit(),
            (None, Some(event), _) => crate::runrecord::count_unit(event),
            (None, None, InputKind::Folded) => "samples",
            (None, None, _) => "periods",
        }
    }
}

/// Stacks read from an input and what is known of their samples.
struct Collapsed {
    stacks: Stacks,
    samples: Option<u64>,
    sampled: Sampled,
}

impl Collapsed {
    /// Stacks whose samples are counted (`perf script` text), or not (folded stacks).
    fn counted(stacks: Stacks, samples: Option<u64>) -> Collapsed {
        Collapsed {
            stacks,
            samples,
            sampled: Sampled::default(),
        }
    }

    /// The built-in reader's stacks, with each one's samples and the file's event.
    fn native(folded: perfdata::FoldedStacks, samples: u64, event: Option<String>) -> Collapsed {
        let per_stack = folded.stacks.iter().map(|stack| stack.samples).collect();
        Collapsed {
            stacks: typed(folded),
            samples: Some(samples),
            sampled: Sampled {
                event,
                per_stack: Some(per_stack),
            },
        }
    }
}

/// Load any supported input as typed stacks. `kallsyms` names the kallsyms to resolve kernel
/// frames with (`--kallsyms`); without it, one of the recording's kernel build is looked for
/// ([`kernel_symbols`]).
pub fn load(input: &Path, kallsyms: Option<&Path>, perf: &PerfChoice) -> Result<Profile> {
    load_inner(input, kallsyms, perf, Collapse::default())
}

/// [`load`], showing every sample the built-in reader folds to `observe` (in the same pass),
/// its BPF frames named with their program ids from `programs`
/// ([`perfdata::Samples::bpf_programs`]); `observe` sees nothing when the input is not a
/// perf.data or perf script reads it.
pub fn load_observed(
    input: &Path,
    kallsyms: Option<&Path>,
    perf: &PerfChoice,
    observe: perfdata::Observer<'_>,
    programs: perfdata::BpfPrograms,
) -> Result<Profile> {
    let how = Collapse {
        observe: Some(observe),
        programs,
        ..Collapse::default()
    };
    load_inner(input, kallsyms, perf, how)
}

/// [`load`] of a perf.data with a source-line frame under each BPF frame (`flame --lines`):
/// `decorate` names them for the built-in reader, `rewrite` inserts them into `perf script`'s
/// text when perf reads the file; `programs` names the program of each BPF frame for it.
pub fn load_with_lines<'a>(
    input: &Path,
    kallsyms: Option<&Path>,
    perf: &PerfChoice,
    rewrite: ScriptRewrite<'_, 'a>,
    decorate: (perfdata::Decorate<'_>, perfdata::BpfPrograms),
) -> Result<Profile> {
    let how = Collapse {
        rewrite: Some(rewrite),
        observe: None,
        decorate: Some(decorate.0),
        programs: decorate.1,
    };
    load_inner(input, kallsyms, perf, how)
}

fn load_inner<'a>(
    input: &Path,
    kallsyms: Option<&Path>,
    perf: &PerfChoice,
    how: Collapse<'_, 'a, '_>,
) -> Result<Profile> {
    let (mut file, len) = open_regular(input, Role::Profile, false)?;
    let head = crate::input::head(&mut file)?;
    let kind = folded::detect(&head).map_err(|why| {
        usage(format!(
            "{} is neither a perf.data file, `perf script` output nor folded stacks: {why}",
            input.display()
        ))
    })?;
    let record = run_record(input)?;
    let symbols = match kind {
        InputKind::PerfData => {
            check_complete(input, &file, &head, len)?;
            kernel_symbols::choose(input, &file, kallsyms, record.as_ref())?
        }
        _ => KernelSymbols::for_named_input(input, kallsyms)?,
    };
    crate::failpoint::hit("profile:symbols-read");
    let Collapsed {
        stacks,
        samples,
        sampled,
    } = match kind {
        InputKind::PerfData => {
            if let Some(note) = &symbols.note {
                say(format!("warning: {note}"));
            }
            collapse_perf_data(input, &file, &symbols, perf, how)?
        }
        _ if how.rewrite.is_some() => {
            return Err(usage(format!(
                "{} is not a perf.data file: source lines need the BPF program info of a perf.data",
                input.display()
            )))
        }
        InputKind::PerfScript => collapse(input, std::io::Cursor::new(head).chain(file))?,
        InputKind::Folded => Collapsed::counted(read_folded(input, head, file)?, None),
    };
    check_has_samples(input, &stacks)?;
    let names = ProgramNames::from_record(record.as_ref());
    let mut stacks = stacks;
    stacks.rename_programs(&names);
    crate::failpoint::hit("profile:loaded");
    Ok(Profile {
        stacks,
        record,
        kind,
        samples,
        kernel_symbols: symbols,
        sampled,
        names,
    })
}

/// Stacks with no stack, whose counts are all 0 or add up past 2^64 are refused naming the
/// input.
fn check_has_samples(input: &Path, stacks: &Stacks) -> Result<()> {
    if stacks.stacks.is_empty() && stacks.skipped == 0 {
        return Err(usage(format!(
            "{} holds no samples with call chains (was it recorded with -g?)",
            input.display()
        )));
    }
    let total = stacks
        .checked_total()
        .map_err(|why| usage(format!("{}: {why}", input.display())))?;
    if total == 0 {
        return Err(usage(format!(
            "{} holds no samples: every stack's count is 0",
            input.display()
        )));
    }
    Ok(())
}

/// A folded file, its head and the rest, parsed; malformed lines are skipped, with a warning
/// that names the first.
fn read_folded(input: &Path, head: Vec<u8>, mut file: File) -> Result<Stacks> {
    let mut all = head;
    file.read_to_end(&mut all)?;
    let text = String::from_utf8_lossy(&all);
    if let Some((line, n)) = stacks::first_malformed(&text) {
        say(format!(
            "warning: {}: {n} line(s) are not folded stacks (`frame;frame COUNT`) and were skipped, the first is line {line}",
            input.display()
        ));
    }
    parse_folded(input, &text)
}

/// Folded text parsed, or the line that makes it no profile.
fn parse_folded(input: &Path, text: &str) -> Result<Stacks> {
    Stacks::parse(text).map_err(|why| usage(format!("{}: {why}", input.display())))
}

/// perf.data's header against its length: a recording that did not finish is said to be one.
fn check_complete(input: &Path, file: &File, head: &[u8], len: u64) -> Result<()> {
    match perfdata::incomplete(head, len, |off, n| perfdata::read_at(file, off, n)) {
        None => Ok(()),
        Some(why) => Err(usage(format!(
            "{} is truncated: the recording did not finish; record again ({why})",
            input.display()
        ))),
    }
}

/// `perf script` text collapsed to folded stacks, with its sample count; periods that add up
/// past 2^64 are a usage error naming the line.
fn collapse<'a>(input: &Path, reader: impl Read + 'a) -> Result<Collapsed> {
    let (scan, tally) = scan::Scan::new(reader);
    let out = folded::collapse_perf_script(scan);
    if let Some(line) = tally.overflow_line.get() {
        return Err(usage(format!(
            "{}: the sample periods add up past 2^64 at line {line} of perf script's output; this is not a profile perf wrote",
            input.display()
        )));
    }
    let out = out.with_context(|| input.display().to_string())?;
    let stacks = parse_folded(input, &String::from_utf8_lossy(&out))?;
    Ok(Collapsed::counted(stacks, Some(tally.samples.get())))
}

/// The run record beside the input, if there is a readable one; a bad one is a warning.
pub fn run_record(input: &Path) -> Result<Option<RunRecord>> {
    let files = RunFiles::new(input);
    let Some(text) = read_sidecar(&files.json())? else {
        return Ok(None);
    };
    match serde_json::from_str(&text) {
        Ok(r) => Ok(Some(r)),
        Err(e) => {
            say(format!(
                "warning: {} is not a run record ({e}): ignored",
                files.json().display()
            ));
            Ok(None)
        }
    }
}

/// The run record beside the input, read without a word when it is absent or unreadable: for
/// a reader that runs beside [`load`] (which says why), or where the record only adds names.
pub fn run_record_quiet(input: &Path) -> Option<RunRecord> {
    let text = read_sidecar(&RunFiles::new(input).json()).ok()??;
    serde_json::from_str(&text).ok()
}

/// What happens to a perf.data's samples on their way to folded stacks.
#[derive(Default)]
struct Collapse<'r, 'a, 'o> {
    /// A rewrite of perf script's text, when perf script reads the file.
    rewrite: Option<ScriptRewrite<'r, 'a>>,
    /// Shown every sample the built-in reader folds.
    observe: Option<perfdata::Observer<'o>>,
    /// The built-in reader's counterpart of `rewrite`: without it, a rewrite goes through perf.
    decorate: Option<perfdata::Decorate<'o>>,
    /// For the built-in reader: the functions of each BPF program, to name frames' programs.
    programs: perfdata::BpfPrograms,
}

fn collapse_perf_data<'a>(
    input: &Path,
    file: &File,
    symbols: &KernelSymbols,
    perf: &PerfChoice,
    how: Collapse<'_, 'a, '_>,
) -> Result<Collapsed> {
    let Collapse {
        rewrite,
        observe,
        decorate,
        programs,
    } = how;
    // A rewrite of perf script's text with no counterpart for the built-in reader goes
    // through perf.
    if !perf.via_perf && (rewrite.is_none() || decorate.is_some()) {
        let hooks = perfdata::FoldHooks {
            observe,
            decorate,
            bpf_programs: programs,
        };
        match perfdata::fold_file(file, input, symbols.text.clone(), hooks)? {
            perfdata::Native::Folded {
                stacks,
                samples,
                event,
            } => return Ok(Collapsed::native(stacks, samples, event)),
            perfdata::Native::Fallback(why) => say(format!(
                "reading {} with perf script: the native reader does not handle {why}",
                input.display()
            )),
        }
    }
    let found = perf.find(true)?;
    let mut script = Script::start(
        &found.path,
        input,
        file,
        symbols.for_perf(),
        force_for_root(file),
    )?;
    let reader: Box<dyn Read + 'a> = Box::new(script.reader()?);
    let collapsed = match rewrite {
        Some(r) => collapse(input, r(reader)),
        None => collapse(input, reader),
    };
    let finished = script.finish();
    match collapsed {
        // Our own finding (periods overflowing) first; else perf's failure, if any.
        Err(e) if crate::error::exit_code(&e) == 2 => Err(e),
        c => finished.and(c),
    }
}

/// The built-in reader's stacks as the typed profile: each name classified once.
fn typed(folded: perfdata::FoldedStacks) -> Stacks {
    let stacks = folded
        .stacks
        .into_iter()
        .map(|stack| (stack.frames, stack.count));
    Stacks::from_table(folded.names, stacks)
}

/// Root reading a file that is not root's: perf's ownership check would refuse it ("File
/// perf.data.old not owned by current user or root"). The file is the one opened and checked
/// here (perf reads it through the same descriptor), so `-f` is safe to pass.
pub(crate) fn force_for_root(file: &File) -> bool {
    use std::os::unix::fs::MetadataExt;
    crate::host::security::is_root() && file.metadata().is_ok_and(|m| m.uid() != 0)
}
