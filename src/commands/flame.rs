//! `ebpf-prof flame perf.data > out.svg`: runs without root. perf.data goes through
//! `perf script --kallsyms=<snapshot>` and inferno's collapser, streamed, no temp files; a
//! `perf script` dump or a folded file is taken as is (told apart by content).

use super::{say, PerfChoice};
use crate::error::usage;
use crate::flame::{render, FlameOptions};
use crate::folded::{self, InputKind};
use crate::perf::script::Script;
use crate::runfiles::{create_new, RunFiles};
use crate::runrecord::RunRecord;
use anyhow::{Context, Result};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

/// Everything `flame` takes.
#[derive(Debug, Clone)]
pub struct FlameOptionsCli {
    pub input: PathBuf,
    pub output: Option<PathBuf>,
    pub force: bool,
    pub folded: bool,
    pub kallsyms: Option<PathBuf>,
    pub title: Option<String>,
    pub perf: PerfChoice,
    /// Only the stacks through a BPF program, each cut to start at its attach point.
    pub bpf_only: bool,
}

/// A profile turned into folded stacks, with what is known of its run.
#[derive(Debug, Clone)]
pub struct Profile {
    pub folded: String,
    pub record: Option<RunRecord>,
    pub kind: InputKind,
}

/// Read the first bytes of a file, with input errors worded for the user.
fn head(path: &Path) -> Result<Vec<u8>> {
    let meta = std::fs::metadata(path).map_err(|e| {
        usage(format!(
            "cannot read {}: {e} (give the perf.data written by `ebpf-prof record`)",
            path.display()
        ))
    })?;
    if meta.is_dir() {
        return Err(usage(format!(
            "{} is a directory: give a perf.data file",
            path.display()
        )));
    }
    if meta.len() == 0 {
        return Err(usage(format!(
            "{} is empty: the recording did not finish; record again",
            path.display()
        )));
    }
    let mut buf = vec![0u8; 4096];
    let mut f = std::fs::File::open(path)
        .map_err(|e| usage(format!("cannot open {}: {e}", path.display())))?;
    let n = f.read(&mut buf)?;
    buf.truncate(n);
    Ok(buf)
}

/// Load any supported input as folded stacks.
pub fn load(input: &Path, kallsyms: Option<&Path>, perf: &PerfChoice) -> Result<Profile> {
    let kind = folded::detect(&head(input)?).ok_or_else(|| {
        usage(format!(
            "{} is neither a perf.data file, `perf script` output nor folded stacks",
            input.display()
        ))
    })?;
    let files = RunFiles::new(input);
    let record = RunRecord::load(&files.json());
    let folded = match kind {
        InputKind::PerfData => collapse_perf_data(input, &files, kallsyms, perf)?,
        InputKind::PerfScript => {
            let f = std::fs::File::open(input)?;
            String::from_utf8_lossy(&folded::collapse_perf_script(f)?).into_owned()
        }
        InputKind::Folded => std::fs::read_to_string(input)
            .map_err(|e| usage(format!("cannot read {}: {e}", input.display())))?,
    };
    if folded.trim().is_empty() {
        return Err(usage(format!(
            "{} holds no samples with call chains (was it recorded with -g?)",
            input.display()
        )));
    }
    Ok(Profile {
        folded,
        record,
        kind,
    })
}

fn collapse_perf_data(
    input: &Path,
    files: &RunFiles,
    kallsyms: Option<&Path>,
    perf: &PerfChoice,
) -> Result<String> {
    let snapshot = kallsyms
        .map(Path::to_path_buf)
        .or_else(|| Some(files.kallsyms()).filter(|p| p.exists()));
    if snapshot.is_none() {
        say(format!(
            "warning: no kallsyms snapshot beside {} (recorded elsewhere?): kernel frames are named from this machine's /proc/kallsyms, which may be wrong or hidden",
            input.display()
        ));
    }
    let found = perf.find(true)?;
    let mut script = Script::start(
        &found.path,
        input,
        snapshot.as_deref(),
        sudo_users_own(input),
    )?;
    let collapsed = folded::collapse_perf_script(script.reader()?);
    script.finish()?;
    Ok(String::from_utf8_lossy(&collapsed?).into_owned())
}

/// Root reading the file of the user who ran sudo: perf's ownership check would refuse it, and
/// the file is that user's own recording, so it is safe to pass `-f`.
fn sudo_users_own(path: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    let owner = crate::runfiles::Owner::from_sudo_env();
    let meta = std::fs::metadata(path).ok();
    crate::host::security::is_root()
        && matches!((owner, meta), (Some(o), Some(m)) if m.uid() == o.uid)
}

/// The graph's title: the user's, else event, kernel and command from the run record.
fn title(opts: &FlameOptionsCli, p: &Profile) -> String {
    opts.title.clone().unwrap_or_else(|| match &p.record {
        Some(r) => r.title(),
        None => format!("ebpf-prof: {}", opts.input.display()),
    })
}

/// Run `flame`.
pub fn run(opts: &FlameOptionsCli) -> Result<()> {
    let mut out: Box<dyn Write> = match &opts.output {
        Some(p) => Box::new(open_output(p, opts.force)?),
        None => Box::new(std::io::stdout().lock()),
    };
    let mut p = load(&opts.input, opts.kallsyms.as_deref(), &opts.perf)?;
    if opts.bpf_only {
        p.folded = keep_bpf_only(&p.folded, &opts.input)?;
    }
    let written = if opts.folded {
        out.write_all(p.folded.as_bytes())
            .map_err(anyhow::Error::from)
    } else {
        let count_name = p
            .record
            .as_ref()
            .map_or("samples", |r| r.count_unit())
            .to_string();
        let fo = FlameOptions {
            title: title(opts, &p),
            subtitle: subtitle(&p).map(|s| match opts.bpf_only {
                true => format!("{s}; BPF stacks only, from the attach point"),
                false => s,
            }),
            count_name,
        };
        render(&p.folded, &fo, &mut out)
    };
    match written.and_then(|()| out.flush().map_err(Into::into)) {
        Err(e) if is_broken_pipe(&e) => Ok(()),
        other => other,
    }
}

fn subtitle(p: &Profile) -> Option<String> {
    let r = p.record.as_ref()?;
    let progs: Vec<&str> = r.bpf_programs.iter().map(|b| b.name.as_str()).collect();
    Some(format!(
        "{} Hz, CPU {}, programs: {}",
        r.freq,
        r.cpu,
        if progs.is_empty() {
            "none".into()
        } else {
            progs.join(", ")
        }
    ))
}

/// `--bpf-only`: the stacks through BPF code, from their attach point.
fn keep_bpf_only(folded: &str, input: &Path) -> Result<String> {
    let cut = crate::report::filter::bpf_only(&folded::Folded::parse(folded));
    if cut.stacks.is_empty() {
        return Err(usage(format!(
            "no stack in {} passes through a BPF program: nothing to draw with --bpf-only (`ebpf-prof report` says why)",
            input.display()
        )));
    }
    Ok(cut.to_text())
}

/// Whether an error is a closed pipe (`| head`): not a failure.
pub(super) fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}

/// Open the -o file: a new file, or with --force an existing regular one (never through a symlink).
pub(crate) fn open_output(path: &Path, force: bool) -> Result<std::fs::File> {
    if let Ok(meta) = std::fs::symlink_metadata(path) {
        if !force {
            return Err(usage(format!(
                "{} exists: pass --force to overwrite it, or pick another -o",
                path.display()
            )));
        }
        if !meta.is_file() {
            return Err(usage(format!(
                "{} is not a regular file: pick another -o",
                path.display()
            )));
        }
        std::fs::remove_file(path).with_context(|| format!("cannot replace {}", path.display()))?;
    }
    let dir = crate::runfiles::parent_dir(path);
    if !dir.is_dir() {
        return Err(usage(format!(
            "output directory {} does not exist",
            dir.display()
        )));
    }
    create_new(path, 0o644)
}
