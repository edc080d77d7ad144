//! Running one round of the benchmark, pinned and at SCHED_FIFO as in `record`, and reading
//! back its samples: the user's benchmark a process per round, the built-in one a process kept
//! for all rounds ([`Served`], `bench --serve`); and measuring what one clock reading costs.

use crate::bench::{now_ns, parse_samples, serve};
use crate::error::child;
use anyhow::{Context, Result};
use std::ffi::OsString;
use std::io::{BufReader, Read, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

/// How the benchmark is run each round.
#[derive(Debug, Clone)]
pub struct BenchRun {
    /// The benchmark argv (the built-in bench, or the user's).
    pub command: Vec<OsString>,
    /// The CPUs it may run on (one per worker).
    pub cpus: Vec<u32>,
    /// SCHED_FIFO priority; `None` without chrt.
    pub priority: Option<u8>,
    /// The checked taskset and chrt it is started by.
    pub tools: crate::bench::pinned::PinTools,
    /// Whether `command` is the built-in bench (which can leave its timed operation out).
    pub builtin: bool,
}

impl BenchRun {
    /// The full argv: `taskset -c CPU [chrt -f P] CMD…`.
    pub fn argv(&self) -> Vec<OsString> {
        crate::bench::pinned::argv(&self.tools, &self.cpus, self.priority, &self.command)
    }

    /// The built-in bench with `--untimed-only`: only what the loop does outside the span.
    pub fn untimed(&self) -> Option<BenchRun> {
        self.builtin.then(|| {
            let mut b = self.clone();
            b.command.push("--untimed-only".into());
            b
        })
    }

    /// The same run with `n` iterations per round of the built-in bench (a user's benchmark is
    /// left as it is).
    pub fn with_iterations(&self, n: usize) -> BenchRun {
        let mut b = self.clone();
        if self.builtin {
            if let Some(i) = b.command.iter().position(|a| a == "-n") {
                if let Some(v) = b.command.get_mut(i + 1) {
                    *v = n.to_string().into();
                }
            }
        }
        b
    }

    /// The full command line, for messages.
    pub fn line(&self) -> String {
        self.argv()
            .iter()
            .map(|a| a.to_string_lossy())
            .collect::<Vec<_>>()
            .join(" ")
    }

    /// Start the built-in bench as a server of rounds; `None` for a user's benchmark.
    pub fn serve(&self) -> Result<Option<Served>> {
        if !self.builtin {
            return Ok(None);
        }
        let mut b = self.clone();
        b.command.push("--serve".into());
        // In ebpf-prof's process group: a Ctrl-C on the terminal ends a round in progress too,
        // and the rounds then report the interrupt (rounds.rs), not a failed benchmark.
        let mut worker = b
            .command()
            .stdin(Stdio::piped())
            .spawn()
            .context("cannot start taskset (install util-linux)")?;
        let (Some(stdin), Some(stdout)) = (worker.stdin.take(), worker.stdout.take()) else {
            let _ = worker.kill();
            let _ = worker.wait();
            return Err(child(
                "the benchmark's pipes could not be set up".to_string(),
            ));
        };
        Ok(Some(Served {
            stdin: Some(stdin),
            stdout: BufReader::with_capacity(1 << 16, stdout),
            child: worker,
            run: b,
        }))
    }

    /// The pinned command, its stdout and stderr piped.
    fn command(&self) -> Command {
        let argv = self.argv();
        let mut c = Command::new(&argv[0]);
        c.args(&argv[1..])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        c
    }

    /// The error of a round that failed with `status` and said `stderr`: SCHED_FIFO or the
    /// CPU refused, or the benchmark's own failure.
    fn failure(&self, label: &str, status: &str, stderr: &str) -> anyhow::Error {
        let err = stderr.trim();
        if let Some(e) = crate::bench::pinned::refused(err, &self.cpus, self.priority) {
            return e;
        }
        child(format!(
            "the benchmark failed ({status}) in round {label}: `{}`: {err}",
            self.line()
        ))
    }

    /// Run one round; the samples in loop order.
    pub fn run(&self, label: &str) -> Result<Vec<u64>> {
        let out = self
            .command()
            .stdin(Stdio::null())
            .output()
            .context("cannot start taskset (install util-linux)")?;
        if !out.status.success() {
            let err = String::from_utf8_lossy(&out.stderr);
            return Err(self.failure(label, &out.status.to_string(), &err));
        }
        parse_samples(
            &String::from_utf8_lossy(&out.stdout),
            &format!("benchmark output of round {label}"),
        )
    }
}

/// The built-in bench kept running for all rounds: a byte on its stdin runs a round, its
/// samples come back on its stdout (bench/serve.rs). Dropping it closes the stdin, which ends
/// the server after the round it may be in; a server still there after a second is killed by
/// its pid.
pub struct Served {
    stdin: Option<ChildStdin>,
    stdout: BufReader<ChildStdout>,
    child: Child,
    run: BenchRun,
}

impl Served {
    /// Run one round; the samples in loop order.
    pub fn round(&mut self, label: &str) -> Result<Vec<u64>> {
        let asked = match self.stdin.as_mut() {
            Some(i) => i.write_all(b"r").and_then(|()| i.flush()),
            None => Err(std::io::ErrorKind::BrokenPipe.into()),
        };
        let answer = asked.and_then(|()| serve::decode(&mut self.stdout));
        match answer {
            Ok(Some(samples)) if !samples.is_empty() => Ok(samples),
            Ok(Some(_)) => Err(child(format!(
                "the benchmark kept no samples in round {label}: `{}`",
                self.run.line()
            ))),
            _ => Err(self.failed(label)),
        }
    }

    /// The error of a server that stopped answering: its exit status and stderr.
    fn failed(&mut self, label: &str) -> anyhow::Error {
        self.stdin = None;
        let status = self.wait_or_kill();
        let mut err = String::new();
        if let Some(e) = self.child.stderr.as_mut() {
            let _ = e.read_to_string(&mut err);
        }
        let status = status.map_or_else(|| "killed".to_string(), |s| s.to_string());
        self.run.failure(label, &status, &err)
    }

    /// Wait up to a second for the server to exit, then kill it by its pid.
    fn wait_or_kill(&mut self) -> Option<std::process::ExitStatus> {
        let start = Instant::now();
        while start.elapsed() < Duration::from_secs(1) {
            match self.child.try_wait() {
                Ok(Some(s)) => return Some(s),
                Ok(None) => std::thread::sleep(Duration::from_millis(5)),
                Err(_) => break,
            }
        }
        let _ = self.child.kill();
        self.child.wait().ok()
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        self.stdin = None;
        let _ = self.wait_or_kill();
    }
}

/// What reading the clock costs, measured in this process.
#[derive(Debug, Clone, Copy, serde::Serialize)]
pub struct ClockCost {
    /// Mean cost of one clock_gettime(CLOCK_MONOTONIC) call, ns.
    pub read_ns: f64,
    /// The smallest non-zero step between consecutive readings, ns (the clock's resolution here).
    pub step_ns: u64,
}

/// Measure the clock: 1,000,000 back-to-back readings.
pub fn clock_cost() -> ClockCost {
    const N: u64 = 1_000_000;
    let mut step = u64::MAX;
    let start = now_ns();
    let mut prev = start;
    for _ in 0..N {
        let t = now_ns();
        if t > prev {
            step = step.min(t - prev);
        }
        prev = t;
    }
    let read_ns = (prev - start) as f64 / N as f64;
    ClockCost {
        read_ns,
        step_ns: if step == u64::MAX { 0 } else { step },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn argv_pins_and_prioritises() {
        let r = BenchRun {
            command: vec!["./b".into(), "x".into()],
            cpus: vec![1],
            priority: Some(99),
            tools: crate::bench::pinned::PinTools::by_name(),
            builtin: false,
        };
        let s: Vec<_> = r
            .argv()
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        assert_eq!(s.join(" "), "taskset -c 1 chrt -f 99 ./b x");
        let r = BenchRun {
            priority: None,
            ..r
        };
        assert_eq!(r.argv().len(), 5);
        assert!(
            r.untimed().is_none(),
            "a user's bench cannot leave its operation out"
        );
        let longer = r.with_iterations(9);
        assert_eq!(longer.command, r.command, "a user's bench is left as it is");
        let own = BenchRun {
            builtin: true,
            command: vec![
                "ebpf-prof".into(),
                "bench".into(),
                "-n".into(),
                "250".into(),
            ],
            ..r
        };
        let longer = own.with_iterations(200_000);
        assert_eq!(longer.command[3], "200000");
        let u = own.untimed().unwrap();
        assert_eq!(u.command.last().unwrap(), "--untimed-only");
    }

    #[test]
    fn clock_cost_is_plausible() {
        let c = clock_cost();
        assert!(c.read_ns > 0.0 && c.read_ns < 10_000.0, "{c:?}");
    }
}
