//! As root, never run a binary another user could have replaced. The rule is sudo's and
//! OpenSSH's StrictModes (`safe_path`): the file and every directory above it, up to `/`, must
//! belong to root (or to the user we run as, or, under sudo, to the user who ran sudo: they
//! could run anything as root already) and must not be writable by group or others. A
//! directory of root's with the sticky bit (/tmp) is the exception: there others cannot rename
//! or remove what they do not own. A symlink must belong to one of those owners too, and is
//! expanded so that its target is walked under the same rules (`runfiles::walk`).
//!
//! It applies to perf (`--perf`, `$PERF`, and every candidate the automatic search finds; an
//! explicit one can be let through with `--trust-perf`) and, as root, to every program looked up
//! on `PATH`: the benchmark command, `taskset`, `chrt`, the `--attach-cmd` loader and the
//! programs its wrappers run. Each is then run by the absolute path that was checked, never
//! looked up again by name. Relative
//! `PATH` entries are dropped from this process's `PATH` at start (inherited by what it runs), so
//! the current directory never chooses what root runs.

use crate::bench::pinned::PinTools;
use crate::error::usage;
use crate::runfiles::walk::{self, LastLink, Missing, Rules, Stop};
use anyhow::Result;
use std::ffi::OsStr;
use std::path::{Path, PathBuf};

pub use walk::trusted_owners;

fn is_root() -> bool {
    crate::host::security::is_root()
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

/// Why `path` is not safe to run as root, if it is not: every directory it is looked up in,
/// every link on the way (expanded, so its target is walked too) and the file itself, checked
/// against `owners` (see [`walk`]). A relative path is checked from `/`, as the current
/// directory's path names it.
pub fn untrusted_reason(path: &Path, owners: &[u32]) -> Option<String> {
    let absolute = match std::path::absolute(path) {
        Ok(p) => p,
        Err(e) => return Some(format!("{} cannot be resolved ({e})", path.display())),
    };
    let rules = Rules {
        owners: Some(owners.to_vec()),
        missing: Missing::Refuse,
        last_link: LastLink::Follow,
    };
    match walk::walk_or_stop(&absolute, &rules) {
        Ok(end) => walk::entry_problem(&end.shown, end.stat.st_uid, end.stat.st_mode, owners),
        Err(Stop::Unsafe(why)) => Some(why),
        Err(Stop::Failed(e)) => Some(format!("{} cannot be checked ({e:#})", path.display())),
    }
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

/// The helpers a pinned run execs (`taskset`, and `chrt` when at SCHED_FIFO), found on
/// `PATH` and, as root, checked: they are run by the absolute paths returned, so a file planted
/// later in an earlier `PATH` directory is never what runs.
pub fn pinned_helpers(fifo: bool) -> Result<PinTools> {
    let taskset = program(OsStr::new("taskset"), "taskset")?;
    let chrt = match fifo {
        true => Some(program(OsStr::new("chrt"), "chrt")?),
        false => None,
    };
    Ok(PinTools { taskset, chrt })
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
