//! The two arms of an overhead measurement and how each round brings one about: nothing
//! attached, an object attached through libbpf-rs, or the user's own loader running.

use crate::bpf::{self, Attached, LoadedProgram, ObjectSource};
use crate::error::{child, usage};
use crate::signals;
use anyhow::{Context, Result};
use std::collections::BTreeSet;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// What one arm has loaded while its rounds run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ArmSpec {
    /// Nothing attached: the baseline.
    Detached,
    /// A libbpf-style object, attached by its SEC() names.
    Object(PathBuf),
    /// The user's loader (argv), started for the round and stopped by its pid after.
    Command(Vec<String>),
}

impl ArmSpec {
    /// A short label for tables and plots.
    pub fn label(&self) -> String {
        match self {
            ArmSpec::Detached => "detached".into(),
            ArmSpec::Object(p) => p.file_name().map_or_else(
                || p.display().to_string(),
                |f| f.to_string_lossy().into_owned(),
            ),
            ArmSpec::Command(argv) => argv.first().cloned().unwrap_or_default(),
        }
    }
}

/// An arm brought about for one round; dropping it undoes it.
pub enum Active {
    Nothing,
    Object(Attached),
    Command {
        child: Child,
        line: String,
        programs: Vec<LoadedProgram>,
    },
}

/// How long to wait for a user's loader to load its programs.
pub const ATTACH_TIMEOUT: Duration = Duration::from_secs(30);

impl Active {
    /// Bring `spec` about.
    pub fn start(spec: &ArmSpec) -> Result<Active> {
        match spec {
            ArmSpec::Detached => Ok(Active::Nothing),
            ArmSpec::Object(p) => Ok(Active::Object(bpf::attach(ObjectSource::Path(p))?)),
            ArmSpec::Command(argv) => start_command(argv),
        }
    }

    /// The kernel ids of the programs this arm has loaded.
    pub fn program_ids(&self) -> Vec<u32> {
        match self {
            Active::Nothing => Vec::new(),
            Active::Object(a) => a.program_ids(),
            Active::Command { programs, .. } => programs.iter().map(|p| p.id).collect(),
        }
    }

    /// The maps of this arm's programs (or of the object).
    pub fn map_ids(&self) -> Vec<u32> {
        match self {
            Active::Nothing => Vec::new(),
            Active::Object(a) => a.map_ids(),
            Active::Command { programs, .. } => {
                let mut v: Vec<u32> = programs
                    .iter()
                    .flat_map(|p| p.map_ids.iter().copied())
                    .collect();
                v.sort_unstable();
                v.dedup();
                v
            }
        }
    }

    /// Full program names by id (the kernel keeps only 15 characters of a name).
    pub fn program_names(&self) -> Vec<(u32, String)> {
        match self {
            Active::Nothing => Vec::new(),
            Active::Object(a) => a
                .programs()
                .iter()
                .map(|p| (p.id, p.name.clone()))
                .collect(),
            Active::Command { programs, .. } => {
                programs.iter().map(|p| (p.id, p.name.clone())).collect()
            }
        }
    }

    /// Undo the arm and check that its programs are gone.
    pub fn stop(self) -> Result<()> {
        let ids = self.program_ids();
        match self {
            Active::Nothing => {}
            Active::Object(a) => drop(a),
            Active::Command {
                mut child, line, ..
            } => stop_child(&mut child, &line)?,
        }
        ensure_gone(&ids)
    }
}

fn start_command(argv: &[String]) -> Result<Active> {
    let line = argv.join(" ");
    let before: BTreeSet<u32> = bpf::loaded_programs()?.iter().map(|p| p.id).collect();
    let mut child = Command::new(&argv[0])
        .args(&argv[1..])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .map_err(|e| usage(format!("cannot start --attach-cmd `{line}`: {e}")))?;
    let mut alive = || matches!(child.try_wait(), Ok(None));
    match bpf::wait_for_new_programs(&before, ATTACH_TIMEOUT, &mut alive) {
        Ok(programs) => Ok(Active::Command {
            child,
            line,
            programs,
        }),
        Err(e) => {
            let _ = stop_child(&mut child, &line);
            Err(e.context(format!("--attach-cmd '{line}'")))
        }
    }
}

/// SIGTERM the loader we started, by its pid; SIGKILL after 5 s.
fn stop_child(child: &mut Child, line: &str) -> Result<()> {
    if child.try_wait()?.is_some() {
        return Err(child_err(line));
    }
    signals::send(child.id(), libc::SIGTERM);
    let deadline = Instant::now() + Duration::from_secs(5);
    while Instant::now() < deadline {
        if child.try_wait()?.is_some() {
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child
        .kill()
        .context("cannot kill the --attach-cmd process")?;
    child.wait()?;
    Ok(())
}

fn child_err(line: &str) -> anyhow::Error {
    child(format!(
        "--attach-cmd `{line}` exited during the round: its programs may have gone with it"
    ))
}

/// Fail when any of `ids` is still loaded (the detached arm must really be detached).
pub fn ensure_gone(ids: &[u32]) -> Result<()> {
    if ids.is_empty() {
        return Ok(());
    }
    // Program teardown is asynchronous (RCU): give the kernel a moment.
    let deadline = Instant::now() + Duration::from_secs(2);
    loop {
        let loaded: BTreeSet<u32> = bpf::loaded_programs()?.iter().map(|p| p.id).collect();
        let left: Vec<u32> = ids.iter().copied().filter(|i| loaded.contains(i)).collect();
        if left.is_empty() {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(child(format!("programs {left:?} are still loaded after detaching: is something else holding them (a pin, another process)?")));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}
