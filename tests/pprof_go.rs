//! The pprof export read by a real consumer, Go's `go tool pprof` (Debian's golang-go): a
//! perf.data recorded by hand (no perf.data.json beside it) keeps the event its own attr names,
//! in Go's CPU-profile convention, and the totals pprof shows are `report`'s.

mod common;

use common::{ebpf_prof, need_tool, run};
use std::path::Path;
use std::process::Command;

const GO: &str = "/usr/bin/go";

/// `go tool pprof ARGS FILE` in `dir`, its stdout.
fn pprof(dir: &Path, args: &[&str]) -> String {
    let mut c = Command::new(GO);
    c.arg("tool")
        .arg("pprof")
        .args(args)
        .arg("p.pb.gz")
        .current_dir(dir)
        .env("HOME", dir)
        .env("PPROF_TMPDIR", dir);
    let r = run(c);
    assert_eq!(r.code(), Some(0), "{r:?}");
    r.stdout()
}

/// The sums of the value columns of `go tool pprof -raw`'s samples (`  1   1003009: 1 2 3`).
fn raw_totals(raw: &str) -> Vec<u64> {
    let mut totals = Vec::new();
    let samples = raw.split("Samples:").nth(1).unwrap_or_default();
    for line in samples.lines().take_while(|l| !l.starts_with("Locations")) {
        let Some((values, _)) = line.split_once(':') else {
            continue;
        };
        let numbers: Vec<u64> = values
            .split_whitespace()
            .filter_map(|v| v.parse().ok())
            .collect();
        if numbers.is_empty() || numbers.len() != values.split_whitespace().count() {
            continue;
        }
        totals.resize(numbers.len(), 0);
        for (total, n) in totals.iter_mut().zip(numbers) {
            *total += n;
        }
    }
    totals
}

/// The pprof export of a cpu-clock perf.data without its run record labelled the weights (ns)
/// `samples/count`, with `Period: 0`; Go's pprof now reads `samples/count` and
/// `cpu/nanoseconds`, the period, the command's mapping first, and `report`'s totals.
#[test]
fn regression_pprof_of_a_hand_recorded_profile_reads_in_go_pprof() {
    if !need_tool(GO, "golang-go") {
        return;
    }
    let d = common::open_tempdir();
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/perf-data");
    for name in ["hook-lines.data", "hook-lines.data.kallsyms"] {
        std::fs::copy(fixtures.join(name), d.path().join(name)).unwrap();
    }
    let args = [
        "flame",
        "hook-lines.data",
        "--format",
        "pprof",
        "-o",
        "p.pb.gz",
    ];
    let r = run(ebpf_prof(&args, d.path()));
    assert_eq!(r.code(), Some(0), "{r:?}");
    let r = run(ebpf_prof(
        &["report", "--json", "hook-lines.data"],
        d.path(),
    ));
    assert_eq!(r.code(), Some(0), "{r:?}");
    let report: serde_json::Value = serde_json::from_str(&r.stdout()).unwrap();
    assert_eq!(
        report["event"], "cpu-clock:k",
        "the file's own attr names it"
    );
    assert_eq!(report["count_unit"], "ns");
    let samples = report["samples"].as_u64().unwrap();
    let weight = report["total_weight"].as_u64().unwrap();

    let raw = pprof(d.path(), &["-raw"]);
    assert!(raw.contains("PeriodType: cpu nanoseconds"), "{raw}");
    assert!(raw.contains("\nsamples/count cpu/nanoseconds\n"), "{raw}");
    let period = weight / samples;
    assert!(raw.contains(&format!("Period: {period}\n")), "{raw}");
    assert_eq!(raw_totals(&raw), [samples, weight], "{raw}");
    let mappings = raw.split("Mappings").nth(1).unwrap_or_default();
    assert!(
        mappings
            .trim_start()
            .starts_with("1: 0x0/0x0/0x0 ebpf-prof "),
        "{mappings}"
    );

    let top = pprof(d.path(), &["-top", "-sample_index=samples"]);
    assert!(top.contains("Type: samples"), "{top}");
    assert!(top.contains(&format!("of {samples} total")), "{top}");
    let top = pprof(d.path(), &["-top"]);
    assert!(top.contains("Type: cpu"), "{top}");
    assert!(
        top.contains("bpf_prog_02d72532ae93c2b5_path_check_callback"),
        "{top}"
    );
}
