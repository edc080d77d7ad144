//! A private scratch directory for the loops that need files of their own (the openat working
//! set, the exec probe, the unlink loop): made fresh with mode 0700 under the temp directory, so
//! no one else can plant a link in it, and removed with everything in it when dropped, also when
//! the run fails midway.
//!
//! As root the temp directory is `/tmp`, whatever `TMPDIR` says, and only when `/tmp` is root's
//! and sticky (or writable by root alone): in a directory another user can write to and rename
//! entries in, they could swap the scratch directory for one of their own between two uses of
//! its path, and root would run or write what they planted there.

use anyhow::{Context, Result};
use std::path::{Path, PathBuf};

/// A fresh 0700 directory, removed when dropped.
#[derive(Debug)]
pub struct Scratch {
    dir: PathBuf,
}

impl Scratch {
    /// Make `ebpf-prof-<what>-<pid>-<nanos>` under the temp directory. Creating it fails if the
    /// name exists, so the directory is always one this process made.
    pub fn new(what: &str) -> Result<Scratch> {
        use std::os::unix::fs::DirBuilderExt;
        use std::sync::atomic::{AtomicU32, Ordering};
        // Workers of one bench make theirs at the same moment: a count keeps the names apart.
        static MADE: AtomicU32 = AtomicU32::new(0);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let made = MADE.fetch_add(1, Ordering::Relaxed);
        let dir = temp_dir()?.join(format!(
            "ebpf-prof-{what}-{}-{nanos}-{made}",
            std::process::id()
        ));
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(&dir)
            .with_context(|| format!("cannot create {}", dir.display()))?;
        Ok(Scratch { dir })
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.dir
    }
}

/// The directory scratch directories are made in: the user's temp directory, or as root the
/// system's, checked.
fn temp_dir() -> Result<PathBuf> {
    use std::os::unix::fs::MetadataExt;
    if !crate::host::security::is_root() {
        return Ok(std::env::temp_dir());
    }
    let system = Path::new("/tmp");
    let meta = std::fs::symlink_metadata(system).context("cannot read /tmp")?;
    let sticky = meta.mode() & 0o1000 != 0;
    let others_write = meta.mode() & 0o022 != 0;
    if !meta.is_dir() || meta.uid() != 0 || (others_write && !sticky) {
        anyhow::bail!(
            "/tmp is not a directory of root's that others cannot rename entries in (mode {:o}, \
             uid {}): fix it (chown root /tmp; chmod 1777 /tmp) before running as root",
            meta.mode() & 0o7777,
            meta.uid()
        );
    }
    Ok(system.to_path_buf())
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn private_and_removed_when_dropped() {
        use std::os::unix::fs::PermissionsExt;
        let s = Scratch::new("test").unwrap();
        let dir = s.path().to_path_buf();
        std::fs::write(dir.join("x"), "x").unwrap();
        let mode = std::fs::metadata(&dir).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o700);
        drop(s);
        assert!(!dir.exists());
    }
}
