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
use std::path::{Path, PathBuf};

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
        let title = opts
            .title
            .clone()
            .unwrap_or_else(|| default_title(&opts.base, &opts.hooked));
        let mut svg = Vec::new();
        crate::flame::render_diff(&base.stacks, &hooked.stacks, &title, count_name, &mut svg)?;
        svg
    };
    match &opts.output {
        Some(p) => write_file(p, &bytes, Existing::replace_if(opts.force)),
        None => out::stdout_bytes(&bytes),
    }
}
/// "ebpf-prof diff: BASE → HOOKED" as given; when that is too long for the graph's title,
/// by the files' names, which tell the two apart unless they are the same.
fn default_title(base: &Path, hooked: &Path) -> String {
    let given = format!("ebpf-prof diff: {} → {}", base.display(), hooked.display());
    let name = |path: &Path| {
        path.file_name().map_or_else(
            || path.display().to_string(),
            |n| n.to_string_lossy().into_owned(),
        )
    };
    let (base_name, hooked_name) = (name(base), name(hooked));
    match given.chars().count() > crate::flame::TITLE_CHARS && base_name != hooked_name {
        true => format!("ebpf-prof diff: {base_name} → {hooked_name}"),
        false => given,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_default_title_names_the_files() {
        let short = default_title(Path::new("a.data"), Path::new("b.data"));
        assert_eq!(short, "ebpf-prof diff: a.data → b.data");
        let deep = "/var/tmp/profiles/of/the/cluster/node-17/before-the-change";
        let long = default_title(
            &Path::new(deep).join("base.data"),
            &Path::new(deep).join("hooked.data"),
        );
        assert_eq!(long, "ebpf-prof diff: base.data → hooked.data");
        let same = default_title(
            &Path::new(deep).join("perf.data"),
            &Path::new("/var/tmp/profiles/of/the/cluster/node-17/after").join("perf.data"),
        );
        assert!(same.contains("before-the-change"), "{same}");
    }
}
