//! `ebpf-prof diff base.data hooked.data > diff.svg`: a differential flame graph of where the
//! hooked profile spends more or less than the base ([`crate::flame::render_diff`]); `--text`
//! prints the biggest per-function moves instead (`--json` as JSON). Runs without root; each
//! input is loaded as `flame` loads it.

use crate::out;
use crate::perf::PerfChoice;
use crate::profile;
use crate::report::delta;
use crate::runfiles::{write_file, Existing};
use anyhow::Result;
use std::path::PathBuf;

/// Everything `diff` takes.
#[derive(Debug, Clone)]
pub struct DiffOptions {
    pub base: PathBuf,
    pub hooked: PathBuf,
    pub output: Option<PathBuf>,
    pub force: bool,
    /// Print the per-function table instead of the SVG.
    pub text: bool,
    /// The per-function moves as JSON.
    pub json: bool,
    /// Rows of the table.
    pub top: usize,
    pub title: Option<String>,
    pub perf: PerfChoice,
}

/// Run `diff`.
pub fn run(opts: &DiffOptions) -> Result<()> {
    // The two profiles are read at the same time: each read is one core's work.
    let (base, hooked) = std::thread::scope(|s| {
        let base = s.spawn(|| profile::load(&opts.base, None, &opts.perf));
        let hooked = profile::load(&opts.hooked, None, &opts.perf);
        let base = base.join().unwrap_or_else(|p| std::panic::resume_unwind(p));
        (base, hooked)
    });
    let (base, hooked) = (base?, hooked?);
    let bytes = if opts.text || opts.json {
        let d = delta::deltas(&base.stacks, &hooked.stacks);
        let text = match opts.json {
            true => delta::json(&d, opts.top)?,
            false => delta::table(&d, opts.top),
        };
        // The names in it are escaped already; this keeps any other text from a terminal too.
        crate::out::escape_controls(&text, crate::out::Keep::Layout)
            .into_owned()
            .into_bytes()
    } else {
        let count_name = hooked.record.as_ref().map_or("samples", |r| r.count_unit());
        let title = opts.title.clone().unwrap_or_else(|| {
            format!(
                "ebpf-prof diff: {} → {}",
                opts.base.display(),
                opts.hooked.display()
            )
        });
        let mut svg = Vec::new();
        crate::flame::render_diff(&base.stacks, &hooked.stacks, &title, count_name, &mut svg)?;
        svg
    };
    match &opts.output {
        Some(p) => write_file(p, &bytes, Existing::replace_if(opts.force)),
        None => out::stdout_bytes(&bytes),
    }
}
