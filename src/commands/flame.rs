//! `ebpf-prof flame perf.data > out.svg`: runs without root. The profile is loaded by
//! [`crate::profile`] (perf.data, `perf script` text or folded stacks) and rendered by
//! [`crate::flame`]; with stdout on a terminal the graph goes to `flame.svg` instead.

use crate::error::usage;
use crate::flame::export::{self, Format};
use crate::flame::{list_within, render, FlameOptions, LEGEND, SUBTITLE_CHARS};
use crate::out::say;
use crate::perf::PerfChoice;
use crate::profile::stacks::Stacks;
use crate::profile::{self, Profile};
use crate::runfiles::{write_file, Existing};
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
    /// `--format` (`None`: SVG, or folded with `--folded`).
    pub format: Option<Format>,
}

/// Run `flame`.
pub fn run(opts: &FlameOptionsCli) -> Result<()> {
    let format = opts.format.unwrap_or(match opts.folded {
        true => Format::Folded,
        false => Format::Svg,
    });
    let output = destination(
        opts.output.as_deref(),
        std::io::stdout().is_terminal(),
        format,
    )?;
    let mut p = if opts.lines {
        crate::flame::lines::load(&opts.input, opts.kallsyms.as_deref(), &opts.perf)?
    } else {
        profile::load(&opts.input, opts.kallsyms.as_deref(), &opts.perf)?
    };
    if opts.bpf_only {
        p.stacks = keep_bpf_only(&p.stacks, &opts.input)?;
    }
    let bytes = encode(format, opts, &p)?;
    match output {
        Destination::File(path) => write_file(&path, &bytes, Existing::replace_if(opts.force)),
        Destination::InsteadOfTerminal(path) => {
            write_file(&path, &bytes, Existing::replace_if(opts.force))?;
            say(format!(
                "wrote {} (stdout is a terminal; -o FILE or a pipe to choose)",
                path.display()
            ));
            Ok(())
        }
        Destination::Stdout => crate::out::stdout_bytes(&bytes),
    }
}

/// Where `flame`'s output goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Destination {
    /// The file `-o` names.
    File(PathBuf),
    /// [`DEFAULT_SVG`], because stdout is a terminal (and `flame` says so).
    InsteadOfTerminal(PathBuf),
    /// Standard output: a pipe or a file, or a terminal for text formats.
    Stdout,
}

/// Where the output goes, from `-o`, whether stdout is a terminal and the format: an SVG is
/// not printed into a terminal (it goes to `flame.svg`), a binary format is refused there.
pub fn destination(output: Option<&Path>, stdout_tty: bool, format: Format) -> Result<Destination> {
    match (output, stdout_tty) {
        (Some(p), _) => Ok(Destination::File(p.to_path_buf())),
        (None, true) if format.is_binary() => Err(usage(
            "a pprof profile is binary: give -o FILE (for example -o prof.pb.gz) or a pipe",
        )),
        (None, true) if format == Format::Svg => {
            Ok(Destination::InsteadOfTerminal(PathBuf::from(DEFAULT_SVG)))
        }
        _ => Ok(Destination::Stdout),
    }
}

/// The profile in the chosen format.
fn encode(format: Format, opts: &FlameOptionsCli, p: &Profile) -> Result<Vec<u8>> {
    let unit = p.count_unit();
    let weights = export::Weights {
        unit,
        per_stack: p.sampled.per_stack.as_deref(),
    };
    match format {
        Format::Folded => Ok(p.stacks.to_text().into_bytes()),
        Format::Svg => {
            let mut svg = Vec::new();
            render(&p.stacks, &flame_options(opts, p), &mut svg)?;
            Ok(svg)
        }
        Format::Pprof => export::pprof(&p.stacks, &weights, &flame_options(opts, p).title),
        Format::Speedscope => export::speedscope(&p.stacks, unit, &flame_options(opts, p).title),
    }
}

fn flame_options(opts: &FlameOptionsCli, p: &Profile) -> FlameOptions {
    let tail = [
        opts.bpf_only
            .then(|| "BPF stacks from the attach point".to_string()),
        Some(LEGEND.to_string()),
    ]
    .into_iter()
    .flatten()
    .collect::<Vec<_>>()
    .join("; ");
    let room = SUBTITLE_CHARS.saturating_sub(tail.chars().count() + "; ".len());
    let subtitle = match subtitle(p, room) {
        Some(run) => format!("{run}; {tail}"),
        None => tail,
    };
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

/// "997 Hz, CPU 1, programs: a, b, +3 more" in at most `chars` characters: the programs that
/// fit, then how many more (a subtitle runs off the SVG's edge otherwise).
fn subtitle(p: &Profile, chars: usize) -> Option<String> {
    let r = p.record.as_ref()?;
    let names: Vec<String> = r
        .bpf_programs
        .iter()
        .map(|b| p.names.of_tag(&b.tag, &b.name))
        .collect();
    let progs: Vec<&str> = names.iter().map(String::as_str).collect();
    let head = format!("{} Hz, CPU {}, programs: ", r.freq, r.cpu);
    let room = chars.saturating_sub(head.chars().count());
    Some(match progs.is_empty() {
        true => format!("{head}none"),
        false => format!("{head}{}", list_within(&progs, room)),
    })
}

/// `--bpf-only`: the stacks through BPF code, from their attach point.
fn keep_bpf_only(stacks: &Stacks, input: &Path) -> Result<Stacks> {
    let cut = crate::report::filter::bpf_only(stacks);
    if cut.stacks.is_empty() {
        return Err(usage(format!(
            "no stack in {} passes through a BPF program: nothing to draw with --bpf-only (`ebpf-prof report` says why)",
            input.display()
        )));
    }
    Ok(cut)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn destination_table() {
        let file = |p: &str| Destination::File(PathBuf::from(p));
        let svg = Destination::InsteadOfTerminal(PathBuf::from("flame.svg"));
        // (-o, stdout is a terminal, format, where it goes; None: refused)
        let cases = [
            (Some("x.svg"), true, Format::Svg, Some(file("x.svg"))),
            (Some("p.pb.gz"), true, Format::Pprof, Some(file("p.pb.gz"))),
            (Some("x.svg"), false, Format::Svg, Some(file("x.svg"))),
            (None, true, Format::Svg, Some(svg)),
            (None, false, Format::Svg, Some(Destination::Stdout)),
            (None, true, Format::Folded, Some(Destination::Stdout)),
            (None, true, Format::Speedscope, Some(Destination::Stdout)),
            (None, false, Format::Pprof, Some(Destination::Stdout)),
            (None, true, Format::Pprof, None),
        ];
        for (o, tty, format, want) in cases {
            let got = destination(o.map(Path::new), tty, format);
            match want {
                Some(w) => assert_eq!(got.unwrap(), w, "{o:?} {tty} {format:?}"),
                None => {
                    let e = got.unwrap_err();
                    assert_eq!(crate::error::exit_code(&e), 2, "{e}");
                    assert!(e.to_string().contains("-o FILE"), "{e}");
                }
            }
        }
    }
}
