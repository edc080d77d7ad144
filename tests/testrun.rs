//! `overhead --test-run` end to end: real programs loaded into the running kernel and run by
//! its test run (root), on the built-in packets and the committed captures; and the bad-input
//! table of the test run in docs/bad-input.md ("Test run"), run row by row.

mod common;

use common::{need_root, run, Run, TestDir};
use ebpf_prof::testrun::samples;
use serde_json::Value;
use std::path::Path;
use std::process::Command;

const DOC: &str = include_str!("../docs/bad-input.md");

/// The tests of this file one at a time: each checks that no program of the fixtures is left
/// loaded, which another test running meanwhile would have loaded.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// A directory holding every fixture program and capture under the names the table uses.
fn scratch() -> TestDir {
    let dir = common::open_tempdir();
    for (name, bytes) in samples::ALL {
        std::fs::write(dir.path().join(name), bytes).unwrap();
    }
    let openat = ebpf_prof::bpf::SAMPLE_HOOK;
    std::fs::write(dir.path().join("openat_hook.bpf.o"), openat).unwrap();
    let pcaps = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/pcap");
    for entry in std::fs::read_dir(pcaps).unwrap() {
        let path = entry.unwrap().path();
        std::fs::copy(&path, dir.path().join(path.file_name().unwrap())).unwrap();
    }
    // A capture past the cap, sparse: no disk is used.
    let huge = std::fs::File::create(dir.path().join("huge.pcap")).unwrap();
    huge.set_len(ebpf_prof::packets::capture::MAX_FILE + 1)
        .unwrap();
    dir
}

fn ebpf_prof(dir: &Path, args: &[&str]) -> Run {
    run(common::ebpf_prof(args, dir))
}

/// The JSON of a run, its classes keyed by example.
fn classes(run: &Run) -> Vec<Value> {
    assert_eq!(run.code(), Some(0), "{run:?}");
    let document: Value = serde_json::from_str(&run.stdout()).expect("JSON");
    document["test_run"]["classes"]
        .as_array()
        .expect("classes")
        .clone()
}

fn class<'a>(classes: &'a [Value], example: &str) -> &'a Value {
    classes
        .iter()
        .find(|c| c["example"].as_str().unwrap().starts_with(example))
        .unwrap_or_else(|| panic!("no class {example} in {classes:#?}"))
}

fn no_program_left(name: &str) {
    std::thread::sleep(std::time::Duration::from_millis(200));
    let out = Command::new("bpftool")
        .args(["prog", "show"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(!text.contains(name), "{name} still loaded:\n{text}");
}

#[test]
#[ignore = "needs root: loads XDP programs and runs the kernel's test run"]
fn the_xdp_classifier_s_classes_have_the_right_verdicts_in_cost_order() {
    if !need_root("the_xdp_classifier_s_classes_have_the_right_verdicts_in_cost_order") {
        return;
    }
    let _serial = serial();
    let dir = scratch();
    let stats_before = common::sysctl("kernel.bpf_stats_enabled");
    let args = [
        "overhead",
        "--test-run",
        "--load",
        "xdp_classify.bpf.o",
        "--pcap",
    ];
    let done = ebpf_prof(
        dir.path(),
        &[&args[..], &["classifier.pcapng", "--json"]].concat(),
    );
    let classes = classes(&done);
    assert_eq!(classes.len(), 7, "{classes:#?}");
    let dns = class(&classes, "UDP 10.0.0.1:41000 > 10.0.0.2:53");
    let other = class(&classes, "UDP 10.0.0.1:41000 > 10.0.0.2:9999");
    let http = class(&classes, "TCP 10.0.0.1:41000 > 10.0.0.2:80");
    let https = class(&classes, "TCP 10.0.0.1:41000 > 10.0.0.2:443");
    let arp = class(&classes, "ethertype 0x0806");
    for (class, verdict, packets) in [
        (dns, "XDP_DROP", 8),
        (other, "XDP_TX", 8),
        (http, "XDP_PASS", 8),
        (https, "XDP_PASS", 8),
        (arp, "XDP_PASS", 1),
    ] {
        assert_eq!(class["verdict"], verdict, "{class}");
        assert_eq!(class["packets"], packets, "{class}");
        let (p50, lo, hi) = (
            class["p50_ns"].as_f64(),
            class["lo_ns"].as_f64(),
            class["hi_ns"].as_f64(),
        );
        assert!(lo <= p50 && p50 <= hi, "{class}");
    }
    // 0, 2, 8 and 32 look-ups: each step costs more than the one before.
    let p50 = |c: &Value| c["p50_ns"].as_f64().unwrap();
    assert!(p50(dns) < p50(other) && p50(other) < p50(http) && p50(http) < p50(https));
    assert_eq!(common::sysctl("kernel.bpf_stats_enabled"), stats_before);
    no_program_left("xdp_classify");
}

#[test]
#[ignore = "needs root: loads tc programs and runs the kernel's test run"]
fn the_tc_classifier_runs_on_the_builtin_packets() {
    if !need_root("the_tc_classifier_runs_on_the_builtin_packets") {
        return;
    }
    let _serial = serial();
    let dir = scratch();
    let done = ebpf_prof(
        dir.path(),
        &["overhead", "--test-run", "--load", "tc_classify.bpf.o"],
    );
    assert_eq!(done.code(), Some(0), "{done:?}");
    let text = done.stdout();
    assert!(text.contains("test run of tc_classify (tc)"), "{done:?}");
    assert!(
        text.contains("24 packets (built-in) in 6 classes"),
        "{done:?}"
    );
    for line in [
        "TC_ACT_SHOT",
        "TC_ACT_OK",
        "UDP 10.0.0.1:40000 > 10.0.0.2:53",
    ] {
        assert!(text.contains(line), "{line}: {done:?}");
    }
    no_program_left("tc_classify");
}

#[test]
#[ignore = "needs root: loads an XDP program that rewrites its packets"]
fn a_program_that_rewrites_its_packet_is_timed_on_a_fresh_copy_and_told_so() {
    if !need_root("a_program_that_rewrites_its_packet_is_timed_on_a_fresh_copy_and_told_so") {
        return;
    }
    let _serial = serial();
    let dir = scratch();
    let args = [
        "overhead",
        "--test-run",
        "--load",
        "xdp_reflect.bpf.o",
        "--json",
    ];
    let done = ebpf_prof(dir.path(), &args);
    let classes = classes(&done);
    let reflected = class(&classes, "UDP 10.0.0.1:40000 > 10.0.0.2:53");
    assert_eq!(reflected["verdict"], "XDP_TX");
    assert_eq!(reflected["rewrites"], true);
    assert_eq!(reflected["timing"], "fresh_copy");
    let untouched = class(&classes, "TCP 10.0.0.1:40000 > 10.0.0.2:80");
    assert_eq!(untouched["rewrites"], false);
    assert_eq!(untouched["timing"], "slope");
    let document: Value = serde_json::from_str(&done.stdout()).unwrap();
    let notes = document["test_run"]["notes"].to_string();
    assert!(notes.contains("rewrites its packet"), "{notes}");
}

#[test]
#[ignore = "needs root: loads a socket filter and a cgroup_skb program"]
fn network_layer_programs_that_change_nothing_are_timed_by_their_slope() {
    if !need_root("network_layer_programs_that_change_nothing_are_timed_by_their_slope") {
        return;
    }
    let _serial = serial();
    let dir = scratch();
    // The kernel hands a socket filter's or cgroup_skb program's packet back with its
    // Ethernet header zeroed: that is not the program rewriting it.
    for name in ["socket_0", "cgroup_skb_0"] {
        let (_, bytes) = ebpf_prof::bpf::PACKET_HOOKS
            .iter()
            .find(|(hook, _)| *hook == name)
            .unwrap();
        let object = format!("{name}.bpf.o");
        std::fs::write(dir.path().join(&object), bytes).unwrap();
        let done = ebpf_prof(
            dir.path(),
            &["overhead", "--test-run", "--load", &object, "--json"],
        );
        let classes = classes(&done);
        assert_eq!(classes.len(), 6, "{name}: {classes:#?}");
        for one in &classes {
            assert_eq!(one["rewrites"], false, "{name}: {one}");
            assert_eq!(one["timing"], "slope", "{name}: {one}");
        }
        let document: Value = serde_json::from_str(&done.stdout()).unwrap();
        let notes = document["test_run"]["notes"].to_string();
        assert!(!notes.contains("rewrites its packet"), "{name}: {notes}");
        no_program_left(name);
    }
}

#[test]
#[ignore = "needs root: loads two XDP programs"]
fn compare_tells_the_one_class_that_differs_and_the_gate_sees_it() {
    if !need_root("compare_tells_the_one_class_that_differs_and_the_gate_sees_it") {
        return;
    }
    let _serial = serial();
    let dir = scratch();
    let args = [
        "overhead",
        "--test-run",
        "--load",
        "xdp_classify_lean.bpf.o",
        "--compare",
        "xdp_classify.bpf.o",
        "--json",
        "--max-p50-ns",
        "100",
    ];
    let done = ebpf_prof(dir.path(), &args);
    assert_eq!(
        done.code(),
        Some(1),
        "the 443 class is 32 look-ups dearer: {done:?}"
    );
    let document: Value = serde_json::from_str(&done.stdout()).unwrap();
    let classes = document["test_run"]["classes"].as_array().unwrap();
    let https = class(classes, "TCP 10.0.0.1:40000 > 10.0.0.2:443");
    assert!(
        https["compare"]["delta_lo_ns"].as_f64().unwrap() > 100.0,
        "{https}"
    );
    let dns = class(classes, "UDP 10.0.0.1:40000 > 10.0.0.2:53");
    let (lo, hi) = (
        dns["compare"]["delta_lo_ns"].as_f64().unwrap(),
        dns["compare"]["delta_hi_ns"].as_f64().unwrap(),
    );
    assert!(
        lo < 10.0 && hi > -10.0,
        "the DNS class is the same code: {dns}"
    );
    assert!(done.stderr().contains("--max-p50-ns 100"), "{done:?}");
    no_program_left("xdp_classify");
}

/// One row of the test run's table in docs/bad-input.md.
struct Row {
    command: String,
    exit: i32,
    message: String,
}

fn rows() -> Vec<Row> {
    DOC.split("### Test run")
        .nth(1)
        .expect("docs/bad-input.md has a Test run section")
        .lines()
        .skip_while(|l| !l.starts_with("| # |"))
        .skip(2)
        .take_while(|l| l.starts_with('|'))
        .map(|line| {
            let cells: Vec<String> = line
                .trim_matches('|')
                .split(" | ")
                .map(|c| c.trim().trim_matches('`').to_string())
                .collect();
            Row {
                command: cells[2].clone(),
                exit: cells[3].parse().expect("exit code"),
                message: cells[4].clone(),
            }
        })
        .collect()
}

#[test]
#[ignore = "needs root: the rows load objects as root"]
fn every_row_of_the_test_run_bad_input_table_holds() {
    if !need_root("every_row_of_the_test_run_bad_input_table_holds") {
        return;
    }
    let _serial = serial();
    let dir = scratch();
    let rows = rows();
    assert!(rows.len() >= 8, "{} rows", rows.len());
    let stats_before = common::sysctl("kernel.bpf_stats_enabled");
    for row in rows {
        let line = row.command.strip_prefix("ebpf-prof ").expect("a command");
        let argv = shlex::split(line).expect("argv");
        let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
        let done = ebpf_prof(dir.path(), &argv);
        assert_eq!(done.code(), Some(row.exit), "{done:?}");
        let errors: Vec<&str> = done
            .out
            .stderr
            .split(|b| *b == b'\n')
            .filter_map(|l| std::str::from_utf8(l).ok())
            .filter(|l| l.contains("error:"))
            .collect();
        assert_eq!(errors.len(), 1, "one error line: {done:?}");
        assert!(
            errors[0].contains(&row.message),
            "{}: {done:?}",
            row.message
        );
        assert!(!done.stderr().contains("panicked"), "{done:?}");
    }
    assert_eq!(common::sysctl("kernel.bpf_stats_enabled"), stats_before);
    for name in [
        "xdp_classify",
        "tc_classify",
        "pass_message",
        "watch_sockets",
    ] {
        no_program_left(name);
    }
}

#[test]
#[ignore = "needs root: switches kernel.bpf_stats_enabled and loads an XDP program"]
fn run_stats_are_off_during_the_timed_runs_and_put_back_after() {
    if !need_root("run_stats_are_off_during_the_timed_runs_and_put_back_after") {
        return;
    }
    let _serial = serial();
    let dir = scratch();
    let _stats = common::SysctlSet::new("kernel.bpf_stats_enabled", "1");
    let args = [
        "overhead",
        "--test-run",
        "--load",
        "xdp_classify.bpf.o",
        "--rounds",
        "30",
    ];
    let done = ebpf_prof(dir.path(), &args);
    assert_eq!(done.code(), Some(0), "{done:?}");
    assert!(
        done.stdout().contains(
            "kernel.bpf_stats_enabled was 1: set to 0 for the timed runs and written back"
        ),
        "{done:?}"
    );
    assert_eq!(common::sysctl("kernel.bpf_stats_enabled"), "1", "put back");
    no_program_left("xdp_classify");
}

#[test]
#[ignore = "needs root: live-frame XDP test runs in a private network namespace"]
fn live_frames_carry_out_the_verdicts_and_cost_more_for_passed_frames() {
    if !need_root("live_frames_carry_out_the_verdicts_and_cost_more_for_passed_frames") {
        return;
    }
    let _serial = serial();
    let dir = scratch();
    let plain = [
        "overhead",
        "--test-run",
        "--load",
        "xdp_classify.bpf.o",
        "--json",
    ];
    let live = [&plain[..], &["--live-frames"]].concat();
    let (plain_run, live_run) = (ebpf_prof(dir.path(), &plain), ebpf_prof(dir.path(), &live));
    let document: Value = serde_json::from_str(&live_run.stdout()).expect("JSON");
    assert_eq!(document["test_run"]["mode"], "live_frames", "{live_run:?}");
    let (plain, live) = (classes(&plain_run), classes(&live_run));
    let http = "TCP 10.0.0.1:40000 > 10.0.0.2:80";
    let cost = |classes: &[Value]| class(classes, http)["p50_ns"].as_f64().unwrap();
    // A passed frame goes up the stack of the private namespace: more work than the program.
    assert!(
        cost(&live) > cost(&plain) + 50.0,
        "{} vs {}",
        cost(&live),
        cost(&plain)
    );
    no_program_left("xdp_classify");
}

#[test]
#[ignore = "needs root: interrupts a test run and checks what it put back"]
fn an_interrupted_test_run_puts_everything_back() {
    if !need_root("an_interrupted_test_run_puts_everything_back") {
        return;
    }
    let _serial = serial();
    let dir = scratch();
    let _stats = common::SysctlSet::new("kernel.bpf_stats_enabled", "1");
    let mut command = common::ebpf_prof(
        &[
            "overhead",
            "--test-run",
            "--load",
            "xdp_classify.bpf.o",
            "--pcap",
            "classifier.pcap",
            "--rounds",
            "2000",
        ],
        dir.path(),
    );
    let child = command
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(400));
    // SAFETY: a signal to the child we started.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(130), "{stderr}");
    assert_eq!(common::sysctl("kernel.bpf_stats_enabled"), "1", "put back");
    no_program_left("xdp_classify");
}
