//! The native reader as the profile loader uses it: fold an opened perf.data into the same
//! stacks `perf script | inferno` gives, or say why `perf script` must read it instead
//! (pipe-mode, compressed or directory recordings, another architecture), or refuse a broken
//! file in one line naming it.

use super::error::PerfDataError;
use super::file::PerfData;
use super::fold::FoldedStacks;
use super::resolve::SymbolOptions;
use crate::error::usage;
use crate::out::say;
use anyhow::Result;
use std::fs::File;
use std::path::Path;

/// What reading natively gave.
#[derive(Debug)]
pub enum Native {
    /// The folded stacks, the samples `perf script` would print (every event's), and the
    /// sampled event the file's attr names.
    Folded {
        stacks: FoldedStacks,
        samples: u64,
        event: Option<String>,
    },
    /// A valid recording this reader does not handle: why (read it with `perf script`).
    Fallback(String),
}

/// Fold `file` (the perf.data at `input`), naming kernel frames from `kallsyms` (`None`: they
/// stay `[unknown]`). Warnings go to stderr.
pub fn fold_file(
    file: &File,
    input: &Path,
    kallsyms: Option<std::sync::Arc<[u8]>>,
    hooks: super::FoldHooks<'_>,
) -> Result<Native> {
    let data = match PerfData::from_file(file) {
        Ok(d) => d,
        Err(e) => return refuse(input, e),
    };
    let opts = SymbolOptions {
        kallsyms,
        ..SymbolOptions::default()
    };
    match super::fold_data_with(&data, &opts, hooks) {
        Ok(p) => {
            for w in &p.warnings {
                say(format!("warning: {w}"));
            }
            Ok(Native::Folded {
                samples: p.samples + p.skipped_samples,
                stacks: p.folded,
                event: p.event,
            })
        }
        Err(e) => refuse(input, e),
    }
}

/// A reader error as the loader reports it.
fn refuse(input: &Path, e: PerfDataError) -> Result<Native> {
    match e {
        PerfDataError::Unsupported(why) => Ok(Native::Fallback(why)),
        PerfDataError::Io { path, source } => Err(usage(format!(
            "cannot read {}: {source}",
            if path.as_os_str() == "perf.data" {
                input
            } else {
                &path
            }
            .display()
        ))),
        other => Err(usage(format!("{}: {other}", input.display()))),
    }
}
