//! Opening what the user gives to read — a profile and its sidecars (`INPUT.json`,
//! `INPUT.kallsyms`), a BPF object to load — without hanging or reading forever: opened with `O_NONBLOCK` (a FIFO
//! does not block the open), `fstat`ed, and refused unless a regular file; sidecars are never
//! followed through a symlink and are read up to a size cap. Found with a FIFO as `INPUT.json`
//! (hung `report`) and `INPUT.json → /dev/zero` (read 530 MB).

use crate::error::usage;
use crate::out::plain;
use anyhow::{Context, Result};
use std::fs::File;
use std::io::Read;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

/// What a file the user gives is for: decides what the messages ask for and the size cap.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// The profile itself: perf.data, `perf script` text or folded stacks.
    Profile,
    /// `INPUT.json`, the run record.
    RunRecord,
    /// `INPUT.kallsyms` or `--kallsyms`, a snapshot of /proc/kallsyms.
    Kallsyms,
    /// A compiled BPF object (`--load`, `--compare`): read whole into memory, so capped.
    BpfObject,
    /// A packet capture (`--test-run --pcap`): read whole into memory, so capped.
    Capture,
}

impl Role {
    /// What to give instead, for messages.
    fn want(self) -> &'static str {
        match self {
            Role::Profile => "give a perf.data file written by `ebpf-prof record` (or `perf script` output, or folded stacks)",
            Role::RunRecord => "remove it, or put there the perf.data.json written by `ebpf-prof record`",
            Role::Kallsyms => "give the kallsyms snapshot written by `ebpf-prof record` (perf.data.kallsyms)",
            Role::BpfObject => "give the path of a compiled BPF object (.bpf.o)",
            Role::Capture => "give a pcap or pcapng capture (tcpdump -w FILE), or leave --pcap out for the built-in packets",
        }
    }

    /// The largest file read for this role: a kallsyms snapshot is ~5 MB, a run record a few
    /// KB, a BPF object with its debug info a few MB, a capture of the packets a test run can
    /// time in a sitting well under 256 MB; a profile has no cap.
    pub fn cap(self) -> u64 {
        match self {
            Role::Profile => u64::MAX,
            Role::RunRecord => 16 << 20,
            Role::Kallsyms => 256 << 20,
            Role::BpfObject => 128 << 20,
            Role::Capture => crate::packets::capture::MAX_FILE,
        }
    }

    /// The role of a sidecar, from its name.
    fn of_sidecar(path: &Path) -> Role {
        match path.extension() {
            Some(e) if e == "json" => Role::RunRecord,
            _ => Role::Kallsyms,
        }
    }
}

/// Open `path` for reading when it is a regular, non-empty file no bigger than the role's cap;
/// `nofollow` refuses a symlink. Errors are usage errors naming the file and what to give.
pub fn open_regular(path: &Path, role: Role, nofollow: bool) -> Result<(File, u64)> {
    let mut flags = libc::O_NONBLOCK | libc::O_CLOEXEC;
    if nofollow {
        flags |= libc::O_NOFOLLOW;
    }
    let shown = path.display();
    let want = role.want();
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(flags)
        .open(path)
        .map_err(|e| match e.raw_os_error() {
            Some(libc::ELOOP) if nofollow => usage(format!(
                "{shown} is a symbolic link: a file beside the input is not followed through a link; copy the file there instead"
            )),
            _ => usage(format!("cannot read {shown}: {}; {want}", plain(&e))),
        })?;
    let meta = file
        .metadata()
        .with_context(|| format!("cannot stat {shown}"))?;
    if meta.is_dir() {
        return Err(usage(format!("{shown} is a directory: {want}")));
    }
    if !meta.is_file() {
        return Err(usage(format!(
            "{shown} is not a regular file (a FIFO, a device or a socket): {want}"
        )));
    }
    match (meta.len(), role) {
        (0, Role::Profile) => Err(usage(format!(
            "{shown} is empty: the recording did not finish; record again"
        ))),
        (0, _) => Err(usage(format!("{shown} is empty: {want}"))),
        (n, _) if n > role.cap() => Err(usage(format!(
            "{shown} is {n} bytes, more than such a file can be ({} bytes): {want}",
            role.cap()
        ))),
        (n, _) => {
            clear_nonblock(&file);
            Ok((file, n))
        }
    }
}

/// The bytes of a file the user names as a whole input of `role` (a BPF object): checked by
/// [`open_regular`] (never waited on as a FIFO, never read endlessly from a device), then read up
/// to the role's cap.
pub(crate) fn read_whole(path: &Path, role: Role) -> Result<Vec<u8>> {
    let (file, len) = open_regular(path, role, false)?;
    let mut bytes = Vec::with_capacity(usize::try_from(len).unwrap_or(0));
    file.take(role.cap())
        .read_to_end(&mut bytes)
        .with_context(|| format!("cannot read {}", path.display()))?;
    Ok(bytes)
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

/// A sidecar's text, when it exists: a regular file, not a link, at most its role's cap
/// (a run record for `*.json`, else a kallsyms snapshot). `Ok(None)` when nothing is at `path`.
pub fn read_sidecar(path: &Path) -> Result<Option<String>> {
    if std::fs::symlink_metadata(path).is_err() {
        return Ok(None);
    }
    let role = Role::of_sidecar(path);
    let (f, _) = open_regular(path, role, true)?;
    let mut bytes = Vec::new();
    f.take(role.cap())
        .read_to_end(&mut bytes)
        .with_context(|| format!("cannot read {}", path.display()))?;
    String::from_utf8(bytes)
        .map(Some)
        .map_err(|_| usage(format!("{} is not text: {}", path.display(), role.want())))
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
            let e = open_regular(p, Role::Profile, *nofollow).err().unwrap();
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

    /// Sidecars are named for what they are, and capped by role.
    #[test]
    fn sidecar_messages_and_caps_follow_the_role() {
        let d = tempfile::tempdir().unwrap();
        let json = d.path().join("p.data.json");
        std::fs::File::create(&json)
            .unwrap()
            .set_len(Role::RunRecord.cap() + 1)
            .unwrap();
        let e = read_sidecar(&json).unwrap_err().to_string();
        assert!(
            e.contains("more than such a file can be (16777216 bytes)"),
            "{e}"
        );
        assert!(e.contains("perf.data.json"), "{e}");
        let ksyms = d.path().join("p.data.kallsyms");
        std::fs::write(&ksyms, "").unwrap();
        let e = read_sidecar(&ksyms).unwrap_err().to_string();
        assert!(e.ends_with("is empty: give the kallsyms snapshot written by `ebpf-prof record` (perf.data.kallsyms)"), "{e}");
        std::fs::write(&json, [0xff, 0xfe]).unwrap();
        assert!(read_sidecar(&json)
            .unwrap_err()
            .to_string()
            .contains("is not text"));
    }

    #[test]
    fn the_head_reaches_the_end_of_a_long_first_line() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("f");
        let long = format!("{} 3\nb 1\n", "x;".repeat(50_000));
        std::fs::write(&p, &long).unwrap();
        let (mut f, _) = open_regular(&p, Role::Profile, false).unwrap();
        let h = head(&mut f).unwrap();
        assert!(h.len() > 100_000 && h.contains(&b'\n'));
    }
}
