//! Surviving SIGKILL: before a run changes a sysctl it writes what it will have to restore to a
//! state file under /run/ebpf-prof; it removes the file once everything is back. The next start
//! of any command finds a file whose process is gone, restores it and says so.
//!
//! A run that starts a user's loader (`overhead --attach-cmd`) records the loader's process
//! group the same way: a killed run's next start ends what is left of that group (a loader a
//! shell put in the background, with its programs still attached), after checking the group is
//! still the one that was started.
//!
//! The state files are input that root acts on, so they are read with suspicion: the directory
//! must be a real directory of root's (of this user's in tests) that nobody else can write, each
//! file a small regular file of the same owner, opened without following links; only the
//! sysctls ebpf-prof itself ever sets ([`ALLOWED`]) are restored, and only to a small integer;
//! and a sysctl that no longer holds the value we set (someone else changed it since) is left
//! alone, with a warning.

use crate::host::procs;
use crate::host::sysctl::{self, Saved};
use crate::host::Host;
use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};
use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// Where state files live.
pub const STATE_DIR: &str = "run/ebpf-prof";

/// The sysctls a state file may name: the only ones ebpf-prof ever changes.
pub const ALLOWED: [&str; 3] = [
    "net.core.bpf_jit_enable",
    "net.core.bpf_jit_kallsyms",
    "kernel.bpf_stats_enabled",
];

/// A state file larger than this is not one of ours.
const MAX_STATE_BYTES: u64 = 64 * 1024;

/// What a running process will have to put back.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct State {
    pub pid: u32,
    /// /proc/PID/stat start time, so a recycled pid is not mistaken for the owner.
    pub start_time: Option<u64>,
    pub sysctls: Vec<Saved>,
    /// Process groups of loaders this process started and has not ended yet.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub loader_groups: Vec<LoaderGroup>,
}

/// A loader started in a process group of its own: the group's id (the loader's pid) and the
/// loader's start time, so that a recycled pid is never taken for it.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
pub struct LoaderGroup {
    pub pgid: u32,
    pub start_time: Option<u64>,
}

impl LoaderGroup {
    /// The group led by process `pid`, as `host` shows it now.
    pub fn of(host: &Host, pid: u32) -> LoaderGroup {
        LoaderGroup {
            pgid: pid,
            start_time: start_time(host, pid),
        }
    }
}

/// Record (`Some`) or forget (`None`) the process group of the loader this process runs, in a
/// state file of its own beside the sysctls'.
pub fn save_loader_group(host: &Host, group: Option<LoaderGroup>) -> Result<()> {
    let pid = std::process::id();
    let path = tagged_path(host, pid, Some("loader"));
    let Some(group) = group else {
        let _ = std::fs::remove_file(&path);
        let _ = std::fs::remove_dir(host.path(STATE_DIR));
        return Ok(());
    };
    let st = State {
        pid,
        start_time: start_time(host, pid),
        sysctls: Vec::new(),
        loader_groups: vec![group],
    };
    write_state_file(host, &path, &serde_json::to_vec_pretty(&st)?)
}

/// The state file of process `pid` (the recording's guard).
pub fn state_path(host: &Host, pid: u32) -> PathBuf {
    tagged_path(host, pid, None)
}

/// The state file of one guard of process `pid`: `PID.json` for the recording's, `PID-TAG.json`
/// for another (the run-statistics fallback's), so two guards never overwrite each other.
fn tagged_path(host: &Host, pid: u32, tag: Option<&str>) -> PathBuf {
    let name = match tag {
        None => format!("{pid}.json"),
        Some(t) => format!("{pid}-{t}.json"),
    };
    host.path(STATE_DIR).join(name)
}

pub(crate) fn start_time(host: &Host, pid: u32) -> Option<u64> {
    let stat = host.read(&format!("proc/{pid}/stat")).ok()?;
    // Field 22, counted after the parenthesised command name (which may hold spaces).
    let rest = &stat[stat.rfind(')')? + 2..];
    rest.split_whitespace().nth(19)?.parse().ok()
}

fn euid() -> u32 {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() }
}

/// Why the state directory cannot be trusted, if it cannot: not a real directory, owned by
/// someone else, or writable by group or others.
pub(crate) fn dir_problem(dir: &Path) -> Option<String> {
    let m = std::fs::symlink_metadata(dir).ok()?;
    let why = if !m.file_type().is_dir() {
        "is not a directory (a link or a file)".to_string()
    } else if m.uid() != euid() {
        format!("belongs to uid {}, not to us", m.uid())
    } else if m.mode() & 0o022 != 0 {
        format!(
            "is writable by group or others (mode {:o})",
            m.mode() & 0o7777
        )
    } else {
        return None;
    };
    Some(format!("{} {why}", dir.display()))
}

/// Write (replace) this process's state file atomically; an empty list removes it.
pub fn save(host: &Host, sysctls: &[Saved]) -> Result<()> {
    save_tagged(host, None, sysctls)
}

/// A journal for a [`sysctl::SysctlGuard`] that writes the state file named by `tag`.
pub fn journal(host: &Host, tag: &'static str) -> impl Fn(&[Saved]) -> Result<()> + 'static {
    let h = host.clone();
    move |pending| save_tagged(&h, Some(tag), pending)
}

/// [`save`] for the guard named `tag`.
pub fn save_tagged(host: &Host, tag: Option<&str>, sysctls: &[Saved]) -> Result<()> {
    let pid = std::process::id();
    let path = tagged_path(host, pid, tag);
    if sysctls.is_empty() {
        let _ = std::fs::remove_file(&path);
        let _ = std::fs::remove_dir(host.path(STATE_DIR));
        return Ok(());
    }
    let st = State {
        pid,
        start_time: start_time(host, pid),
        sysctls: sysctls.to_vec(),
        loader_groups: Vec::new(),
    };
    write_state_file(host, &path, &serde_json::to_vec_pretty(&st)?)
}

/// Write `bytes` to `path` in the state directory atomically: the directory created 0700 and
/// checked, a temp file created 0600 without following links, then renamed.
pub(crate) fn write_state_file(host: &Host, path: &Path, bytes: &[u8]) -> Result<()> {
    let dir = host.path(STATE_DIR);
    match std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&dir)
    {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(e).with_context(|| format!("cannot create {}", dir.display())),
    }
    if let Some(why) = dir_problem(&dir) {
        bail!(
            "refusing to keep the restore state in {why}: remove it (sudo rm -r {})",
            dir.display()
        );
    }
    let tmp = dir.join(format!(
        ".{}.tmp",
        path.file_name()
            .map_or_else(String::new, |n| n.to_string_lossy().into_owned())
    ));
    let _ = std::fs::remove_file(&tmp);
    let mut f = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(&tmp)
        .with_context(|| format!("cannot create {}", tmp.display()))?;
    let written = f.write_all(bytes).and_then(|()| f.sync_all());
    let written = written.and_then(|()| std::fs::rename(&tmp, path));
    if let Err(e) = written {
        let _ = std::fs::remove_file(&tmp);
        return Err(e).with_context(|| format!("cannot write {}", path.display()));
    }
    Ok(())
}

/// Remove this process's state file (everything was restored).
pub fn clear(host: &Host) {
    let _ = std::fs::remove_file(state_path(host, std::process::id()));
    // Leave no empty directory behind (fails harmlessly while another run's file is there).
    let _ = std::fs::remove_dir(host.path(STATE_DIR));
}

fn owner_alive(host: &Host, st: &State) -> bool {
    match (
        host.path(&format!("proc/{}", st.pid)).exists(),
        st.start_time,
    ) {
        (false, _) => false,
        (true, None) => true,
        (true, Some(t)) => start_time(host, st.pid) == Some(t),
    }
}

/// Read one state file as root should: no link followed, a regular file of ours, small.
fn read_state(path: &Path) -> Result<State> {
    serde_json::from_slice(&read_checked(path)?).context("not a state file")
}

/// The bytes of a file in the state directory, read as root should (see [`read_state`]).
pub(crate) fn read_checked(path: &Path) -> Result<Vec<u8>> {
    let mut f: File = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(path)
        .context("cannot open it (a link?)")?;
    let m = f.metadata()?;
    if !m.file_type().is_file() {
        bail!("not a regular file");
    }
    if m.uid() != euid() {
        bail!("belongs to uid {}, not to us", m.uid());
    }
    if m.len() > MAX_STATE_BYTES {
        bail!("{} bytes: too large for a state file", m.len());
    }
    let mut buf = Vec::new();
    Read::by_ref(&mut f)
        .take(MAX_STATE_BYTES)
        .read_to_end(&mut buf)?;
    Ok(buf)
}

/// State files left by processes that are gone. Files that fail the checks are skipped (and
/// reported by [`recover`]).
pub fn stale(host: &Host) -> Vec<(PathBuf, State)> {
    scan(host)
        .into_iter()
        .filter_map(|(p, r)| r.ok().map(|st| (p, st)))
        .filter(|(_, st)| !owner_alive(host, st))
        .collect()
}

/// Every `*.json` in the state directory with what reading it gave; nothing when the directory
/// itself is not to be trusted (the error says why).
fn scan(host: &Host) -> Vec<(PathBuf, Result<State>)> {
    let dir = host.path(STATE_DIR);
    if let Some(why) = dir_problem(&dir) {
        return vec![(dir, Err(anyhow::anyhow!("{why}")))];
    }
    let Ok(list) = std::fs::read_dir(&dir) else {
        return Vec::new();
    };
    list.flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .map(|p| {
            let st = read_state(&p);
            (p, st)
        })
        .collect()
}

/// Restore what stale state files record; returns one line per restored sysctl, and one per
/// file or entry left alone (and why).
pub fn recover(host: &Host) -> Vec<String> {
    let mut lines = Vec::new();
    for (path, read) in scan(host) {
        let st = match read {
            Ok(st) if owner_alive(host, &st) => continue,
            Ok(st) => st,
            Err(e) => {
                lines.push(format!(
                    "warning: ignored the restore state {}: {e:#}; remove it by hand",
                    path.display()
                ));
                continue;
            }
        };
        let mut ok = true;
        for group in &st.loader_groups {
            lines.extend(end_loader_group(host, group, st.pid));
        }
        for s in st.sysctls.iter().rev() {
            let (line, restored) = restore_one(host, s, st.pid);
            ok &= restored;
            lines.push(line);
        }
        if ok {
            let _ = std::fs::remove_file(&path);
            let _ = std::fs::remove_dir(host.path(STATE_DIR));
        }
    }
    lines
}

/// End what is left of a killed run's loader group: SIGKILL to the group, once it is sure to be
/// the one that run started. Its leader, when still there, must have the recorded start time
/// (else the pid was recycled and the group is someone else's); members without their leader
/// keep the group's id reserved, so they are the loader's. Never our own group. One line when
/// something was ended or left alone; none when the group is gone.
fn end_loader_group(host: &Host, group: &LoaderGroup, owner: u32) -> Option<String> {
    let members = procs::group_members(host, group.pgid);
    if members.is_empty() {
        return None;
    }
    let leader_alive = host.path(&format!("proc/{}", group.pgid)).exists();
    let recycled = leader_alive && start_time(host, group.pgid) != group.start_time;
    // SAFETY: getpgrp has no preconditions and cannot fail.
    let ours = unsafe { libc::getpgrp() } as u32 == group.pgid;
    if recycled || ours || group.pgid <= 1 {
        return Some(format!(
            "warning: left process group {} alone: it is no longer the loader group ebpf-prof pid {owner} started",
            group.pgid
        ));
    }
    if host.is_live() {
        // SAFETY: kill has no memory-safety preconditions; the group was checked above.
        unsafe { libc::kill(-(group.pgid as libc::pid_t), libc::SIGKILL) };
    }
    Some(format!(
        "ended the loader process group {} ({} processes) left running by ebpf-prof pid {owner} (killed before it could)",
        group.pgid,
        members.len()
    ))
}

/// Whether `v` looks like a value of one of [`ALLOWED`]: a small integer.
fn plausible_value(v: &str) -> bool {
    !v.is_empty() && v.len() <= 4 && v.bytes().all(|b| b.is_ascii_digit())
}

/// Put one entry back; the line to print and whether the entry is settled (restored, or not
/// ours to restore any more).
fn restore_one(host: &Host, s: &Saved, pid: u32) -> (String, bool) {
    if !ALLOWED.contains(&s.name.as_str()) {
        let line = format!(
            "warning: not restoring {}={:?} from the state of pid {pid}: ebpf-prof never sets it",
            s.name, s.before
        );
        return (line, true);
    }
    if !plausible_value(&s.before) || !plausible_value(&s.during) {
        let line = format!(
            "warning: not restoring {} from the state of pid {pid}: its saved value {:?} is malformed (not a small integer), so the file was damaged or changed by hand; {} is left as it is (check it with sysctl {})",
            s.name, s.before, s.name, s.name
        );
        return (line, true);
    }
    match sysctl::read(host, &s.name) {
        Ok(now) if now != s.during => {
            let line = format!(
                "warning: left {}={now} as it is: ebpf-prof pid {pid} (killed) had set it to {}, and someone changed it since",
                s.name, s.during
            );
            return (line, true);
        }
        _ => {}
    }
    match sysctl::write(host, &s.name, &s.before) {
        Ok(()) => (
            format!(
                "restored {}={} left changed by ebpf-prof pid {pid} (killed before it could)",
                s.name, s.before
            ),
            true,
        ),
        Err(e) => (format!("could not restore {}: {e:#}", s.name), false),
    }
}

#[cfg(test)]
#[path = "recovery_tests.rs"]
mod tests;
