//! Running one round of the benchmark, pinned and at SCHED_FIFO as in `record`, and reading
//! back its samples; and measuring what one clock reading costs.

use crate::bench::{now_ns, parse_samples};
use crate::error::child;
use anyhow::{Context, Result};
use std::ffi::OsString;
use std::process::{Command, Stdio};

/// How the benchmark is run each round.
#[derive(Debug, Clone)]
pub struct BenchRun {
    /// The benchmark argv (the built-in bench, or the user's).
    pub command: Vec<OsString>,
    /// The CPUs it may run on (one per worker).
    pub cpus: Vec<u32>,
    /// SCHED_FIFO priority; `None` without chrt.
    pub priority: Option<u8>,
    /// Whether `command` is the built-in bench (which can leave its timed operation out).
    pub builtin: bool,
}

impl BenchRun {
    /// The full argv: `taskset -c CPU [chrt -f P] CMD…`.
    pub fn argv(&self) -> Vec<OsString> {
        crate::bench::pinned::argv(&self.cpus, self.priority, &self.command)
    }

    /// The built-in bench with `--untimed-only`: only what the loop does outside the span.
    pub fn untimed(&self) -> Option<BenchRun> {
        self.builtin.then(|| {
            let mut b = self.clone();
            b.command.push("--untimed-only".into());
            b
        })
    }

    /// The full command line, for messages.
    pub fn line(&self) -> String {
        self.argv()
            .iter()
            .map(|a| a.to_string_lossy())
            .collect::<Vec<_>>()
            .join(" ")
    }

    /// Run one round; the samples in loop order.
    pub fn run(&self, label: &str) -> Result<Vec<u64>> {
        let argv = self.argv();
        let out = Command::new(&argv[0])
            .args(&argv[1..])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .output()
            .context("cannot start taskset (install util-linux)")?;
        let line = self.line();
        if !out.status.success() {
            let err = String::from_utf8_lossy(&out.stderr).trim().to_string();
            if let Some(e) = crate::bench::pinned::refused(&err, &self.cpus, self.priority) {
                return Err(e);
            }
            return Err(child(format!(
                "the benchmark failed ({}) in round {label}: `{line}`: {err}",
                out.status
            )));
        }
        parse_samples(
            &String::from_utf8_lossy(&out.stdout),
            &format!("benchmark output of round {label}"),
        )
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
        let own = BenchRun { builtin: true, ..r };
        let u = own.untimed().unwrap();
        assert_eq!(u.command.last().unwrap(), "--untimed-only");
    }

    #[test]
    fn clock_cost_is_plausible() {
        let c = clock_cost();
        assert!(c.read_ns > 0.0 && c.read_ns < 10_000.0, "{c:?}");
    }
}
