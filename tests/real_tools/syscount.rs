//! libbpf-tools `syscount -L`: two tracepoint programs on raw_syscalls sys_enter/sys_exit that
//! update and look up hash maps on every system call of the machine.

use super::*;

/// Allocator functions of the report called from a map update or delete (or from another
/// allocator function under one).
fn allocator_frames(report: &Value) -> Vec<String> {
    let is_change = |n: &str| n.contains("_map_update_elem") || n.contains("_map_delete_elem");
    let funcs = report["kernel_functions"].as_array().unwrap();
    let alloc: Vec<&str> = funcs
        .iter()
        .filter(|f| f["category"] == "alloc")
        .map(|f| f["name"].as_str().unwrap())
        .collect();
    funcs
        .iter()
        .filter(|f| f["category"] == "alloc")
        .filter(|f| {
            f["called_from"].as_array().unwrap().iter().any(|c| {
                let c = c["name"].as_str().unwrap();
                is_change(c) || alloc.contains(&c)
            })
        })
        .map(|f| f["name"].as_str().unwrap().to_string())
        .collect()
}

/// The share of the time inside BPF of `category` in the report's breakdown.
fn share(report: &Value, category: &str) -> f64 {
    report["breakdown"]
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["category"] == category)
        .map_or(0.0, |b| b["share_of_bpf"].as_f64().unwrap())
}

/// Allocations under a map update count in the allocation share. Natively every allocation
/// under these programs is a map update's; under emulation timer interrupts land inside BPF
/// code far more often, and an allocation in one (not under an update) counts in the share too.
fn check_alloc_share(report: &Value, text: &str) {
    let alloc = allocator_frames(report);
    if !alloc.is_empty() {
        assert!(share(report, "alloc") > 0.0, "{alloc:?}: {text}");
    }
    if !emulated() {
        assert_eq!(
            !alloc.is_empty(),
            share(report, "alloc") > 0.0,
            "{alloc:?}: {text}"
        );
    }
}

/// On the real profile: the update is named, with the hint that fits
/// what is under it, and no share of a parent or grandparent exceeds 100%.
fn check_report(report: &Value, text: &str, flags: &[(String, String, u64)]) {
    let funcs = report["kernel_functions"].as_array().unwrap();
    let update = funcs
        .iter()
        .find(|f| f["name"] == "htab_map_update_elem")
        .unwrap_or_else(|| panic!("no htab_map_update_elem: {text}"));
    let from = update["called_from"].as_array().unwrap();
    assert!(from.iter().any(|c| c["name"] == "sys_enter"), "{update}");
    let hints = report["hints"].as_array().unwrap();
    let hint_of = |cat: &str| hints.iter().find(|h| h["category"] == cat);
    check_alloc_share(report, text);
    match hint_of("alloc") {
        Some(h) => {
            let t = h["text"].as_str().unwrap();
            assert!(t.contains("preallocate") && t.contains("per-CPU"), "{t}");
        }
        None => assert!(share(report, "alloc") < 5.0, "{text}"),
    }
    // The hint is there exactly when map access reaches the threshold and enough samples fall
    // inside BPF to act on. On an ordinary machine both always hold here; under emulation the
    // shares and the sample counts are the emulator's, not the kernel's, and only the rule is
    // checked.
    let access_share = share(report, "map_access");
    let bpf = &report["bpf"];
    let too_rough = bpf["samples"]
        .as_u64()
        .is_some_and(|n| n < bpf["min_samples"].as_u64().unwrap());
    match hint_of("map_access") {
        Some(access) => {
            let t = access["text"].as_str().unwrap();
            assert!(
                t.contains("htab_map_update_elem") && t.contains("per-CPU"),
                "{t}"
            );
            assert!(
                access_share >= ebpf_prof::report::ACTION_SHARE && !too_rough,
                "{text}"
            );
        }
        None => assert!(
            emulated() && (access_share < ebpf_prof::report::ACTION_SHARE || too_rough),
            "no map-access hint at {access_share:.1}% map access: {text}"
        ),
    }
    if flags.iter().all(|(_, _, f)| f & NO_PREALLOC == 0) {
        assert!(
            !text.contains("drop BPF_F_NO_PREALLOC"),
            "{flags:?}: {text}"
        );
    }
    check_shares(report, text);
}

/// Every `hook_share` of a parent or grandparent is within 0..=100, in the JSON and the text.
fn check_shares(report: &Value, text: &str) {
    let points = report["attach_points"].as_array().unwrap();
    let trace = points
        .iter()
        .find(|p| p["name"] == "trace_call_bpf")
        .unwrap_or_else(|| panic!("{text}"));
    let gp = &trace["grandparent"];
    assert!(
        gp["name"]
            .as_str()
            .is_some_and(|n| n.starts_with("perf_trace_sys_e")),
        "{trace}"
    );
    for p in points {
        for up in ["parent", "grandparent"] {
            if let Some(share) = p[up]["hook_share"].as_f64() {
                assert!((0.0..=100.0).contains(&share), "{up} of {p}");
            }
        }
    }
    for line in text.lines().filter(|l| l.contains(" holds ")) {
        let pct: f64 = line
            .split(" holds ")
            .nth(1)
            .and_then(|r| r.split('%').next())
            .and_then(|n| n.trim().parse().ok())
            .unwrap_or_else(|| panic!("{line}"));
        assert!(pct <= 100.0, "{line}");
    }
}

/// Syscount held by hand, `record` without `--load` takes it, and `report`
/// reads the profile.
#[test]
#[ignore = "needs root: scripts/test.sh runs it (or as root: cargo test -- --include-ignored)"]
fn syscount_held_by_hand_is_recorded_without_load_and_its_map_updates_named() {
    if !need_root("syscount_held_by_hand_is_recorded_without_load_and_its_map_updates_named")
        || !have_tool(SYSCOUNT)
    {
        return;
    }
    let _one = ONE.lock().unwrap_or_else(|e| e.into_inner());
    let d = open_tempdir();
    let held = Held::start(&format!("{SYSCOUNT} -L"), &["sys_enter", "sys_exit"]);
    let (enter, exit) = (held.id("sys_enter"), held.id("sys_exit"));
    let mut flags = maps_of(enter);
    flags.extend(maps_of(exit));
    let rec = run(ebpf_prof(
        &["record", "-n", &sampled_iterations(300_000), "-F", "4999"],
        d.path(),
    ));
    assert_eq!(rec.code(), Some(0), "{rec:?}");
    for (id, name) in [(enter, "sys_enter"), (exit, "sys_exit")] {
        assert!(
            rec.stderr()
                .contains(&format!("_{name}: id {id}, tracepoint")),
            "record lists {name} (id {id}): {rec:?}"
        );
    }
    held.stop();
    let text = run(ebpf_prof(&["report", "perf.data"], d.path()));
    assert_eq!(text.code(), Some(0), "{text:?}");
    let json = run(ebpf_prof(&["report", "--json", "perf.data"], d.path()));
    let report: Value = serde_json::from_str(&json.stdout()).unwrap_or_else(|e| panic!("{e}"));
    let progs: Vec<&str> = report["programs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    assert!(
        progs.contains(&"sys_enter") && progs.contains(&"sys_exit"),
        "{progs:?}"
    );
    check_report(&report, &text.stdout(), &flags);
    eprintln!("syscount maps: {flags:?}\n{}", text.stdout());
}

/// `overhead --attach-cmd 'syscount -L'`: its programs run on every system call, the
/// bench's close(2) outside the timed span included; only the runs inside count.
#[test]
#[ignore = "needs root: scripts/test.sh runs it (or as root: cargo test -- --include-ignored)"]
fn syscount_overhead_counts_only_its_runs_inside_the_timed_span() {
    if !need_root("syscount_overhead_counts_only_its_runs_inside_the_timed_span")
        || !have_tool(SYSCOUNT)
    {
        return;
    }
    let _one = ONE.lock().unwrap_or_else(|e| e.into_inner());
    let d = tempfile::tempdir().unwrap();
    let cmd = attach_cmd(&format!("{SYSCOUNT} -L"));
    let r = run(ebpf_prof(
        &[
            "overhead",
            "--attach-cmd",
            &cmd,
            "--max-time",
            "4s",
            "--json",
        ],
        d.path(),
    ));
    assert_eq!(r.code(), Some(0), "{r:?}");
    let v: Value = serde_json::from_str(&r.stdout()).unwrap_or_else(|e| panic!("{e}: {r:?}"));
    let progs = v["kernel"]["programs"].as_array().unwrap();
    let mut all = 0.0;
    for name in ["sys_enter", "sys_exit"] {
        let p = progs
            .iter()
            .find(|p| p["name"] == name)
            .unwrap_or_else(|| panic!("{name}: {progs:?}"));
        let runs = p["runs_per_iteration"].as_f64().unwrap();
        let outside = p["outside_runs_per_iteration"].as_f64().unwrap();
        // openat inside the span, close outside; other processes' system calls only add.
        assert!(runs >= 1.9, "{p}");
        assert!(outside >= 0.9 && outside < runs, "{p}");
        assert_eq!(p["tail_call_target"], false, "{p}");
        all += runs * p["mean_run_ns"].as_f64().unwrap();
    }
    let own = v["dispatch"]["own_ns"].as_f64().unwrap();
    assert!(
        own < 0.8 * all,
        "only the runs inside the span: {own} of {all}"
    );
    assert_dispatch_split(&v);
    let ids: Vec<u32> = progs
        .iter()
        .map(|p| p["id"].as_u64().unwrap() as u32)
        .collect();
    assert_gone(&ids);
    eprintln!("syscount overhead: {}", v["dispatch"]);
}

/// `syscount` without `-L` loads `sys_enter` but never attaches it: the op line and the
/// kernel's figures say "loaded, attached nowhere", not that the bench does not trigger it.
#[test]
#[ignore = "needs root: scripts/test.sh runs it (or as root: cargo test -- --include-ignored)"]
fn syscount_sys_enter_is_loaded_and_attached_nowhere() {
    if !need_root("syscount_sys_enter_is_loaded_and_attached_nowhere") || !have_tool(SYSCOUNT) {
        return;
    }
    let _one = ONE.lock().unwrap_or_else(|e| e.into_inner());
    let d = tempfile::tempdir().unwrap();
    let r = overhead_of_loader(SYSCOUNT, d.path());
    assert_eq!(r.code(), Some(0), "{r:?}");
    assert!(
        r.stderr()
            .contains("sys_enter loaded, attached nowhere (no operation can run it)"),
        "{r:?}"
    );
    assert!(!r.stderr().contains("not sys_enter ()"), "{r:?}");
    let v: Value = serde_json::from_str(&r.stdout()).unwrap();
    assert_eq!(v["op"]["op"], "openat", "{r:?}");
    let progs = v["kernel"]["programs"].as_array().unwrap();
    let enter = progs.iter().find(|p| p["name"] == "sys_enter").unwrap();
    assert_eq!(enter["attached_nowhere"], true, "{enter}");
    let exit = progs.iter().find(|p| p["name"] == "sys_exit").unwrap();
    assert_eq!(exit["attached_nowhere"], false, "{exit}");
}
