//! `ebpf-prof annotate [INPUT] [--prog NAME] [--json] [--top N] [--asm] [--via-perf]`: runs
//! without root.
//! Which line of a BPF program's C source the time goes to, read from the perf.data's BPF
//! program info and its samples by [`crate::bpfinfo::annotate`].

use crate::bpfinfo::annotate::text as annotate_text;
use crate::bpfinfo::annotate::{annotate, Request};
use crate::bpfinfo::source::SampleSource;
use crate::out;
use crate::perf::PerfChoice;
use anyhow::Result;
use std::path::PathBuf;

/// Everything `annotate` takes.
#[derive(Debug, Clone)]
pub struct AnnotateOptions {
    pub input: PathBuf,
    /// Only this BPF function (short name, symbol or program id).
    pub prog: Option<String>,
    pub json: bool,
    /// Lines per function.
    pub top: usize,
    /// Disassemble each shown line.
    pub asm: bool,
    /// The kallsyms snapshot (default: INPUT.kallsyms if present).
    pub kallsyms: Option<PathBuf>,
    pub perf: PerfChoice,
}

/// Run `annotate`.
pub fn run(opts: &AnnotateOptions) -> Result<()> {
    let a = annotate(&Request {
        source: SampleSource {
            input: &opts.input,
            kallsyms: opts.kallsyms.as_deref(),
            perf: &opts.perf,
            quiet: false,
        },
        prog: opts.prog.clone(),
        top: opts.top,
        asm: opts.asm,
    })?;
    let text = if opts.json {
        serde_json::to_string_pretty(&a)? + "\n"
    } else {
        annotate_text::render(&a)
    };
    out::stdout(&text)
}
