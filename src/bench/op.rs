//! The timed body of an operation: the [`Op`] trait every operation implements (its set-up,
//! the call timed, its clean-up), and the default one, the raw openat. Which operations exist is
//! the catalogue's (operation.rs).

use crate::error::usage;
use anyhow::Result;
use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// One timed operation. `run` is the whole timed span; `cleanup` runs after the second clock
/// reading.
pub trait Op {
    /// Untimed preparation before each run (e.g. making the socket to connect).
    #[inline(always)]
    fn setup(&mut self) {}
    /// The preparation when `run` will not happen (`bench --untimed-only`): the same system
    /// calls as [`Op::setup`] unless they would pile up work for a `run` that never comes.
    #[inline(always)]
    fn setup_without_run(&mut self) {
        self.setup();
    }
    /// The operation itself; returns the raw syscall result.
    fn run(&mut self) -> i64;
    /// Undo what `run` did (close the fd), untimed.
    fn cleanup(&mut self, ret: i64);
    /// The system calls `cleanup` makes, when `run` did not happen (`bench --untimed-only`):
    /// whatever a hook sees outside the timed span, without the timed operation.
    fn cleanup_without_run(&mut self);
}

/// `op` with its timed operation left out: the loop makes only the calls outside the span.
pub struct UntimedOnly<O: Op>(pub O);

impl<O: Op> Op for UntimedOnly<O> {
    #[inline(always)]
    fn setup(&mut self) {
        self.0.setup_without_run();
    }

    #[inline(always)]
    fn run(&mut self) -> i64 {
        0
    }

    #[inline(always)]
    fn cleanup(&mut self, _ret: i64) {
        self.0.cleanup_without_run();
    }

    #[inline(always)]
    fn cleanup_without_run(&mut self) {
        self.0.cleanup_without_run();
    }
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
        self.advance();
    }

    #[inline(always)]
    fn cleanup_without_run(&mut self) {
        // The close(2) the timed loop makes, on no fd: the same system call reaches the hooks
        // on syscall entry and exit (it fails with EBADF), nothing else does.
        // SAFETY: closing -1 touches no fd.
        unsafe { libc::close(-1) };
        self.advance();
    }
}

impl Openat {
    /// The next path, chosen outside the timed span.
    #[inline(always)]
    fn advance(&mut self) {
        self.next += 1;
        if self.next == self.paths.len() {
            self.next = 0;
        }
        self.cur = self.paths[self.next].as_ptr();
    }

    /// Prepare openats of `paths` (cycled, starting at `start`), opening each once so a bad
    /// path fails before the loop.
    pub fn new(paths: &[PathBuf], start: usize) -> Result<Openat> {
        let mut c = Vec::with_capacity(paths.len());
        for path in paths {
            c.push(c_path(path)?);
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

/// `path` as a C string, refused when it holds a NUL byte.
pub fn c_path(path: &Path) -> Result<CString> {
    CString::new(path.as_os_str().as_bytes())
        .map_err(|_| usage(format!("{}: a path cannot hold a NUL byte", path.display())))
}
