//! Benchmark of `overhead`'s statistical targets on the real machine (root):
//! - sensitivity: two hooks whose p50 costs differ by about 35 ns (2 vs 4 hash-map lookups per
//!   openat) compared `--compare`: how many of R runs get the right sign with an interval that
//!   excludes 0 (target ≥ 9 of 10);
//! - noise floor: `--aa` runs whose p50 (and p99) interval holds 0 (target ≥ 19 of 20);
//! - the wall time of each run (target for a default run: under 30 s).
//!
//! Run: `scripts/overhead-targets.sh [COMPARE_RUNS=10] [AA_RUNS=20] [-- extra overhead args]`.

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

/// (p50 lo, p50 hi, p50 delta, p99 lo, p99 hi, seconds)
fn one(args: &[String], dir: &Path) -> Option<(f64, f64, f64, f64, f64, f64)> {
    let t = Instant::now();
    let out = Command::new(bin())
        .arg("overhead")
        .args(args)
        .args(["--json", "--stats-rounds", "0"])
        .current_dir(dir)
        .output()
        .ok()?;
    let secs = t.elapsed().as_secs_f64();
    if !out.status.success() {
        eprintln!("run failed: {}", String::from_utf8_lossy(&out.stderr));
        return None;
    }
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).ok()?;
    let d = |q: f64| {
        v["comparison"]["diffs"]
            .as_array()?
            .iter()
            .find(|d| d["q"] == q)
            .cloned()
    };
    let (p50, p99) = (d(50.0)?, d(99.0)?);
    let f = |x: &serde_json::Value, k: &str| x[k].as_f64().unwrap_or(f64::NAN);
    Some((
        f(&p50, "lo"),
        f(&p50, "hi"),
        f(&p50, "delta"),
        f(&p99, "lo"),
        f(&p99, "hi"),
        secs,
    ))
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let split = args.iter().position(|a| a == "--").unwrap_or(args.len());
    let compare_runs: usize = args
        .first()
        .filter(|_| split > 0)
        .and_then(|a| a.parse().ok())
        .unwrap_or(10);
    let aa_runs: usize = args
        .get(1)
        .filter(|_| split > 1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(20);
    let extra: Vec<String> = args.iter().skip(split + 1).cloned().collect();
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("a.bpf.o"), ebpf_prof::bpf::HOOK_LOOKUPS_A).expect("write");
    std::fs::write(dir.path().join("b.bpf.o"), ebpf_prof::bpf::HOOK_LOOKUPS_B).expect("write");

    let mut cmp: Vec<String> = ["--load", "a.bpf.o", "--compare", "b.bpf.o"]
        .map(String::from)
        .to_vec();
    cmp.extend(extra.iter().cloned());
    let mut detected = 0;
    let mut times = Vec::new();
    for i in 1..=compare_runs {
        let Some((lo, hi, d, _, _, s)) = one(&cmp, dir.path()) else {
            continue;
        };
        times.push(s);
        let ok = lo > 0.0;
        detected += usize::from(ok);
        println!(
            "compare {i:>2}: Δp50 {d:+.0} ns [{lo:+.0}, {hi:+.0}] {} ({s:.1} s)",
            if ok { "detected" } else { "not detected" }
        );
    }
    let mut aa: Vec<String> = vec!["--aa".into()];
    aa.extend(extra.iter().cloned());
    let (mut held50, mut held99) = (0, 0);
    for i in 1..=aa_runs {
        let Some((lo, hi, d, lo99, hi99, s)) = one(&aa, dir.path()) else {
            continue;
        };
        times.push(s);
        held50 += usize::from(lo <= 0.0 && hi >= 0.0);
        held99 += usize::from(lo99 <= 0.0 && hi99 >= 0.0);
        println!("aa      {i:>2}: Δp50 {d:+.0} ns [{lo:+.0}, {hi:+.0}]  p99 [{lo99:+.0}, {hi99:+.0}] ({s:.1} s)");
    }
    let max = times.iter().copied().fold(0.0, f64::max);
    println!("sensitivity (lookups_2 vs lookups_4, ~35 ns at p50): detected with the right sign in {detected} of {compare_runs} runs (target ≥ 9 of 10)");
    println!("noise floor (--aa): p50 interval held 0 in {held50} of {aa_runs} runs, p99 in {held99} of {aa_runs} (target ≥ 19 of 20)");
    println!("wall time per run: max {max:.1} s (target for a default run: < 30 s)");
}
