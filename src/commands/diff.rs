//! `ebpf-prof diff base.data hooked.data > diff.svg`: a differential flame graph (inferno's
//! differential mode) of where the hooked profile spends more or less than the base one, the
//! base normalised to the hooked profile's total; `--text` prints the biggest per-function
//! moves instead. Runs without root; each input is loaded as `flame` loads it.

use super::flame::{is_broken_pipe, load, open_output};
use super::PerfChoice;
use crate::folded::{sanitize, Folded};
use crate::report::delta;
use anyhow::{Context, Result};
use inferno::{differential, flamegraph};
use std::io::Write;
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
    /// Rows of the table.
    pub top: usize,
    pub title: Option<String>,
    pub perf: PerfChoice,
}

/// Run `diff`.
pub fn run(opts: &DiffOptions) -> Result<()> {
    let mut out: Box<dyn Write> = match &opts.output {
        Some(p) => Box::new(open_output(p, opts.force)?),
        None => Box::new(std::io::stdout().lock()),
    };
    let base = load(&opts.base, None, &opts.perf)?;
    let hooked = load(&opts.hooked, None, &opts.perf)?;
    let written = if opts.text {
        let d = delta::deltas(&Folded::parse(&base.folded), &Folded::parse(&hooked.folded));
        out.write_all(delta::table(&d, opts.top).as_bytes())
            .map_err(anyhow::Error::from)
    } else {
        let count_name = hooked.record.as_ref().map_or("samples", |r| r.count_unit());
        let title = opts.title.clone().unwrap_or_else(|| {
            format!(
                "ebpf-prof diff: {} → {}",
                opts.base.display(),
                opts.hooked.display()
            )
        });
        render(&base.folded, &hooked.folded, &title, count_name, &mut out)
    };
    match written.and_then(|()| out.flush().map_err(Into::into)) {
        Err(e) if is_broken_pipe(&e) => Ok(()),
        other => other,
    }
}

/// Render the differential graph: frames sized by the hooked profile, red where it spends more
/// than the base (normalised to the same total), blue where less.
pub fn render(
    base: &str,
    hooked: &str,
    title: &str,
    count_name: &str,
    out: impl Write,
) -> Result<()> {
    let mut lines = Vec::new();
    let opts = differential::Options {
        normalize: true,
        strip_hex: false,
    };
    differential::from_readers(opts, base.as_bytes(), hooked.as_bytes(), &mut lines)
        .context("cannot merge the two profiles")?;
    let text = String::from_utf8_lossy(&lines);
    let clean = sanitize(&text);
    let mut o = flamegraph::Options::default();
    o.title = sanitize(title).into_owned();
    o.subtitle = Some(
        "width: hooked profile; red: more than in the base (normalised to the same total), blue: less"
            .into(),
    );
    o.count_name = count_name.to_string();
    o.deterministic = true;
    flamegraph::from_lines(&mut o, clean.lines(), out)
        .context("cannot render the differential flame graph")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn differential_svg_marks_the_hook_as_grown() {
        let base = "b;sys_[k];open_[k] 60\nb;sys_[k];close_[k] 40\n";
        let hooked = "b;sys_[k];open_[k] 60\nb;sys_[k];close_[k] 40\nb;sys_[k];trace_call_bpf_[k];bpf_prog_0123456789abcdef_hook 100\n";
        let mut svg = Vec::new();
        render(base, hooked, "t", "samples", &mut svg).unwrap();
        let svg = String::from_utf8(svg).unwrap();
        assert!(svg.contains("bpf_prog_0123456789abcdef_hook"));
        assert!(svg.contains("+50.00%"), "the hook's delta is shown");
    }
}
