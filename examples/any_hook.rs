//! Benchmark of `overhead --load` on hooks of other events than openat, at its defaults (no
//! `--op`): for each bundled hook of fixtures/hooks/on_<event>.bpf.c, the operation `--op auto`
//! chose, the programs' runs per timed operation inside the span, Δp50 with its interval, and
//! the run's wall time. Targets: runs ≥ 0.9 per timed operation and a p50 interval that
//! excludes 0 for the execve, newfstatat, sendto and sched_process_fork hooks; for the vhangup
//! hook (an event no operation fires) the verdict and the JSON say the programs did not run,
//! and the run exits 0; every run ≤ 15 s. Then `record --load` of the execve hook and `report`
//! of it: the hook's program among the profile's frames.
//!
//! Other root runs of ebpf-prof hold /run/ebpf-prof.lock one at a time: a run refused with
//! `--no-wait` is retried, so the wall time printed is the run's own. The load average is
//! printed before and after: other work on the machine widens the intervals.
//!
//! Run: `sudo scripts/any-hook.sh [RUNS_PER_HOOK=1] [-- extra overhead args]`.

#[path = "common/mod.rs"]
mod common;

use common::{bin, load_average, run};
use serde_json::Value;
use std::path::Path;
use std::process::Command;

/// One `overhead --load HOOK` run: its row of the table, and whether it met its target.
fn overhead_row(hook: &str, fires: bool, extra: &[String], dir: &Path) -> (String, bool) {
    let mut args: Vec<String> = ["overhead", "--load", &format!("{hook}.bpf.o"), "--json"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    args.extend(extra.iter().cloned());
    let (out, seconds) = run(&args, dir);
    let Ok(v) = serde_json::from_slice::<Value>(&out.stdout) else {
        let err = String::from_utf8_lossy(&out.stderr);
        return (format!("{hook:<14} failed: {}", err.trim()), false);
    };
    let p50 = v["comparison"]["diffs"]
        .as_array()
        .and_then(|d| d.iter().find(|d| d["q"] == 50.0))
        .cloned()
        .unwrap_or(Value::Null);
    let f = |k: &str| p50[k].as_f64().unwrap_or(f64::NAN);
    let runs = v["ran"]["runs_per_op"].as_f64().unwrap_or(f64::NAN);
    let excludes = f("lo") > 0.0 || f("hi") < 0.0;
    let not_run = v["ran"]["inside"] == "not_run"
        && v["verdict"]
            .as_str()
            .is_some_and(|s| s.contains("did not run"));
    let met = seconds <= 15.0
        && out.status.success()
        && if fires {
            runs >= 0.9 && excludes
        } else {
            not_run
        };
    let row = format!(
        "{hook:<14} {:<12} {runs:>8.2} {:>7.0} [{:>5.0}, {:>5.0}] {:>6} {:>6.1} s  {}",
        v["op"]["op"].as_str().unwrap_or("?"),
        f("delta"),
        f("lo"),
        f("hi"),
        v["rounds"].as_u64().unwrap_or(0),
        seconds,
        if met { "ok" } else { "MISSED" }
    );
    (row, met)
}

/// `record --load` of the execve hook, then `report --json`: the program's share of the samples.
fn record_row(dir: &Path) -> (String, bool) {
    let args: Vec<String> = [
        "record",
        "--load",
        "on_execve.bpf.o",
        "-F",
        "4999",
        "-n",
        "100000",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let (out, seconds) = run(&args, dir);
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        return (format!("record failed: {}", err.trim()), false);
    }
    let report = Command::new(bin())
        .args(["report", "--json", "perf.data"])
        .current_dir(dir)
        .output()
        .expect("report");
    let v: Value = serde_json::from_slice(&report.stdout).unwrap_or(Value::Null);
    let share = v["programs"]
        .as_array()
        .and_then(|p| p.iter().find(|p| p["name"] == "on_execve"))
        .and_then(|p| p["percent"].as_f64())
        .unwrap_or(0.0);
    let row = format!(
        "record --load on_execve.bpf.o (--op auto), report: on_execve in {share:.1}% of the samples ({seconds:.1} s)"
    );
    (row, share > 0.0)
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let split = args.iter().position(|a| a == "--").unwrap_or(args.len());
    let runs: usize = args
        .first()
        .filter(|_| split > 0)
        .and_then(|a| a.parse().ok())
        .unwrap_or(1);
    let extra: Vec<String> = args.iter().skip(split + 1).cloned().collect();
    let dir = tempfile::tempdir().expect("tempdir");
    for (name, _, bytes) in ebpf_prof::bpf::EVENT_HOOKS {
        std::fs::write(dir.path().join(format!("{name}.bpf.o")), bytes).expect("write");
    }
    println!("load average before: {}", load_average());
    println!("hook           op           runs/op    Δp50 [99% interval]  pairs   wall");
    let mut missed = 0;
    for _ in 0..runs {
        for (name, _, _) in ebpf_prof::bpf::EVENT_HOOKS {
            let (row, met) = overhead_row(name, name != "on_vhangup", &extra, dir.path());
            println!("{row}");
            missed += usize::from(!met);
        }
    }
    let (row, met) = record_row(dir.path());
    println!("{row}");
    missed += usize::from(!met);
    println!("load average after: {}", load_average());
    println!("{missed} target(s) missed");
}
