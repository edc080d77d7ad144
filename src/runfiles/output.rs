//! Output files the user names (`-o`, `--plot`, `--export-json`, …): written to a temp file in
//! the target's directory and moved into place only once complete, so a bad input, a full disk
//! or `ulimit -f` never leaves a partial file, and with `--force` the old file survives every
//! failure. Nothing is followed through a symlink: the temp file is created with `O_EXCL` and
//! `O_NOFOLLOW`, and the move is `renameat2(RENAME_NOREPLACE)` unless replacing was asked for
//! (then only a regular file is replaced, never a link or a directory).

use super::Owner;
use crate::error::usage;
use anyhow::{Context, Result};
use std::ffi::CString;
use std::fs::File;
use std::io::Write;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// A file being written; [`Output::commit`] puts it in place, dropping it removes the temp file.
pub struct Output {
    file: Option<File>,
    /// Set once the temp file is in place: then dropping leaves it alone.
    committed: bool,
    tmp: PathBuf,
    target: PathBuf,
    /// The target as the user knows it, for messages (the same as `target` unless it is reached
    /// through an open directory, see [`Output::create_at`]).
    shown: PathBuf,
    existing: Existing,
}

/// What to do when the output already exists.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Existing {
    /// Refuse: the user's file stays as it is; `--force` would replace it.
    Keep,
    /// Refuse, for a command that has no `--force` (`overhead`'s outputs): the message says
    /// what to do instead.
    KeepWithoutForce,
    /// Replace it, when it is a regular file (`--force`).
    Replace,
}

impl Existing {
    /// `Replace` with `--force`, else `Keep`.
    pub fn replace_if(force: bool) -> Existing {
        if force {
            Existing::Replace
        } else {
            Existing::Keep
        }
    }
}

/// The mode of every output: readable by all, as a file the user wrote would be.
const OUTPUT_MODE: u32 = 0o644;

impl Output {
    /// Check `target` (its directory exists; it does not exist, or it may be replaced and is a
    /// regular file) and open a temp file beside it.
    pub fn create(target: &Path, existing: Existing) -> Result<Output> {
        Output::create_at(target, target, existing)
    }

    /// As [`Output::create`], for a `target` reached through an open directory
    /// (`/proc/self/fd/N/name`, see `OutputDir`), named `shown` in messages.
    pub fn create_at(target: &Path, shown: &Path, existing: Existing) -> Result<Output> {
        check_target(target, shown, existing)?;
        let dir = super::parent_dir(target);
        let name = target.file_name().unwrap_or_default().to_string_lossy();
        for attempt in 0..100u32 {
            let tmp = dir.join(format!(
                ".{name}.tmp-{}-{}",
                std::process::id(),
                nonce(attempt)
            ));
            match super::create_new(&tmp, 0o600) {
                Ok(file) => {
                    return Ok(Output {
                        file: Some(file),
                        committed: false,
                        tmp,
                        target: target.to_path_buf(),
                        shown: shown.to_path_buf(),
                        existing,
                    })
                }
                Err(e) if exists(&e) => continue,
                Err(e) => return Err(cannot_create(&super::parent_dir(shown), shown, e)),
            }
        }
        Err(anyhow::anyhow!(
            "cannot create a temp file in {}",
            dir.display()
        ))
    }

    /// The file to write to.
    pub fn file(&mut self) -> &mut File {
        match self.file.as_mut() {
            Some(f) => f,
            None => unreachable!("an Output is only used before commit"),
        }
    }

    /// Flush, sync, set the mode, hand the file to the sudo user, and move it into place.
    pub fn commit(mut self) -> Result<()> {
        let file = self.file.take().context("output already committed")?;
        let path = self.shown.display().to_string();
        file.sync_all().map_err(|e| write_error(&self.shown, &e))?;
        file.set_permissions(std::fs::Permissions::from_mode(OUTPUT_MODE))
            .with_context(|| format!("cannot set the mode of {path}"))?;
        if let Some(o) = Owner::from_sudo_env() {
            o.give_file(&file, &self.shown)?;
        }
        drop(file);
        if self.existing == Existing::Replace {
            check_target(&self.target, &self.shown, Existing::Replace)?;
            std::fs::rename(&self.tmp, &self.target)
                .with_context(|| format!("cannot move the new {path} into place"))?;
        } else {
            rename_noreplace(&self.tmp, &self.target, &self.shown)?;
        }
        self.committed = true;
        Ok(())
    }
}

impl Write for Output {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.file().write(buf)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.file().flush()
    }
}

impl Drop for Output {
    fn drop(&mut self) {
        if !self.committed {
            let _ = std::fs::remove_file(&self.tmp);
        }
    }
}

/// Write `bytes` to the file `target` all at once, as `existing` says for one already there.
pub fn write_file(target: &Path, bytes: &[u8], existing: Existing) -> Result<()> {
    write_file_at(target, target, bytes, existing)
}

/// As [`write_file`], for a target reached through an open directory, `shown` in messages.
pub fn write_file_at(target: &Path, shown: &Path, bytes: &[u8], existing: Existing) -> Result<()> {
    let mut o = Output::create_at(target, shown, existing)?;
    o.write_all(bytes).map_err(|e| write_error(shown, &e))?;
    o.commit()
}

/// A failed write of an output, saying that nothing changed and, for the usual causes, what to
/// do. Not a usage error: the input was fine (exit 4).
pub fn write_error(target: &Path, e: &std::io::Error) -> anyhow::Error {
    let why = match e.raw_os_error() {
        Some(libc::EFBIG) => {
            "the file size limit (ulimit -f) was reached; raise it or write elsewhere"
        }
        Some(libc::ENOSPC) | Some(libc::EDQUOT) => {
            "the disk is full; free some space or write elsewhere"
        }
        _ => "write elsewhere",
    };
    anyhow::anyhow!(
        "cannot write {}: {} ({why}); nothing was left behind and any old file is as it was",
        target.display(),
        crate::out::plain(e)
    )
}

/// The temp file could not be made: a directory the user cannot write is theirs to change.
fn cannot_create(dir: &Path, target: &Path, e: anyhow::Error) -> anyhow::Error {
    let io = e.chain().find_map(|c| c.downcast_ref::<std::io::Error>());
    match io.and_then(std::io::Error::raw_os_error) {
        Some(libc::EACCES | libc::EPERM | libc::EROFS) => usage(format!(
            "cannot write {}: {} is not writable for you ({}); pick another -o",
            target.display(),
            dir.display(),
            io.map(crate::out::plain).unwrap_or_default()
        )),
        _ => e,
    }
}

fn check_target(target: &Path, shown: &Path, existing: Existing) -> Result<()> {
    let dir = super::parent_dir(target);
    if !dir.is_dir() {
        return Err(usage(format!(
            "output directory {} does not exist",
            super::parent_dir(shown).display()
        )));
    }
    match std::fs::symlink_metadata(target) {
        Err(_) => Ok(()),
        Ok(_) if existing == Existing::Keep => Err(usage(format!(
            "{} exists: pass --force to overwrite it, or pick another name",
            shown.display()
        ))),
        Ok(_) if existing == Existing::KeepWithoutForce => Err(usage(format!(
            "{} exists (it appeared while this ran): nothing was overwritten; move it away or pick another name, and run again",
            target.display()
        ))),
        Ok(m) if !m.file_type().is_file() => Err(usage(format!(
            "{} is not a regular file (a link, a directory, …): pick another name",
            shown.display()
        ))),
        Ok(_) => Ok(()),
    }
}

/// `renameat2(from, to, RENAME_NOREPLACE)`; where the file system refuses the flag, `link` and
/// `unlink`, which also never replace.
fn rename_noreplace(from: &Path, to: &Path, shown: &Path) -> Result<()> {
    let c = |p: &Path| CString::new(p.as_os_str().as_bytes()).context("a path holds a NUL byte");
    let (f, t) = (c(from)?, c(to)?);
    // SAFETY: two NUL-terminated paths relative to the current directory.
    let ret = unsafe {
        libc::renameat2(
            libc::AT_FDCWD,
            f.as_ptr(),
            libc::AT_FDCWD,
            t.as_ptr(),
            libc::RENAME_NOREPLACE,
        )
    };
    if ret == 0 {
        return Ok(());
    }
    let err = std::io::Error::last_os_error();
    if err.raw_os_error() == Some(libc::EINVAL) {
        std::fs::hard_link(from, to).map_err(|e| taken(shown, e))?;
        let _ = std::fs::remove_file(from);
        return Ok(());
    }
    Err(taken(shown, err))
}

fn taken(to: &Path, e: std::io::Error) -> anyhow::Error {
    if e.kind() == std::io::ErrorKind::AlreadyExists {
        return usage(format!(
            "{} appeared while it was being written: nothing was overwritten; pick another name",
            to.display()
        ));
    }
    anyhow::Error::from(e).context(format!("cannot move the new {} into place", to.display()))
}

fn exists(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::AlreadyExists)
    })
}

fn nonce(attempt: u32) -> u64 {
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos() as u64);
    t ^ (u64::from(attempt) << 32)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(d: &Path) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(d)
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }

    #[test]
    fn a_failed_write_leaves_the_old_file_and_no_temp() {
        let d = tempfile::tempdir().unwrap();
        let t = d.path().join("old.svg");
        std::fs::write(&t, "old").unwrap();
        {
            let mut o = Output::create(&t, Existing::Replace).unwrap();
            o.write_all(b"half").unwrap();
            // dropped without commit: the run failed
        }
        assert_eq!(std::fs::read_to_string(&t).unwrap(), "old");
        assert_eq!(names(d.path()), ["old.svg"]);
        write_file(&t, b"new", Existing::Replace).unwrap();
        assert_eq!(std::fs::read_to_string(&t).unwrap(), "new");
        let mode = std::fs::metadata(&t).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o644);
    }

    /// A failed write says why and that nothing changed (exit 4).
    #[test]
    fn write_errors_name_the_limit_or_the_full_disk() {
        let t = Path::new("out.svg");
        let cases = [
            (libc::EFBIG, "(the file size limit (ulimit -f) was reached"),
            (libc::ENOSPC, "(the disk is full"),
            (libc::EIO, "(write elsewhere)"),
        ];
        for (errno, want) in cases {
            let e = write_error(t, &std::io::Error::from_raw_os_error(errno));
            let s = e.to_string();
            assert!(s.starts_with("cannot write out.svg: "), "{s}");
            assert!(s.contains(want), "{s}");
            assert!(s.ends_with("nothing was left behind and any old file is as it was"));
            assert_eq!(crate::error::exit_code(&e), 4);
        }
    }

    #[test]
    fn refusals_table() {
        let d = tempfile::tempdir().unwrap();
        let file = d.path().join("f");
        std::fs::write(&file, "keep").unwrap();
        let link = d.path().join("link");
        std::os::unix::fs::symlink(&file, &link).unwrap();
        let cases: &[(PathBuf, Existing, &str)] = &[
            (file.clone(), Existing::Keep, "exists: pass --force"),
            (link.clone(), Existing::Replace, "not a regular file"),
            (
                d.path().to_path_buf(),
                Existing::Replace,
                "not a regular file",
            ),
            (d.path().join("no/dir/x"), Existing::Keep, "does not exist"),
        ];
        for (target, existing, message) in cases {
            let e = Output::create(target, *existing).err().unwrap();
            assert!(e.to_string().contains(message), "{target:?}: {e}");
            assert_eq!(crate::error::exit_code(&e), 2);
        }
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "keep");
    }

    /// A file planted at an export of `overhead` (which has no `--force`) while it measured was
    /// refused with "pass --force"; the refusal now says what to do there.
    #[test]
    fn regression_a_refusal_without_force_does_not_offer_it() {
        let d = tempfile::tempdir().unwrap();
        let t = d.path().join("x.json");
        std::fs::write(&t, "planted").unwrap();
        let e = write_file(&t, b"ours", Existing::KeepWithoutForce).unwrap_err();
        let s = e.to_string();
        assert!(
            s.contains("exists (it appeared while this ran): nothing was overwritten; move it away or pick another name"),
            "{s}"
        );
        assert!(!s.contains("--force"), "{s}");
        assert_eq!(crate::error::exit_code(&e), 2);
        assert_eq!(std::fs::read_to_string(&t).unwrap(), "planted");
        let e = write_file(&t, b"ours", Existing::Keep).unwrap_err();
        assert!(e.to_string().contains("pass --force"), "{e}");
    }

    #[test]
    fn a_file_planted_meanwhile_is_not_overwritten() {
        let d = tempfile::tempdir().unwrap();
        let t = d.path().join("new.svg");
        let mut o = Output::create(&t, Existing::Keep).unwrap();
        o.write_all(b"ours").unwrap();
        std::fs::write(&t, "planted").unwrap();
        let e = o.commit().unwrap_err();
        assert!(e.to_string().contains("appeared while"), "{e}");
        assert_eq!(std::fs::read_to_string(&t).unwrap(), "planted");
        assert_eq!(names(d.path()), ["new.svg"]);
    }
}
