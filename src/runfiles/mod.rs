//! The files a run leaves beside perf.data, and writing them safely: created without following
//! symlinks (no clobbering through a link planted in a shared directory), old copies rotated the
//! way perf rotates perf.data, and handed to the invoking user under sudo.

mod handover;
mod output;
pub mod pending;

pub(crate) use handover::Unfinished;
pub use handover::{give_path, PrivateDir};
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
    pub fn check_writable(&self) -> Result<()> {
        let dir = parent_dir(&self.data);
        if !dir.is_dir() {
            return Err(usage(format!(
                "output directory {} does not exist: create it or give another -o",
                dir.display()
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
        Ok(())
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

/// Make `dir` for the user's files, or take it as it is when it is a directory the user could
/// make (see the hardening of `demo --dir`: ours, or the sudo user's, not a link).
pub fn prepare_dir(dir: &Path, owner: Option<Owner>) -> Result<()> {
    match std::fs::symlink_metadata(dir) {
        Ok(m) if m.file_type().is_symlink() => Err(usage(format!(
            "{} is a symbolic link: give a real directory (not followed as root)",
            dir.display()
        ))),
        Ok(m) if !m.is_dir() => Err(usage(format!(
            "{} exists and is not a directory: pick another --dir",
            dir.display()
        ))),
        Ok(m) => check_dir_owner(dir, &m, owner),
        Err(_) => {
            std::fs::create_dir(dir).with_context(|| format!("cannot create {}", dir.display()))?;
            if let Some(o) = owner {
                o.give(dir)?;
            }
            Ok(())
        }
    }
}

/// A directory we write into as root must belong to root or to the sudo user, and not be
/// writable by others (or be sticky): else someone else could plant links in it.
fn check_dir_owner(dir: &Path, m: &std::fs::Metadata, owner: Option<Owner>) -> Result<()> {
    use std::os::unix::fs::MetadataExt;
    if !crate::host::security::is_root() {
        return Ok(());
    }
    let ours = m.uid() == 0 || owner.is_some_and(|o| o.uid == m.uid());
    let open_to_others = m.mode() & 0o022 != 0 && m.mode() & 0o1000 == 0;
    if !ours || open_to_others {
        return Err(usage(format!(
            "{} belongs to uid {} (mode {:o}): as root, write only into a directory of root's or yours that others cannot write; pick another --dir",
            dir.display(),
            m.uid(),
            m.mode() & 0o7777
        )));
    }
    Ok(())
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

    /// Give `path` to this user without following a symlink at it: `fchown` on an fd opened
    /// with `O_NOFOLLOW` (see [`give_path`]).
    pub fn give(&self, path: &Path) -> Result<()> {
        give_path(*self, path)
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
