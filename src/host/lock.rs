//! One root run at a time: `record`, `overhead`, `demo` and `hook` change machine-wide state
//! (the JIT sysctls, run statistics, attached programs). Two at once would undo each other's
//! changes (the first to end restores `bpf_jit_kallsyms=0` while the second still records), so
//! as root each holds an exclusive `flock` on `/run/ebpf-prof.lock` for its whole life. The
//! second waits, saying which pid it waits for, or with `--no-wait` refuses at once.
//!
//! The lock file is created as root should: in a directory of root's that nobody else can write,
//! without following a link, and checked after opening (a regular file of ours, one link, not
//! writable by others) before it is locked or written. It holds the holder's pid, for messages
//! only: the lock is the `flock`, released by the kernel however the holder ends. What a
//! holder starts (an `--attach-cmd` that is `ebpf-prof hook`) runs under its lock: the holder's
//! pid is in the environment, and a descendant of that pid does not wait for it.

use super::Host;
use crate::error::check;
use anyhow::{bail, Context, Result};
use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The lock file, under the host's root.
pub(crate) const LOCK_FILE: &str = "run/ebpf-prof.lock";

/// Held for as long as it lives; the kernel drops the `flock` when the file closes.
#[derive(Debug)]
pub struct RunLock {
    _file: File,
    /// Where it is, for messages.
    pub path: PathBuf,
}

/// Whether a second run waits for the first or refuses at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wait {
    /// Wait, saying for whom (the default).
    Wait,
    /// `--no-wait`: refuse with the holder's pid.
    NoWait,
}

fn euid() -> u32 {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() }
}

/// Open (creating it if needed) the lock file safely; see the module docs.
fn open_lock_file(path: &Path) -> Result<File> {
    let dir = path.parent().unwrap_or(Path::new("/"));
    let dir_meta =
        std::fs::symlink_metadata(dir).with_context(|| format!("cannot stat {}", dir.display()))?;
    if !dir_meta.is_dir() || dir_meta.uid() != euid() || dir_meta.mode() & 0o022 != 0 {
        bail!(
            "{} is not a directory of ours that only we can write (uid {}, mode {:o}): no safe place for the run lock",
            dir.display(),
            dir_meta.uid(),
            dir_meta.mode() & 0o7777
        );
    }
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o644)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(path)
        .with_context(|| format!("cannot open the run lock {} (a link?)", path.display()))?;
    let meta = file.metadata()?;
    if !meta.file_type().is_file()
        || meta.uid() != euid()
        || meta.nlink() != 1
        || meta.mode() & 0o022 != 0
    {
        bail!(
            "{} is not a plain file of ours (uid {}, mode {:o}, {} links): remove it (sudo rm {})",
            path.display(),
            meta.uid(),
            meta.mode() & 0o7777,
            meta.nlink(),
            path.display()
        );
    }
    Ok(file)
}

/// Try the exclusive lock without blocking: `Ok(false)` when another process holds it.
fn try_lock(file: &File) -> Result<bool> {
    use rustix::fs::{flock, FlockOperation};
    match flock(file, FlockOperation::NonBlockingLockExclusive) {
        Ok(()) => Ok(true),
        Err(rustix::io::Errno::WOULDBLOCK) => Ok(false),
        Err(errno) => Err(std::io::Error::from(errno)).context("cannot lock the run lock"),
    }
}

/// The pid the holder wrote, for messages.
fn holder(file: &mut File) -> String {
    let mut text = String::new();
    let _ = file.rewind();
    let _ = Read::by_ref(file).take(32).read_to_string(&mut text);
    let pid = text.trim();
    if !pid.is_empty() && pid.bytes().all(|b| b.is_ascii_digit()) {
        pid.to_string()
    } else {
        "unknown".to_string()
    }
}

/// Take the run lock under `host`'s root, waiting (with a message naming the holder) or
/// refusing per `wait`. `poll` is how often a waiting run tries again.
pub(crate) fn acquire(host: &Host, wait: Wait, poll: Duration) -> Result<RunLock> {
    let path = host.path(LOCK_FILE);
    let mut file = open_lock_file(&path)?;
    if !try_lock(&file)? {
        let pid = holder(&mut file);
        if wait == Wait::NoWait {
            return Err(check(format!(
                "another root run of ebpf-prof (pid {pid}) is in progress and changes the same sysctls: wait for it to end, or drop --no-wait to wait for it"
            )));
        }
        crate::out::say(format!(
            "waiting for ebpf-prof pid {pid} to finish (it holds {}; Ctrl-C to give up, --no-wait to refuse instead)",
            path.display()
        ));
        while !try_lock(&file)? {
            std::thread::sleep(poll);
        }
    }
    file.set_len(0)?;
    file.rewind()?;
    writeln!(file, "{}", std::process::id())?;
    Ok(RunLock { _file: file, path })
}

/// The lock for a root run of a machine-changing command; `None` when not root (such a run
/// cannot change the machine and fails later with its own message).
pub(crate) fn for_root_run(wait: Wait) -> Result<Option<RunLock>> {
    if !super::security::is_root() {
        return Ok(None);
    }
    let host = Host::live();
    if held_by_an_ancestor(&host) {
        // `overhead --attach-cmd 'ebpf-prof hook'`: the run that started us holds the lock
        // for the both of us; waiting for it would wait forever.
        return Ok(None);
    }
    let lock = acquire(&host, wait, Duration::from_millis(200))?;
    // Edition 2021: set_var is safe; called at start, before any thread is started.
    std::env::set_var(HOLDER_VAR, std::process::id().to_string());
    Ok(Some(lock))
}

/// The lock for putting back what a killed run left, when nobody holds it: recovery must not
/// run while another run records (it could restore a value that run relies on). `None` when
/// not root, or when the lock is taken: then the holder's run, or a later start, recovers.
pub(crate) fn for_recovery() -> Option<RunLock> {
    if !super::security::is_root() {
        return None;
    }
    let host = Host::live();
    if held_by_an_ancestor(&host) {
        return None;
    }
    acquire(&host, Wait::NoWait, Duration::from_millis(200)).ok()
}

/// Set in the environment of a run that holds the lock, for what it starts.
const HOLDER_VAR: &str = "EBPF_PROF_RUN_LOCK_PID";

/// Whether the lock is held by a process that started us (directly or not): the pid in
/// [`HOLDER_VAR`] must be an ancestor of ours and the one the lock file names.
fn held_by_an_ancestor(host: &Host) -> bool {
    let Some(pid) = std::env::var(HOLDER_VAR)
        .ok()
        .and_then(|v| v.parse::<u32>().ok())
    else {
        return false;
    };
    let named = std::fs::read_to_string(host.path(LOCK_FILE)).unwrap_or_default();
    named.trim() == pid.to_string() && ancestors(host).contains(&pid)
}

/// Our parent, its parent, … up to init, from /proc/PID/stat.
fn ancestors(host: &Host) -> Vec<u32> {
    let mut list = Vec::new();
    let mut pid = std::process::id();
    while pid > 1 && list.len() < 256 {
        let Some(parent) = parent_of(host, pid) else {
            break;
        };
        list.push(parent);
        pid = parent;
    }
    list
}

fn parent_of(host: &Host, pid: u32) -> Option<u32> {
    let stat = host.read(&format!("proc/{pid}/stat")).ok()?;
    // Field 4, after the parenthesised command name (which may hold spaces).
    stat[stat.rfind(')')? + 2..]
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn root() -> (tempfile::TempDir, Host) {
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir(d.path().join("run")).unwrap();
        std::fs::set_permissions(d.path().join("run"), std::fs::Permissions::from_mode(0o755))
            .unwrap();
        let h = Host::at(d.path());
        (d, h)
    }

    #[test]
    fn second_holder_is_refused_with_no_wait_naming_the_first_pid() {
        let (_d, host) = root();
        let first = acquire(&host, Wait::NoWait, Duration::from_millis(10)).unwrap();
        // flock locks belong to the open file: a second open conflicts even in this process.
        let e = acquire(&host, Wait::NoWait, Duration::from_millis(10)).unwrap_err();
        let msg = format!("{e:#}");
        assert!(
            msg.contains(&format!("pid {}", std::process::id())),
            "{msg}"
        );
        assert_eq!(crate::error::exit_code(&e), 1);
        drop(first);
        acquire(&host, Wait::NoWait, Duration::from_millis(10)).unwrap();
    }

    #[test]
    fn a_waiting_run_gets_the_lock_when_the_first_ends() {
        let (_d, host) = root();
        let first = acquire(&host, Wait::Wait, Duration::from_millis(10)).unwrap();
        let h2 = host.clone();
        let t = std::thread::spawn(move || acquire(&h2, Wait::Wait, Duration::from_millis(10)));
        std::thread::sleep(Duration::from_millis(150));
        assert!(
            !t.is_finished(),
            "the second run waits while the first holds the lock"
        );
        drop(first);
        assert!(t.join().unwrap().is_ok());
    }

    #[test]
    fn a_planted_link_or_an_open_directory_is_refused() {
        let (d, host) = root();
        let victim = d.path().join("victim");
        std::fs::write(&victim, "keep").unwrap();
        std::os::unix::fs::symlink(&victim, d.path().join(LOCK_FILE)).unwrap();
        let e = acquire(&host, Wait::NoWait, Duration::from_millis(10)).unwrap_err();
        assert!(format!("{e:#}").contains("a link?"), "{e:#}");
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep");
        std::fs::remove_file(d.path().join(LOCK_FILE)).unwrap();
        std::fs::set_permissions(d.path().join("run"), std::fs::Permissions::from_mode(0o777))
            .unwrap();
        let e = acquire(&host, Wait::NoWait, Duration::from_millis(10)).unwrap_err();
        assert!(format!("{e:#}").contains("no safe place"), "{e:#}");
    }

    #[test]
    fn our_ancestors_include_our_parent() {
        let parent = std::os::unix::process::parent_id();
        assert_eq!(ancestors(&Host::live()).first(), Some(&parent));
    }

    #[test]
    fn a_hard_link_to_another_file_is_refused() {
        let (d, host) = root();
        let other = d.path().join("run/other");
        std::fs::write(&other, "keep").unwrap();
        std::fs::hard_link(&other, d.path().join(LOCK_FILE)).unwrap();
        let e = acquire(&host, Wait::NoWait, Duration::from_millis(10)).unwrap_err();
        assert!(format!("{e:#}").contains("2 links"), "{e:#}");
        assert_eq!(std::fs::read_to_string(&other).unwrap(), "keep");
    }
}
