//! As root, never run a binary another user could have replaced. The rule is sudo's and
//! OpenSSH's StrictModes (`safe_path`): the file and every directory above it, up to `/`, must
//! belong to root (or to the user we run as, or, under sudo, to the user who ran sudo: they
//! could run anything as root already) and must not be writable by group or others. A
//! directory of root's with the sticky bit (/tmp) is the exception: there others cannot rename
//! or remove what they do not own. A symlink is followed to the real file and both the link's
//! directories and the file's are checked.
//!
//! It applies to perf (`--perf`, `$PERF`, and every candidate the automatic search finds; an
//! explicit one can be let through with `--trust-perf`) and, as root, to every program looked up
//! on `PATH`: the benchmark command, `taskset`, `chrt` and the `--attach-cmd` loader. Relative
//! `PATH` entries are dropped from this process's `PATH` at start (inherited by what it runs), so
//! the current directory never chooses what root runs.

use crate::error::usage;
use anyhow::Result;
use std::ffi::OsStr;
use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// The sticky bit of a directory's mode (`S_ISVTX`).
const STICKY: u32 = 0o1000;

/// Who may own what root runs: root, the user we run as, and the user who ran sudo.
pub fn trusted_owners() -> Vec<u32> {
    // SAFETY: geteuid has no preconditions and cannot fail.
    let mut owners = vec![0, unsafe { libc::geteuid() }];
    if let Some(o) = crate::runfiles::Owner::from_sudo_env() {
        owners.push(o.uid);
    }
    owners
}

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// As root, refuse an explicit perf that someone else could have replaced (see the module),
/// unless `trusted` (`--trust-perf`).
pub(super) fn check_trust(path: &Path, label: &str, as_root: bool, trusted: bool) -> Result<()> {
    if !as_root || trusted {
        return Ok(());
    }
    match untrusted_reason(path, &trusted_owners()) {
        None => Ok(()),
        Some(why) => Err(usage(format!(
            "refusing to run {label} as root: {why}, so another user could replace what root \
             runs; fix the owner or permissions (chown root, chmod go-w) or pass --trust-perf \
             if you trust it"
        ))),
    }
}

/// Why one file or directory is not safe, if it is not: owned by someone not in `owners`, or
/// writable by group or others.
fn entry_problem(p: &Path, owners: &[u32]) -> Option<String> {
    let m = match fs::metadata(p) {
        Ok(m) => m,
        Err(e) => return Some(format!("{} cannot be checked ({e})", p.display())),
    };
    if !owners.contains(&m.uid()) {
        return Some(format!("{} belongs to uid {}", p.display(), m.uid()));
    }
    let mode = m.mode() & 0o7777;
    // A directory of root's with the sticky bit, such as /tmp, lets others add entries but
    // not rename or remove the ones they do not own, so what root owns in it stays put.
    let sticky_of_root = m.is_dir() && m.uid() == 0 && mode & STICKY != 0;
    (mode & 0o022 != 0 && !sticky_of_root).then(|| {
        format!(
            "{} is writable by group or others (mode {mode:o})",
            p.display()
        )
    })
}

/// `p` and every directory above it, `p` first.
fn chain(p: &Path) -> Vec<PathBuf> {
    p.ancestors()
        .filter(|a| !a.as_os_str().is_empty())
        .map(Path::to_path_buf)
        .collect()
}

/// Why `path` is not safe to run as root, if it is not: the real file and every directory above
/// it, and every directory above the path as named (a link's own directory), checked against
/// `owners`.
pub fn untrusted_reason(path: &Path, owners: &[u32]) -> Option<String> {
    let real = match fs::canonicalize(path) {
        Ok(r) => r,
        Err(e) => return Some(format!("{} cannot be resolved ({e})", path.display())),
    };
    let mut checked = chain(&real);
    let named_dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .and_then(|d| fs::canonicalize(d).ok());
    if let Some(dir) = named_dir {
        for d in chain(&dir) {
            if !checked.contains(&d) {
                checked.push(d);
            }
        }
    }
    checked.iter().find_map(|p| entry_problem(p, owners))
}

/// The program `name` as the shell would find it on `PATH` (or as given, with a `/`). As root,
/// refuse one another user could have replaced; `what` names it in messages ("the benchmark").
pub fn program(name: &OsStr, what: &str) -> Result<PathBuf> {
    let given = Path::new(name);
    let found = which::which(given).map_err(|_| {
        usage(format!(
            "{what} {} not found or not executable: give a path (./bench) or a command on PATH",
            given.display()
        ))
    })?;
    // A path the user typed (./bench) is their choice; only what a PATH search picked is checked.
    let searched = !name.as_encoded_bytes().contains(&b'/');
    if searched && is_root() {
        if let Some(why) = untrusted_reason(&found, &trusted_owners()) {
            return Err(usage(format!(
                "refusing to run {what} {} found on PATH as root: {why}; give its full path if you trust it, or fix the owner/permissions",
                found.display()
            )));
        }
    }
    Ok(found)
}

/// As root, check the helpers a pinned run execs by name (`taskset`, and `chrt` when at
/// SCHED_FIFO): the child finds them on the same `PATH`, so it runs what was checked.
pub fn pinned_helpers(fifo: bool) -> Result<()> {
    let names: &[&str] = if fifo {
        &["taskset", "chrt"]
    } else {
        &["taskset"]
    };
    for n in names {
        program(OsStr::new(n), n)?;
    }
    Ok(())
}

/// As root, remove relative entries (`.`, `bin`, an empty entry) from this process's `PATH`,
/// which everything it starts inherits. Call at start, before any thread exists.
pub fn drop_relative_path_entries() {
    if !is_root() {
        return;
    }
    let Some(path) = std::env::var_os("PATH") else {
        return;
    };
    let kept: Vec<PathBuf> = std::env::split_paths(&path)
        .filter(|d| d.is_absolute())
        .collect();
    if let Ok(joined) = std::env::join_paths(kept) {
        if joined != path {
            // Edition 2021: set_var is safe to call; no other thread runs yet.
            std::env::set_var("PATH", joined);
        }
    }
}
