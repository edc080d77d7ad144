//! Opening what the user gives to read — a profile and its sidecars (`INPUT.json`,
//! `INPUT.kallsyms`) — without hanging or reading forever: opened with `O_NONBLOCK` (a FIFO
//! does not block the open), `fstat`ed, and refused unless a regular file; sidecars are never
//! followed through a symlink and are read up to a size cap. Found with a FIFO as `INPUT.json`
//! (hung `report`) and `INPUT.json → /dev/zero` (read 530 MB).

use crate::error::usage;
use anyhow::{Context, Result};
use std::fs::File;
use std::io::Read;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

/// The largest sidecar read: a kallsyms snapshot is ~5 MB, a run record a few KB.
pub const SIDECAR_MAX: u64 = 256 << 20;

/// Open `path` for reading when it is a regular, non-empty file; `nofollow` refuses a symlink.
/// Errors are usage errors naming the file and what to give instead.
pub fn open_regular(path: &Path, nofollow: bool) -> Result<(File, u64)> {
    let mut flags = libc::O_NONBLOCK | libc::O_CLOEXEC;
    if nofollow {
        flags |= libc::O_NOFOLLOW;
    }
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(flags)
        .open(path)
        .map_err(|e| {
            if e.raw_os_error() == Some(libc::ELOOP) {
                return usage(format!(
                    "{} is a symbolic link: not followed for a sidecar file",
                    path.display()
                ));
            }
            usage(format!(
                "cannot read {}: {e} (give the perf.data written by `ebpf-prof record`)",
                path.display()
            ))
        })?;
    let meta = file
        .metadata()
        .with_context(|| format!("cannot stat {}", path.display()))?;
    if meta.is_dir() {
        return Err(usage(format!(
            "{} is a directory: give a perf.data file",
            path.display()
        )));
    }
    if !meta.is_file() {
        return Err(usage(format!(
            "{} is not a regular file (a FIFO, a device, a socket): give a perf.data file",
            path.display()
        )));
    }
    if meta.len() == 0 {
        return Err(usage(format!(
            "{} is empty: the recording did not finish; record again",
            path.display()
        )));
    }
    clear_nonblock(&file);
    Ok((file, meta.len()))
}

/// Blocking reads again for a regular file (O_NONBLOCK was only for the open).
fn clear_nonblock(f: &File) {
    use std::os::fd::AsRawFd;
    // SAFETY: fcntl on an fd we own, reading and setting its status flags.
    unsafe {
        let fl = libc::fcntl(f.as_raw_fd(), libc::F_GETFL);
        if fl >= 0 {
            libc::fcntl(f.as_raw_fd(), libc::F_SETFL, fl & !libc::O_NONBLOCK);
        }
    }
}

/// A sidecar's text, when it exists: a regular file, not a link, at most [`SIDECAR_MAX`]
/// bytes. `Ok(None)` when there is nothing at `path`.
pub fn read_sidecar(path: &Path) -> Result<Option<String>> {
    if std::fs::symlink_metadata(path).is_err() {
        return Ok(None);
    }
    let (f, len) = open_regular(path, true)?;
    if len > SIDECAR_MAX {
        return Err(usage(format!(
            "{} is {len} bytes, more than a sidecar file can be ({SIDECAR_MAX}): is it the right file?",
            path.display()
        )));
    }
    let mut text = String::new();
    f.take(SIDECAR_MAX)
        .read_to_string(&mut text)
        .with_context(|| format!("cannot read {}", path.display()))?;
    Ok(Some(text))
}

/// The first bytes of the file, at least up to the end of its first line (a folded file's
/// first stack can be longer than any fixed head), at most 16 MB.
pub fn head(f: &mut File) -> Result<Vec<u8>> {
    const STEP: usize = 64 << 10;
    const MAX: usize = 16 << 20;
    let mut buf = Vec::new();
    loop {
        let start = buf.len();
        buf.resize(start + STEP, 0);
        let n = f.read(&mut buf[start..])?;
        buf.truncate(start + n);
        if n == 0 || buf.len() >= MAX || buf[start..].contains(&b'\n') && buf.len() >= 4096 {
            return Ok(buf);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_is_not_a_regular_file_is_named() {
        let d = tempfile::tempdir().unwrap();
        let fifo = d.path().join("fifo");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: a NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let empty = d.path().join("empty");
        std::fs::write(&empty, "").unwrap();
        let link = d.path().join("link");
        std::os::unix::fs::symlink(&empty, &link).unwrap();
        // (path, nofollow, message)
        let cases: &[(&Path, bool, &str)] = &[
            (&fifo, false, "not a regular file"),
            (Path::new("/dev/zero"), false, "not a regular file"),
            (d.path(), false, "is a directory"),
            (&empty, false, "is empty"),
            (&link, true, "symbolic link"),
            (Path::new("/nonexistent-x"), false, "cannot read"),
        ];
        for (p, nofollow, msg) in cases {
            let e = open_regular(p, *nofollow).err().unwrap();
            assert!(e.to_string().contains(msg), "{p:?}: {e}");
            assert_eq!(crate::error::exit_code(&e), 2, "{p:?}");
        }
    }

    #[test]
    fn sidecars_are_optional_capped_and_not_followed() {
        let d = tempfile::tempdir().unwrap();
        assert!(read_sidecar(&d.path().join("none")).unwrap().is_none());
        let real = d.path().join("real.json");
        std::fs::write(&real, "{}").unwrap();
        assert_eq!(read_sidecar(&real).unwrap().as_deref(), Some("{}"));
        let zero = d.path().join("zero.json");
        std::os::unix::fs::symlink("/dev/zero", &zero).unwrap();
        assert!(read_sidecar(&zero).is_err());
    }

    #[test]
    fn the_head_reaches_the_end_of_a_long_first_line() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("f");
        let long = format!("{} 3\nb 1\n", "x;".repeat(50_000));
        std::fs::write(&p, &long).unwrap();
        let (mut f, _) = open_regular(&p, false).unwrap();
        let h = head(&mut f).unwrap();
        assert!(h.len() > 100_000 && h.contains(&b'\n'));
    }
}
