//! Which programs `record` takes, and `doctor` agreeing with it:
//! real programs loaded into the running kernel, real `record` and `doctor` runs.

mod common;
use common::*;
use std::path::Path;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

/// `ebpf-prof hook --load OBJ --seconds 60` in the background (longer under emulation, where
/// two `doctor` runs can outlast a minute), once its programs are listed.
fn hold(dir: &Path, obj: &str, part: &str) -> Child {
    let seconds = patience(Duration::from_secs(60)).as_secs().to_string();
    let child = ebpf_prof(&["hook", "--load", obj, "--seconds", &seconds], dir)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let t = Instant::now();
    while !bpf_symbol_loaded(part) {
        assert!(
            t.elapsed() < patience(Duration::from_secs(20)),
            "hook never loaded {part}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    child
}

/// The tests load the same objects: one at a time.
static ONE: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn release(mut child: Child, part: &str) {
    // SAFETY: kill on the pid of a child we spawned and have not reaped.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let _ = child.wait();
    assert!(!bpf_symbol_loaded(part), "{part} left loaded");
}

/// With the every-syscall hook held, `doctor --filter syscall` lists its programs (type,
/// attach point, tag) and passes its BPF check, in JSON and in text.
fn doctor_lists_the_held_hook(dir: &Path) {
    let doc = run(ebpf_prof(&["doctor", "--json", "--filter", "syscall"], dir));
    let v: serde_json::Value = serde_json::from_str(&doc.stdout()).unwrap();
    let progs = v["programs"].as_array().expect("programs listed");
    let count = progs
        .iter()
        .find(|p| p["name"] == "count_syscall")
        .unwrap_or_else(|| panic!("{v}"));
    assert_eq!(count["type"], "tracepoint", "{count}");
    // A perf_event link names its tracepoint since 6.6; before, doctor leaves the attach point
    // empty rather than guess.
    match count["attach"].as_str() {
        Some(attach) => assert!(attach.contains("sys_enter"), "{count}"),
        None => assert!(
            !kernel_at_least(6, 6),
            "a 6.6+ kernel names the tracepoint: {count}"
        ),
    }
    assert!(count["tag"].as_str().unwrap().len() == 16, "{count}");
    let id = the_kernels_id_and_tag(count);
    let bpf_check = v["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "bpf programs")
        .unwrap();
    assert_eq!(bpf_check["status"], "ok", "{bpf_check}");
    let text = run(ebpf_prof(&["doctor", "--filter", "syscall"], dir));
    assert!(text.stdout().contains("loaded BPF programs"), "{text:?}");
    assert!(text.stdout().contains("drop_syscall"), "{text:?}");
    let row = format!("{id}  tracepoint");
    assert!(text.stdout().contains(&row), "{row:?} in {text:?}");
}

/// The id doctor lists is the kernel's (as `bpftool prog show` gives it), and the tag is that
/// program's; the id.
fn the_kernels_id_and_tag(count: &serde_json::Value) -> u32 {
    let kernel: Vec<ebpf_prof::bpf::LoadedProgram> = ebpf_prof::bpf::loaded_programs()
        .unwrap()
        .into_iter()
        .filter(|p| p.name == "count_syscall")
        .collect();
    assert_eq!(kernel.len(), 1, "{kernel:?}");
    assert_eq!(
        count["id"].as_u64(),
        Some(u64::from(kernel[0].id)),
        "{count}"
    );
    assert_eq!(count["tag"], kernel[0].tag.as_str(), "{count}");
    kernel[0].id
}

#[test]
#[ignore = "needs root: scripts/test.sh runs it (or as root: cargo test -- --include-ignored)"]
fn doctor_fails_exactly_when_record_refuses() {
    if !need_root("doctor_fails_exactly_when_record_refuses") {
        return;
    }
    let _one = ONE.lock().unwrap_or_else(|e| e.into_inner());
    let d = tempfile::tempdir().unwrap();
    let doc = run(ebpf_prof(
        &["doctor", "--json", "--filter", "zzz_nomatch"],
        d.path(),
    ));
    let v: serde_json::Value =
        serde_json::from_str(&doc.stdout()).unwrap_or_else(|e| panic!("{e}: {doc:?}"));
    assert_eq!(v["can_record"], false, "{doc:?}");
    assert_eq!(doc.code(), Some(1), "{doc:?}");
    let rec = run(ebpf_prof(
        &[
            "record",
            "--filter",
            "zzz_nomatch",
            "-n",
            "1000",
            "-F",
            "99",
        ],
        d.path(),
    ));
    assert_eq!(rec.code(), Some(1), "{rec:?}");
    assert!(!d.path().join("perf.data").exists());

    std::fs::write(
        d.path().join("every.bpf.o"),
        ebpf_prof::bpf::HOOK_EVERY_SYSCALL,
    )
    .unwrap();
    let hook = hold(d.path(), "every.bpf.o", "count_syscall");
    doctor_lists_the_held_hook(d.path());
    release(hook, "count_syscall");
}

#[test]
#[ignore = "needs root: scripts/test.sh runs it (or as root: cargo test -- --include-ignored)"]
fn record_takes_a_hook_whose_names_match_nothing_of_the_old_grep() {
    if !need_root("record_takes_a_hook_whose_names_match_nothing_of_the_old_grep") {
        return;
    }
    let _one = ONE.lock().unwrap_or_else(|e| e.into_inner());

    let d = tempfile::tempdir().unwrap();
    std::fs::write(
        d.path().join("every.bpf.o"),
        ebpf_prof::bpf::HOOK_EVERY_SYSCALL,
    )
    .unwrap();
    let count = iterations(20_000);
    let r = run(ebpf_prof(
        &["record", "--load", "every.bpf.o", "-n", &count, "-F", "499"],
        d.path(),
    ));
    assert_eq!(r.code(), Some(0), "{r:?}");
    assert!(r.stderr().contains("count_syscall"), "{r:?}");
    let json = std::fs::read_to_string(d.path().join("perf.data.json")).unwrap();
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(v["schema"], 1, "perf.data.json has its schema: {json}");
    let loaded = v["loaded_programs"].as_array().unwrap();
    assert!(
        loaded
            .iter()
            .any(|p| p["name"] == "drop_syscall" && p["type"] == "tracepoint"),
        "{json}"
    );
    assert!(!bpf_symbol_loaded("count_syscall"));
}

#[test]
#[ignore = "needs root: scripts/test.sh runs it (or as root: cargo test -- --include-ignored)"]
fn a_filter_matching_none_of_the_loaded_object_is_refused() {
    if !need_root("a_filter_matching_none_of_the_loaded_object_is_refused") {
        return;
    }
    let _one = ONE.lock().unwrap_or_else(|e| e.into_inner());
    let d = tempfile::tempdir().unwrap();
    std::fs::write(d.path().join("hook.bpf.o"), ebpf_prof::bpf::SAMPLE_HOOK).unwrap();
    let r = run(ebpf_prof(
        &[
            "record",
            "--load",
            "hook.bpf.o",
            "--filter",
            "zzz_nomatch",
            "-n",
            "1000",
            "-F",
            "99",
        ],
        d.path(),
    ));
    assert_eq!(r.code(), Some(1), "{r:?}");
    assert!(r.stderr().contains("zzz_nomatch"), "{r:?}");
    assert!(
        r.stderr().contains("tail_call_security_check"),
        "the refusal lists what was found: {r:?}"
    );
    assert!(!d.path().join("perf.data").exists());
}

#[test]
#[ignore = "needs root: scripts/test.sh runs it (or as root: cargo test -- --include-ignored)"]
fn hook_warns_when_program_symbols_are_not_listed() {
    if !need_root("hook_warns_when_program_symbols_are_not_listed") {
        return;
    }
    let _one = ONE.lock().unwrap_or_else(|e| e.into_inner());
    let d = tempfile::tempdir().unwrap();
    std::fs::write(
        d.path().join("every.bpf.o"),
        ebpf_prof::bpf::HOOK_EVERY_SYSCALL,
    )
    .unwrap();
    let _off = SysctlSet::new("net.core.bpf_jit_kallsyms", "0");
    let r = run(ebpf_prof(
        &["hook", "--load", "every.bpf.o", "--seconds", "1"],
        d.path(),
    ));
    assert_eq!(r.code(), Some(0), "{r:?}");
    assert!(
        r.stderr()
            .contains("warning: net.core.bpf_jit_kallsyms is 0"),
        "{r:?}"
    );
}
