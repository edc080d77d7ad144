//! The pinned harness, after the four decisions of the reference (README.md, "The reference"): the
//! clock is `clock_gettime(CLOCK_MONOTONIC)` through the vDSO (no syscall per reading), the
//! operation is the raw syscall (`syscall(SYS_openat, …)`, no libc wrapper), the sample buffer is
//! mmapped with MAP_POPULATE, mlocked and pre-touched (no page fault in the loop), and nothing is
//! printed until the loop is over. Cleanup (close) happens after the second clock reading, outside
//! the span.

mod buffer;
pub mod choose;
mod connect;
pub mod entry;
mod fileops;
pub mod kind;
mod netops;
pub mod op;
pub mod operation;
pub mod pinned;
mod procops;
pub mod scratch;
pub mod serve;
mod sock;
mod tcpveth;
mod vethops;
mod workers;
pub mod workingset;

use crate::error::usage;
use crate::stats::Summary;
use anyhow::Result;
use buffer::SampleBuffer;
use std::io::Write;
use std::path::{Path, PathBuf};

pub use kind::OpKind;
pub use op::Op;
pub use operation::Operation;
pub use vethops::{in_namespace, socket_filter_handover};

/// The file `--path` names unless told otherwise.
pub const DEFAULT_PATH: &str = "/etc/hostname";

/// The most iterations of one loop: its samples are one mlocked buffer of 8 bytes each
/// (800 MB at the most), filled at about a microsecond an iteration.
pub const MAX_ITERATIONS: usize = 100_000_000;
/// The most files of an openat working set: each is made (or opened) before the loop.
pub const MAX_PATHS: usize = 100_000;
/// The most loops at once, one per CPU: the kernel's largest CPU count (`CONFIG_NR_CPUS`).
pub const MAX_WORKERS: usize = 8192;

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
            op: OpKind::openat(path),
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
    if !(1..=MAX_ITERATIONS).contains(&opts.iterations) {
        return Err(usage(format!("-n must be from 1 to {MAX_ITERATIONS}")));
    }
    if !(1..=MAX_PATHS).contains(&opts.paths) || !(1..=MAX_WORKERS).contains(&opts.workers) {
        return Err(usage(format!(
            "--paths must be from 1 to {MAX_PATHS}, --workers from 1 to {MAX_WORKERS}"
        )));
    }
    let working_set = opts.op.operation().takes_working_set();
    if !working_set && (opts.paths > 1 || opts.dir.is_some()) {
        return Err(usage(format!(
            "--paths and --dir are for --op openat, not --op {}",
            opts.op.operation()
        )));
    }
    if !(0.0..1.0).contains(&opts.warmup_fraction) {
        return Err(usage(format!(
            "--warmup-fraction {} is outside [0, 1): give e.g. 0.1 to drop the first 10%",
            opts.warmup_fraction
        )));
    }
    let opens = matches!(opts.op.operation(), Operation::Openat | Operation::Read);
    if let (true, Some(path)) = (opens, opts.op.path()) {
        check_operand(path)?;
    }
    Ok(())
}

/// The file an operation opens must be a regular file or a directory: opening a FIFO
/// would block the loop before its first operation, and a device may act on being opened.
fn check_operand(path: &Path) -> Result<()> {
    // A path that cannot be read is reported by the operation's own first try.
    let Ok(meta) = std::fs::metadata(path) else {
        return Ok(());
    };
    if meta.is_file() || meta.is_dir() {
        return Ok(());
    }
    Err(usage(format!(
        "--path {} is not a regular file or a directory (a FIFO, a socket or a device): give a file such as /etc/hostname",
        path.display()
    )))
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
    let single = |paths: Vec<PathBuf>| Prepared {
        kind: opts.op.clone(),
        paths,
    };
    let working_set = opts.op.operation().takes_working_set();
    let Some(path) = opts.op.path().filter(|_| working_set) else {
        let paths = opts.op.path().map(Path::to_path_buf).into_iter().collect();
        return Ok((single(paths), None));
    };
    let ws = match (&opts.dir, opts.paths) {
        (Some(d), _) => WorkingSet::from_dir(d, opts.paths)?,
        (None, 1) => WorkingSet::single(path),
        (None, _) => WorkingSet::create(opts.paths)?,
    };
    Ok((single(ws.paths.clone()), Some(ws)))
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

/// An operation ready to be made, per worker: the operation, and its files (the working set
/// resolved to paths, `--path`, or none).
#[derive(Debug, Clone)]
pub struct Prepared {
    kind: OpKind,
    paths: Vec<PathBuf>,
}

impl Prepared {
    /// How many files the workers spread their starts over.
    fn spread(&self) -> usize {
        self.paths.len().max(1)
    }
}

/// Prepare the operation and hand it to `f` as a concrete type, so the timed loop is
/// monomorphised (no indirect call in the span). `start` staggers workers over a working set;
/// `untimed_only` leaves the timed operation out.
pub fn with_op<R>(
    prepared: &Prepared,
    start: usize,
    untimed_only: bool,
    f: impl FnOnce(&mut dyn FnMut(&mut [u32])) -> R,
) -> Result<R> {
    let op = prepared.kind.operation();
    let setup = entry::Setup {
        name: op.name(),
        paths: &prepared.paths,
        start,
        netns: prepared.kind.netns(),
    };
    op.time_with(&setup, Looper { untimed_only, f })
}

/// Runs the timed loop over the body it is given, or over its calls outside the span only.
struct Looper<F> {
    untimed_only: bool,
    f: F,
}

impl<R, F: FnOnce(&mut dyn FnMut(&mut [u32])) -> R> entry::Timer for Looper<F> {
    type Output = R;

    fn time<O: Op>(self, op: O) -> R {
        if self.untimed_only {
            let mut op = op::UntimedOnly(op);
            (self.f)(&mut |d| timed_loop(&mut op, d))
        } else {
            let mut op = op;
            (self.f)(&mut |d| timed_loop(&mut op, d))
        }
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
            op: OpKind::new(Operation::Connect, PathBuf::new()),
            ..BenchOptions::openat("/", 3000)
        };
        let r = run(&o).unwrap().remove(0);
        assert_eq!(r.samples.len(), 2700);
        assert!(r.samples.iter().all(|&s| s > 0));
    }

    #[test]
    fn every_operation_runs_timed_and_without_its_timed_call() {
        // The packet operations need a network namespace made as root: tests/packet.rs.
        let plain = Operation::ALL
            .into_iter()
            .filter(|op| !OpKind::new(*op, PathBuf::new()).needs_netns());
        for op in plain {
            let o = BenchOptions {
                op: OpKind::new(op, "/etc/hostname".into()),
                ..BenchOptions::openat("/", 400)
            };
            let r = run(&o).unwrap_or_else(|e| panic!("{op}: {e:#}")).remove(0);
            assert_eq!(r.samples.len(), 360, "{op}");
            assert!(r.samples.iter().all(|&s| s > 0), "{op}: a call takes time");
            let untimed = BenchOptions {
                untimed_only: true,
                ..o.clone()
            };
            let u = run(&untimed).unwrap().remove(0);
            let median = |v: &[u64]| {
                let mut v = v.to_vec();
                v.sort_unstable();
                v[v.len() / 2]
            };
            assert!(
                median(&u.samples) < median(&r.samples),
                "{op}: without the timed call the span is shorter"
            );
        }
    }

    #[test]
    fn the_socket_and_file_loops_leave_nothing_behind() {
        let fds = || std::fs::read_dir("/proc/self/fd").unwrap().count();
        let before = fds();
        for op in [
            Operation::Accept,
            Operation::Sendto,
            Operation::Recvfrom,
            Operation::Unlink,
        ] {
            let o = BenchOptions {
                op: OpKind::new(op, "/etc/hostname".into()),
                ..BenchOptions::openat("/", 3000)
            };
            run(&o).unwrap_or_else(|e| panic!("{op}: {e:#}"));
        }
        // Other tests of this binary open files meanwhile: a leak would be thousands.
        assert!(fds() < before + 50, "{before} fds before, {} after", fds());
    }

    #[test]
    fn workers_each_make_their_own_files_and_children() {
        for op in [
            Operation::Unlink,
            Operation::ExecMissing,
            Operation::Exec,
            Operation::Fork,
        ] {
            let o = BenchOptions {
                op: OpKind::new(op, "/".into()),
                workers: 2,
                ..BenchOptions::openat("/", 200)
            };
            let r = run(&o).unwrap_or_else(|e| panic!("{op}: {e:#}"));
            assert!(r.iter().all(|w| w.samples.len() == 180), "{op}");
        }
    }

    #[test]
    fn paths_are_for_openat_only() {
        let o = BenchOptions {
            op: OpKind::new(Operation::Exec, PathBuf::new()),
            paths: 3,
            ..BenchOptions::openat("/", 10)
        };
        let e = validate(&o).unwrap_err().to_string();
        assert!(e.contains("not --op exec"), "{e}");
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
