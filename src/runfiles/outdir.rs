//! A directory the user names for a run's outputs (`demo --dir`, `overhead --keep` and
//! `--profile`): walked from `/` and opened once (see [`super::walk`]: as root no link of
//! another user's and no directory others can write on the way), made when missing, checked to be a
//! directory of root's or the sudo user's that others cannot write, and then written into only
//! through that open directory, so a rename or a link swapped in after the start changes
//! nothing.

use super::walk::{self, LastLink, Missing, Rules};
use super::{Existing, Owner};
use crate::error::usage;
use anyhow::Result;
use rustix::fs::FileType;
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};

/// What the directory may hold already.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Contents {
    /// Anything: the files written are checked one by one.
    Any,
    /// Nothing: it must be new or empty.
    Empty,
}

/// An output directory, open (see the module).
#[derive(Debug)]
pub struct OutputDir {
    fd: OwnedFd,
    stat: rustix::fs::Stat,
    shown: PathBuf,
}

impl OutputDir {
    /// Open `dir`, making it (and what is missing above it) when it does not exist, handed to
    /// `owner`; refuse a link at `dir` itself, and as root a directory someone else could
    /// change (see the module).
    pub fn open(dir: &Path, owner: Option<Owner>, contents: Contents) -> Result<OutputDir> {
        let rules = Rules::for_this_user(Missing::Create(owner), LastLink::Refuse);
        let walked = walk::walk(&absolute(dir)?, &rules)?;
        if FileType::from_raw_mode(walked.stat.st_mode) != FileType::Directory {
            return Err(usage(format!(
                "{} exists and is not a directory: pick another directory",
                dir.display()
            )));
        }
        if let Some(owners) = &rules.owners {
            let (uid, mode) = (walked.stat.st_uid, walked.stat.st_mode);
            if walk::entry_problem(dir, uid, mode, owners).is_some() {
                return Err(usage(format!(
                    "{} belongs to uid {uid} (mode {:o}): as root, write only into a directory of root's or yours that others cannot write; pick another directory",
                    dir.display(),
                    mode & 0o7777
                )));
            }
        }
        let out = OutputDir {
            fd: walked.fd,
            stat: walked.stat,
            shown: dir.to_path_buf(),
        };
        if contents == Contents::Empty && !out.is_empty()? {
            return Err(usage(format!(
                "{}: must be a new or empty directory",
                dir.display()
            )));
        }
        Ok(out)
    }

    /// The directory as the user named it.
    pub fn shown(&self) -> &Path {
        &self.shown
    }

    /// The path that reaches `name` in the directory through the open descriptor, whatever the
    /// directory's own path names by now.
    pub fn fd_path(&self, name: &str) -> PathBuf {
        PathBuf::from(format!(
            "/proc/{}/fd/{}",
            std::process::id(),
            self.fd.as_raw_fd()
        ))
        .join(name)
    }

    /// Write `bytes` to the file `name` here, as `existing` says for one already there,
    /// complete or not at all, handed to the sudo user (see [`super::write_file`]).
    pub fn write(&self, name: &str, bytes: &[u8], existing: Existing) -> Result<()> {
        let shown = self.shown.join(name);
        super::output::write_file_at(&self.fd_path(name), &shown, bytes, existing)
    }

    /// Whether `name` here is a regular file (not followed through a link) holding exactly
    /// `bytes`: a file this tool wrote, recognised by its content.
    pub fn holds_exactly(&self, name: &str, bytes: &[u8]) -> bool {
        use std::io::Read;
        use std::os::unix::fs::OpenOptionsExt;
        let opened = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
            .open(self.fd_path(name));
        let Ok(file) = opened else {
            return false;
        };
        let same_size = file
            .metadata()
            .is_ok_and(|m| m.is_file() && m.len() == bytes.len() as u64);
        let mut held = Vec::with_capacity(bytes.len());
        same_size
            && file
                .take(bytes.len() as u64 + 1)
                .read_to_end(&mut held)
                .is_ok()
            && held == bytes
    }

    /// Whether `name` is here (as anything, a link included).
    pub fn holds(&self, name: &str) -> bool {
        std::fs::symlink_metadata(self.fd_path(name)).is_ok()
    }

    /// Check that the directory's path still leads to the directory opened at the start (for
    /// what is written by path, such as perf's files): refuse when it was replaced.
    pub fn check_still_there(&self) -> Result<()> {
        let rules = Rules::for_this_user(Missing::Refuse, LastLink::Refuse);
        let now = absolute(&self.shown).and_then(|path| walk::walk(&path, &rules));
        let same = now
            .as_ref()
            .is_ok_and(|w| (w.stat.st_dev, w.stat.st_ino) == (self.stat.st_dev, self.stat.st_ino));
        if same {
            return Ok(());
        }
        let why = now.err().map_or_else(
            || "another directory is there now".to_string(),
            |e| format!("{e:#}"),
        );
        Err(usage(format!(
            "{} was replaced during the run ({why}): nothing more is written there",
            self.shown.display()
        )))
    }

    fn is_empty(&self) -> Result<bool> {
        let mut entries = std::fs::read_dir(self.fd_path("."))
            .map_err(|e| usage(format!("cannot read {}: {e}", self.shown.display())))?;
        Ok(entries.next().is_none())
    }
}

/// `dir` from `/`: the directories above the current one are on the way to it too.
fn absolute(dir: &Path) -> Result<PathBuf> {
    std::path::absolute(dir).map_err(|e| usage(format!("cannot resolve {}: {e}", dir.display())))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An output directory swapped for a link after it was opened: what is written goes to the
    /// directory that was opened, never to the link's target, and a path check says it moved.
    #[test]
    fn an_output_directory_swapped_for_a_link_after_opening_gets_nothing_through_it() {
        let d = tempfile::tempdir().unwrap();
        let dir = d.path().join("keep");
        let out = OutputDir::open(&dir, None, Contents::Empty).unwrap();
        let victim = d.path().join("victim");
        std::fs::create_dir(&victim).unwrap();
        std::fs::rename(&dir, d.path().join("moved")).unwrap();
        std::os::unix::fs::symlink(&victim, &dir).unwrap();
        out.write("base-1.samples", b"1\n", Existing::Keep).unwrap();
        assert_eq!(std::fs::read_dir(&victim).unwrap().count(), 0);
        assert!(d.path().join("moved/base-1.samples").is_file());
        let e = out.check_still_there().unwrap_err();
        assert!(e.to_string().contains("was replaced during the run"), "{e}");
    }

    #[test]
    fn an_output_directory_must_be_empty_when_asked() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("x"), "").unwrap();
        let e = OutputDir::open(d.path(), None, Contents::Empty).unwrap_err();
        assert!(
            e.to_string().contains("must be a new or empty directory"),
            "{e}"
        );
        let out = OutputDir::open(d.path(), None, Contents::Any).unwrap();
        assert!(out.holds("x") && !out.holds("y"));
        out.check_still_there().unwrap();
    }
}
