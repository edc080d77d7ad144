//! `ebpf-prof flame perf.data > out.svg`: runs without root. The profile is loaded by
//! [`crate::profile`] (perf.data, `perf script` text or folded stacks) and rendered by
//! [`crate::flame`]; with stdout on a terminal the graph goes to `flame.svg` instead.

use crate::error::usage;
use crate::flame::{render, FlameOptions, LEGEND};
use crate::out::say;
use crate::perf::PerfChoice;
use crate::profile::{self, Profile};
use crate::runfiles::write_file;
use anyhow::Result;
use std::io::IsTerminal;
use std::path::{Path, PathBuf};

/// Where an SVG goes when stdout is a terminal and no `-o` is given.
pub const DEFAULT_SVG: &str = "flame.svg";

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
    /// A frame per BPF source line under each BPF frame.
    pub lines: bool,
}

/// Run `flame`.
pub fn run(opts: &FlameOptionsCli) -> Result<()> {
    let to_terminal = opts.output.is_none() && !opts.folded && std::io::stdout().is_terminal();
    let output = match (&opts.output, to_terminal) {
        (Some(p), _) => Some(p.clone()),
        (None, true) => Some(PathBuf::from(DEFAULT_SVG)),
        (None, false) => None,
    };
    let mut p = if opts.lines {
        crate::flame::lines::load(&opts.input, opts.kallsyms.as_deref(), &opts.perf)?
    } else {
        profile::load(&opts.input, opts.kallsyms.as_deref(), &opts.perf)?
    };
    if opts.bpf_only {
        p.folded = keep_bpf_only(&p.folded, &opts.input)?;
    }
    let bytes = if opts.folded {
        p.folded.clone().into_bytes()
    } else {
        let mut svg = Vec::new();
        render(&p.folded, &flame_options(opts, &p), &mut svg)?;
        svg
    };
    match output {
        Some(path) => {
            write_file(&path, &bytes, opts.force, 0o644)?;
            if to_terminal {
                say(format!(
                    "wrote {} (stdout is a terminal; -o FILE or a pipe to choose)",
                    path.display()
                ));
            }
            Ok(())
        }
        None => crate::out::stdout_bytes(&bytes),
    }
}

fn flame_options(opts: &FlameOptionsCli, p: &Profile) -> FlameOptions {
    let subtitle = [
        subtitle(p),
        opts.bpf_only
            .then(|| "BPF stacks only, from the attach point".to_string()),
        Some(LEGEND.to_string()),
    ]
    .into_iter()
    .flatten()
    .collect::<Vec<_>>()
    .join("; ");
    FlameOptions {
        title: opts.title.clone().unwrap_or_else(|| match &p.record {
            Some(r) => r.title(),
            None => format!("ebpf-prof: {}", opts.input.display()),
        }),
        subtitle: Some(subtitle),
        count_name: p
            .record
            .as_ref()
            .map_or("samples", |r| r.count_unit())
            .to_string(),
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
    let cut = crate::report::filter::bpf_only(&crate::profile::folded::Folded::parse(folded));
    if cut.stacks.is_empty() {
        return Err(usage(format!(
            "no stack in {} passes through a BPF program: nothing to draw with --bpf-only (`ebpf-prof report` says why)",
            input.display()
        )));
    }
    Ok(cut.to_text())
}
