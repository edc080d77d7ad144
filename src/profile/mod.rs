//! Reading profiles into the folded stacks that `flame`, `report` and `diff` share: a
//! perf.data (through `perf script` and inferno's collapser), `perf script` text, or folded
//! stacks, told apart by content; with the run record (`INPUT.json`) beside it. Parse once, in
//! one place.

pub mod folded;
pub mod frames;
mod input;
pub mod perfdata;

pub use input::{open_regular, read_sidecar};

use crate::error::usage;
use crate::out::say;
use crate::perf::script::Script;
use crate::perf::PerfChoice;
use crate::runfiles::RunFiles;
use crate::runrecord::RunRecord;
use anyhow::Result;
use folded::InputKind;
use std::io::Read;
use std::path::Path;

/// A profile turned into folded stacks, with what is known of its run.
#[derive(Debug, Clone)]
pub struct Profile {
    pub folded: String,
    pub record: Option<RunRecord>,
    pub kind: InputKind,
}

/// Load any supported input as folded stacks. `kallsyms` names a snapshot to resolve kernel
/// frames with (default: `INPUT.kallsyms`).
pub fn load(input: &Path, kallsyms: Option<&Path>, perf: &PerfChoice) -> Result<Profile> {
    let (mut file, _) = open_regular(input, false)?;
    let head = input::head(&mut file)?;
    let kind = folded::detect(&head).map_err(|why| {
        usage(format!(
            "{} is neither a perf.data file, `perf script` output nor folded stacks: {why}",
            input.display()
        ))
    })?;
    let files = RunFiles::new(input);
    let record = run_record(&files)?;
    let text = match kind {
        InputKind::PerfData => collapse_perf_data(input, &files, kallsyms, perf)?,
        InputKind::PerfScript => {
            let all = std::io::Cursor::new(head).chain(file);
            String::from_utf8_lossy(&folded::collapse_perf_script(all)?).into_owned()
        }
        InputKind::Folded => {
            let mut rest = Vec::new();
            file.read_to_end(&mut rest)?;
            let mut all = head;
            all.extend_from_slice(&rest);
            String::from_utf8_lossy(&all).into_owned()
        }
    };
    if text.trim().is_empty() {
        return Err(usage(format!(
            "{} holds no samples with call chains (was it recorded with -g?)",
            input.display()
        )));
    }
    Ok(Profile {
        folded: text,
        record,
        kind,
    })
}

/// The run record beside the input, if there is a readable one; a bad one is a warning.
fn run_record(files: &RunFiles) -> Result<Option<RunRecord>> {
    let Some(text) = read_sidecar(&files.json())? else {
        return Ok(None);
    };
    match serde_json::from_str(&text) {
        Ok(r) => Ok(Some(r)),
        Err(e) => {
            say(format!(
                "warning: {} is not a run record ({e}): ignored",
                files.json().display()
            ));
            Ok(None)
        }
    }
}

fn collapse_perf_data(
    input: &Path,
    files: &RunFiles,
    kallsyms: Option<&Path>,
    perf: &PerfChoice,
) -> Result<String> {
    let snapshot = kallsyms
        .map(Path::to_path_buf)
        .or_else(|| Some(files.kallsyms()).filter(|p| p.exists()));
    match &snapshot {
        Some(s) => {
            // A snapshot must be a regular file perf can read to the end: check it first.
            let (_, len) = open_regular(s, kallsyms.is_none())?;
            if len > input::SIDECAR_MAX {
                return Err(usage(format!(
                    "{} is {len} bytes: not a kallsyms snapshot",
                    s.display()
                )));
            }
        }
        None => say(format!(
            "warning: no kallsyms snapshot beside {} (recorded elsewhere?): kernel frames are named from this machine's /proc/kallsyms, which may be wrong or hidden",
            input.display()
        )),
    }
    if !perf.via_perf {
        let (file, _) = open_regular(input, false)?;
        match perfdata::fold_file(&file, input, snapshot.as_deref())? {
            perfdata::Native::Folded(text) => return Ok(text),
            perfdata::Native::Fallback(why) => say(format!(
                "reading {} with perf script: the native reader does not handle {why}",
                input.display()
            )),
        }
    }
    let found = perf.find(true)?;
    let mut script = Script::start(
        &found.path,
        input,
        snapshot.as_deref(),
        sudo_users_own(input),
    )?;
    let collapsed = folded::collapse_perf_script(script.reader()?);
    script.finish()?;
    Ok(String::from_utf8_lossy(&collapsed?).into_owned())
}

/// Root reading the file of the user who ran sudo: perf's ownership check would refuse it, and
/// the file is that user's own recording, so it is safe to pass `-f`.
fn sudo_users_own(path: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    let owner = crate::runfiles::Owner::from_sudo_env();
    let meta = std::fs::metadata(path).ok();
    crate::host::security::is_root()
        && matches!((owner, meta), (Some(o), Some(m)) if m.uid() == o.uid)
}
