//! The one seam between `annotate` (and `flame --lines`, `report`'s hot lines) and a perf.data:
//! the samples with their call-chain IPs ([`for_each_sample`]) and the header feature sections
//! ([`read_features`]). Samples come from `perf script -F event,period,ip,sym` (one line per
//! call-chain entry: the raw IP and perf's symbol, which for BPF code is the KSYMBOL name);
//! the feature table is read here from the file (perf `tools/perf/util/header.c:
//! perf_file_header__read`, `perf_header__process_sections`; notes perfdata-research.md §1).
//! A native perf.data reader can replace both functions without the callers changing.

use std::fs::File;
use std::io::{BufRead, BufReader, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use crate::error::usage;
use crate::perf::script::Script;
use crate::perf::PerfChoice;

/// `HEADER_ARCH`: `uname -m` of the recording machine.
pub const FEAT_ARCH: u32 = 6;
/// `HEADER_BPF_PROG_INFO`.
pub const FEAT_BPF_PROG_INFO: u32 = 25;
/// `HEADER_BPF_BTF`.
pub const FEAT_BPF_BTF: u32 = 26;
/// No feature section we read is larger than this (a BPF_PROG_INFO holds a few KB per program).
const FEATURE_MAX: u64 = 512 << 20;

/// The header feature sections `annotate` needs.
#[derive(Debug, Clone, Default)]
pub struct Features {
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
}

/// One sample of the first sampled event: its call chain, innermost first, and its period.
#[derive(Debug, Clone, Copy)]
pub struct RawSample<'a> {
    /// Call-chain entries, innermost first.
    pub frames: &'a [RawFrame<'a>],
    /// The sample's period (1 when the file has none).
    pub weight: u64,
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
    /// No progress line on a terminal (when it runs beside another `perf script`).
    pub quiet: bool,
}

fn u64_at(b: &[u8], at: usize, le: bool) -> Option<u64> {
    let raw: [u8; 8] = b.get(at..at + 8)?.try_into().ok()?;
    Some(if le {
        u64::from_le_bytes(raw)
    } else {
        u64::from_be_bytes(raw)
    })
}

/// Reads the header, the feature table and the bodies of features 6, 25 and 26 of `path`.
pub fn read_features(path: &Path) -> Result<Features> {
    let (mut f, len) = crate::profile::open_regular(path, crate::profile::Role::Profile, false)?;
    let not = |why: &str| usage(format!("{} is not a perf.data file: {why}", path.display()));
    let mut head = [0u8; 104];
    f.read_exact(&mut head)
        .map_err(|_| not("shorter than perf's header"))?;
    let le = match &head[..8] {
        b"PERFILE2" => true,
        b"2ELIFREP" => false,
        _ => return Err(not("no PERFILE2 magic")),
    };
    let field = |at| u64_at(&head, at, le).unwrap_or(0);
    if field(8) != 104 {
        return Err(not(
            "a pipe-mode or old-format header (record to a file, not a pipe)",
        ));
    }
    let bits: Vec<u64> = (0..4).map(|i| field(72 + 8 * i)).collect();
    let has = |n: u32| bits[n as usize / 64] >> (n % 64) & 1 == 1;
    let table = field(40)
        .checked_add(field(48))
        .filter(|&t| t < len)
        .ok_or_else(|| not("its data section runs past the end (was perf stopped?)"))?;
    let mut feats = Features {
        little_endian: le,
        ..Features::default()
    };
    for feat in [FEAT_ARCH, FEAT_BPF_PROG_INFO, FEAT_BPF_BTF] {
        if !has(feat) {
            continue;
        }
        let index = (0..feat).filter(|&n| has(n)).count() as u64;
        let body = section(&mut f, table + 16 * index, len, le)
            .with_context(|| format!("{}: feature {feat} unreadable", path.display()))?;
        match feat {
            FEAT_ARCH => feats.arch = arch_string(&body, le),
            FEAT_BPF_PROG_INFO => feats.prog_info = Some(body),
            _ => feats.btf = Some(body),
        }
    }
    Ok(feats)
}

/// The body of the feature whose `{offset, size}` entry is at `entry`.
fn section(f: &mut File, entry: u64, len: u64, le: bool) -> Result<Vec<u8>> {
    let mut e = [0u8; 16];
    f.seek(SeekFrom::Start(entry))?;
    f.read_exact(&mut e).context("feature table truncated")?;
    let (off, size) = (
        u64_at(&e, 0, le).unwrap_or(0),
        u64_at(&e, 8, le).unwrap_or(0),
    );
    if size > FEATURE_MAX || off.checked_add(size).is_none_or(|end| end > len) {
        anyhow::bail!("section {off}+{size} is outside the file ({len} bytes)");
    }
    let mut body = vec![0u8; size as usize];
    f.seek(SeekFrom::Start(off))?;
    f.read_exact(&mut body)?;
    Ok(body)
}

/// A `perf_header_string` (`u32 len; char s[len]`), up to its NUL.
fn arch_string(body: &[u8], le: bool) -> Option<String> {
    let n: [u8; 4] = body.get(..4)?.try_into().ok()?;
    let n = if le {
        u32::from_le_bytes(n)
    } else {
        u32::from_be_bytes(n)
    } as usize;
    let s = body.get(4..4 + n.min(body.len() - 4))?;
    let s = s.split(|&c| c == 0).next().unwrap_or(&[]);
    Some(String::from_utf8_lossy(s).into_owned())
}

/// The kallsyms snapshot to give perf: the one named, else `INPUT.kallsyms` when it exists.
fn snapshot(src: &SampleSource<'_>) -> Result<Option<PathBuf>> {
    let path = match src.kallsyms {
        Some(k) => k.to_path_buf(),
        None => crate::runfiles::RunFiles::new(src.input).kallsyms(),
    };
    if src.kallsyms.is_none() && std::fs::symlink_metadata(&path).is_err() {
        return Ok(None);
    }
    crate::profile::open_regular(
        &path,
        crate::profile::Role::Kallsyms,
        src.kallsyms.is_none(),
    )?;
    Ok(Some(path))
}

/// Calls `each` for every sample of the first sampled event of the perf.data, with its
/// call chain: read natively ([`crate::profile::perfdata`]), or with
/// `perf script -F event,period,ip,sym` under `--via-perf` or where the native reader does not
/// handle the file (it says why).
pub fn for_each_sample(src: &SampleSource<'_>, mut each: impl FnMut(&RawSample<'_>)) -> Result<()> {
    let snap = snapshot(src)?;
    let (file, _) = crate::profile::open_regular(src.input, crate::profile::Role::Profile, false)?;
    if !src.perf.via_perf {
        match native_samples(&file, snap.clone(), &mut each) {
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
        snap.as_deref(),
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
/// (kernel frames from the kallsyms snapshot, else /proc/kallsyms; BPF frames from KSYMBOL
/// records; user frames are not needed here). `Err`: why the reader cannot read this file.
fn native_samples(
    file: &std::fs::File,
    kallsyms: Option<PathBuf>,
    each: &mut impl FnMut(&RawSample<'_>),
) -> std::result::Result<(), String> {
    use crate::profile::perfdata::{PerfData, Samples, SymbolOptions};
    let data = PerfData::from_file(file).map_err(|e| e.to_string())?;
    let opts = SymbolOptions {
        kallsyms: Some(kallsyms.unwrap_or_else(|| "/proc/kallsyms".into())),
        user_symbols: false,
        ..SymbolOptions::default()
    };
    let mut samples = Samples::new(&data, &opts)
        .map_err(|e| e.to_string())?
        .first_event_only();
    while let Some(s) = samples.next_sample() {
        let frames = raw_frames(&s);
        each(&RawSample {
            frames: &frames,
            weight: s.period.unwrap_or(1),
        });
    }
    Ok(())
}

/// A resolved sample's call chain as [`RawFrame`]s: addresses with perf's names.
pub fn raw_frames<'s>(s: &crate::profile::perfdata::ResolvedSample<'s>) -> Vec<RawFrame<'s>> {
    s.ips
        .iter()
        .zip(s.frames)
        .map(|(&ip, id)| RawFrame {
            ip,
            sym: s.table.get(*id).and_then(|f| f.symbol.as_deref()),
        })
        .collect()
}

/// Parses `perf script -F event,period,ip,sym` text: an event line (`PERIOD EVENT:`), one
/// `\tHEXIP SYM` line per call-chain entry, a blank line. Samples of events other than the
/// first one seen are skipped (as inferno's collapser does).
pub fn parse_script(mut r: impl BufRead, mut each: impl FnMut(&RawSample<'_>)) -> Result<()> {
    let mut names = String::new();
    let mut ips: Vec<(u64, usize, usize)> = Vec::new();
    let mut first_event: Option<String> = None;
    let mut current: Option<u64> = None;
    let mut line = String::new();
    loop {
        line.clear();
        let n = r.read_line(&mut line).context("reading perf script")?;
        let t = line.trim_end_matches(['\n', '\r']);
        if n == 0 || t.trim().is_empty() {
            if let Some(weight) = current.take() {
                emit(&ips, &names, weight, &mut each);
            }
            ips.clear();
            names.clear();
            if n == 0 {
                return Ok(());
            }
        } else if t.starts_with([' ', '\t']) && current.is_some() {
            let body = t.trim_start();
            let (hex, sym) = body.split_once(' ').unwrap_or((body, ""));
            if let Ok(ip) = u64::from_str_radix(hex, 16) {
                let start = names.len();
                names.push_str(sym.trim());
                ips.push((ip, start, names.len()));
            }
        } else {
            current = event_line(t, &mut first_event);
        }
    }
}

/// The period of an event line, `None` for an event other than the first.
fn event_line(t: &str, first: &mut Option<String>) -> Option<u64> {
    let mut words = t.split_whitespace();
    let period = words.next()?;
    let (weight, event) = match period.parse::<u64>() {
        Ok(p) => (p, words.next().unwrap_or("")),
        Err(_) => (1, period),
    };
    let event = event.trim_end_matches(':');
    match first {
        Some(f) if f != event => None,
        Some(_) => Some(weight),
        None => {
            *first = Some(event.to_string());
            Some(weight)
        }
    }
}

fn emit(
    ips: &[(u64, usize, usize)],
    names: &str,
    weight: u64,
    each: &mut impl FnMut(&RawSample<'_>),
) {
    let frames: Vec<RawFrame<'_>> = ips
        .iter()
        .map(|&(ip, a, b)| {
            let s = &names[a..b];
            RawFrame {
                ip,
                sym: (!s.is_empty() && s != "[unknown]").then_some(s),
            }
        })
        .collect();
    each(&RawSample {
        frames: &frames,
        weight,
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
