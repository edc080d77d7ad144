//! The process operations: `exec` and `fork`.
//!
//! A full exec replaces the bench, so `exec` times the cheapest call that still goes through the
//! exec checks: an `execve` of an executable file holding a line of text, which every binary
//! format refuses (`ENOEXEC`) after the LSM hooks `bprm_creds_for_exec` and
//! `bprm_check_security` ran (operation.rs follows it through the kernel's source). Its first
//! four bytes are printable, so the kernel does not ask modprobe for a format module.
//! `exec-missing` is the same call on a name in the same private directory that is never
//! created, which fails with `ENOENT` before any of that.
//!
//! `fork` times `clone(CLONE_VM | SIGCHLD)`: the system call glibc's `fork()` makes, less the
//! copy of the address space (a fork of the bench copies its page tables, 4–7 times as long on
//! the project's VM), which reaches the same hook points (`sys_enter_clone`,
//! `sched_process_fork`, `task_newtask`, the LSM `task_alloc` hook). The child calls `_exit` on
//! a stack of its own and is waited for after the span; the parent's span ends when `clone`
//! returns to it.

use super::op::{c_path, Op};
use super::scratch::Scratch;
use crate::error::usage;
use anyhow::{Context, Result};
use std::ffi::CString;

/// What the exec probe file holds: printable text that is no binary format's magic.
const NOT_A_PROGRAM: &[u8] = b"ebpf-prof exec probe: a text no binary format accepts\n";

/// `execve(path, [path], [])` of the probe file, which fails with `ENOEXEC`, or of a missing
/// path, which fails with `ENOENT`.
pub struct Exec {
    path: CString,
    argv: [*const libc::c_char; 2],
    envp: [*const libc::c_char; 1],
    dir: Scratch,
}

impl Exec {
    /// Write the probe file into a private directory and exec it once: it must fail with
    /// ENOEXEC (EACCES means the directory's filesystem is mounted noexec).
    pub fn new() -> Result<Exec> {
        use std::os::unix::fs::PermissionsExt;
        let dir = Scratch::new("exec")?;
        let file = dir.path().join("not-a-program");
        std::fs::write(&file, NOT_A_PROGRAM)
            .with_context(|| format!("cannot write {}", file.display()))?;
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o700))
            .with_context(|| format!("cannot make {} executable", file.display()))?;
        let mut op = Exec::of(&file, dir)?;
        if let Some(err) = op.fails_otherwise_than(libc::ENOEXEC) {
            return Err(usage(format!(
                "the exec probe {} failed with \"{err}\", not ENOEXEC: is {} on a filesystem mounted noexec? point TMPDIR at one that allows exec",
                file.display(),
                op.dir.path().display()
            )));
        }
        Ok(op)
    }

    /// An exec of a name in a private directory that nobody else can create there; it must
    /// fail with ENOENT.
    pub fn missing() -> Result<Exec> {
        let dir = Scratch::new("exec")?;
        let file = dir.path().join("missing");
        let mut op = Exec::of(&file, dir)?;
        if let Some(err) = op.fails_otherwise_than(libc::ENOENT) {
            return Err(usage(format!(
                "the exec of the missing path {} failed with \"{err}\", not ENOENT",
                file.display()
            )));
        }
        Ok(op)
    }

    /// The exec of `file`, kept with the directory it is in.
    fn of(file: &std::path::Path, dir: Scratch) -> Result<Exec> {
        let mut op = Exec {
            path: c_path(file)?,
            argv: [std::ptr::null(); 2],
            envp: [std::ptr::null(); 1],
            dir,
        };
        op.argv[0] = op.path.as_ptr();
        Ok(op)
    }

    /// Exec once: the error it failed with, when that is not `expected`.
    fn fails_otherwise_than(&mut self, expected: i32) -> Option<std::io::Error> {
        self.run();
        let err = std::io::Error::last_os_error();
        (err.raw_os_error() != Some(expected)).then_some(err)
    }
}

impl Op for Exec {
    #[inline(always)]
    fn run(&mut self) -> i64 {
        // SAFETY: a NUL-terminated path and NULL-terminated argv and envp arrays that live as
        // long as self; the file is no program or does not exist, so execve returns.
        unsafe {
            libc::syscall(
                libc::SYS_execve,
                self.path.as_ptr(),
                self.argv.as_ptr(),
                self.envp.as_ptr(),
            )
        }
    }

    #[inline(always)]
    fn cleanup(&mut self, _ret: i64) {}

    #[inline(always)]
    fn cleanup_without_run(&mut self) {}
}

/// Bytes of the child's stack: it calls `_exit` and nothing else.
const CHILD_STACK: usize = 64 * 1024;

/// What the child runs: nothing but its exit.
extern "C" fn child_exits(_: *mut libc::c_void) -> libc::c_int {
    // SAFETY: _exit ends the child at once, running no handler and touching no memory.
    unsafe { libc::_exit(0) }
}

/// `clone(CLONE_VM | SIGCHLD)` on a stack of its own: a child that shares the bench's memory
/// (as `vfork` and `posix_spawn` make them), so no page tables are copied, and exits at once;
/// reaped after the span.
pub struct Fork {
    stack: *mut libc::c_void,
}

impl Fork {
    /// Map the child's stack, and fork once to prove it works here (no process limit in the
    /// way).
    pub fn new() -> Result<Fork> {
        // SAFETY: an anonymous private mapping with no address hint; the result is checked.
        let stack = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                CHILD_STACK,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_STACK,
                -1,
                0,
            )
        };
        if stack == libc::MAP_FAILED {
            return Err(usage(format!(
                "cannot map a stack for the fork child: {}",
                std::io::Error::last_os_error()
            )));
        }
        let mut op = Fork { stack };
        let pid = op.run();
        if pid < 0 {
            return Err(usage(format!(
                "cannot fork: {}",
                std::io::Error::last_os_error()
            )));
        }
        op.cleanup(pid);
        Ok(op)
    }
}

impl Op for Fork {
    #[inline(always)]
    fn run(&mut self) -> i64 {
        // SAFETY: the child runs `child_exits` on its own stack (the top of our mapping; stacks
        // grow down) and exits at once: whenever it runs, it touches only that stack.
        let pid = unsafe {
            libc::clone(
                child_exits,
                self.stack.cast::<u8>().add(CHILD_STACK).cast(),
                libc::CLONE_VM | libc::SIGCHLD,
                std::ptr::null_mut(),
            )
        };
        i64::from(pid)
    }

    #[inline(always)]
    fn cleanup(&mut self, ret: i64) {
        if let Ok(pid) = libc::pid_t::try_from(ret) {
            if pid > 0 {
                // SAFETY: reaping the child `run` made.
                unsafe { libc::waitpid(pid, std::ptr::null_mut(), 0) };
            }
        }
    }

    #[inline(always)]
    fn cleanup_without_run(&mut self) {
        // The wait4(2) the loop makes, with no child: ECHILD at once.
        // SAFETY: a non-blocking wait touches nothing.
        unsafe { libc::waitpid(-1, std::ptr::null_mut(), libc::WNOHANG) };
    }
}

impl Drop for Fork {
    fn drop(&mut self) {
        // SAFETY: unmapping the stack mapped in new(); every child using it has been reaped.
        unsafe { libc::munmap(self.stack, CHILD_STACK) };
    }
}
