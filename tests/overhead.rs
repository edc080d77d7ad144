//! `overhead` end to end, as root, with the sample hook and the real kernel: the attached arm
//! costs more, the JSON holds every figure, the plot is a valid SVG, gates exit 1 only when
//! confidently over, and nothing stays attached, also after a run that fails midway.

mod common;
use common::*;
use std::path::Path;
use std::sync::Mutex;

static SERIAL: Mutex<()> = Mutex::new(());

fn hook_loaded() -> bool {
    bpf_symbol_loaded("_tail_call_security_check")
}

fn with_hook(dir: &Path) {
    std::fs::write(dir.join("hook.bpf.o"), ebpf_prof::bpf::SAMPLE_HOOK).unwrap();
}

/// The rounds of each arm [`overhead`] runs: five, or under emulation, where their statistics
/// are not judged, the two an interval needs.
fn rounds() -> usize {
    if emulated() {
        2
    } else {
        5
    }
}

/// `overhead` at [`rounds`] rounds of each arm.
fn overhead(dir: &Path, extra: &[&str]) -> Run {
    let count = iterations(20_000);
    let rounds = rounds().to_string();
    let mut a = vec!["overhead", "--rounds", &rounds, "-n", &count];
    a.extend_from_slice(extra);
    run(ebpf_prof(&a, dir))
}

/// A well-formed XML document (every tag closed), checked with quick-xml.
fn assert_valid_xml(text: &str) {
    let mut r = quick_xml::Reader::from_str(text);
    let mut depth = 0i64;
    loop {
        match r.read_event() {
            Ok(quick_xml::events::Event::Start(_)) => depth += 1,
            Ok(quick_xml::events::Event::End(_)) => depth -= 1,
            Ok(quick_xml::events::Event::Eof) => break,
            Ok(_) => {}
            Err(e) => panic!("invalid XML at {}: {e}", r.buffer_position()),
        }
    }
    assert_eq!(depth, 0, "unbalanced tags");
}

/// Every part of the `--json` document is there; the attached arm's p50 is above the
/// baseline's, clear of zero, and the kernel saw the tail-called program run.
fn assert_the_document_holds_the_cost(v: &serde_json::Value) {
    for field in [
        "mode",
        "cpu",
        "rounds",
        "base",
        "treat",
        "comparison",
        "verdict",
        "clock",
        "kernel",
        "dispatch_gap_ns",
        "gates",
    ] {
        assert!(v.get(field).is_some(), "missing {field}: {v}");
    }
    let p50 = v["comparison"]["diffs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["q"] == 50.0)
        .unwrap()
        .clone();
    // Under emulation a round's timings are noise: the statistics are not judged there.
    if !emulated() {
        assert!(
            p50["treat"].as_f64().unwrap() > p50["base"].as_f64().unwrap(),
            "attached p50 exceeds baseline: {p50}"
        );
        assert!(
            p50["lo"].as_f64().unwrap() > 0.0,
            "the hook's cost is clear of zero: {p50}"
        );
    }
    assert!(v["clock"]["read_ns"].as_f64().unwrap() > 0.0);
    let progs = v["kernel"]["programs"].as_array().unwrap();
    assert!(
        progs
            .iter()
            .any(|p| p["name"] == "tail_call_security_check" && p["runs"].as_u64().unwrap() > 0),
        "{progs:?}"
    );
}

#[test]
#[ignore = "needs root: scripts/test.sh runs it (or as root: cargo test -- --include-ignored)"]
fn attached_costs_more_and_every_output_is_there() {
    if !need_root("attached_costs_more_and_every_output_is_there") {
        return;
    }
    let _s = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let d = tempfile::tempdir().unwrap();
    with_hook(d.path());
    let r = overhead(
        d.path(),
        &[
            "--load",
            "hook.bpf.o",
            "--json",
            "--plot",
            "cdf.svg",
            "--keep",
            "rounds",
            "--export-json",
            "export.json",
            "--export-markdown",
            "export.md",
        ],
    );
    assert_eq!(r.code(), Some(0), "{r:?}");
    let v: serde_json::Value =
        serde_json::from_str(&r.stdout()).unwrap_or_else(|e| panic!("{e}: {r:?}"));
    assert_exports_match(d.path(), &r.stdout(), &v);
    assert_the_document_holds_the_cost(&v);
    assert_valid_xml(&std::fs::read_to_string(d.path().join("cdf.svg")).unwrap());
    assert_eq!(
        std::fs::read_dir(d.path().join("rounds")).unwrap().count(),
        2 * rounds() + 1,
        "the rounds of each arm kept, and loads.json"
    );
    let loads = std::fs::read_to_string(d.path().join("rounds/loads.json")).unwrap();
    let loads: serde_json::Value = serde_json::from_str(&loads).unwrap();
    assert_eq!(
        loads, v["loads"],
        "the loads beside the rounds are the document's"
    );
    assert!(!hook_loaded());
}

#[test]
#[ignore = "needs root: scripts/test.sh runs it (or as root: cargo test -- --include-ignored)"]
fn regression_every_file_written_is_named_in_one_line() {
    if !need_root("regression_every_file_written_is_named_in_one_line") {
        return;
    }
    let _s = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let d = tempfile::tempdir().unwrap();
    let r = run(ebpf_prof(
        &[
            "overhead",
            "--aa",
            "--rounds",
            "4",
            "-n",
            "200",
            "--plot",
            "p.svg",
            "--keep",
            "kept",
            "--export-json",
            "r.json",
            "--export-markdown",
            "r.md",
        ],
        d.path(),
    ));
    assert_eq!(r.code(), Some(0), "{r:?}");
    let err = r.stderr();
    for line in [
        "ebpf-prof: wrote the plot (--plot) to p.svg",
        "ebpf-prof: wrote the JSON document (--export-json) to r.json",
        "ebpf-prof: wrote the Markdown table (--export-markdown) to r.md",
        "ebpf-prof: kept the rounds in kept: base-1.samples … base-4.samples, treat-1.samples … treat-4.samples (one latency in ns per line) and loads.json",
    ] {
        assert_eq!(err.lines().filter(|l| *l == line).count(), 1, "{line}: {r:?}");
    }
    assert!(d.path().join("kept/treat-4.samples").is_file(), "{r:?}");
    assert!(
        !r.stdout().contains("wrote"),
        "stdout holds only the table: {r:?}"
    );
}

/// `--export-json` holds what `--json` printed; `--export-markdown` its table and verdict.
fn assert_exports_match(dir: &Path, stdout: &str, v: &serde_json::Value) {
    let json = std::fs::read_to_string(dir.join("export.json")).unwrap();
    assert_eq!(json, stdout, "--export-json is the --json document");
    assert_eq!(v["schema"], 1, "{v}");
    let md = std::fs::read_to_string(dir.join("export.md")).unwrap();
    assert!(md.starts_with("**overhead (load)**"), "{md}");
    for q in ["p50", "p90", "p99", "p99.9"] {
        assert!(md.contains(&format!("\n| {q} | ")), "{q} row: {md}");
    }
    let verdict = v["verdict"].as_str().unwrap();
    assert!(md.ends_with(&format!("verdict: {verdict}\n")), "{md}");
}

#[test]
#[ignore = "needs root: scripts/test.sh runs it (or as root: cargo test -- --include-ignored)"]
fn profile_per_arm_feeds_diff() {
    if !need_root("profile_per_arm_feeds_diff") {
        return;
    }
    let _s = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let d = tempfile::tempdir().unwrap();
    with_hook(d.path());
    let r = overhead(
        d.path(),
        &[
            "--load",
            "hook.bpf.o",
            "--stats-rounds",
            "0",
            "--profile",
            "prof",
        ],
    );
    assert_eq!(r.code(), Some(0), "{r:?}");
    for f in [
        "prof/base.data",
        "prof/treat.data",
        "prof/treat.data.kallsyms",
    ] {
        assert!(d.path().join(f).exists(), "{f}: {r:?}");
    }
    let diff = run(ebpf_prof(
        &["diff", "prof/base.data", "prof/treat.data", "--text"],
        d.path(),
    ));
    assert_eq!(diff.code(), Some(0), "{diff:?}");
    assert!(
        diff.stdout().contains("path_check_callback"),
        "the hook is where the extra time goes: {diff:?}"
    );
    // `annotate` reads the treatment arm's recording: the hook's lines.
    let a = run(ebpf_prof(
        &["annotate", "--json", "prof/treat.data"],
        d.path(),
    ));
    assert_eq!(a.code(), Some(0), "{a:?}");
    let v: serde_json::Value = serde_json::from_str(&a.stdout()).unwrap();
    let callback = v["programs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "path_check_callback")
        .unwrap_or_else(|| panic!("{v}"));
    assert!(callback["percent"].as_f64().unwrap() > 0.0, "{v}");
    assert!(callback["lines"][0]["line"].as_u64().unwrap() > 0, "{v}");
    assert!(!hook_loaded());
}

#[test]
#[ignore = "needs root: scripts/test.sh runs it (or as root: cargo test -- --include-ignored)"]
fn gates_exit_1_only_when_confidently_over() {
    if !need_root("gates_exit_1_only_when_confidently_over") {
        return;
    }
    let _s = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let d = tempfile::tempdir().unwrap();
    with_hook(d.path());
    let r = overhead(
        d.path(),
        &[
            "--load",
            "hook.bpf.o",
            "--stats-rounds",
            "0",
            "--max-p50-ns",
            "1",
        ],
    );
    assert_eq!(r.code(), Some(1), "{r:?}");
    assert!(r.stderr().contains("--max-p50-ns"), "{r:?}");
    let r = overhead(
        d.path(),
        &[
            "--load",
            "hook.bpf.o",
            "--stats-rounds",
            "0",
            "--max-p50-ns",
            "1000000",
            "--max-p99-pct",
            "10000",
        ],
    );
    assert_eq!(r.code(), Some(0), "{r:?}");
    assert!(!hook_loaded());
}

#[test]
#[ignore = "needs root: scripts/test.sh runs it (or as root: cargo test -- --include-ignored)"]
fn aa_and_compare_and_attach_cmd_run() {
    if !need_root("aa_and_compare_and_attach_cmd_run") {
        return;
    }
    let _s = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let d = tempfile::tempdir().unwrap();
    with_hook(d.path());
    std::fs::write(d.path().join("a.bpf.o"), ebpf_prof::bpf::HOOK_LOOKUPS_A).unwrap();
    std::fs::write(d.path().join("b.bpf.o"), ebpf_prof::bpf::HOOK_LOOKUPS_B).unwrap();
    let r = overhead(d.path(), &["--aa", "--json"]);
    assert_eq!(r.code(), Some(0), "{r:?}");
    let v: serde_json::Value = serde_json::from_str(&r.stdout()).unwrap();
    assert_eq!(v["mode"], "aa");
    assert_eq!(
        v["comparison"]["method"],
        "median-pair-difference-sign-test"
    );
    assert_eq!(v["ended"]["reason"], "rounds");
    let r = overhead(
        d.path(),
        &["--load", "a.bpf.o", "--compare", "b.bpf.o", "--json"],
    );
    assert_eq!(r.code(), Some(0), "{r:?}");
    assert!(
        r.stderr()
            .contains("holding syscalls/sys_enter_openat registered for the whole measurement"),
        "both hooks attach sys_enter_openat: it is held, and rounds wait on its program array: {r:?}"
    );
    let v: serde_json::Value = serde_json::from_str(&r.stdout()).unwrap();
    let arms: Vec<&str> = v["kernel"]["programs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["arm"].as_str().unwrap())
        .collect();
    assert!(
        arms.contains(&"base") && arms.contains(&"treat"),
        "both hooks' own view: {arms:?}"
    );
    // Two versions of one hook share their programs' names: neither is someone else's.
    std::fs::write(d.path().join("a2.bpf.o"), ebpf_prof::bpf::HOOK_LOOKUPS_A).unwrap();
    let r = overhead(d.path(), &["--load", "a.bpf.o", "--compare", "a2.bpf.o"]);
    assert_eq!(
        r.code(),
        Some(0),
        "regression: refused as loaded by someone else: {r:?}"
    );
    let cmd = format!("{} hook --load hook.bpf.o", bin().display());
    let r = overhead(d.path(), &["--attach-cmd", &cmd, "--stats-rounds", "0"]);
    assert_eq!(r.code(), Some(0), "{r:?}");
    assert!(r.stdout().contains("verdict"), "{r:?}");
    assert!(
        !hook_loaded(),
        "the loader was stopped and its programs went with it"
    );
}

/// `overhead --aa -n 2000 EXTRA… --json --stats-rounds 0`: exit 0, and its document.
fn aa_json(dir: &Path, extra: &[&str]) -> serde_json::Value {
    let mut args = vec!["overhead", "--aa", "-n", "2000"];
    args.extend_from_slice(extra);
    args.extend_from_slice(&["--json", "--stats-rounds", "0"]);
    let r = run(ebpf_prof(&args, dir));
    assert_eq!(r.code(), Some(0), "{r:?}");
    serde_json::from_str(&r.stdout()).unwrap_or_else(|e| panic!("{e}: {r:?}"))
}

#[test]
#[ignore = "needs root: scripts/test.sh runs it (or as root: cargo test -- --include-ignored)"]
fn the_default_run_adds_pairs_until_a_target_or_the_budget() {
    if !need_root("the_default_run_adds_pairs_until_a_target_or_the_budget") {
        return;
    }
    let _s = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let d = tempfile::tempdir().unwrap();
    // A loose target: met at the first look (rounds of 250 keep 225 samples).
    let first = ebpf_prof::overhead::first_look(225, &[50.0, 90.0, 99.0, 99.9], 0.99);
    let v = short_aa_target(d.path(), "1000");
    assert_eq!(v["ended"]["reason"], "target", "{v}");
    assert_eq!(v["rounds"], first, "{v}");
    assert_eq!(v["base"]["started_s"].as_array().unwrap().len(), first);
    // An unreachable target: the budget ends it, before the budget is spent.
    let t = std::time::Instant::now();
    let v = aa_json(d.path(), &["--target-ns", "0.001", "--max-time", "2s"]);
    assert_eq!(v["ended"]["reason"], "time", "{v}");
    // Each next pair is taken to need as long as the longest so far: only a pair longer than
    // every one before it can end past the budget, and by less than a pair.
    let pairs = v["ended"]["pairs"].as_f64().unwrap();
    let seconds = v["ended"]["seconds"].as_f64().unwrap();
    assert!(seconds <= 2.0 + 2.0 / pairs, "{v}");
    assert!(t.elapsed().as_secs_f64() < 4.0, "{:?}", t.elapsed());
    // A budget that cannot hold two rounds: refused after the first, exit 2.
    let r = run(ebpf_prof(
        &["overhead", "--aa", "-n", "200000", "--max-time", "100ms"],
        d.path(),
    ));
    assert_eq!(r.code(), Some(2), "{r:?}");
    assert!(r.stderr().contains("too short for two rounds"), "{r:?}");
    assert_eq!(
        r.stderr().lines().filter(|l| l.contains("error")).count(),
        1,
        "{r:?}"
    );
}

/// `overhead --aa -n 250 --target-ns T --json --stats-rounds 0`: its document.
fn short_aa_target(dir: &Path, target: &str) -> serde_json::Value {
    let args = ["overhead", "--aa", "-n", "250", "--target-ns", target];
    let r = run(ebpf_prof(
        &[&args[..], &["--json", "--stats-rounds", "0"]].concat(),
        dir,
    ));
    assert_eq!(r.code(), Some(0), "{r:?}");
    serde_json::from_str(&r.stdout()).unwrap_or_else(|e| panic!("{e}: {r:?}"))
}

/// `overhead --aa --rounds 40 -n 250 EXTRA… --json --stats-rounds 0`: its document.
fn short_aa(dir: &Path, extra: &[&str]) -> serde_json::Value {
    let mut args = vec!["overhead", "--aa", "--rounds", "40", "-n", "250"];
    args.extend_from_slice(extra);
    args.extend_from_slice(&["--json", "--stats-rounds", "0"]);
    let r = run(ebpf_prof(&args, dir));
    assert_eq!(r.code(), Some(0), "{r:?}");
    serde_json::from_str(&r.stdout()).unwrap_or_else(|e| panic!("{e}: {r:?}"))
}

/// Which arm ran first in each pair.
fn first_arms(v: &serde_json::Value) -> Vec<bool> {
    let at = |arm: &str| -> Vec<f64> {
        v[arm]["started_s"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_f64().unwrap())
            .collect()
    };
    at("base")
        .iter()
        .zip(at("treat"))
        .map(|(b, t)| *b < t)
        .collect()
}

/// `--seed` repeats a run's coin, and without it every run draws its own (and says which);
/// rounds of 250 compare p99 and p99.9 over pooled blocks of 5 and 45 pairs.
#[test]
#[ignore = "needs root: scripts/test.sh runs it (or as root: cargo test -- --include-ignored)"]
fn fresh_coins_unless_seeded_and_pooled_tails_of_short_rounds() {
    if !need_root("fresh_coins_unless_seeded_and_pooled_tails_of_short_rounds") {
        return;
    }
    let _s = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let d = tempfile::tempdir().unwrap();
    let (a, b) = (
        short_aa(d.path(), &["--seed", "7"]),
        short_aa(d.path(), &["--seed", "7"]),
    );
    assert_eq!((a["seed"].as_u64(), b["seed"].as_u64()), (Some(7), Some(7)));
    assert_eq!(
        first_arms(&a),
        first_arms(&b),
        "the same seed, the same coin"
    );
    let (x, y) = (short_aa(d.path(), &[]), short_aa(d.path(), &[]));
    assert_ne!(x["seed"], y["seed"], "a fresh coin each run");
    assert_ne!(
        first_arms(&x),
        first_arms(&y),
        "40 coin flips alike by chance: 2^-40"
    );
    assert_eq!(a["iterations"], 250);
    let diffs = a["comparison"]["diffs"].as_array().unwrap();
    let blocks: Vec<u64> = diffs.iter().map(|d| d["block"].as_u64().unwrap()).collect();
    let count = |key: &str| -> Vec<usize> {
        diffs
            .iter()
            .map(|d| d[key].as_array().unwrap().len())
            .collect()
    };
    assert_eq!(blocks, [1, 1, 5, 45]);
    assert_eq!(count("pair_deltas"), [40, 40, 40, 40]);
    assert_eq!(count("block_deltas"), [0, 0, 8, 1]);
    let p999 = &diffs[3];
    assert!(p999["confidence"].as_f64().unwrap() < 0.99, "{p999}");
    let notes = a["comparison"]["notes"].as_array().unwrap();
    assert!(
        notes.iter().any(|n| n
            .as_str()
            .unwrap()
            .starts_with("p99.9 is compared over blocks of 45 pairs")),
        "one block of 45 reaches no 99% interval, and a note says so: {notes:?}"
    );
}

/// The programs' own time counts only their runs inside the timed span, and the dispatch gap
/// is shown only when it is not a negative cost.
fn assert_only_runs_inside_the_span_count(v: &serde_json::Value, progs: &[serde_json::Value]) {
    let dispatch = &v["dispatch"];
    let own = dispatch["own_ns"].as_f64().unwrap();
    let all: f64 = progs
        .iter()
        .map(|p| p["runs_per_iteration"].as_f64().unwrap() * p["mean_run_ns"].as_f64().unwrap())
        .sum();
    assert!(
        own < 0.8 * all,
        "only the runs inside the span count: {own} of {all}"
    );
    if let Some(gap) = v["dispatch_gap_ns"].as_f64() {
        assert!(dispatch["gap_hi"].as_f64().unwrap() >= 0.0, "{dispatch}");
        assert!(gap.is_finite());
    } else {
        assert!(
            dispatch["sentence"]
                .as_str()
                .unwrap()
                .contains("cannot be separated"),
            "{dispatch}"
        );
    }
}

/// A hook on every system call runs on the close after each openat too;
/// the residual must count only its runs inside the timed span, and is never a negative cost.
#[test]
#[ignore = "needs root: scripts/test.sh runs it (or as root: cargo test -- --include-ignored)"]
fn regression_negative_dispatch_residual_of_an_every_syscall_hook() {
    if !need_root("regression_negative_dispatch_residual_of_an_every_syscall_hook") {
        return;
    }
    let _s = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let d = tempfile::tempdir().unwrap();
    std::fs::write(
        d.path().join("sys.bpf.o"),
        ebpf_prof::bpf::HOOK_EVERY_SYSCALL,
    )
    .unwrap();
    let r = run(ebpf_prof(
        &[
            "overhead",
            "--load",
            "sys.bpf.o",
            "--rounds",
            "8",
            "-n",
            "5000",
            "--json",
        ],
        d.path(),
    ));
    assert_eq!(r.code(), Some(0), "{r:?}");
    let v: serde_json::Value = serde_json::from_str(&r.stdout()).unwrap();
    let progs = v["kernel"]["programs"].as_array().unwrap();
    let enter = progs
        .iter()
        .find(|p| p["name"] == "count_syscall")
        .unwrap_or_else(|| panic!("{progs:?}"));
    let runs = enter["runs_per_iteration"].as_f64().unwrap();
    let outside = enter["outside_runs_per_iteration"].as_f64().unwrap();
    // The hook counts every system call of the machine: other processes' (daemons, other test
    // binaries) can only add a few runs, never remove any.
    assert!((1.9..2.6).contains(&runs), "openat and close: {enter}");
    assert!(
        (0.9..1.6).contains(&outside),
        "the close, outside the span: {enter}"
    );
    assert_only_runs_inside_the_span_count(&v, progs);
    assert_dispatch_split(&v);
}

/// Programs on sys_enter_open and sys_enter_openat2 do not run under the
/// openat bench, and are not tail-call targets; the sample hook's enforce_access_policy is one.
#[test]
#[ignore = "needs root: scripts/test.sh runs it (or as root: cargo test -- --include-ignored)"]
fn regression_a_program_that_did_not_run_was_called_a_tail_call_target() {
    if !need_root("regression_a_program_that_did_not_run_was_called_a_tail_call_target") {
        return;
    }
    let _s = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let d = tempfile::tempdir().unwrap();
    std::fs::write(
        d.path().join("open.bpf.o"),
        ebpf_prof::bpf::HOOK_OPEN_FAMILY,
    )
    .unwrap();
    with_hook(d.path());
    let r = overhead(d.path(), &["--load", "open.bpf.o"]);
    assert_eq!(r.code(), Some(0), "{r:?}");
    let out = r.stdout();
    for idle in ["on_open ", "on_openat2 "] {
        let line = out
            .lines()
            .find(|l| l.contains(idle))
            .unwrap_or_else(|| panic!("{idle}: {r:?}"));
        assert!(
            line.contains("did not run") && !line.contains("tail-call"),
            "{line}"
        );
    }
    let r = overhead(d.path(), &["--load", "hook.bpf.o"]);
    assert_eq!(r.code(), Some(0), "{r:?}");
    let line = r
        .stdout()
        .lines()
        .find(|l| l.contains("enforce_access_policy"))
        .map(str::to_string)
        .unwrap_or_default();
    assert!(line.contains("tail-call target"), "{r:?}");
}

#[test]
#[ignore = "needs root: scripts/test.sh runs it (or as root: cargo test -- --include-ignored)"]
fn a_run_failing_midway_leaves_nothing_attached() {
    if !need_root("a_run_failing_midway_leaves_nothing_attached") {
        return;
    }
    let _s = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let d = tempfile::tempdir().unwrap();
    with_hook(d.path());
    let mut c = ebpf_prof(
        &[
            "overhead",
            "--load",
            "hook.bpf.o",
            "--rounds",
            "3",
            "-n",
            "2000",
        ],
        d.path(),
    );
    c.env("EBPF_PROF_FAILPOINT", "overhead:attached");
    let r = run(c);
    assert_eq!(r.code(), Some(101), "{r:?}");
    assert!(!hook_loaded(), "detached while unwinding");
    // A benchmark that fails in its second round, while the hook is attached.
    std::fs::write(
        d.path().join("bench.sh"),
        "#!/bin/sh\nif [ -e once ]; then exit 3; fi\ntouch once\necho 1000\necho 1001\n",
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(
        d.path().join("bench.sh"),
        std::fs::Permissions::from_mode(0o755),
    )
    .unwrap();
    let r = overhead(d.path(), &["--load", "hook.bpf.o", "--", "./bench.sh"]);
    assert_eq!(r.code(), Some(3), "{r:?}");
    assert!(
        r.stderr().contains("in round base 1") || r.stderr().contains("in round treat 1"),
        "the second round of the first pair failed: {r:?}"
    );
    assert!(!hook_loaded());
}

#[test]
fn bad_input_is_refused_before_measuring() {
    // Serial too: its many short runs' system calls would count as the every-syscall hook's.
    let _s = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let d = tempfile::tempdir().unwrap();
    with_hook(d.path());
    std::fs::create_dir(d.path().join("full")).unwrap();
    std::fs::write(d.path().join("full/x"), "").unwrap();
    std::fs::write(d.path().join("exists.svg"), "").unwrap();
    let cases: &[(&[&str], &str)] = &[
        (&[], "nothing to measure"),
        (&["--compare", "hook.bpf.o"], "needs --load"),
        (&["--load", "missing.bpf.o"], "cannot read missing.bpf.o"),
        (&["--load", "hook.bpf.o", "--attach-cmd", "x"], "not both"),
        (
            &["--load", "hook.bpf.o", "--rounds", "1"],
            "--rounds 1 is out of range: give 2 to 2000",
        ),
        (
            &["--load", "hook.bpf.o", "--target-ns", "0"],
            "--target-ns 0 is out of range: give a number in (0, ",
        ),
        (
            &["--load", "hook.bpf.o", "--max-time", "0"],
            "--max-time 0 is out of range: give a duration from 1ms to 24h",
        ),
        (
            &["--load", "hook.bpf.o", "--rounds", "9", "--max-time", "5s"],
            "cannot be used with",
        ),
        (
            &["--load", "hook.bpf.o", "--confidence", "95"],
            "--confidence 95 is out of range: give a number in [0.5, 1)",
        ),
        (&["--load", "hook.bpf.o", "--keep", "full"], "new or empty"),
        (&["--load", "hook.bpf.o", "--plot", "exists.svg"], "exists"),
    ];
    for (args, needle) in cases {
        let mut a = vec!["overhead"];
        a.extend_from_slice(args);
        let r = run(ebpf_prof(&a, d.path()));
        let before_root_check = [
            "nothing",
            "needs",
            "cannot read",
            "not both",
            "out of range",
            "cannot be used",
        ];
        if !unsafe_root() && !before_root_check.iter().any(|b| needle.contains(b)) {
            continue; // the root check comes first for the rest
        }
        assert_eq!(r.code(), Some(2), "{args:?}: {r:?}");
        assert!(
            r.stderr().contains(needle),
            "{args:?} wants {needle:?}: {r:?}"
        );
    }
}

fn unsafe_root() -> bool {
    // SAFETY: no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// perf's version-mismatch warning was printed at every step of one run (`--profile` looks
/// perf up once per arm): it is printed once. The perf is a wrapper that reports another
/// version, so the warning shows on any machine.
#[test]
#[ignore = "needs root: scripts/test.sh runs it (or as root: cargo test -- --include-ignored)"]
fn regression_perf_version_warning_is_printed_once_a_run() {
    if !need_root("regression_perf_version_warning_is_printed_once_a_run") {
        return;
    }
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let d = tempfile::tempdir().unwrap();
    let perf = d.path().join("perf");
    let real = ebpf_prof::perf::PerfChoice::default()
        .find(true)
        .unwrap()
        .path;
    let script = format!(
        "#!/bin/sh\ncase \"$1\" in --version) echo 'perf version 1.0'; exit 0 ;; esac\nexec {} \"$@\"\n",
        real.display()
    );
    std::fs::write(&perf, script).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&perf, std::fs::Permissions::from_mode(0o755)).unwrap();
    let args = [
        "overhead",
        "--aa",
        "--rounds",
        "2",
        "-n",
        "100",
        "--profile",
        "prof",
    ];
    let mut c = ebpf_prof(&args, d.path());
    c.env("PERF", &perf);
    let r = run(c);
    assert_eq!(r.code(), Some(0), "{r:?}");
    assert_eq!(
        r.stderr()
            .matches("does not match the running kernel")
            .count(),
        1,
        "{r:?}"
    );
    assert!(
        d.path().join("prof/treat.data").exists(),
        "both arms recorded: {r:?}"
    );
}
