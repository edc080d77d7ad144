//! Walking a path one name at a time, the way sudo's `safe_path` and OpenSSH's StrictModes
//! check one, but holding each directory open as it goes. As root, every directory a name is
//! looked up in must belong to a trusted owner (root, the user we run as, the user who ran
//! sudo) and must not be writable by group or others; a directory of root's with the sticky
//! bit, such as /tmp, is the exception, since there others cannot rename or remove what they do
//! not own. A symbolic link must belong to a trusted owner too, and is expanded here rather
//! than by the kernel, so that its target is walked under the same rules.
//!
//! Each step is an `openat` with `O_NOFOLLOW` relative to the directory before it, so the file
//! descriptor the walk ends with is the directory or file it checked: a rename behind the walk
//! changes nothing. Without root nothing is refused, but the walk still opens without
//! following links the kernel would follow.

use super::Owner;
use crate::error::usage;
use anyhow::Result;
use rustix::fs::{AtFlags, FileType, Mode, OFlags, CWD};
use std::collections::VecDeque;
use std::ffi::{OsStr, OsString};
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};

/// The sticky bit of a directory's mode (`S_ISVTX`).
const STICKY: u32 = 0o1000;

/// Links expanded in one walk before it gives up, as the kernel's own limit (`MAXSYMLINKS`).
const MAX_LINKS: u32 = 40;

/// Who may own what root runs or writes into: root, the user we run as, and the user who ran
/// sudo (they could run anything as root already).
pub fn trusted_owners() -> Vec<u32> {
    // SAFETY: geteuid has no preconditions and cannot fail.
    let mut owners = vec![0, unsafe { libc::geteuid() }];
    if let Some(o) = Owner::from_sudo_env() {
        owners.push(o.uid);
    }
    owners
}

/// Why an entry with `uid` and `mode` at `shown` is not safe for root to trust, if it is not:
/// owned by someone outside `owners`, or writable by group or others (a sticky directory of
/// root's excepted).
pub fn entry_problem(shown: &Path, uid: u32, mode: u32, owners: &[u32]) -> Option<String> {
    if !owners.contains(&uid) {
        return Some(format!("{} belongs to uid {uid}", shown.display()));
    }
    let perm = mode & 0o7777;
    let is_dir = FileType::from_raw_mode(mode) == FileType::Directory;
    let sticky_of_root = is_dir && uid == 0 && perm & STICKY != 0;
    (perm & 0o022 != 0 && !sticky_of_root).then(|| {
        format!(
            "{} is writable by group or others (mode {perm:o})",
            shown.display()
        )
    })
}

/// What the walk does about a directory that does not exist yet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Missing {
    /// Refuse: the path must exist.
    Refuse,
    /// Create it (mode 0755), and hand it to the sudo user when there is one.
    Create(Option<Owner>),
}

/// What the walk does about a symbolic link as the last name of the path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LastLink {
    /// Expand it like any other link.
    Follow,
    /// Refuse it: the path must name the entry itself (a directory root makes or writes into).
    Refuse,
}

/// What a walk refuses and does: the owners it trusts (`None` refuses nothing: not root), and
/// what it does about a missing directory and a link at the end.
#[derive(Debug, Clone)]
pub struct Rules {
    pub owners: Option<Vec<u32>>,
    pub missing: Missing,
    pub last_link: LastLink,
}

impl Rules {
    /// As root, the trusted owners of [`trusted_owners`]; otherwise nothing is refused.
    pub fn for_this_user(missing: Missing, last_link: LastLink) -> Rules {
        Rules {
            owners: crate::host::security::is_root().then(trusted_owners),
            missing,
            last_link,
        }
    }
}

/// Where a walk ended: the entry, open (`O_PATH`), its status, and its path as walked (links
/// expanded), for messages.
#[derive(Debug)]
pub struct Walked {
    pub fd: OwnedFd,
    pub stat: rustix::fs::Stat,
    pub shown: PathBuf,
}

/// Why a walk stopped short: the path is not safe for root (the reason), or something else
/// went wrong (a missing entry, an OS error), already worded for the user.
#[derive(Debug)]
pub enum Stop {
    Unsafe(String),
    Failed(anyhow::Error),
}

impl From<anyhow::Error> for Stop {
    fn from(e: anyhow::Error) -> Stop {
        Stop::Failed(e)
    }
}

/// Walk `path` to its last entry (see the module) under `rules`. Refusals are usage errors
/// that name the entry and say why.
pub fn walk(path: &Path, rules: &Rules) -> Result<Walked> {
    walk_or_stop(path, rules).map_err(|stop| match stop {
        Stop::Unsafe(why) => refused(&why),
        Stop::Failed(e) => e,
    })
}

/// [`walk`], telling a path that is unsafe apart from one that failed otherwise.
pub fn walk_or_stop(path: &Path, rules: &Rules) -> Result<Walked, Stop> {
    let owners = rules.owners.as_deref();
    let mut pending: VecDeque<OsString> = VecDeque::new();
    push_front(&mut pending, path);
    let (mut fd, mut shown) = start(path)?;
    let mut links = 0;
    while let Some(name) = pending.pop_front() {
        if let Some(owners) = owners {
            let here = shown_dir(&shown);
            let stat = stat_of(&fd, here)?;
            if let Some(why) = entry_problem(here, stat.st_uid, stat.st_mode, owners) {
                return Err(Stop::Unsafe(why));
            }
        }
        let next = shown.join(&name);
        let entry = match rustix::fs::statat(&fd, name.as_os_str(), AtFlags::SYMLINK_NOFOLLOW) {
            Ok(s) => s,
            Err(rustix::io::Errno::NOENT) => match rules.missing {
                Missing::Refuse => return Err(does_not_exist(&next).into()),
                Missing::Create(owner) => create(&fd, &name, &next, owner)?,
            },
            Err(e) => return Err(cannot(&next, e).into()),
        };
        if FileType::from_raw_mode(entry.st_mode) != FileType::Symlink {
            fd = open_nofollow(&fd, &name, &next)?;
            shown = next;
            continue;
        }
        if pending.is_empty() && rules.last_link == LastLink::Refuse {
            return Err(usage(format!(
                "{} is a symbolic link: give a real directory (not followed as root)",
                next.display()
            ))
            .into());
        }
        if owners.is_some_and(|o| !o.contains(&entry.st_uid)) {
            let owner = entry.st_uid;
            return Err(Stop::Unsafe(format!(
                "{} is a symbolic link of uid {owner}",
                next.display()
            )));
        }
        links += 1;
        let target = link_target(&fd, &name, &next, links)?;
        if target.is_absolute() {
            (fd, shown) = start(&target)?;
        }
        push_front(&mut pending, &target);
    }
    let stat = stat_of(&fd, shown_dir(&shown))?;
    Ok(Walked { fd, stat, shown })
}

/// The directory a walk is in, for messages: `.` while it is still the current directory.
fn shown_dir(shown: &Path) -> &Path {
    match shown.as_os_str().is_empty() {
        true => Path::new("."),
        false => shown,
    }
}

/// Put the names of `path` in front of what is left to walk (a link's target before the rest).
fn push_front(pending: &mut VecDeque<OsString>, path: &Path) {
    let names: Vec<OsString> = path
        .components()
        .filter_map(|c| match c {
            Component::Normal(n) => Some(n.to_os_string()),
            Component::ParentDir => Some(OsString::from("..")),
            Component::RootDir | Component::CurDir | Component::Prefix(_) => None,
        })
        .collect();
    for n in names.into_iter().rev() {
        pending.push_front(n);
    }
}

/// Where a walk of `path` starts: `/` for an absolute path, the current directory otherwise.
fn start(path: &Path) -> Result<(OwnedFd, PathBuf)> {
    let (from, shown) = match path.is_absolute() {
        true => ("/", PathBuf::from("/")),
        false => (".", PathBuf::new()),
    };
    let fd = rustix::fs::openat(CWD, from, path_flags(), Mode::empty())
        .map_err(|e| cannot(Path::new(from), e))?;
    Ok((fd, shown))
}

fn path_flags() -> OFlags {
    OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC
}

/// Open `name` in `dir` without following a link at it (a directory or, last, a file).
fn open_nofollow(dir: &OwnedFd, name: &OsStr, shown: &Path) -> Result<OwnedFd> {
    let flags = OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    rustix::fs::openat(dir, name, flags, Mode::empty()).map_err(|e| cannot(shown, e))
}

fn stat_of(fd: &OwnedFd, shown: &Path) -> Result<rustix::fs::Stat> {
    rustix::fs::fstat(fd).map_err(|e| cannot(shown, e))
}

/// The target of the link `name` in `dir`, the `links`-th of the walk.
fn link_target(dir: &OwnedFd, name: &OsStr, shown: &Path, links: u32) -> Result<PathBuf> {
    if links > MAX_LINKS {
        return Err(usage(format!(
            "{}: too many levels of symbolic links",
            shown.display()
        )));
    }
    let target = rustix::fs::readlinkat(dir, name, Vec::new()).map_err(|e| cannot(shown, e))?;
    Ok(PathBuf::from(OsStr::from_bytes(target.as_bytes())))
}

/// Make the directory `name` in `dir` (mode 0755 less the umask), hand it to `owner`, and
/// return its status.
fn create(
    dir: &OwnedFd,
    name: &OsStr,
    shown: &Path,
    owner: Option<Owner>,
) -> Result<rustix::fs::Stat> {
    rustix::fs::mkdirat(dir, name, Mode::from_raw_mode(0o755))
        .map_err(|e| cannot_create(shown, e))?;
    let made = open_nofollow(dir, name, shown)?;
    if let Some(o) = owner {
        // An O_PATH descriptor cannot be given away with fchown; one opened for reading can.
        let readable = rustix::fs::openat(
            &made,
            ".",
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| cannot(shown, e))?;
        o.give_file(&std::fs::File::from(readable), shown)?;
    }
    stat_of(&made, shown)
}

fn refused(why: &str) -> anyhow::Error {
    usage(format!(
        "{why}, so another user could redirect what root writes there; fix the owner or permissions (chown root, chmod go-w) or use another path"
    ))
}

fn does_not_exist(shown: &Path) -> anyhow::Error {
    usage(format!(
        "{} does not exist: create it or give another path",
        shown.display()
    ))
}

fn cannot(shown: &Path, e: rustix::io::Errno) -> anyhow::Error {
    usage(format!(
        "cannot open {}: {}",
        shown.display(),
        crate::out::plain(&std::io::Error::from(e))
    ))
}

fn cannot_create(shown: &Path, e: rustix::io::Errno) -> anyhow::Error {
    usage(format!(
        "cannot create {}: {}",
        shown.display(),
        crate::out::plain(&std::io::Error::from(e))
    ))
}

#[cfg(test)]
#[path = "walk_tests.rs"]
mod tests;
