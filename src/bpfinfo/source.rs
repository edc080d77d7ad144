//! The one seam between `annotate` (and `flame --lines`, `report`'s hot lines) and a perf.data:
//! the samples with their call-chain IPs ([`for_each_sample`]) and the header feature sections
//! ([`read_features`]), both through the built-in perf.data reader
//! ([`crate::profile::perfdata`]); samples come from `perf script -F event,period,ip,sym`
//! under `--via-perf` or where that reader does not handle the file.

use std::io::{BufRead, BufReader};
use std::path::Path;

use anyhow::{Context, Result};

use crate::error::usage;
use crate::perf::script::Script;
use crate::perf::PerfChoice;
use crate::profile::perfdata::BpfPrograms;

/// The header feature sections `annotate` needs.
#[derive(Debug, Clone, Default)]
pub(crate) struct Features {
    /// The file is little-endian (`PERFILE2`); perf itself refuses BPF sections otherwise.
    pub little_endian: bool,
    /// Body of `HEADER_BPF_PROG_INFO`, when the file has one.
    pub prog_info: Option<Vec<u8>>,
    /// Body of `HEADER_BPF_BTF`, when the file has one.
    pub btf: Option<Vec<u8>>,
    /// The recording machine's architecture (`HEADER_ARCH`), when present.
    pub arch: Option<String>,
}

/// One call-chain entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RawFrame<'a> {
    /// The sample IP (entry 0) or a return address.
    pub ip: u64,
    /// perf's symbol for it, when it had one (`[unknown]` is `None`).
    pub sym: Option<&'a str>,
    /// For JIT-ed BPF code: the program loaded there at the sample's time, as the built-in
    /// reader knows it from the recording's BPF_EVENTs (`None` through perf script).
    pub prog: Option<u32>,
}

/// One sample of the first sampled event: its call chain, innermost first, and its period.
#[derive(Debug, Clone, Copy)]
pub struct RawSample<'a> {
    /// Call-chain entries, innermost first.
    pub frames: &'a [RawFrame<'a>],
    /// The sample's period (1 when the file has none).
    pub weight: u64,
    /// Its `perf_clock` time, when the built-in reader read it.
    pub time: Option<u64>,
}

/// Where to find perf and the kernel symbols for [`for_each_sample`].
#[derive(Debug, Clone)]
pub struct SampleSource<'a> {
    /// The perf.data.
    pub input: &'a Path,
    /// The kallsyms snapshot to name kernel frames with.
    pub kallsyms: Option<&'a Path>,
    /// Which perf to run.
    pub perf: &'a PerfChoice,
    /// No progress line on a terminal and no note about the kernel symbols (when it runs
    /// beside another reading of the same file, which says them).
    pub quiet: bool,
}

/// The header's feature sections 6 (arch), 25 and 26 of `path`, read by the built-in reader
/// ([`crate::profile::perfdata::PerfData::headers_of`]).
pub(crate) fn read_features(path: &Path) -> Result<Features> {
    use crate::profile::perfdata::{feature, Endian, PerfData};
    let (file, _) = crate::profile::open_regular(path, crate::profile::Role::Profile, false)?;
    let data = PerfData::headers_of(&file).map_err(|err| {
        usage(format!(
            "{} is not a perf.data file annotate can read: {err}",
            path.display()
        ))
    })?;
    let section = |id| data.feature(id).map(<[u8]>::to_vec);
    Ok(Features {
        little_endian: data.endian() == Endian::Little,
        prog_info: section(feature::BPF_PROG_INFO),
        btf: section(feature::BPF_BTF),
        arch: data.arch(),
    })
}

/// Calls `each` for every sample of the first sampled event of the perf.data, with its
/// call chain: read natively ([`crate::profile::perfdata`]; BPF frames carry their program's
/// id, found from `programs`: [`BpfPrograms`]), or with `perf script -F event,period,ip,sym`
/// under `--via-perf` or where the native reader does not handle the file (it says why).
pub fn for_each_sample(
    src: &SampleSource<'_>,
    programs: BpfPrograms,
    mut each: impl FnMut(&RawSample<'_>),
) -> Result<()> {
    let (file, _) = crate::profile::open_regular(src.input, crate::profile::Role::Profile, false)?;
    let record = crate::profile::run_record(src.input)?;
    let symbols =
        crate::profile::kernel_symbols::choose(src.input, &file, src.kallsyms, record.as_ref())?;
    if let Some(note) = symbols.note.as_ref().filter(|_| !src.quiet) {
        crate::out::say(format!("warning: {note}"));
    }
    if !src.perf.via_perf {
        match native_samples(&file, symbols.text.clone(), programs, &mut each) {
            Ok(()) => return Ok(()),
            Err(why) => crate::out::say(format!(
                "reading {} with perf script: the native reader does not handle {why}",
                src.input.display()
            )),
        }
    }
    let found = src.perf.find(true)?;
    let fields = ["-F", "event,period,ip,sym"];
    let mut script = Script::start_with(
        &found.path,
        src.input,
        &file,
        symbols.for_perf(),
        crate::profile::force_for_root(&file),
        &fields,
    )?;
    let parsed = if src.quiet {
        parse_script(
            BufReader::with_capacity(1 << 20, script.reader_quiet()?),
            each,
        )
    } else {
        parse_script(BufReader::with_capacity(1 << 20, script.reader()?), each)
    };
    script.finish()?;
    parsed
}

/// The samples of the first sampled event, read natively, each frame named as perf names it
/// (kernel frames from `kallsyms`, which is of the recording's kernel build, else left
/// unnamed; BPF frames from KSYMBOL records; user frames are not needed here). `Err`: why the reader cannot read this file.
fn native_samples(
    file: &std::fs::File,
    kallsyms: Option<std::sync::Arc<[u8]>>,
    programs: BpfPrograms,
    each: &mut impl FnMut(&RawSample<'_>),
) -> std::result::Result<(), String> {
    use crate::profile::perfdata::{PerfData, Samples, SymbolOptions};
    let data = PerfData::from_file(file).map_err(|e| e.to_string())?;
    let opts = SymbolOptions {
        kallsyms,
        user_symbols: false,
        ..SymbolOptions::default()
    };
    let mut samples = Samples::new(&data, &opts)
        .map_err(|e| e.to_string())?
        .first_event_only()
        .bpf_programs(programs);
    while let Some(sample) = samples.next_sample() {
        let frames = raw_frames(&sample);
        each(&RawSample {
            frames: &frames,
            weight: sample.period.unwrap_or(1),
            time: sample.time,
        });
    }
    Ok(())
}

/// A resolved sample's call chain as [`RawFrame`]s: addresses with perf's names.
pub(crate) fn raw_frames<'s>(
    sample: &crate::profile::perfdata::ResolvedSample<'s>,
) -> Vec<RawFrame<'s>> {
    sample
        .ips
        .iter()
        .zip(sample.frames)
        .map(|(&ip, id)| {
            let frame = sample.table.get(*id);
            RawFrame {
                ip,
                sym: frame.and_then(|frame| frame.symbol.as_deref()),
                prog: frame.and_then(|frame| frame.bpf_prog),
            }
        })
        .collect()
}

/// Parses `perf script -F event,period,ip,sym` text: an event line (`PERIOD EVENT:`), one
/// `\tHEXIP SYM` line per call-chain entry, a blank line. Samples of events other than the
/// first one seen are skipped (as inferno's collapser does).
pub(crate) fn parse_script(
    mut reader: impl BufRead,
    mut each: impl FnMut(&RawSample<'_>),
) -> Result<()> {
    let mut names = String::new();
    let mut ips: Vec<ScriptFrame> = Vec::new();
    let mut first_event: Option<String> = None;
    let mut current: Option<u64> = None;
    let mut line = String::new();
    loop {
        line.clear();
        let count = reader.read_line(&mut line).context("reading perf script")?;
        let trimmed = line.trim_end_matches(['\n', '\r']);
        if count == 0 || trimmed.trim().is_empty() {
            if let Some(weight) = current.take() {
                emit(&ips, &names, weight, &mut each);
            }
            ips.clear();
            names.clear();
            if count == 0 {
                return Ok(());
            }
        } else if trimmed.starts_with([' ', '\t']) && current.is_some() {
            let body = trimmed.trim_start();
            let (hex, sym) = body.split_once(' ').unwrap_or((body, ""));
            if let Ok(ip) = u64::from_str_radix(hex, 16) {
                let start = names.len();
                names.push_str(sym.trim());
                ips.push(ScriptFrame {
                    ip,
                    name: start..names.len(),
                });
            }
        } else {
            current = event_line(trimmed, &mut first_event);
        }
    }
}

/// The period of an event line, `None` for an event other than the first.
fn event_line(line: &str, first: &mut Option<String>) -> Option<u64> {
    let mut words = line.split_whitespace();
    let period = words.next()?;
    let (weight, event) = match period.parse::<u64>() {
        Ok(parsed) => (parsed, words.next().unwrap_or("")),
        Err(_) => (1, period),
    };
    let event = event.trim_end_matches(':');
    match first {
        Some(chosen) if chosen != event => None,
        Some(_) => Some(weight),
        None => {
            *first = Some(event.to_string());
            Some(weight)
        }
    }
}

/// A call-chain entry of `perf script`'s text: its address and where its symbol is in the
/// sample's names.
struct ScriptFrame {
    ip: u64,
    name: std::ops::Range<usize>,
}

fn emit(ips: &[ScriptFrame], names: &str, weight: u64, each: &mut impl FnMut(&RawSample<'_>)) {
    let frames: Vec<RawFrame<'_>> = ips
        .iter()
        .map(|frame| {
            let name = &names[frame.name.clone()];
            RawFrame {
                ip: frame.ip,
                sym: (!name.is_empty() && name != "[unknown]").then_some(name),
                prog: None,
            }
        })
        .collect();
    each(&RawSample {
        frames: &frames,
        weight,
        time: None,
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn script_text_becomes_samples_of_the_first_event() {
        let text = "   1000 cpu-clock:k: \n\tffffffff8153136b __htab_map_lookup_elem\n\tffffffffc0000a84 bpf_prog_abb7fedfb7f3aa07_path_check_callback\n\t          101829 [unknown]\n\n   7 other:k: \n\tffffffff81000000 x\n\n   3 cpu-clock:k: \n\tffffffff81000001 y\n";
        let mut got = Vec::new();
        parse_script(text.as_bytes(), |s| {
            let f: Vec<_> = s
                .frames
                .iter()
                .map(|f| (f.ip, f.sym.map(str::to_string)))
                .collect();
            got.push((s.weight, f));
        })
        .unwrap();
        assert_eq!(got.len(), 2);
        assert_eq!(got[0].0, 1000);
        assert_eq!(
            got[0].1[0],
            (0xffffffff8153136b, Some("__htab_map_lookup_elem".into()))
        );
        assert_eq!(got[0].1[2], (0x101829, None));
        assert_eq!(got[1], (3, vec![(0xffffffff81000001, Some("y".into()))]));
    }

    #[test]
    fn not_perf_data_is_one_line() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("x");
        std::fs::write(&p, vec![b'a'; 200]).unwrap();
        let e = read_features(&p).unwrap_err();
        assert!(e.to_string().contains("not a perf.data file"), "{e}");
        assert_eq!(crate::error::exit_code(&e), 2);
    }
}
