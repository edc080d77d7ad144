//! Benchmark of the packet path at `overhead`'s defaults: for each calibrated packet program
//! (fixtures/hooks/packet/<kind>_8.bpf.c: 8 hash look-ups per packet, then pass; the kinds are
//! xdp, tc, tcx/ingress, cgroup_skb/egress, socket, cgroup/sock_create, netfilter), the operation
//! `--op auto` chose, the programs' runs per timed operation inside the span, Δp50 with its
//! interval, and the run's wall time; then R runs of `--load xdp_0 --compare xdp_8` (the 0 and
//! 8 look-up XDP programs) and how many told them apart with the right sign (8 costs more).
//! Targets: runs ≥ 0.9 per timed operation, a p50 interval that excludes 0, ≤ 15 s a run, and
//! ≥ 9 of 10 comparisons right.
//!
//! Other root runs of ebpf-prof hold /run/ebpf-prof.lock one at a time: a run refused with
//! `--no-wait` is retried, so the wall time printed is the run's own. The load average is
//! printed before and after: other work on the machine widens the intervals.
//!
//! XDP runs three arms at the defaults (`--trivial-arm auto`): its row gives the program's cost
//! on top of a trivial XDP program, and what attaching one at all costs. `-- --trivial-arm on`
//! does the same for every kind (the measurement behind `auto`'s choice), `-- --trivial-arm
//! off` gives every kind against nothing attached.
//!
//! Run: `sudo scripts/packet-path.sh [COMPARE_RUNS=10] [-- extra overhead args]`.

#[path = "common/mod.rs"]
mod common;

use common::{load_average, run};
use serde_json::Value;
use std::path::Path;

/// The p50 row of a report: (delta, lo, hi).
fn p50(v: &Value) -> (f64, f64, f64) {
    let row = v["comparison"]["diffs"]
        .as_array()
        .and_then(|d| d.iter().find(|d| d["q"] == 50.0))
        .cloned()
        .unwrap_or(Value::Null);
    let f = |k: &str| row[k].as_f64().unwrap_or(f64::NAN);
    (f("delta"), f("lo"), f("hi"))
}

fn args(list: &[&str], extra: &[String]) -> Vec<String> {
    let mut v: Vec<String> = list.iter().map(|s| s.to_string()).collect();
    v.extend(extra.iter().cloned());
    v
}

/// One `overhead --load KIND_8` run: its row, and whether it met every target.
fn kind_row(kind: &str, extra: &[String], dir: &Path) -> (String, bool) {
    let object = format!("{kind}_8.bpf.o");
    let (out, seconds) = run(
        &args(&["overhead", "--load", &object, "--json"], extra),
        dir,
    );
    let Ok(v) = serde_json::from_slice::<Value>(&out.stdout) else {
        let err = String::from_utf8_lossy(&out.stderr);
        return (format!("{kind:<11} failed: {}", err.trim()), false);
    };
    // A three-arm run (the trivial arm) judges the program against the trivial one: its own
    // figures are under "program", what attaching at all costs under "attach".
    let three = v["program"].is_object();
    let judged = if three { &v["program"] } else { &v };
    let (delta, lo, hi) = p50(judged);
    let runs = judged["ran"]["runs_per_op"].as_f64().unwrap_or(f64::NAN);
    let op = judged["op"]["op"].as_str().unwrap_or("?").to_string();
    let mut ok = runs >= 0.9 && (lo > 0.0 || hi < 0.0) && seconds <= 15.0;
    let mut row = format!(
        "{kind:<11} {op:<9} {runs:>6.2} {delta:>+9.0} [{lo:>+6.0}, {hi:>+6.0}] {seconds:>6.1} s",
    );
    if three {
        let (a, alo, ahi) = p50(&v["attach"]);
        let trivial_runs = v["attach"]["ran"]["runs_per_op"]
            .as_f64()
            .unwrap_or(f64::NAN);
        ok &= trivial_runs >= 0.9;
        row.push_str(&format!(
            "  (on top of the trivial program; attaching it at all {a:+.0} [{alo:+.0}, {ahi:+.0}], it ran {trivial_runs:.2} times per op)"
        ));
    }
    row.push_str(if ok { "  ok" } else { "  MISSED" });
    (row, ok)
}

/// One `--load xdp_0 --compare xdp_8` run: whether it told them apart with the right sign.
fn compare_once(extra: &[String], dir: &Path) -> (String, bool) {
    let list = [
        "overhead",
        "--load",
        "xdp_0.bpf.o",
        "--compare",
        "xdp_8.bpf.o",
        "--json",
    ];
    let (out, seconds) = run(&args(&list, extra), dir);
    let Ok(v) = serde_json::from_slice::<Value>(&out.stdout) else {
        let err = String::from_utf8_lossy(&out.stderr);
        return (format!("failed: {}", err.trim()), false);
    };
    let (delta, lo, hi) = p50(&v);
    let right = lo > 0.0;
    let line = format!(
        "xdp_8 - xdp_0: {delta:+.0} ns [{lo:+.0}, {hi:+.0}] in {seconds:.1} s: {}",
        if right {
            "right sign"
        } else {
            "not told apart"
        }
    );
    (line, right)
}

fn main() {
    let mut argv: Vec<String> = std::env::args().skip(1).collect();
    let extra = match argv.iter().position(|a| a == "--") {
        Some(i) => argv.split_off(i).into_iter().skip(1).collect(),
        None => Vec::new(),
    };
    let compare_runs: usize = argv.first().and_then(|s| s.parse().ok()).unwrap_or(10);
    let dir = tempfile::tempdir().expect("temp dir");
    for (name, bytes) in ebpf_prof::bpf::PACKET_HOOKS {
        std::fs::write(dir.path().join(format!("{name}.bpf.o")), bytes).expect("write hook");
    }
    println!("load average before: {}", load_average());
    println!("kind        operation  runs/op   Δp50 ns [99% CI]        wall");
    let mut all = true;
    for kind in [
        "xdp",
        "tc",
        "tcx",
        "cgroup_skb",
        "socket",
        "sock_create",
        "netfilter",
    ] {
        let (row, ok) = kind_row(kind, &extra, dir.path());
        println!("{row}");
        all &= ok;
    }
    let mut right = 0;
    for _ in 0..compare_runs {
        let (line, ok) = compare_once(&extra, dir.path());
        println!("{line}");
        right += usize::from(ok);
    }
    println!(
        "xdp 8 vs 0 look-ups told apart with the right sign in {right} of {compare_runs} runs"
    );
    println!("load average after: {}", load_average());
    all &= right * 10 >= compare_runs * 9;
    std::process::exit(if all { 0 } else { 1 });
}
