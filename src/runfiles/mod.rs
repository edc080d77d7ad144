//! The files a run leaves beside perf.data, and writing them safely: created without following
//! symlinks (no clobbering through a link planted in a shared directory), old copies rotated the
//! way perf rotates perf.data, and handed to the invoking user under sudo.

mod handover;
mod outdir;
mod output;
pub mod pending;
pub mod walk;

pub use handover::PrivateDir;
pub(crate) use handover::Unfinished;
pub use outdir::{Contents, OutputDir};
pub use output::{write_error, write_file, Existing, Output};

use crate::error::usage;
use anyhow::{Context, Result};
use std::fs::{File, OpenOptions};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

/// The family of files of one recording, named after its perf.data.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunFiles {
    pub data: PathBuf,
}

impl RunFiles {
    /// The files for `data` (e.g. `perf.data`).
    pub fn new(data: impl Into<PathBuf>) -> RunFiles {
        RunFiles { data: data.into() }
    }

    fn sidecar(&self, suffix: &str) -> PathBuf {
        let mut s = self.data.clone().into_os_string();
        s.push(suffix);
        PathBuf::from(s)
    }

    /// The benchmark's stdout: one latency in ns per line.
    pub fn samples(&self) -> PathBuf {
        self.sidecar(".samples")
    }

    /// The /proc/kallsyms snapshot (mode 0600).
    pub fn kallsyms(&self) -> PathBuf {
        self.sidecar(".kallsyms")
    }

    /// The JSON record of the run's conditions.
    pub fn json(&self) -> PathBuf {
        self.sidecar(".json")
    }

    /// Every file of the family, perf.data first.
    pub fn all(&self) -> Vec<PathBuf> {
        vec![
            self.data.clone(),
            self.samples(),
            self.kallsyms(),
            self.json(),
        ]
    }

    /// The family an `.old` rotation moves these files to (`perf.data.old`, `perf.data.old.json`, …).
    pub fn old(&self) -> RunFiles {
        RunFiles::new(self.sidecar(".old"))
    }

    /// Check the directory exists and nothing in the family is a directory, before anything runs.
    /// As root, the way to the directory must not pass through another user's link or a
    /// directory others can write (see [`walk`]). The directory the walk reached is returned,
    /// open: the private directory, the rotation and the hand-over all happen relative to
    /// it, and it is never looked up by its path again, so a directory swapped in at the path
    /// after the checks (by the user who owns the one above it) receives nothing.
    pub fn check_writable(&self) -> Result<std::os::fd::OwnedFd> {
        let dir = parent_dir(&self.data);
        if !dir.is_dir() {
            return Err(usage(format!(
                "output directory {} does not exist: create it or give another -o",
                dir.display()
            )));
        }
        let rules = walk::Rules::for_this_user(walk::Missing::Refuse, walk::LastLink::Follow);
        let walked = walk::walk(&dir, &rules)?;
        // Asked of the directory the walk holds: a read-only mount refuses even root, and
        // finding that out only when perf's file moves into place would come after the
        // sysctls, the load and the check bench.
        let access = rustix::fs::accessat(
            &walked.fd,
            ".",
            rustix::fs::Access::WRITE_OK,
            rustix::fs::AtFlags::empty(),
        );
        if let Err(errno) = access {
            return Err(usage(format!(
                "-o {}: cannot write in {}: {}; give another -o",
                self.data.display(),
                dir.display(),
                crate::out::plain(&errno.into())
            )));
        }
        for f in self.all() {
            if f.is_dir() {
                return Err(usage(format!(
                    "{} is a directory: give another -o",
                    f.display()
                )));
            }
        }
        Ok(walked.fd)
    }
}

/// The name `member` of the family of `data` (perf.data, perf.data.json, …) takes when the
/// family moves aside: `perf.data.old`, `perf.data.old.json`, … (as [`RunFiles::old`]).
pub(crate) fn old_name(data: &std::ffi::OsStr, member: &std::ffi::OsStr) -> std::ffi::OsString {
    use std::os::unix::ffi::OsStrExt;
    let rest = member
        .as_bytes()
        .strip_prefix(data.as_bytes())
        .unwrap_or_default();
    let mut old = data.to_os_string();
    old.push(".old");
    old.push(std::ffi::OsStr::from_bytes(rest));
    old
}

/// The directory a path lives in (`.` for a bare file name).
pub fn parent_dir(p: &Path) -> PathBuf {
    match p.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

/// Create a new file: fails if anything (a file or a symlink) is already there; never follows a
/// symlink; `mode` applies from the first instant (no window with wider permissions).
pub fn create_new(path: &Path, mode: u32) -> Result<File> {
    OpenOptions::new()
        .write(true)
        .create_new(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .mode(mode)
        .open(path)
        .with_context(|| format!("cannot create {}", path.display()))
}

/// The user to hand files to: the one who ran sudo (SUDO_UID/SUDO_GID), when we run as root.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Owner {
    pub uid: u32,
    pub gid: u32,
}

impl Owner {
    /// The invoking user under sudo, from `SUDO_UID`/`SUDO_GID`; `None` when not under sudo.
    pub fn from_sudo_env() -> Option<Owner> {
        Owner::from_vars(
            std::env::var("SUDO_UID").ok(),
            std::env::var("SUDO_GID").ok(),
        )
    }

    /// Parse the two variables (pure, for tests).
    pub fn from_vars(uid: Option<String>, gid: Option<String>) -> Option<Owner> {
        let uid: u32 = uid?.trim().parse().ok()?;
        let gid: u32 = gid?.trim().parse().ok()?;
        (uid != 0).then_some(Owner { uid, gid })
    }

    /// Give the open file `f` (at `path`, for messages) to this user: `fchown` on the fd, so
    /// whatever the path names by now, only the file we created changes hands.
    pub fn give_file(&self, f: &File, path: &Path) -> Result<()> {
        std::os::unix::fs::fchown(f, Some(self.uid), Some(self.gid))
            .with_context(|| format!("cannot hand {} to uid {}", path.display(), self.uid))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn sidecar_names() {
        let f = RunFiles::new("/tmp/x/perf.data");
        assert_eq!(f.samples(), PathBuf::from("/tmp/x/perf.data.samples"));
        assert_eq!(f.old().json(), PathBuf::from("/tmp/x/perf.data.old.json"));
    }

    #[test]
    fn old_names_are_those_of_the_old_family() {
        let f = RunFiles::new("/tmp/x/perf.data");
        for (member, old) in f.all().iter().zip(f.old().all()) {
            let name = old_name(f.data.file_name().unwrap(), member.file_name().unwrap());
            assert_eq!(name, old.file_name().unwrap());
        }
    }

    #[test]
    fn create_new_refuses_symlinks_and_existing_files() {
        let d = tempfile::tempdir().unwrap();
        let target = d.path().join("victim");
        std::fs::write(&target, "keep").unwrap();
        let link = d.path().join("link");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        assert!(create_new(&link, 0o600).is_err());
        assert!(create_new(&target, 0o600).is_err());
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "keep");
        let p = d.path().join("fresh");
        create_new(&p, 0o600).unwrap();
        let mode = std::fs::metadata(&p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
    }

    #[test]
    fn missing_directory_is_a_usage_error() {
        let f = RunFiles::new("/nonexistent-dir-xyz/perf.data");
        let e = f.check_writable().unwrap_err();
        assert_eq!(crate::error::exit_code(&e), 2);
        assert!(e.to_string().contains("does not exist"));
    }

    #[test]
    fn sudo_owner() {
        assert_eq!(
            Owner::from_vars(Some("1000".into()), Some("100".into())),
            Some(Owner {
                uid: 1000,
                gid: 100
            })
        );
        assert_eq!(Owner::from_vars(Some("0".into()), Some("0".into())), None);
        assert_eq!(Owner::from_vars(None, Some("1".into())), None);
        assert_eq!(Owner::from_vars(Some("x".into()), Some("1".into())), None);
    }
}
