//! `perf record` around the pinned benchmark: the argv (a pure function, unit-tested), the line
//! printed for rerunning by hand, and running it so that Ctrl-C finishes the profile.

use crate::signals::{self, Interrupts};
use anyhow::{Context, Result};
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::time::Duration;

/// Everything that decides the `perf record` command line.
#[derive(Debug, Clone, PartialEq)]
pub struct RecordPlan {
    /// The perf binary.
    pub perf: PathBuf,
    /// The event, `cycles:k` by default (perf falls back to cpu-clock without a PMU).
    pub event: String,
    /// Sampling frequency in Hz, 997 by default (not a round number: no lock-step).
    pub freq: u32,
    /// Call-graph mode, `fp` by default.
    pub call_graph: String,
    /// Where perf writes.
    pub output: PathBuf,
    /// Extra arguments for perf record, placed before `--`.
    pub extra: Vec<String>,
    /// The CPU the benchmark is pinned to (taskset -c).
    pub cpu: u32,
    /// SCHED_FIFO priority (chrt -f); `None` runs without chrt.
    pub priority: Option<u8>,
    /// The checked taskset and chrt the benchmark is started by.
    pub tools: crate::bench::pinned::PinTools,
    /// The benchmark command and its arguments.
    pub command: Vec<OsString>,
    /// What is profiled: the pinned benchmark, the whole box, or one process.
    pub scope: Scope,
    /// The `sleep` perf runs for a recording of the whole box or a process with a duration:
    /// as root, the one found on PATH and checked, by its absolute path.
    pub sleep: PathBuf,
}

/// What a recording profiles.
#[derive(Debug, Clone, PartialEq)]
pub enum Scope {
    /// The benchmark, pinned and at SCHED_FIFO (the method of the reference, README.md "The
    /// reference").
    Bench,
    /// Every CPU (`-a`) while the user's workload runs, for `duration` s or until Ctrl-C.
    AllCpus { duration: Option<f64> },
    /// One running process (`-p PID`), for `duration` s or until Ctrl-C.
    Pid { pid: u32, duration: Option<f64> },
}

impl Scope {
    /// How long a whole-box or per-process recording lasts; `None` for the bench or Ctrl-C.
    pub fn duration(&self) -> Option<f64> {
        match self {
            Scope::Bench => None,
            Scope::AllCpus { duration } | Scope::Pid { duration, .. } => *duration,
        }
    }
}

impl RecordPlan {
    /// The full argv, perf first: `perf record -g --call-graph fp -e cycles:k -F 997 -o perf.data
    /// --no-buildid-cache -- taskset -c CPU chrt -f 99 CMD…`. `--no-buildid-cache`: perf would
    /// otherwise copy /proc/kallsyms, real addresses and all, into `$HOME/.debug` with the
    /// mode of the directories there (0755 under `sudo -E`); the run's own snapshot serves
    /// instead.
    pub fn argv(&self) -> Vec<OsString> {
        let mut a: Vec<OsString> = vec![self.perf.clone().into(), "record".into(), "-g".into()];
        a.extend(["--call-graph".into(), self.call_graph.clone().into()]);
        a.extend(["-e".into(), self.event.clone().into()]);
        a.extend(["-F".into(), self.freq.to_string().into()]);
        a.extend(["-o".into(), self.output.clone().into()]);
        a.push("--no-buildid-cache".into());
        a.extend(self.extra.iter().map(OsString::from));
        match &self.scope {
            Scope::Bench => {}
            Scope::AllCpus { .. } => a.push("-a".into()),
            Scope::Pid { pid, .. } => a.extend(["-p".into(), pid.to_string().into()]),
        }
        if self.scope != Scope::Bench {
            if let Some(d) = self.scope.duration() {
                a.extend([
                    "--".into(),
                    self.sleep.clone().into(),
                    format!("{d}").into(),
                ]);
            }
            return a;
        }
        a.push("--".into());
        a.extend(crate::bench::pinned::argv(
            &self.tools,
            &[self.cpu],
            self.priority,
            &self.command,
        ));
        a
    }

    /// The command line as a person would type it, stdout redirected to `samples`.
    pub fn display(&self, samples: &Path) -> String {
        let mut s = self
            .argv()
            .iter()
            .map(|a| shell_quote(&a.to_string_lossy()))
            .collect::<Vec<_>>()
            .join(" ");
        if self.scope == Scope::Bench {
            s.push_str(" > ");
            s.push_str(&shell_quote(&samples.to_string_lossy()));
        }
        s
    }
}

/// Words as one command line, each quoted for a POSIX shell where it needs it.
pub fn quote_line<S: AsRef<str>>(words: &[S]) -> String {
    words
        .iter()
        .map(|w| shell_quote(w.as_ref()))
        .collect::<Vec<_>>()
        .join(" ")
}

/// Quote a word for a POSIX shell, only when it needs it.
pub fn shell_quote(w: &str) -> String {
    let plain = !w.is_empty()
        && w.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./:=,+@%".contains(c));
    if plain {
        w.to_string()
    } else {
        format!("'{}'", w.replace('\'', r"'\''"))
    }
}

/// How a perf run ended.
#[derive(Debug)]
pub struct RecordOutcome {
    pub status: ExitStatus,
    /// perf's stderr (its summary lines and any warnings).
    pub stderr: String,
    /// Signals that arrived while perf ran.
    pub signals: usize,
    /// Whether we had to kill perf (second signal): its file is then incomplete.
    pub aborted: bool,
}

/// Wait for perf, passing signals on: the first (and any before a second) as SIGINT so perf
/// finishes its file; at the second, abort: kill the benchmark, SIGTERM perf, SIGKILL it if it
/// has not exited within 3 s. Returns perf's status and whether it was aborted.
fn wait_forwarding(
    child: &mut std::process::Child,
    ints: &Interrupts,
    start: usize,
) -> Result<(ExitStatus, bool)> {
    let mut forwarded = 0;
    let mut aborted = false;
    let mut deadline = None;
    loop {
        if let Some(st) = child.try_wait()? {
            return Ok((st, aborted));
        }
        let got = ints.count() - start;
        if got > forwarded {
            forwarded = got;
            if got >= 2 && !aborted {
                // Abort: end the benchmark now and tell perf to stop; perf then exits in well
                // under a second and cleans up after itself (a SIGKILLed perf leaves its
                // /tmp/perf-vdso.so-* behind). SIGKILL only if it does not.
                for pid in children(child.id()) {
                    signals::send(pid, libc::SIGKILL);
                }
                signals::send(child.id(), libc::SIGTERM);
                aborted = true;
                deadline = Some(std::time::Instant::now() + Duration::from_secs(3));
            } else if got < 2 {
                signals::send(child.id(), libc::SIGINT);
            }
        }
        if deadline.is_some_and(|d| std::time::Instant::now() > d) {
            let _ = child.kill();
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The child processes of `pid` (perf's workload), from /proc.
fn children(pid: u32) -> Vec<u32> {
    std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children"))
        .unwrap_or_default()
        .split_whitespace()
        .filter_map(|p| p.parse().ok())
        .collect()
}

/// Run the plan with stdout going to `stdout`. While it runs, a signal sent to us is passed to
/// perf as SIGINT so it finishes its file (perf takes a repeated SIGINT, as from a terminal that
/// signalled the whole group, as one); a second signal kills perf. Should we be SIGKILLed, the
/// kernel sends perf SIGTERM (PR_SET_PDEATHSIG), which perf also answers by finishing its file.
pub fn run(
    plan: &RecordPlan,
    stdout: Option<std::fs::File>,
    ints: &Interrupts,
) -> Result<RecordOutcome> {
    use std::os::unix::process::CommandExt;
    // Counted from before the start, so that a signal that arrives while perf starts is passed
    // on to it too.
    let start = ints.count();
    let argv = plan.argv();
    let mut cmd = Command::new(&argv[0]);
    // SAFETY: prctl is async-signal-safe and touches no memory of the parent.
    unsafe {
        cmd.pre_exec(|| {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM);
            // Once we are gone its stderr pipe is broken: perf must not die of SIGPIPE on
            // its closing lines before it has cleaned up (its /tmp/perf-vdso.so-* files).
            libc::signal(libc::SIGPIPE, libc::SIG_IGN);
            // perf does not handle SIGQUIT: a terminal's Ctrl-\ would kill it mid-file. We
            // catch it instead and pass it on as SIGINT, which perf answers by finishing.
            libc::signal(libc::SIGQUIT, libc::SIG_IGN);
            Ok(())
        });
    }
    super::without_caller_config(&mut cmd);
    let mut child = cmd
        .args(&argv[1..])
        .stdin(Stdio::null())
        .stdout(stdout.map_or_else(Stdio::null, Stdio::from))
        .stderr(Stdio::piped())
        .spawn()
        .with_context(|| format!("cannot start {}", plan.perf.display()))?;
    let err_reader = child.stderr.take().map(|mut e| {
        std::thread::spawn(move || {
            let mut s = String::new();
            let _ = std::io::Read::read_to_string(&mut e, &mut s);
            s
        })
    });
    let (status, aborted) = wait_forwarding(&mut child, ints, start)?;
    let stderr = err_reader.and_then(|h| h.join().ok()).unwrap_or_default();
    Ok(RecordOutcome {
        status,
        stderr,
        signals: ints.count() - start,
        aborted,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan() -> RecordPlan {
        RecordPlan {
            perf: "/usr/bin/perf".into(),
            event: "cycles:k".into(),
            freq: 997,
            call_graph: "fp".into(),
            output: "perf.data".into(),
            extra: vec![],
            cpu: 1,
            priority: Some(99),
            tools: crate::bench::pinned::PinTools::by_name(),
            command: vec!["./bench".into(), "/etc/hostname".into(), "200000".into()],
            scope: Scope::Bench,
            sleep: "sleep".into(),
        }
    }

    #[test]
    fn default_argv_is_the_reference_line() {
        let line: Vec<String> = plan()
            .argv()
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        assert_eq!(
            line.join(" "),
            "/usr/bin/perf record -g --call-graph fp -e cycles:k -F 997 -o perf.data --no-buildid-cache -- taskset -c 1 chrt -f 99 ./bench /etc/hostname 200000"
        );
    }

    #[test]
    fn options_change_the_line() {
        let mut p = plan();
        p.priority = None;
        p.event = "cpu-clock:k".into();
        p.freq = 20000;
        p.extra = vec!["--no-buildid".into()];
        let line = p.display(Path::new("out dir/perf.data.samples"));
        assert!(
            line.contains(
                "-e cpu-clock:k -F 20000 -o perf.data --no-buildid-cache --no-buildid -- taskset -c 1 ./bench"
            ),
            "{line}"
        );
        assert!(!line.contains("chrt"));
        assert!(line.ends_with("> 'out dir/perf.data.samples'"), "{line}");
    }

    #[test]
    fn whole_box_and_pid_scopes() {
        let mut p = plan();
        p.scope = Scope::AllCpus {
            duration: Some(30.0),
        };
        let line = p.display(Path::new("x"));
        assert!(
            line.ends_with("-o perf.data --no-buildid-cache -a -- sleep 30"),
            "{line}"
        );
        p.scope = Scope::Pid {
            pid: 42,
            duration: None,
        };
        let line = p.display(Path::new("x"));
        assert!(
            line.ends_with("-o perf.data --no-buildid-cache -p 42"),
            "{line}"
        );
        assert!(!line.contains("taskset"));
    }

    #[test]
    fn quoting() {
        assert_eq!(shell_quote("a-b_c/1.x"), "a-b_c/1.x");
        assert_eq!(shell_quote("it's"), r"'it'\''s'");
        assert_eq!(shell_quote(""), "''");
    }
}
