//! Benchmark of `overhead`'s statistical targets on the real machine (root), at its default
//! settings (no `--rounds`, `-n`, `--target-ns`, `--max-time` or `--loads` unless given after
//! `--`):
//! - sensitivity: pairs of hooks compared with `--compare`, how many of R runs get the right
//!   sign with an interval that excludes 0: 2 vs 4 hash-map look-ups per openat (`2v4`, about
//!   40–55 ns apart on the test VM), 2 vs 3 (`2v3`, about 25 ns) and 2 hash look-ups vs 2 hash
//!   and 4 array look-ups (`2v2a`, about 14 ns); and how many of the runs' p50 intervals hold
//!   the median of the runs' estimates (coverage: an interval is a promise about the next run);
//! - noise floors: `--aa` (nothing attached on either arm), `copy` (`--load A --compare` a
//!   byte-identical copy of A) and `aa-load` (`--aa --load A`, A loaded once per arm): how
//!   many runs' intervals hold 0, per quantile, and the median width of the p50 interval;
//! - the wall time of each run (target: ≤ 15 s).
//!
//! The kinds of run are interleaved (aa, copy, aa-load, 2v4, 2v3, 2v2a, aa, …) so that a slow
//! spell of the machine falls on all of them.
//!
//! Run: `sudo scripts/overhead-targets.sh [COMPARE_RUNS=10] [AA_RUNS=20] [-- extra overhead args]`.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

fn bin() -> PathBuf {
    let exe = std::env::current_exe().expect("current exe");
    exe.parent()
        .and_then(Path::parent)
        .expect("target dir")
        .join("ebpf-prof")
}

/// One run's figures: (lo, delta, hi) per quantile p50, p90, p99, p99.9, pairs, seconds.
struct Figures {
    diffs: Vec<(f64, f64, f64)>,
    pairs: u64,
    loads: u64,
    ended: String,
    seconds: f64,
}

fn one(args: &[String], dir: &Path) -> Option<Figures> {
    let t = Instant::now();
    let out = Command::new(bin())
        .arg("overhead")
        .args(args)
        .arg("--json")
        .current_dir(dir)
        .output()
        .ok()?;
    let seconds = t.elapsed().as_secs_f64();
    if !out.status.success() {
        eprintln!("run failed: {}", String::from_utf8_lossy(&out.stderr));
        return None;
    }
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).ok()?;
    let f = |x: &serde_json::Value, k: &str| x[k].as_f64().unwrap_or(f64::NAN);
    let diffs = v["comparison"]["diffs"]
        .as_array()?
        .iter()
        .map(|d| (f(d, "lo"), f(d, "delta"), f(d, "hi")))
        .collect();
    Some(Figures {
        diffs,
        pairs: v["rounds"].as_u64().unwrap_or(0),
        loads: v["ended"]["loads"].as_u64().unwrap_or(1),
        ended: v["ended"]["reason"].as_str().unwrap_or("?").to_string(),
        seconds,
    })
}

#[derive(Default)]
struct Tally {
    runs: usize,
    detected: usize,
    wrong: usize,
    holds: [usize; 4],
    widths: Vec<f64>,
    deltas: Vec<f64>,
    intervals: Vec<(f64, f64)>,
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

/// A kind of run: its name, its arguments, whether it is an A/A (the interval must hold 0)
/// and how many runs it gets.
struct Kind {
    name: &'static str,
    args: Vec<String>,
    same_on_both_arms: bool,
    runs: usize,
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let split = args.iter().position(|a| a == "--").unwrap_or(args.len());
    let num = |i: usize, default: usize| {
        args.get(i)
            .filter(|_| split > i)
            .and_then(|a| a.parse().ok())
            .unwrap_or(default)
    };
    let extra: Vec<String> = args.iter().skip(split + 1).cloned().collect();
    let dir = objects();
    let kinds = kinds(num(0, 10), num(1, 20), &extra);
    let mut tallies: Vec<Tally> = kinds.iter().map(|_| Tally::default()).collect();
    let mut times = Vec::new();
    for k in plan(&kinds) {
        let Some(fig) = one(&kinds[k].args, dir.path()) else {
            continue;
        };
        times.push(fig.seconds);
        tallies[k].add(&kinds[k], &fig);
    }
    summary(&kinds, &tallies, times);
}

/// The kinds of run: the three A/As and the three pairs of hooks, with the runs each gets and
/// the `extra` arguments after the kind's own.
fn kinds(compare_runs: usize, aa_runs: usize, extra: &[String]) -> [Kind; 6] {
    let kind = |name, base: &[&str], same_on_both_arms, runs| Kind {
        name,
        args: base
            .iter()
            .map(|s| s.to_string())
            .chain(extra.iter().cloned())
            .collect(),
        same_on_both_arms,
        runs,
    };
    [
        kind("aa", &["--aa"], true, aa_runs),
        kind(
            "copy",
            &["--load", "a.bpf.o", "--compare", "a-copy.bpf.o"],
            true,
            aa_runs,
        ),
        kind("aa-load", &["--aa", "--load", "a.bpf.o"], true, aa_runs),
        kind(
            "2v4",
            &["--load", "a.bpf.o", "--compare", "b.bpf.o"],
            false,
            compare_runs,
        ),
        kind(
            "2v3",
            &["--load", "a.bpf.o", "--compare", "mid.bpf.o"],
            false,
            compare_runs,
        ),
        kind(
            "2v2a",
            &["--load", "a.bpf.o", "--compare", "fine.bpf.o"],
            false,
            compare_runs,
        ),
    ]
}

/// A directory holding the hooks compared: 2, 4, 3 and 2 + 4 array look-ups, and a copy of
/// the first.
fn objects() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    for (name, bytes) in [
        ("a.bpf.o", ebpf_prof::bpf::HOOK_LOOKUPS_A),
        ("b.bpf.o", ebpf_prof::bpf::HOOK_LOOKUPS_B),
        ("mid.bpf.o", ebpf_prof::bpf::HOOK_LOOKUPS_MID),
        ("fine.bpf.o", ebpf_prof::bpf::HOOK_LOOKUPS_FINE),
        ("a-copy.bpf.o", ebpf_prof::bpf::HOOK_LOOKUPS_A),
    ] {
        std::fs::write(dir.path().join(name), bytes).expect("write");
    }
    dir
}

/// The order of the runs, as indices into `kinds`: one of each kind in turn while it has runs
/// left, so that a slow spell of the machine falls on all of them.
fn plan(kinds: &[Kind]) -> Vec<usize> {
    let most = kinds.iter().map(|k| k.runs).max().unwrap_or(0);
    (0..most)
        .flat_map(|round| {
            kinds
                .iter()
                .enumerate()
                .filter(move |(_, k)| round < k.runs)
                .map(|(i, _)| i)
        })
        .collect()
}

impl Tally {
    /// Count one run of `kind` and print its line.
    fn add(&mut self, kind: &Kind, fig: &Figures) {
        self.runs += 1;
        let (lo, d, hi) = fig.diffs[0];
        self.widths.push(hi - lo);
        self.deltas.push(d);
        self.intervals.push((lo, hi));
        for (q, &(l, _, h)) in fig.diffs.iter().enumerate().take(4) {
            self.holds[q] += usize::from(l <= 0.0 && 0.0 <= h);
        }
        self.detected += usize::from(lo > 0.0);
        self.wrong += usize::from(hi < 0.0);
        let verdict = match (kind.same_on_both_arms, lo > 0.0, hi < 0.0) {
            (true, false, false) => "holds 0",
            (true, _, _) => "EXCLUDES 0",
            (false, true, _) => "detected",
            (false, _, true) => "WRONG SIGN",
            _ => "not detected",
        };
        println!(
            "{:<8} Δp50 {d:+6.1} ns [{lo:+6.1}, {hi:+6.1}] width {:5.1}  {verdict:<12} {} pairs over {} loads, ended by {}, {:.1} s",
            kind.name,
            hi - lo,
            fig.pairs,
            fig.loads,
            fig.ended,
            fig.seconds
        );
    }

    /// How many of the runs' p50 intervals hold the median of the runs' estimates.
    fn hold_the_median(&self) -> usize {
        let m = median(self.deltas.clone());
        self.intervals
            .iter()
            .filter(|(lo, hi)| *lo <= m && m <= *hi)
            .count()
    }
}

/// The figures against their targets.
fn summary(kinds: &[Kind], tallies: &[Tally], times: Vec<f64>) {
    println!();
    for (kind, t) in kinds.iter().zip(tallies) {
        let holds = format!(
            "p50 {} / p90 {} / p99 {} / p99.9 {} of {}",
            t.holds[0], t.holds[1], t.holds[2], t.holds[3], t.runs
        );
        let width = median(t.widths.clone());
        if kind.same_on_both_arms {
            println!(
                "{:<8} the interval held 0 in {holds} runs (target ≥ 19 of 20 at p50; with copy ≥ 18 of 20 at p90 and p99); median Δp50 {:+.1} ns, median p50 width {width:.1} ns",
                kind.name,
                median(t.deltas.clone())
            );
        } else {
            println!(
                "{:<8} median Δp50 {:+.1} ns: told apart with the right sign in {} of {} runs, wrong sign {}; the intervals held the runs' median estimate in {} of {} (coverage); median p50 width {width:.1} ns",
                kind.name,
                median(t.deltas.clone()),
                t.detected,
                t.runs,
                t.wrong,
                t.hold_the_median(),
                t.runs
            );
        }
    }
    let max = times.iter().copied().fold(0.0, f64::max);
    println!(
        "wall time per run: median {:.1} s, max {max:.1} s (target ≤ 15 s)",
        median(times)
    );
}
