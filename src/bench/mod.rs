//! The pinned harness, after the reference's four decisions: the clock is
//! `clock_gettime(CLOCK_MONOTONIC)` through the vDSO (no syscall per reading), the operation is
//! the raw syscall (`syscall(SYS_openat, …)`, no libc wrapper), the sample buffer is mmapped with
//! MAP_POPULATE, mlocked and pre-touched (no page fault in the loop), and nothing is printed until
//! the loop is over. Cleanup (close) happens after the second clock reading, outside the span.

mod buffer;
mod connect;
pub mod op;
pub mod pinned;
pub mod serve;
mod workers;
pub mod workingset;

use crate::error::usage;
use crate::stats::Summary;
use anyhow::Result;
use buffer::SampleBuffer;
use std::io::Write;
use std::path::PathBuf;

pub use op::{Op, OpKind};

/// What to run.
#[derive(Debug, Clone)]
pub struct BenchOptions {
    /// The operation timed in the loop.
    pub op: OpKind,
    /// Iterations, warm-up included.
    pub iterations: usize,
    /// Leading fraction of samples dropped as warm-up (0.0..1.0).
    pub warmup_fraction: f64,
    /// Distinct files the openat loop cycles over (1: just the path).
    pub paths: usize,
    /// Take the working set from this directory instead of making temp files.
    pub dir: Option<std::path::PathBuf>,
    /// Loops run at once, each pinned to its own CPU of the allowed set.
    pub workers: usize,
    /// Leave the timed operation out: only the calls outside the span (the close of each
    /// openat, on no fd), for counting how often hooks run outside it.
    pub untimed_only: bool,
}

impl BenchOptions {
    /// One worker timing openat of one path: the reference's bench.
    pub fn openat(path: impl Into<std::path::PathBuf>, iterations: usize) -> BenchOptions {
        BenchOptions {
            op: OpKind::Openat(path.into()),
            iterations,
            warmup_fraction: 0.1,
            paths: 1,
            dir: None,
            workers: 1,
            untimed_only: false,
        }
    }
}

/// The outcome of one loop.
#[derive(Debug, Clone)]
pub struct BenchResult {
    /// Latencies in ns of the kept samples, in loop order.
    pub samples: Vec<u64>,
    /// How many leading samples were dropped as warm-up.
    pub dropped: usize,
    /// Whether the buffer could be mlocked (RLIMIT_MEMLOCK may forbid it).
    pub locked: bool,
}

/// Reads CLOCK_MONOTONIC in ns. glibc answers it from the vDSO: no system call.
#[inline(always)]
pub fn now_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: ts is a valid, writable timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Validate options before anything runs.
pub fn validate(opts: &BenchOptions) -> Result<()> {
    if opts.iterations == 0 {
        return Err(usage("-n must be at least 1"));
    }
    if opts.paths == 0 || opts.workers == 0 {
        return Err(usage("--paths and --workers must be at least 1"));
    }
    if opts.op == OpKind::Connect && (opts.paths > 1 || opts.dir.is_some()) {
        return Err(usage("--paths and --dir are for --op openat"));
    }
    if !(0.0..1.0).contains(&opts.warmup_fraction) {
        return Err(usage(format!(
            "--warmup-fraction {} is outside [0, 1): give e.g. 0.1 to drop the first 10%",
            opts.warmup_fraction
        )));
    }
    Ok(())
}

/// Run the loop(s): prepare the working set and the operation (errors out before the loop if
/// it cannot run once), time `iterations` runs per worker into locked buffers, and return each
/// worker's kept samples.
pub fn run(opts: &BenchOptions) -> Result<Vec<BenchResult>> {
    validate(opts)?;
    let (prepared, _ws) = prepare(opts)?;
    workers::run(opts, &prepared)
}

/// Resolve the operation and its working set (held until the loops are done).
fn prepare(opts: &BenchOptions) -> Result<(Prepared, Option<workingset::WorkingSet>)> {
    use workingset::WorkingSet;
    let ws = match (&opts.op, &opts.dir) {
        (OpKind::Connect, _) => return Ok((Prepared::Connect, None)),
        (OpKind::Openat(_), Some(d)) => WorkingSet::from_dir(d, opts.paths)?,
        (OpKind::Openat(p), None) if opts.paths == 1 => WorkingSet::single(p),
        (OpKind::Openat(_), None) => WorkingSet::create(opts.paths)?,
    };
    Ok((Prepared::Openat(ws.paths.clone()), Some(ws)))
}

/// One worker's loop on the current thread.
fn one_loop(
    opts: &BenchOptions,
    prepared: &Prepared,
    start: usize,
    ready: &dyn Fn(),
) -> Result<BenchResult> {
    let mut buf = SampleBuffer::new(opts.iterations)?;
    let locked = buf.locked();
    with_op(prepared, start, opts.untimed_only, |run_loop| {
        ready();
        run_loop(buf.as_mut_slice())
    })?;
    let dropped = (opts.iterations as f64 * opts.warmup_fraction) as usize;
    let samples = buf.as_mut_slice()[dropped..]
        .iter()
        .map(|&d| u64::from(d))
        .collect();
    Ok(BenchResult {
        samples,
        dropped,
        locked,
    })
}

/// An operation ready to be made, per worker: the working set resolved to paths.
#[derive(Debug, Clone)]
pub enum Prepared {
    Openat(Vec<PathBuf>),
    Connect,
}

/// Prepare the operation and hand it to `f` as a concrete type, so the timed loop is
/// monomorphised (no indirect call in the span). `start` staggers workers over a working set;
/// `untimed_only` leaves the timed operation out.
pub fn with_op<R>(
    kind: &Prepared,
    start: usize,
    untimed_only: bool,
    f: impl FnOnce(&mut dyn FnMut(&mut [u32])) -> R,
) -> Result<R> {
    fn go<O: Op, R>(
        op: O,
        untimed_only: bool,
        f: impl FnOnce(&mut dyn FnMut(&mut [u32])) -> R,
    ) -> R {
        if untimed_only {
            let mut op = op::UntimedOnly(op);
            f(&mut |d| timed_loop(&mut op, d))
        } else {
            let mut op = op;
            f(&mut |d| timed_loop(&mut op, d))
        }
    }
    match kind {
        Prepared::Openat(p) => Ok(go(op::Openat::new(p, start)?, untimed_only, f)),
        Prepared::Connect => Ok(go(connect::Connect::new()?, untimed_only, f)),
    }
}

/// The timed loop itself: two clock readings around the operation, cleanup outside the span.
#[inline(never)]
fn timed_loop<O: Op>(op: &mut O, d: &mut [u32]) {
    for slot in d.iter_mut() {
        op.setup();
        let t0 = now_ns();
        let ret = op.run();
        let t1 = now_ns();
        op.cleanup(ret);
        *slot = u32::try_from(t1.saturating_sub(t0)).unwrap_or(u32::MAX);
    }
}

/// Write one latency per line.
pub fn write_samples(out: &mut impl Write, samples: &[u64]) -> std::io::Result<()> {
    let mut w = std::io::BufWriter::with_capacity(1 << 16, out);
    for s in samples {
        writeln!(w, "{s}")?;
    }
    w.flush()
}

/// Parse a samples file: one non-negative integer (ns) per line; blank lines are ignored.
pub fn parse_samples(text: &str, origin: &str) -> Result<Vec<u64>> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let t = line.trim();
        if t.is_empty() {
            continue;
        }
        let v = t.parse().map_err(|_| {
            usage(format!(
                "{origin}:{}: {t:?} is not a latency in ns: the benchmark must print one integer per line",
                i + 1
            ))
        })?;
        out.push(v);
    }
    if out.is_empty() {
        return Err(usage(format!(
            "{origin}: no samples: the benchmark must print one latency in ns per line"
        )));
    }
    Ok(out)
}

/// The summary lines for stderr: one per worker, and the merged one when there are several.
pub fn summary_lines(rs: &[BenchResult]) -> Vec<String> {
    let line = |samples: &[u64], dropped: usize| match Summary::of(samples) {
        Some(s) => format!("{s}; {dropped} warm-up samples dropped"),
        None => "no samples kept".into(),
    };
    if rs.len() == 1 {
        return vec![line(&rs[0].samples, rs[0].dropped)];
    }
    let mut v: Vec<String> = rs
        .iter()
        .enumerate()
        .map(|(i, r)| format!("worker {i}: {}", line(&r.samples, r.dropped)))
        .collect();
    let all: Vec<u64> = rs.iter().flat_map(|r| r.samples.iter().copied()).collect();
    v.push(format!(
        "merged: {}",
        line(&all, rs.iter().map(|r| r.dropped).sum())
    ));
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn samples_round_trip_and_reject_garbage() {
        let mut v = Vec::new();
        write_samples(&mut v, &[1, 22, 333]).unwrap();
        let text = String::from_utf8(v).unwrap();
        assert_eq!(parse_samples(&text, "x").unwrap(), vec![1, 22, 333]);
        let e = parse_samples("12\nabc\n", "f").unwrap_err().to_string();
        assert!(e.contains("f:2"), "{e}");
        assert!(parse_samples("\n\n", "f").is_err());
        assert!(parse_samples("-5\n", "f").is_err());
    }

    #[test]
    fn warmup_fraction_is_checked() {
        let mut o = BenchOptions {
            warmup_fraction: 1.0,
            ..BenchOptions::openat("/etc/hostname", 10)
        };
        assert!(validate(&o).is_err());
        o.warmup_fraction = 0.1;
        assert!(validate(&o).is_ok());
        o.iterations = 0;
        assert!(validate(&o).is_err());
    }

    #[test]
    fn loop_drops_warmup_and_times_something() {
        let o = BenchOptions::openat("/etc/hostname", 1000);
        let r = run(&o).unwrap().remove(0);
        assert_eq!(r.samples.len(), 900);
        assert_eq!(r.dropped, 100);
        assert!(
            r.samples.iter().all(|&s| s > 0),
            "an openat takes more than 0 ns"
        );
    }

    #[test]
    fn connect_loop_runs_without_exhausting_ports() {
        let o = BenchOptions {
            op: OpKind::Connect,
            ..BenchOptions::openat("/", 3000)
        };
        let r = run(&o).unwrap().remove(0);
        assert_eq!(r.samples.len(), 2700);
        assert!(r.samples.iter().all(|&s| s > 0));
    }

    #[test]
    fn working_set_and_workers() {
        let o = BenchOptions {
            paths: 64,
            workers: 2,
            ..BenchOptions::openat("/etc/hostname", 2000)
        };
        let r = run(&o).unwrap();
        assert_eq!(r.len(), 2);
        assert!(r.iter().all(|w| w.samples.len() == 1800));
        assert_eq!(summary_lines(&r).len(), 3);
        let left = std::fs::read_dir(std::env::temp_dir())
            .unwrap()
            .flatten()
            .filter(|e| {
                e.file_name()
                    .to_string_lossy()
                    .starts_with(&format!("ebpf-prof-ws-{}-", std::process::id()))
            })
            .count();
        assert_eq!(left, 0, "temp working set removed");
    }

    #[test]
    fn unopenable_path_fails_before_the_loop() {
        let o = BenchOptions::openat("/nonexistent/x", 100000);
        let e = run(&o).unwrap_err().to_string();
        assert!(e.contains("/nonexistent/x"), "{e}");
    }
}
