//! Which kallsyms names the kernel frames of a perf.data: only one of the recording's own
//! kernel build. A kallsyms of another build names every kernel frame after whatever function
//! sits at that address there, which is worse than no name, so when nothing matches the frames
//! stay `[unknown]`, as perf prints them, and one line says which build the profile wants,
//! what was found, and what to pass.
//!
//! perf writes the recording kernel's build id into the file's build-id table (the
//! `[kernel.kallsyms]` entry; `perf buildid-list -i FILE` prints it). The candidates, in order:
//! 1. `--kallsyms FILE`, which the user vouches for (as with perf's own `--kallsyms`);
//! 2. the snapshot `record` left beside the file (`INPUT.kallsyms`), of the build its run
//!    record (`INPUT.json`) names; a run record written before it named one still vouches for
//!    its snapshot, which the same run took;
//! 3. perf's build-id cache (`$PERF_BUILDID_DIR`, else `~/.debug`), where `perf record` copies
//!    /proc/kallsyms as `[kernel.kallsyms]/<build-id>/kallsyms`;
//! 4. this machine's /proc/kallsyms, when the running kernel (`/sys/kernel/notes`) is the
//!    recording's build.
//!
//! A kallsyms whose addresses are all zero (read by a user while `kernel.kptr_restrict` hides
//! them) is never a source.

use crate::error::usage;
use crate::host::{kallsyms, notes, Host};
use crate::input::{open_regular, Role};
use crate::runfiles::RunFiles;
use crate::runrecord::RunRecord;
use anyhow::Result;
use std::fs::File;
use std::io::{Read, Seek};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// How much of a kallsyms is read to see whether it shows addresses: real files have a
/// non-zero address on their first line.
const ADDRESS_CHECK_BYTES: u64 = 64 << 10;

/// Where the kernel symbols of a recording came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SymbolSource {
    /// `--kallsyms FILE`.
    Given,
    /// The snapshot `record` left beside the recording.
    Snapshot,
    /// perf's build-id cache.
    BuildIdCache,
    /// This machine's /proc/kallsyms, of the recording's kernel build.
    RunningKernel,
    /// This machine's /proc/kallsyms, though the recording names no build to check it with.
    RunningKernelUnchecked,
    /// None: kernel frames stay `[unknown]`.
    Nothing,
}

impl SymbolSource {
    /// Whether the file holds the BPF symbols of the recording's time too (trampolines and
    /// programs perf has no record of): a snapshot taken then does; the running kernel's
    /// kallsyms lists the programs loaded now.
    pub fn from_recording_time(self) -> bool {
        matches!(
            self,
            SymbolSource::Given | SymbolSource::Snapshot | SymbolSource::BuildIdCache
        )
    }
}

/// The kallsyms to name a recording's kernel frames with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KernelSymbols {
    /// The file chosen, for messages; `None` when no candidate is of the recording's build.
    pub path: Option<PathBuf>,
    /// Its text, read through the very descriptor that was checked (a regular file, capped):
    /// the file is never opened again by its path, so a FIFO or a device swapped in after the
    /// check neither hangs the read nor fills memory. perf is handed this text, not the path.
    pub text: Option<Arc<[u8]>>,
    pub source: SymbolSource,
    /// One line for the user when the names are missing or unchecked.
    pub note: Option<String>,
}

impl Default for KernelSymbols {
    /// No kernel symbols, and nothing to say about it.
    fn default() -> KernelSymbols {
        nothing(None)
    }
}

impl KernelSymbols {
    /// The symbols of `file`, opened and checked at `path`: its text read from that descriptor.
    fn found(path: PathBuf, file: &File, source: SymbolSource) -> Result<KernelSymbols> {
        let text = read_checked(file, &path)?;
        Ok(KernelSymbols {
            path: Some(path),
            text: Some(text),
            source,
            note: None,
        })
    }

    /// The symbols given for an input that carries its own names (perf script text, folded
    /// stacks): `--kallsyms`, else the snapshot beside it, for naming bare addresses only. A
    /// snapshot beside it that cannot be read leaves them unnamed, with a warning.
    pub fn for_named_input(input: &Path, given: Option<&Path>) -> Result<KernelSymbols> {
        if let Some(path) = given {
            let (file, _) = open_regular(path, Role::Kallsyms, false)?;
            return KernelSymbols::found(path.to_path_buf(), &file, SymbolSource::Given);
        }
        let beside = RunFiles::new(input).kallsyms();
        if std::fs::symlink_metadata(&beside).is_err() {
            return Ok(nothing(None));
        }
        let opened = open_regular(&beside, Role::Kallsyms, true);
        match opened
            .and_then(|(file, _)| KernelSymbols::found(beside, &file, SymbolSource::Snapshot))
        {
            Ok(found) => Ok(found),
            Err(err) => {
                crate::out::say(format!("warning: {err:#}; unresolved frames stay unnamed"));
                Ok(nothing(None))
            }
        }
    }

    /// The text to hand `perf script` as its `--kallsyms` (a private copy, see
    /// [`crate::perf::script`]): one taken at the recording's time. For the running kernel's own
    /// kallsyms none is given, as perf finds it itself (and checks its build id); with no match
    /// none is given either, and perf prints `[unknown]`.
    pub fn for_perf(&self) -> Option<&[u8]> {
        self.text
            .as_deref()
            .filter(|_| self.source.from_recording_time())
    }
}

/// The kernel symbols for the perf.data `file` at `input`, chosen as the module says, with
/// `given` the user's `--kallsyms` and `record` the run record beside the input.
pub fn choose(
    input: &Path,
    file: &File,
    given: Option<&Path>,
    record: Option<&RunRecord>,
) -> Result<KernelSymbols> {
    if let Some(path) = given {
        return given_file(path);
    }
    let wanted = recorded_build_id(file);
    let mut passed_over = Vec::new();
    if let Some(found) = beside_snapshot(input, record, wanted.as_deref(), &mut passed_over)? {
        return Ok(found);
    }
    if let Some(id) = &wanted {
        if let Some(found) = build_id_cache(id, &mut passed_over) {
            return Ok(found);
        }
    }
    Ok(running_kernel(input, wanted.as_deref(), passed_over))
}

/// The recording kernel's build id in hex, when the file names one.
fn recorded_build_id(file: &File) -> Option<String> {
    let data = super::perfdata::PerfData::headers_of(file).ok()?;
    data.kernel_build_id().map(|id| super::perfdata::hex(&id))
}

/// `--kallsyms FILE`: used as given, unless it shows no addresses at all.
fn given_file(path: &Path) -> Result<KernelSymbols> {
    let (file, _) = open_regular(path, Role::Kallsyms, false)?;
    if !shows_addresses(&file) {
        return Err(usage(format!(
            "{} shows only zero addresses (it was read by a user while kernel.kptr_restrict hides them): give a copy of /proc/kallsyms taken as root",
            path.display()
        )));
    }
    KernelSymbols::found(path.to_path_buf(), &file, SymbolSource::Given)
}

/// The snapshot beside the input, when it is of the recording's build. A snapshot that is a
/// link or not a regular file is an error, as any bad sidecar is.
fn beside_snapshot(
    input: &Path,
    record: Option<&RunRecord>,
    wanted: Option<&str>,
    passed_over: &mut Vec<String>,
) -> Result<Option<KernelSymbols>> {
    let path = RunFiles::new(input).kallsyms();
    if std::fs::symlink_metadata(&path).is_err() {
        passed_over.push(format!("no snapshot {} beside it", file_name(&path)));
        return Ok(None);
    }
    let (file, _) = open_regular(&path, Role::Kallsyms, true)?;
    let snapshot_build = record.and_then(|r| r.kernel_build_id.as_deref());
    match (wanted, snapshot_build) {
        (Some(wanted), Some(snapshot)) if !wanted.eq_ignore_ascii_case(snapshot) => {
            passed_over.push(format!("the snapshot beside it is of build {snapshot}"));
            Ok(None)
        }
        _ if !shows_addresses(&file) => {
            passed_over.push("the snapshot beside it shows no addresses".into());
            Ok(None)
        }
        _ => KernelSymbols::found(path, &file, SymbolSource::Snapshot).map(Some),
    }
}

/// perf's copy of the recording kernel's kallsyms in its build-id cache, when it has one.
fn build_id_cache(wanted: &str, passed_over: &mut Vec<String>) -> Option<KernelSymbols> {
    let dir = std::env::var_os("PERF_BUILDID_DIR")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".debug")))?;
    let path = dir
        .join(super::perfdata::KERNEL_DSO)
        .join(wanted)
        .join("kallsyms");
    if std::fs::symlink_metadata(&path).is_err() {
        passed_over.push(format!(
            "perf's build-id cache ({}) has none",
            dir.display()
        ));
        return None;
    }
    let opened = open_regular(&path, Role::Kallsyms, true);
    match opened.map(|(file, _)| (shows_addresses(&file), file)) {
        Ok((true, file)) => match KernelSymbols::found(path, &file, SymbolSource::BuildIdCache) {
            Ok(found) => Some(found),
            Err(err) => {
                passed_over.push(format!("{err:#}"));
                None
            }
        },
        Ok(_) => {
            passed_over.push(format!("{} shows no addresses", path.display()));
            None
        }
        Err(err) => {
            passed_over.push(format!("{err:#}"));
            None
        }
    }
}

/// This machine's kallsyms, when the running kernel is the recording's build (or the
/// recording names none: then with a note); else nothing, with the line that says why.
fn running_kernel(
    input: &Path,
    wanted: Option<&str>,
    mut passed_over: Vec<String>,
) -> KernelSymbols {
    let host = Host::live();
    let path = kallsyms::live_path(&host);
    let running = notes::running_build_id(&host).map(|id| super::perfdata::hex(&id));
    // The kernel's own file, read once: its text when it shows addresses to this user.
    let text = File::open(&path)
        .ok()
        .filter(shows_addresses)
        .and_then(|file| read_checked(&file, &path).ok());
    let input = input.display();
    let Some(wanted) = wanted else {
        return unchecked(input, path, text);
    };
    let same_build = running
        .as_deref()
        .is_some_and(|id| id.eq_ignore_ascii_case(wanted));
    if let Some(text) = text.filter(|_| same_build) {
        return KernelSymbols {
            path: Some(path),
            text: Some(text),
            source: SymbolSource::RunningKernel,
            note: None,
        };
    }
    let fix = if same_build {
        passed_over.insert(0, format!(
            "this machine runs build {wanted}, the same, but {} shows no addresses to this user (kernel.kptr_restrict hides them)",
            path.display()
        ));
        "run as root, or pass --kallsyms with a copy of /proc/kallsyms taken as root"
    } else {
        passed_over.insert(
            0,
            match &running {
                Some(id) => format!("this machine runs build {id}"),
                None => "this machine's kernel shows no build id".to_string(),
            },
        );
        "pass --kallsyms with the snapshot of the recording machine (`ebpf-prof record` leaves it beside perf.data; else copy /proc/kallsyms there as root)"
    };
    nothing(Some(format!(
        "kernel frames of {input} stay [unknown]: it was recorded on kernel build {wanted} and no kallsyms of that build is at hand ({}); {fix}",
        passed_over.join("; ")
    )))
}

/// This machine's kallsyms for a recording that names no kernel build, when it shows
/// addresses: it cannot be checked, and the note says so.
fn unchecked(
    input: std::path::Display<'_>,
    path: PathBuf,
    text: Option<Arc<[u8]>>,
) -> KernelSymbols {
    if text.is_none() {
        return nothing(Some(format!(
            "kernel frames of {input} stay [unknown]: it names no kernel build id, has no snapshot beside it, and {} shows no addresses to this user; pass --kallsyms with a snapshot taken as root",
            path.display()
        )));
    }
    KernelSymbols {
        path: Some(path),
        text,
        source: SymbolSource::RunningKernelUnchecked,
        note: Some(format!(
            "{input} names no kernel build id (recorded with --no-buildid?) and has no snapshot beside it: kernel frames are named from this machine's kallsyms without a check; if it was recorded elsewhere, pass --kallsyms with that machine's snapshot"
        )),
    }
}

fn nothing(note: Option<String>) -> KernelSymbols {
    KernelSymbols {
        path: None,
        text: None,
        source: SymbolSource::Nothing,
        note,
    }
}

/// The whole text of an opened kallsyms (from its start, at most its role's cap).
fn read_checked(mut file: &File, path: &Path) -> Result<Arc<[u8]>> {
    let mut text = Vec::new();
    let read = file
        .rewind()
        .and_then(|()| file.take(Role::Kallsyms.cap()).read_to_end(&mut text));
    read.map_err(|err| {
        usage(format!(
            "cannot read {}: {}",
            path.display(),
            crate::out::plain(&err)
        ))
    })?;
    Ok(text.into())
}

/// Whether an opened kallsyms shows any real address in its first bytes.
fn shows_addresses(mut file: &File) -> bool {
    let mut head = Vec::new();
    let read = (&mut file).take(ADDRESS_CHECK_BYTES).read_to_end(&mut head);
    read.is_ok() && kallsyms::shows_addresses(&head)
}

fn file_name(path: &Path) -> String {
    path.file_name().map_or_else(
        || path.display().to_string(),
        |n| n.to_string_lossy().into_owned(),
    )
}
