//! The file and memory operations: `stat`, `read`, `write`, `mmap` and `unlink`, each one raw
//! system call in the span, its set-up (opening the file, making the file to unlink) and
//! clean-up (rewinding, unmapping) outside it. What each reaches is in operation.rs.

use super::op::{c_path, Op};
use super::scratch::Scratch;
use crate::error::usage;
use anyhow::Result;
use std::ffi::CString;
use std::path::Path;

/// The error of an operation that failed once before the loop, `what` naming it.
fn failed_once(what: String) -> anyhow::Error {
    usage(format!("{what}: {}", std::io::Error::last_os_error()))
}

/// Open `path` with `flags` for the loop, or say why not.
fn open(path: &Path, flags: i32) -> Result<i32> {
    let c = c_path(path)?;
    // SAFETY: a NUL-terminated path; the fd is ours.
    let fd = unsafe { libc::open(c.as_ptr(), flags | libc::O_CLOEXEC) };
    if fd < 0 {
        return Err(failed_once(format!("cannot open {}", path.display())));
    }
    Ok(fd)
}

/// `newfstatat(AT_FDCWD, path, &st, 0)`.
pub struct Stat {
    path: CString,
    buf: libc::stat,
}

impl Stat {
    /// Prepare the stat of `path`, made once so a bad path fails before the loop.
    pub fn new(path: &Path) -> Result<Stat> {
        let mut op = Stat {
            path: c_path(path)?,
            // SAFETY: a zeroed `struct stat` is a valid buffer for the kernel to fill.
            buf: unsafe { std::mem::zeroed() },
        };
        if op.run() < 0 {
            return Err(failed_once(format!(
                "cannot stat {} (give an existing path with --path)",
                path.display()
            )));
        }
        Ok(op)
    }
}

impl Op for Stat {
    #[inline(always)]
    fn run(&mut self) -> i64 {
        // SAFETY: a NUL-terminated path and a `struct stat` we own.
        unsafe {
            libc::syscall(
                libc::SYS_newfstatat,
                libc::AT_FDCWD,
                self.path.as_ptr(),
                &raw mut self.buf,
                0,
            )
        }
    }

    #[inline(always)]
    fn cleanup(&mut self, _ret: i64) {}

    #[inline(always)]
    fn cleanup_without_run(&mut self) {}
}

/// Bytes a `read` takes.
const READ_BYTES: usize = 64;

/// `read(fd, buf, 64)` of a file opened once, rewound after the span.
pub struct Read {
    fd: i32,
    buf: [u8; READ_BYTES],
}

impl Read {
    /// Open `path` once and read it to prove it can be.
    pub fn new(path: &Path) -> Result<Read> {
        let mut op = Read {
            fd: open(path, libc::O_RDONLY)?,
            buf: [0; READ_BYTES],
        };
        if op.run() < 0 {
            return Err(failed_once(format!(
                "cannot read {} (give a readable file with --path)",
                path.display()
            )));
        }
        op.cleanup(0);
        Ok(op)
    }
}

impl Op for Read {
    #[inline(always)]
    fn run(&mut self) -> i64 {
        // SAFETY: reading into a buffer we own, at most its size.
        unsafe { libc::syscall(libc::SYS_read, self.fd, self.buf.as_mut_ptr(), READ_BYTES) }
    }

    #[inline(always)]
    fn cleanup(&mut self, _ret: i64) {
        // SAFETY: rewinding an fd we own, so every read reads the same bytes.
        unsafe { libc::lseek(self.fd, 0, libc::SEEK_SET) };
    }

    #[inline(always)]
    fn cleanup_without_run(&mut self) {
        self.cleanup(0);
    }
}

impl Drop for Read {
    fn drop(&mut self) {
        // SAFETY: closing the fd opened in new().
        unsafe { libc::close(self.fd) };
    }
}

/// `write(fd, buf, 1)` to /dev/null: the write path with no storage behind it.
pub struct Write {
    fd: i32,
    byte: [u8; 1],
}

impl Write {
    /// Open /dev/null for writing.
    pub fn new() -> Result<Write> {
        Ok(Write {
            fd: open(Path::new("/dev/null"), libc::O_WRONLY)?,
            byte: [b'x'],
        })
    }
}

impl Op for Write {
    #[inline(always)]
    fn run(&mut self) -> i64 {
        // SAFETY: writing one byte from a buffer we own.
        unsafe { libc::syscall(libc::SYS_write, self.fd, self.byte.as_ptr(), 1) }
    }

    #[inline(always)]
    fn cleanup(&mut self, _ret: i64) {}

    #[inline(always)]
    fn cleanup_without_run(&mut self) {}
}

impl Drop for Write {
    fn drop(&mut self) {
        // SAFETY: closing the fd opened in new().
        unsafe { libc::close(self.fd) };
    }
}

/// The bytes `mmap` maps: one page on every architecture Linux runs on.
const MAP_BYTES: usize = 4096;

/// `mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0)`, unmapped
/// after the span. Nothing touches the page: no fault is taken.
pub struct Mmap;

impl Op for Mmap {
    #[inline(always)]
    fn run(&mut self) -> i64 {
        // SAFETY: an anonymous private mapping with no address hint; unmapped in cleanup.
        unsafe {
            libc::syscall(
                libc::SYS_mmap,
                std::ptr::null_mut::<libc::c_void>(),
                MAP_BYTES,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        }
    }

    #[inline(always)]
    fn cleanup(&mut self, ret: i64) {
        if ret != -1 {
            // SAFETY: unmapping exactly the page `run` mapped.
            unsafe { libc::munmap(ret as *mut libc::c_void, MAP_BYTES) };
        }
    }

    #[inline(always)]
    fn cleanup_without_run(&mut self) {
        // The munmap(2) the loop makes, on no mapping: a zero length fails with EINVAL.
        // SAFETY: a zero-length munmap touches nothing.
        unsafe { libc::munmap(std::ptr::null_mut(), 0) };
    }
}

/// `unlinkat(AT_FDCWD, path, 0)` of a file made (openat with O_CREAT, then close) before the
/// span, in a private directory of the bench's.
pub struct Unlink {
    path: CString,
    dir: Scratch,
}

impl Unlink {
    /// Make the private directory and unlink a file in it once.
    pub fn new() -> Result<Unlink> {
        let dir = Scratch::new("unlink")?;
        let mut op = Unlink {
            path: c_path(&dir.path().join("victim"))?,
            dir,
        };
        op.setup();
        if op.run() < 0 {
            return Err(failed_once(format!(
                "cannot unlink a file in {}",
                op.dir.path().display()
            )));
        }
        Ok(op)
    }
}

impl Op for Unlink {
    #[inline(always)]
    fn setup(&mut self) {
        // SAFETY: a NUL-terminated path in our private directory; the fd is closed at once.
        unsafe {
            let fd = libc::open(
                self.path.as_ptr(),
                libc::O_CREAT | libc::O_WRONLY | libc::O_CLOEXEC,
                0o600,
            );
            if fd >= 0 {
                libc::close(fd);
            }
        }
    }

    #[inline(always)]
    fn run(&mut self) -> i64 {
        // SAFETY: a NUL-terminated path.
        unsafe { libc::syscall(libc::SYS_unlinkat, libc::AT_FDCWD, self.path.as_ptr(), 0) }
    }

    #[inline(always)]
    fn cleanup(&mut self, _ret: i64) {}

    #[inline(always)]
    fn cleanup_without_run(&mut self) {}
}
