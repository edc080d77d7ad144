//! Root's recordings written where no one else can interfere, then handed over.
//!
//! perf opens its `-o` file itself, with `O_CREAT|O_TRUNC`, following links. Were that path in
//! a directory another user can write, they could plant `perf.data → /etc/nologin` between the
//! run's checks and perf's start, and root would create or truncate the target.
//! So perf, and every sidecar, writes into a private directory this module creates beside the
//! target (`.ebpf-prof-PID-XXXXXX`, mode 0700, root's: on the same file system, so the files can
//! be moved, not copied). perf is given the directory as `/proc/PID/fd/N/perf.data`: the open
//! directory itself, which no rename or link in the parent can swap.
//!
//! When the run is done, each file is opened without following links, checked to be a regular
//! file, given its mode and handed to the invoking user with `fchown` on that fd (never by path),
//! and moved into place with `renameat2(RENAME_NOREPLACE)` relative to the two directory fds
//! (where a file system refuses the flag: `linkat`, which never replaces either, then `unlinkat`).
//! Should something have appeared at a target meanwhile, nothing is replaced: the remaining
//! files stay in the private directory, which is handed to the user, and the error says where.

use super::Owner;
use crate::error::{check, child};
use anyhow::{bail, Context, Result};
use std::ffi::{CString, OsStr, OsString};
use std::fs::File;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// Why perf's file is not whole (its header does not match its length), or `None`: the
/// profile reader's check, which this module cannot name itself.
pub(crate) type Unfinished = fn(&File) -> Option<String>;

/// A 0700 directory of ours beside the target; removed with its contents when dropped, unless
/// [`PrivateDir::hand_over`] had to leave files in it for the user.
#[derive(Debug)]
pub struct PrivateDir {
    parent: OwnedFd,
    fd: OwnedFd,
    name: CString,
    shown: PathBuf,
    kept: bool,
}

fn cstr(b: &[u8]) -> Result<CString> {
    CString::new(b).context("a file name with a NUL byte")
}

fn last_err() -> std::io::Error {
    std::io::Error::last_os_error()
}

/// `open(path, flags)` as an owned fd.
fn open_fd(
    dirfd: Option<&OwnedFd>,
    path: &CString,
    flags: i32,
    mode: u32,
) -> std::io::Result<OwnedFd> {
    let at = dirfd.map_or(libc::AT_FDCWD, |d| d.as_raw_fd());
    // SAFETY: `path` is NUL-terminated and outlives the call; a non-negative return is an fd
    // nothing else owns.
    let fd = unsafe { libc::openat(at, path.as_ptr(), flags | libc::O_CLOEXEC, mode) };
    if fd < 0 {
        return Err(last_err());
    }
    // SAFETY: `fd` was just returned by openat and is owned by no one else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

impl PrivateDir {
    /// Create the private directory in `target`'s directory.
    pub fn beside(target: &Path) -> Result<PrivateDir> {
        let dir = super::parent_dir(target);
        let parent = open_fd(
            None,
            &cstr(dir.as_os_str().as_bytes())?,
            libc::O_DIRECTORY | libc::O_RDONLY,
            0,
        )
        .with_context(|| format!("cannot open the directory {}", dir.display()))?;
        crate::failpoint::hit("private:parent-opened");
        let name = make_private_dir(&parent)
            .with_context(|| format!("cannot create a private directory in {}", dir.display()))?;
        open_private(parent, dir.join(name))
    }

    /// Create the private directory in `parent`, the directory of the target as opened (and
    /// checked) by the walk of `RunFiles::check_writable`; `dir` is its path, for messages.
    /// Nothing is looked up by path: the private directory is made in, and the files later
    /// rotated and moved into, the directory that was checked, whatever the path names by now.
    pub fn in_dir(parent: &OwnedFd, dir: &Path) -> Result<PrivateDir> {
        // The walk's descriptor is an O_PATH one; a directory fd of our own is opened through it.
        let parent = open_fd(
            Some(parent),
            &cstr(b".")?,
            libc::O_DIRECTORY | libc::O_RDONLY,
            0,
        )
        .with_context(|| format!("cannot open the directory {}", dir.display()))?;
        crate::failpoint::hit("private:parent-opened");
        let name = make_private_dir(&parent)
            .with_context(|| format!("cannot create a private directory in {}", dir.display()))?;
        open_private(parent, dir.join(name))
    }

    /// Reopen the private directory a killed run left (see `host::recovery`), with the same
    /// checks: a real directory of ours that nobody else can enter.
    pub fn reopen(shown: &Path) -> Result<PrivateDir> {
        let dir = super::parent_dir(shown);
        let parent = open_fd(
            None,
            &cstr(dir.as_os_str().as_bytes())?,
            libc::O_DIRECTORY | libc::O_RDONLY,
            0,
        )
        .with_context(|| format!("cannot open the directory {}", dir.display()))?;
        open_private(parent, shown.to_path_buf())
    }

    /// The path that reaches a file in the directory through its open fd (for perf's `-o`).
    pub fn work_path(&self, name: &OsStr) -> PathBuf {
        PathBuf::from(format!(
            "/proc/{}/fd/{}",
            std::process::id(),
            self.fd.as_raw_fd()
        ))
        .join(name)
    }

    /// Create `name` in the directory: new, not through a link, `mode` from the first instant.
    pub fn create(&self, name: &OsStr, mode: u32) -> Result<File> {
        let flags = libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW;
        let fd = open_fd(Some(&self.fd), &cstr(name.as_bytes())?, flags, mode)
            .with_context(|| format!("cannot create {}", self.shown.join(name).display()))?;
        Ok(File::from(fd))
    }

    /// Where the directory is, for messages.
    pub fn shown(&self) -> &Path {
        &self.shown
    }

    /// Move each `(name in here, target)` that exists here into place, in order, each with its
    /// mode and owner (see the module). At the first target that is taken, stop: what is left
    /// stays here, the directory is handed to `owner` and kept, and the error says where.
    pub fn hand_over(
        &mut self,
        files: &[(OsString, PathBuf, u32)],
        owner: Option<Owner>,
    ) -> Result<()> {
        for (name, _, mode) in files {
            self.settle(name, *mode, owner)?;
        }
        for (name, target, _) in files {
            let to = cstr(target.file_name().unwrap_or_default().as_bytes())?;
            match self.move_out(&cstr(name.as_bytes())?, &to) {
                Ok(()) => {}
                Err(e) if e.raw_os_error() == Some(libc::ENOENT) => {}
                Err(e) if e.raw_os_error() == Some(libc::EEXIST) => {
                    return Err(self.keep(target, owner))
                }
                Err(e) => {
                    return Err(e)
                        .with_context(|| format!("cannot move {} into place", target.display()))
                }
            }
        }
        Ok(())
    }

    /// Open `name` in here without following a link or waiting on a FIFO, checked to be a
    /// regular file; `None` when there is no such file.
    fn open_member(&self, name: &OsStr) -> Result<Option<File>> {
        let flags = libc::O_RDONLY | libc::O_NOFOLLOW | libc::O_NONBLOCK;
        let fd = match open_fd(Some(&self.fd), &cstr(name.as_bytes())?, flags, 0) {
            Ok(fd) => fd,
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => return Ok(None),
            Err(e) => {
                return Err(e)
                    .with_context(|| format!("cannot open {}", self.shown.join(name).display()))
            }
        };
        let f = File::from(fd);
        if !f.metadata()?.is_file() {
            bail!("{} is not a regular file", self.shown.join(name).display());
        }
        Ok(Some(f))
    }

    /// Put the recording made in here in place of the previous one. Only when `unfinished`
    /// finds its first file (perf.data) whole does the family now at the targets move aside to
    /// `.old` (see [`PrivateDir::rotate`]); then this one is handed over. A run that failed or
    /// was cut short leaves the previous recording and its `.old` as they were. Returns whether
    /// a previous recording moved.
    pub(crate) fn replace_family(
        &mut self,
        files: &[(OsString, PathBuf, u32)],
        owner: Option<Owner>,
        unfinished: Unfinished,
    ) -> Result<bool> {
        let Some((data_name, data, _)) = files.first() else {
            return Ok(false);
        };
        let why = match self.open_member(data_name)? {
            Some(file) => unfinished(&file),
            None => Some("perf wrote no file".to_string()),
        };
        if let Some(why) = why {
            return Err(child(format!(
                "perf did not finish {} ({why}); the previous recording, if any, was left as it was",
                data.display()
            )));
        }
        let rotated = self.rotate(files)?;
        crate::failpoint::hit("record:after-rotate");
        self.hand_over(files, owner)?;
        Ok(rotated)
    }

    /// Move the family at the targets aside to their `.old` names (perf's convention for
    /// perf.data, extended to the sidecars), by name relative to the parent's fd, so a link is
    /// moved as a link and never followed. Nothing moves unless a perf.data is there: an `.old`
    /// is replaced only by a newer recording, and an `.old` sidecar is removed only when the
    /// `.old` perf.data it went with has just been replaced (it would pair with the wrong data).
    fn rotate(&self, files: &[(OsString, PathBuf, u32)]) -> Result<bool> {
        let target_name = |t: &Path| t.file_name().unwrap_or_default().to_os_string();
        let Some(data) = files.first().map(|f| target_name(&f.1)) else {
            return Ok(false);
        };
        if !self.in_parent(&cstr(data.as_bytes())?) {
            return Ok(false);
        }
        for (_, target, _) in files {
            let name = target_name(target);
            let old = super::old_name(&data, &name);
            let (from, to) = (cstr(name.as_bytes())?, cstr(old.as_bytes())?);
            let parent = self.parent.as_raw_fd();
            if self.in_parent(&from) {
                // SAFETY: both names are NUL-terminated and outlive the call; the fd is open.
                if unsafe { libc::renameat(parent, from.as_ptr(), parent, to.as_ptr()) } != 0 {
                    return Err(last_err()).with_context(|| {
                        format!("cannot move {} aside to {:?}", target.display(), old)
                    });
                }
            } else if self.in_parent(&to) {
                // SAFETY: as above; unlinkat with flags 0 removes a link, never its target.
                unsafe { libc::unlinkat(parent, to.as_ptr(), 0) };
            }
        }
        Ok(true)
    }

    /// Whether anything (a file, a link) has `name` in the parent directory.
    fn in_parent(&self, name: &CString) -> bool {
        let mut stat = std::mem::MaybeUninit::<libc::stat>::uninit();
        // SAFETY: `name` is NUL-terminated, `stat` is written by the call before any read (and
        // not read at all here); the fd is an open directory.
        let r = unsafe {
            libc::fstatat(
                self.parent.as_raw_fd(),
                name.as_ptr(),
                stat.as_mut_ptr(),
                libc::AT_SYMLINK_NOFOLLOW,
            )
        };
        r == 0
    }

    /// Give one file its mode and owner through its own fd; a missing file is skipped.
    fn settle(&self, name: &OsStr, mode: u32, owner: Option<Owner>) -> Result<()> {
        let Some(f) = self.open_member(name)? else {
            return Ok(());
        };
        f.set_permissions(std::os::unix::fs::PermissionsExt::from_mode(mode))?;
        if let Some(o) = owner {
            o.give_file(&f, &self.shown.join(name))?;
        }
        Ok(())
    }

    /// `renameat2(RENAME_NOREPLACE)` from here to the parent; `linkat` + `unlinkat` where the
    /// file system does not take the flag.
    fn move_out(&self, from: &CString, to: &CString) -> std::io::Result<()> {
        let (src, dst) = (self.fd.as_raw_fd(), self.parent.as_raw_fd());
        // SAFETY: both names are NUL-terminated and outlive the call; the fds are open dirs.
        let r = unsafe {
            libc::syscall(
                libc::SYS_renameat2,
                src,
                from.as_ptr(),
                dst,
                to.as_ptr(),
                libc::RENAME_NOREPLACE,
            )
        };
        if r == 0 {
            return Ok(());
        }
        let e = last_err();
        if !matches!(e.raw_os_error(), Some(libc::EINVAL) | Some(libc::ENOSYS)) {
            return Err(e);
        }
        // SAFETY: as above; linkat with flags 0 does not follow a link at `from`.
        if unsafe { libc::linkat(src, from.as_ptr(), dst, to.as_ptr(), 0) } != 0 {
            return Err(last_err());
        }
        // SAFETY: as above.
        if unsafe { libc::unlinkat(src, from.as_ptr(), 0) } != 0 {
            return Err(last_err());
        }
        Ok(())
    }

    /// Keep the directory and what is in it for `owner`: each file given its mode and owner,
    /// then the directory itself. Nothing in it is removed when it is dropped.
    pub(crate) fn leave(&mut self, files: &[(OsString, PathBuf, u32)], owner: Option<Owner>) {
        self.kept = true;
        for (name, _, mode) in files {
            let _ = self.settle(name, *mode, owner);
        }
        let f = self.fd.try_clone().map(File::from);
        if let (Some(o), Ok(f)) = (owner, f) {
            let _ = o.give_file(&f, &self.shown);
        }
    }

    /// Leave what is left here for the user, and say so.
    fn keep(&mut self, taken: &Path, owner: Option<Owner>) -> anyhow::Error {
        self.leave(&[], owner);
        check(format!(
            "{} appeared during the run and was left alone (nothing is replaced): the recording is in {}; move it yourself",
            taken.display(),
            self.shown.display()
        ))
    }

    /// Remove what is left in the directory, and the directory.
    fn remove(&self) {
        let Ok(list) = std::fs::read_dir(self.work_path(OsStr::new(""))) else {
            return;
        };
        for e in list.flatten() {
            if let Ok(n) = cstr(e.file_name().as_bytes()) {
                // SAFETY: a NUL-terminated name relative to our open directory.
                unsafe { libc::unlinkat(self.fd.as_raw_fd(), n.as_ptr(), 0) };
            }
        }
        // SAFETY: as above, relative to the parent's fd.
        unsafe {
            libc::unlinkat(
                self.parent.as_raw_fd(),
                self.name.as_ptr(),
                libc::AT_REMOVEDIR,
            )
        };
    }
}

/// Open `shown` (in `parent`) without following a link, and check it is a directory of ours
/// that nobody else can enter.
/// Make a new 0700 directory `.ebpf-prof-PID-XXXXXX` in `parent` and return its name. It is
/// made with `mkdirat` on the parent's fd, so it lands in the directory that was opened even if
/// the parent's path names another one by now; a name already taken is drawn again.
fn make_private_dir(parent: &OwnedFd) -> std::io::Result<String> {
    const LETTERS: &[u8] = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    let mut taken = std::io::Error::from_raw_os_error(libc::EEXIST);
    for _ in 0..16 {
        let mut bits = crate::stats::rng::fresh_seed();
        let suffix: String = (0..6)
            .map(|_| {
                let letter = LETTERS[(bits % LETTERS.len() as u64) as usize];
                bits /= LETTERS.len() as u64;
                char::from(letter)
            })
            .collect();
        let name = format!(".ebpf-prof-{}-{suffix}", std::process::id());
        let c_name = CString::new(name.as_str()).map_err(std::io::Error::other)?;
        // SAFETY: `c_name` is NUL-terminated and outlives the call; `parent` is an open
        // directory fd.
        if unsafe { libc::mkdirat(parent.as_raw_fd(), c_name.as_ptr(), 0o700) } == 0 {
            return Ok(name);
        }
        taken = last_err();
        if taken.raw_os_error() != Some(libc::EEXIST) {
            return Err(taken);
        }
    }
    Err(taken)
}

fn open_private(parent: OwnedFd, shown: PathBuf) -> Result<PrivateDir> {
    let name = cstr(shown.file_name().unwrap_or_default().as_bytes())?;
    // Named by where it is, not by the way this process's working directory reached it: a
    // killed run's note is read by a run started anywhere.
    let shown = absolute(&parent).map_or(shown, |dir| dir.join(OsStr::from_bytes(name.as_bytes())));
    let fd = open_fd(
        Some(&parent),
        &name,
        libc::O_DIRECTORY | libc::O_RDONLY | libc::O_NOFOLLOW,
        0,
    )
    .with_context(|| format!("cannot open {}", shown.display()))?;
    let m = File::from(fd.try_clone()?).metadata()?;
    // SAFETY: geteuid has no preconditions.
    if !m.is_dir() || m.uid() != unsafe { libc::geteuid() } || m.mode() & 0o077 != 0 {
        bail!(
            "{} was replaced before it could be used: refusing to write into it",
            shown.display()
        );
    }
    Ok(PrivateDir {
        parent,
        fd,
        name,
        shown,
        kept: false,
    })
}

impl Drop for PrivateDir {
    fn drop(&mut self) {
        if !self.kept {
            self.remove();
        }
    }
}

/// Where the open directory `dir` is, as the kernel knows it (an absolute path).
fn absolute(dir: &OwnedFd) -> Option<PathBuf> {
    let path = std::fs::read_link(format!("/proc/self/fd/{}", dir.as_raw_fd())).ok()?;
    path.is_absolute().then_some(path)
}

#[cfg(test)]
#[path = "handover_tests.rs"]
mod tests;
