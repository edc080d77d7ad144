//! `perf script` as a stream: started with the run's kallsyms snapshot (`--kallsyms=`) so kernel
//! frames keep their names for a reader that /proc/kallsyms shows only zeros to
//! (kptr_restrict=1), read as it comes, with a progress line on a terminal.
//!
//! [`ProgressLine`] is the one progress line of the tool, also drawn by the perf.data reader:
//! whoever shows progress on the terminal draws through it.

use crate::error::{child, usage};
use anyhow::{Context, Result};
use std::io::{IsTerminal, Read};
use std::os::fd::AsRawFd;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdout, Command, Stdio};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// The argv for `perf script` over `data`, with an optional kallsyms snapshot.
/// `force` passes `-f`: perf refuses a file owned by another user unless told.
pub fn argv(
    perf: &Path,
    data: &Path,
    kallsyms: Option<&Path>,
    force: bool,
) -> Vec<std::ffi::OsString> {
    let mut args: Vec<std::ffi::OsString> =
        vec![perf.into(), "script".into(), "-i".into(), data.into()];
    if force {
        args.push("-f".into());
    }
    if let Some(snapshot) = kallsyms {
        let mut opt = std::ffi::OsString::from("--kallsyms=");
        opt.push(snapshot);
        args.push(opt);
    }
    args
}

/// The descriptor number `perf script` reads the profile from (see [`Script::start`]).
const DATA_FD: i32 = 3;
/// The descriptor number `perf script` reads the kallsyms snapshot from: a private copy of the
/// text that was checked, in memory (`memfd_create`), never the user's path.
const KALLSYMS_FD: i32 = 4;

/// Between fork and exec, put the profile at fd 3 and the kallsyms copy (if any) at fd 4.
fn place_fds(cmd: &mut Command, src: i32, symbols: Option<i32>) {
    // SAFETY: between fork and exec only dup2 and fcntl, which are async-signal-safe; the
    // profile ends at fd 3 and the kallsyms copy at fd 4 without FD_CLOEXEC (dup2 clears
    // it; a descriptor already in place has it cleared by fcntl), and a failure fails the
    // spawn. The copy is moved out of the way first when it sits at fd 3.
    unsafe {
        cmd.pre_exec(move || {
            let symbols = match symbols {
                Some(fd) if fd == DATA_FD => Some(libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 10)),
                other => other,
            };
            let placed = [(Some(src), DATA_FD), (symbols, KALLSYMS_FD)];
            for (from, to) in placed {
                let ret = match from {
                    None => 0,
                    Some(fd) if fd < 0 => -1,
                    Some(fd) if fd == to => libc::fcntl(fd, libc::F_SETFD, 0),
                    Some(fd) => libc::dup2(fd, to),
                };
                if ret < 0 {
                    return Err(std::io::Error::last_os_error());
                }
            }
            Ok(())
        });
    }
}

/// A private copy of `text` in an anonymous memory file, for perf to read as
/// `/proc/self/fd/4`: no one else can swap it, and it goes with the last descriptor.
fn private_copy(text: &[u8]) -> Result<std::fs::File> {
    use std::io::Write;
    use std::os::fd::FromRawFd;
    // SAFETY: a NUL-terminated name and valid flags; the fd returned is ours alone.
    let fd = unsafe { libc::memfd_create(c"ebpf-prof-kallsyms".as_ptr(), libc::MFD_CLOEXEC) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error())
            .context("cannot make the kallsyms copy for perf");
    }
    // SAFETY: `fd` was just created and nothing else owns it.
    let mut copy = unsafe { std::fs::File::from_raw_fd(fd) };
    copy.write_all(text)
        .context("cannot write the kallsyms copy for perf")?;
    Ok(copy)
}

/// A running `perf script`: read its output from [`Script::reader`], then call [`Script::finish`].
pub(crate) struct Script {
    child: Child,
    stderr: Option<JoinHandle<String>>,
    line: String,
}

impl Script {
    /// Start `perf script` on `data`, the profile opened and checked by the caller (`shown`
    /// is its path, for messages): perf reads that very file as `/proc/self/fd/3`, so whatever
    /// the path names by now (a file swapped after the check), perf parses what was checked.
    pub fn start(
        perf: &Path,
        shown: &Path,
        data: &std::fs::File,
        kallsyms: Option<&[u8]>,
        force: bool,
    ) -> Result<Script> {
        Script::start_with(perf, shown, data, kallsyms, force, &[])
    }

    /// [`Script::start`] with `extra` arguments (e.g. `-F event,period,ip,sym`).
    pub fn start_with(
        perf: &Path,
        shown: &Path,
        data: &std::fs::File,
        kallsyms: Option<&[u8]>,
        force: bool,
        extra: &[&str],
    ) -> Result<Script> {
        let fd_path = format!("/proc/self/fd/{DATA_FD}");
        let copy = kallsyms.map(private_copy).transpose()?;
        let copy_path = PathBuf::from(format!("/proc/self/fd/{KALLSYMS_FD}"));
        let copy_given = copy.as_ref().map(|_| copy_path.as_path());
        let mut args = argv(perf, Path::new(&fd_path), copy_given, force);
        args.extend(extra.iter().map(std::ffi::OsString::from));
        let mut shown_argv = argv(perf, shown, copy_given, force);
        shown_argv.extend(extra.iter().map(std::ffi::OsString::from));
        let line = shown_argv
            .iter()
            .map(|text| text.to_string_lossy())
            .collect::<Vec<_>>()
            .join(" ");
        let mut cmd = Command::new(&args[0]);
        super::without_caller_config(&mut cmd);
        if let Some(home) = super::script_home() {
            cmd.env("HOME", home);
        }
        cmd.args(&args[1..])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        place_fds(
            &mut cmd,
            data.as_raw_fd(),
            copy.as_ref().map(|c| c.as_raw_fd()),
        );
        let mut child = cmd
            .spawn()
            .with_context(|| format!("cannot start {}", perf.display()))?;
        let stderr = child.stderr.take().map(|mut pipe| {
            std::thread::spawn(move || {
                let mut text = String::new();
                let _ = pipe.read_to_string(&mut text);
                text
            })
        });
        Ok(Script {
            child,
            stderr,
            line,
        })
    }

    /// perf's stdout, wrapped in a progress indicator when stderr is a terminal.
    pub fn reader(&mut self) -> Result<Progress<ChildStdout>> {
        let out = self
            .child
            .stdout
            .take()
            .context("perf script stdout already taken")?;
        Ok(Progress::new(out, "perf script"))
    }

    /// perf's stdout, without a progress indicator (for a `perf script` run beside another).
    pub fn reader_quiet(&mut self) -> Result<ChildStdout> {
        self.child
            .stdout
            .take()
            .context("perf script stdout already taken")
    }

    /// Wait for perf; a failure carries its command line and stderr.
    pub fn finish(mut self) -> Result<()> {
        let status = self.child.wait()?;
        let err = self
            .stderr
            .take()
            .and_then(|h| h.join().ok())
            .unwrap_or_default();
        if status.success() {
            return Ok(());
        }
        let fd_path = format!("/proc/self/fd/{DATA_FD}");
        let msg = err
            .lines()
            .filter(|l| !l.trim().is_empty())
            .collect::<Vec<_>>()
            .join(" | ")
            .replace(&fd_path, "the input");
        if msg.contains("not owned by current user") {
            return Err(usage(format!(
                "{msg} (the file belongs to another user: run as that user, or as root)"
            )));
        }
        Err(child(format!("`{}` failed ({status}): {msg}", self.line)))
    }
}

/// The terminal's progress line, held while a long step draws on it. Only one holder draws at
/// a time ([`crate::out::claim_progress_line`]): when steps run side by side (`diff`), the
/// first to draw keeps the line and the others stay quiet, instead of taking turns on it. The
/// line is drawn over with a carriage return, and cleared and given back when dropped.
#[derive(Debug)]
pub(crate) struct ProgressLine {
    /// Whether this one has the line.
    held: bool,
    /// Whether it may still draw: stderr is a terminal and no other holder had the line.
    enabled: bool,
}

impl ProgressLine {
    /// A line drawn only when stderr is a terminal.
    pub fn new() -> ProgressLine {
        ProgressLine::with_terminal(std::io::stderr().is_terminal())
    }

    /// A line drawn only when `terminal` is true.
    pub fn with_terminal(terminal: bool) -> ProgressLine {
        ProgressLine {
            held: false,
            enabled: terminal,
        }
    }

    /// Whether it may draw now: it has the line already, or no other holder has it, and then
    /// the line is this one's until it is dropped. One that finds the line taken stays quiet
    /// for good.
    pub fn claim(&mut self) -> bool {
        if self.held {
            return true;
        }
        if !self.enabled {
            return false;
        }
        self.held = crate::out::claim_progress_line();
        self.enabled = self.held;
        self.held
    }

    /// Whether it may still draw, before any claim.
    pub fn enabled(&self) -> bool {
        self.enabled
    }

    /// Draws `text` over the line when it may; false when it may not.
    pub fn draw(&mut self, text: &str) -> bool {
        if !self.claim() {
            return false;
        }
        crate::out::err_text(&format!("\r{text}"));
        true
    }
}

impl Default for ProgressLine {
    fn default() -> ProgressLine {
        ProgressLine::new()
    }
}

impl Drop for ProgressLine {
    fn drop(&mut self) {
        if self.held {
            crate::out::err_text("\r\x1b[K");
            crate::out::release_progress_line();
        }
    }
}

/// A reader that shows the bytes read so far on the progress line, at most ten times a second.
pub(crate) struct Progress<R> {
    inner: R,
    label: &'static str,
    bytes: u64,
    last: Instant,
    line: ProgressLine,
}

impl<R> Progress<R> {
    /// Wrap `inner`.
    pub fn new(inner: R, label: &'static str) -> Progress<R> {
        Progress {
            inner,
            label,
            bytes: 0,
            last: Instant::now(),
            line: ProgressLine::new(),
        }
    }
}

impl<R: Read> Read for Progress<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let count = self.inner.read(buf)?;
        self.bytes += count as u64;
        if self.line.enabled() && self.last.elapsed() > Duration::from_millis(100) {
            const SPIN: [char; 4] = ['|', '/', '-', '\\'];
            let spin = SPIN[(self.bytes as usize / 4096) % 4];
            let text = format!(
                "{spin} {}: {:.1} MB read",
                self.label,
                self.bytes as f64 / 1e6
            );
            if self.line.draw(&text) {
                self.last = Instant::now();
            }
        }
        Ok(count)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_progress_line_draws_at_a_time() {
        let mut first = ProgressLine::with_terminal(true);
        let mut second = ProgressLine::with_terminal(true);
        assert!(first.claim());
        assert!(first.claim(), "the holder keeps drawing");
        assert!(!second.claim(), "another stays quiet");
        assert!(!second.enabled(), "for good");
        drop(first);
        let mut third = ProgressLine::with_terminal(true);
        assert!(third.claim(), "free again once the first is gone");
        assert!(
            !ProgressLine::with_terminal(false).claim(),
            "never off a terminal"
        );
    }

    #[test]
    fn argv_carries_kallsyms() {
        let a = argv(
            Path::new("perf"),
            Path::new("p.data"),
            Some(Path::new("p.data.kallsyms")),
            false,
        );
        let s: Vec<_> = a.iter().map(|x| x.to_string_lossy().into_owned()).collect();
        assert_eq!(
            s,
            [
                "perf",
                "script",
                "-i",
                "p.data",
                "--kallsyms=p.data.kallsyms"
            ]
        );
        assert_eq!(argv(Path::new("perf"), Path::new("p"), None, true).len(), 5);
    }
}
