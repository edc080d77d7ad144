//! The working set of the openat loop (`--paths N`): N distinct files, created in a private
//! temp dir before the loop (and removed after, also when the run fails midway), or the first N
//! regular files of `--dir DIR` (never modified). The paths are all prepared before the loop, so
//! the loop still does nothing but open.

use super::scratch::Scratch;
use crate::error::usage;
use anyhow::{Context, Result};
use std::path::{Path, PathBuf};

/// Paths for the loop, and the temp dir holding them when we made it.
#[derive(Debug)]
pub struct WorkingSet {
    pub paths: Vec<PathBuf>,
    temp: Option<Scratch>,
}

impl WorkingSet {
    /// One path: the single file of the reference (README.md, "The reference").
    pub fn single(path: &Path) -> WorkingSet {
        WorkingSet {
            paths: vec![path.to_path_buf()],
            temp: None,
        }
    }

    /// The first `n` regular files of `dir`, in name order.
    pub fn from_dir(dir: &Path, n: usize) -> Result<WorkingSet> {
        let rd =
            std::fs::read_dir(dir).map_err(|e| usage(format!("--dir {}: {e}", dir.display())))?;
        let mut files: Vec<PathBuf> = rd
            .flatten()
            // Regular files only, links not followed: the files are opened as root, and a link
            // in a directory someone else writes to could name a device.
            .filter(|entry| entry.file_type().is_ok_and(|kind| kind.is_file()))
            .map(|entry| entry.path())
            .collect();
        files.sort();
        if files.len() < n {
            return Err(usage(format!(
                "--dir {} holds {} regular files; --paths {n} needs that many",
                dir.display(),
                files.len()
            )));
        }
        files.truncate(n);
        Ok(WorkingSet {
            paths: files,
            temp: None,
        })
    }

    /// `n` new small files in a private (0700) temp dir, removed when this is dropped.
    pub fn create(n: usize) -> Result<WorkingSet> {
        let scratch = Scratch::new("ws")?;
        let dir = scratch.path().to_path_buf();
        let mut ws = WorkingSet {
            paths: Vec::with_capacity(n),
            temp: Some(scratch),
        };
        for i in 0..n {
            let p = dir.join(format!("f{i:06}"));
            std::fs::write(&p, b"x").with_context(|| format!("cannot create {}", p.display()))?;
            ws.paths.push(p);
        }
        Ok(ws)
    }

    /// The temp dir, when we made one.
    pub fn temp_dir(&self) -> Option<&Path> {
        self.temp.as_ref().map(Scratch::path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn temp_files_are_made_and_removed() {
        let ws = WorkingSet::create(50).unwrap();
        let dir = ws.temp_dir().unwrap().to_path_buf();
        assert_eq!(ws.paths.len(), 50);
        assert!(ws.paths.iter().all(|p| p.is_file()));
        drop(ws);
        assert!(!dir.exists());
    }

    #[test]
    fn dir_must_hold_enough_files() {
        let d = tempfile::tempdir().unwrap();
        for i in 0..3 {
            std::fs::write(d.path().join(format!("{i}")), "").unwrap();
        }
        std::fs::create_dir(d.path().join("sub")).unwrap();
        assert_eq!(WorkingSet::from_dir(d.path(), 3).unwrap().paths.len(), 3);
        let e = WorkingSet::from_dir(d.path(), 4).unwrap_err().to_string();
        assert!(e.contains("holds 3 regular files"), "{e}");
        assert!(d.path().join("0").exists(), "never modified");
    }
}
