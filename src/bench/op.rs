//! The operations the harness times. Adding one is a variant of [`Operation`] with what it
//! reaches (operation.rs), a variant of [`OpKind`], a struct implementing [`Op`], and a line in
//! [`super::with_op`].

use super::operation::Operation;
use crate::error::usage;
use anyhow::Result;
use std::ffi::{CString, OsString};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// Which operation to time, with what it works on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OpKind {
    /// `syscall(SYS_openat, AT_FDCWD, path, O_RDONLY)`; the fd is closed outside the timed span.
    Openat(PathBuf),
    /// `syscall(SYS_connect, …)` of a fresh TCP socket to a loopback listener the bench opens
    /// itself; the socket is made before and closed (with RST, no TIME_WAIT) after the span,
    /// and the listener's side accepted and closed, untimed.
    Connect,
    /// `execve` of a path that does not exist (see operation.rs).
    ExecMissing,
    /// `execve` of a file no binary format accepts (see operation.rs).
    Exec,
    /// `clone` as `fork` makes it; the child exits at once and is waited for after the span.
    Fork,
    /// `newfstatat` of the path.
    Stat(PathBuf),
    /// `read` of the path's first bytes, rewound after the span.
    Read(PathBuf),
    /// `write` of a byte to /dev/null.
    Write,
    /// `mmap` of an anonymous page, unmapped after the span.
    Mmap,
    /// `unlinkat` of a file made before the span.
    Unlink,
    /// `sendto` of a UDP datagram to a loopback socket of the bench's.
    Sendto,
    /// `recvfrom` of a UDP datagram sent to it on loopback before the span.
    Recvfrom,
    /// `accept` of a loopback TCP connection made before the span.
    Accept,
    /// `sendto` of a UDP datagram through a veth pair into the private network namespace named
    /// (`None` until one is made: the command running the bench makes it), and the `recvfrom`
    /// there that receives it (see vethops.rs).
    UdpVeth(Option<String>),
}

impl OpKind {
    /// `op`, working on `path` when it takes one.
    pub fn new(op: Operation, path: PathBuf) -> OpKind {
        match op {
            Operation::Openat => OpKind::Openat(path),
            Operation::Connect => OpKind::Connect,
            Operation::ExecMissing => OpKind::ExecMissing,
            Operation::Exec => OpKind::Exec,
            Operation::Fork => OpKind::Fork,
            Operation::Stat => OpKind::Stat(path),
            Operation::Read => OpKind::Read(path),
            Operation::Write => OpKind::Write,
            Operation::Mmap => OpKind::Mmap,
            Operation::Unlink => OpKind::Unlink,
            Operation::Sendto => OpKind::Sendto,
            Operation::Recvfrom => OpKind::Recvfrom,
            Operation::Accept => OpKind::Accept,
            Operation::UdpVeth => OpKind::UdpVeth(None),
        }
    }

    /// The operation, by name.
    pub fn operation(&self) -> Operation {
        match self {
            OpKind::Openat(_) => Operation::Openat,
            OpKind::Connect => Operation::Connect,
            OpKind::ExecMissing => Operation::ExecMissing,
            OpKind::Exec => Operation::Exec,
            OpKind::Fork => Operation::Fork,
            OpKind::Stat(_) => Operation::Stat,
            OpKind::Read(_) => Operation::Read,
            OpKind::Write => Operation::Write,
            OpKind::Mmap => Operation::Mmap,
            OpKind::Unlink => Operation::Unlink,
            OpKind::Sendto => Operation::Sendto,
            OpKind::Recvfrom => Operation::Recvfrom,
            OpKind::Accept => Operation::Accept,
            OpKind::UdpVeth(_) => Operation::UdpVeth,
        }
    }

    /// The path it works on, for the operations that take one.
    pub fn path(&self) -> Option<&Path> {
        match self {
            OpKind::Openat(p) | OpKind::Stat(p) | OpKind::Read(p) => Some(p),
            _ => None,
        }
    }

    /// The private network namespace it sends into, for the packet operations that have one.
    pub fn netns(&self) -> Option<&str> {
        match self {
            OpKind::UdpVeth(netns) => netns.as_deref(),
            _ => None,
        }
    }

    /// Whether it sends packets through a private network namespace the tool makes.
    pub fn needs_netns(&self) -> bool {
        matches!(self, OpKind::UdpVeth(_))
    }

    /// The same operation sending into namespace `netns` (the others unchanged).
    pub fn in_netns(&self, netns: &str) -> OpKind {
        match self {
            OpKind::UdpVeth(_) => OpKind::UdpVeth(Some(netns.to_string())),
            other => other.clone(),
        }
    }

    /// The bench's arguments that choose it: `--op NAME`, and `--path P` where it takes one.
    pub fn bench_args(&self) -> Vec<OsString> {
        let mut v: Vec<OsString> = vec!["--op".into(), self.operation().name().into()];
        if let Some(p) = self.path() {
            v.extend(["--path".into(), p.as_os_str().to_owned()]);
        }
        if let Some(netns) = self.netns() {
            v.extend(["--netns".into(), netns.into()]);
        }
        v
    }

    /// "2000 openats of /etc/hostname", "250 forks".
    pub fn describe(&self, iterations: usize) -> String {
        let op = self.operation().plural();
        match self.path() {
            Some(p) => format!("{iterations} {op} of {}", p.display()),
            None => format!("{iterations} {op}"),
        }
    }
}

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
