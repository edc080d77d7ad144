//! The operations the harness times. Adding one is a variant of [`OpKind`], a struct
//! implementing [`Op`], and a line in [`with_op`].

use crate::error::usage;
use anyhow::Result;
use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;

/// Which operation to time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OpKind {
    /// `syscall(SYS_openat, AT_FDCWD, path, O_RDONLY)`; the fd is closed outside the timed span.
    Openat(PathBuf),
    /// `syscall(SYS_connect, …)` of a fresh TCP socket to a loopback listener the bench opens
    /// itself; the socket is made before and closed (with RST, no TIME_WAIT) after the span,
    /// and the listener's side accepted and closed, untimed.
    Connect,
}

/// One timed operation. `run` is the whole timed span; `cleanup` runs after the second clock
/// reading.
pub trait Op {
    /// Untimed preparation before each run (e.g. making the socket to connect).
    #[inline(always)]
    fn setup(&mut self) {}
    /// The operation itself; returns the raw syscall result.
    fn run(&mut self) -> i64;
    /// Undo what `run` did (close the fd), untimed.
    fn cleanup(&mut self, ret: i64);
}

/// The raw openat of a path, or of each path of a working set in turn.
pub struct Openat {
    paths: Vec<CString>,
    next: usize,
    /// The path the next run opens, chosen outside the timed span.
    cur: *const libc::c_char,
}

impl Op for Openat {
    #[inline(always)]
    fn run(&mut self) -> i64 {
        // SAFETY: cur points into `paths`, NUL-terminated strings that live as long as self.
        unsafe { libc::syscall(libc::SYS_openat, libc::AT_FDCWD, self.cur, libc::O_RDONLY) }
    }

    #[inline(always)]
    fn cleanup(&mut self, ret: i64) {
        if ret >= 0 {
            // SAFETY: ret is an fd this loop just opened and nobody else holds.
            unsafe { libc::close(ret as i32) };
        }
        self.next += 1;
        if self.next == self.paths.len() {
            self.next = 0;
        }
        self.cur = self.paths[self.next].as_ptr();
    }
}

impl Openat {
    /// Prepare openats of `paths` (cycled, starting at `start`), opening each once so a bad
    /// path fails before the loop.
    pub fn new(paths: &[PathBuf], start: usize) -> Result<Openat> {
        let mut c = Vec::with_capacity(paths.len());
        for path in paths {
            c.push(CString::new(path.as_os_str().as_bytes()).map_err(|_| {
                usage(format!("{}: a path cannot hold a NUL byte", path.display()))
            })?);
        }
        let mut op = Openat {
            cur: c.first().map_or(std::ptr::null(), |p| p.as_ptr()),
            paths: c,
            next: 0,
        };
        for path in paths {
            let ret = op.run();
            if ret < 0 {
                let err = std::io::Error::last_os_error();
                return Err(usage(format!(
                    "cannot open {}: {err} (give a readable file with --path)",
                    path.display()
                )));
            }
            op.cleanup(ret);
        }
        op.next = start % paths.len().max(1);
        op.cur = op.paths[op.next].as_ptr();
        Ok(op)
    }
}

/// An operation ready to be made, per worker: the working set resolved to paths.
#[derive(Debug, Clone)]
pub enum Prepared {
    Openat(Vec<PathBuf>),
    Connect,
}

/// Prepare the operation and hand it to `f` as a concrete type, so the timed loop is
/// monomorphised (no indirect call in the span). `start` staggers workers over a working set.
pub fn with_op<R>(
    kind: &Prepared,
    start: usize,
    f: impl FnOnce(&mut dyn FnMut(&mut [u32])) -> R,
) -> Result<R> {
    match kind {
        Prepared::Openat(p) => {
            let mut op = Openat::new(p, start)?;
            Ok(f(&mut |d| super::timed_loop(&mut op, d)))
        }
        Prepared::Connect => {
            let mut op = super::connect::Connect::new()?;
            Ok(f(&mut |d| super::timed_loop(&mut op, d)))
        }
    }
}
