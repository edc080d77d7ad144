//! The BPF loader against the running kernel: the sample hook attaches, is named in
//! /proc/kallsyms, runs on openat and tail-calls, and is gone after drop; broken objects fail
//! with one clear line each.
//!
//! These tests need root. Without it they print why and return, except under `CI=true`, where
//! not being root fails them. Tests that load programs hold one lock, so that no test's hook
//! is attached while another measures or checks what is left.

mod common;

use std::ffi::CString;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use ebpf_prof::bpf::{
    attach, lsm_supported, map_pressure, Attached, ObjectSource, ProgramInfo, HOOK_LOOKUPS_A,
    HOOK_LOOKUPS_A_NAME, HOOK_LOOKUPS_B, HOOK_LOOKUPS_B_NAME, SAMPLE_HOOK, SAMPLE_HOOK_LSM,
    SAMPLE_HOOK_REJECTED, SAMPLE_NO_PROGRAMS,
};
use ebpf_prof::error::exit_code;
use libbpf_rs::query::{ProgInfoIter, ProgInfoQueryOptions};

static KERNEL: Mutex<()> = Mutex::new(());

/// The hook's `hits` slots (fixtures/hooks/openat_hook_common.h).
const HIT_ENTRY: u32 = 0;
const HIT_POLICY: u32 = 1;
const HIT_CALLBACK: u32 = 2;

/// Takes the kernel lock if we are root; `None` (after saying why) when the test must skip.
fn kernel(test: &str) -> Option<MutexGuard<'static, ()>> {
    if !common::need_root(test) {
        return None;
    }
    Some(KERNEL.lock().unwrap_or_else(PoisonError::into_inner))
}

fn sample(name: &str, bytes: &'static [u8]) -> ObjectSource<'static> {
    let name: &'static str = Box::leak(name.to_string().into_boxed_str());
    ObjectSource::Bytes { name, bytes }
}

fn attach_sample() -> Attached {
    match attach(sample("openat_hook", SAMPLE_HOOK)) {
        Ok(attached) => attached,
        Err(err) => panic!("attaching the sample hook failed: {err:#}"),
    }
}

fn program<'a>(attached: &'a Attached, name: &str) -> &'a ProgramInfo {
    let found = attached.programs().iter().find(|p| p.name == name);
    found.unwrap_or_else(|| panic!("no program {name} in {:?}", attached.programs()))
}

fn kallsyms() -> String {
    std::fs::read_to_string("/proc/kallsyms").expect("read /proc/kallsyms")
}

/// The kallsyms names at the addresses of a program's JITed functions (main and subprograms).
fn jited_symbols(id: u32) -> Vec<String> {
    let opts = ProgInfoQueryOptions::default().include_jited_ksyms(true);
    let info = ProgInfoIter::with_query_opts(opts).find(|p| p.id == id);
    let info = info.unwrap_or_else(|| panic!("program {id} not found"));
    let symbols = kallsyms();
    info.jited_ksyms
        .iter()
        .filter_map(|addr| {
            let prefix = format!("{:016x} ", *addr as usize);
            let line = symbols.lines().find(|l| l.starts_with(&prefix))?;
            line.split_whitespace().nth(2).map(str::to_string)
        })
        .collect()
}

fn program_exists(id: u32) -> bool {
    libbpf_rs::Program::fd_from_id(id).is_ok()
}

/// Ids of every loaded program, from `bpftool -j prog show` (libbpf if bpftool is missing).
fn loaded_program_ids() -> Vec<u64> {
    let output = std::process::Command::new("bpftool")
        .args(["-j", "prog", "show"])
        .output();
    let Ok(output) = output.map_err(|e| eprintln!("bpftool: {e}; asking libbpf")) else {
        return ProgInfoIter::default().map(|p| u64::from(p.id)).collect();
    };
    assert!(output.status.success(), "bpftool prog show failed");
    let progs: serde_json::Value = serde_json::from_slice(&output.stdout).expect("bpftool JSON");
    let list = progs.as_array().cloned().unwrap_or_default();
    list.iter().filter_map(|p| p["id"].as_u64()).collect()
}

/// After drop, the kernel frees programs asynchronously (RCU): wait until none of `programs`
/// exists, is listed by bpftool, or is named in kallsyms.
fn assert_gone(programs: &[ProgramInfo]) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let symbols = kallsyms();
        let listed = loaded_program_ids();
        let left: Vec<&ProgramInfo> = programs
            .iter()
            .filter(|p| {
                program_exists(p.id)
                    || listed.contains(&u64::from(p.id))
                    || symbols.contains(&format!("bpf_prog_{}_{}", p.tag, p.name))
            })
            .collect();
        if left.is_empty() {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "still loaded after drop: {left:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn open_hostname(times: usize) {
    for _ in 0..times {
        std::fs::File::open("/etc/hostname").expect("open /etc/hostname");
    }
}

#[test]
#[ignore = "needs root: scripts/test.sh runs it (or as root: cargo test -- --include-ignored)"]
fn sample_hook_programs_are_named_in_kallsyms_and_gone_after_drop() {
    let Some(_kernel) = kernel("sample_hook_programs_are_named_in_kallsyms") else {
        return;
    };
    let attached = attach_sample();
    assert_eq!(attached.name(), "openat_hook");
    let entry = program(&attached, "tail_call_security_check").clone();
    let policy = program(&attached, "enforce_access_policy").clone();
    assert!(entry.attached && entry.section == "tracepoint/syscalls/sys_enter_openat");
    assert!(
        !policy.attached,
        "a tail-call target must not be attached: {policy:?}"
    );
    for p in [&entry, &policy] {
        assert_eq!(p.tag.len(), 16, "{p:?}");
        assert!(p.tag.chars().all(|c| c.is_ascii_hexdigit()), "{p:?}");
    }

    let symbols = kallsyms();
    for p in [&entry, &policy] {
        let symbol = format!("bpf_prog_{}_{}", p.tag, p.name);
        assert!(symbols.contains(&symbol), "{symbol} not in /proc/kallsyms");
    }
    // The subprogram is a JITed function of enforce_access_policy's program.
    let functions = jited_symbols(policy.id);
    assert!(
        functions
            .iter()
            .any(|s| s.starts_with("bpf_prog_") && s.ends_with("_path_check_callback")),
        "path_check_callback not among {functions:?}"
    );
    assert!(functions
        .iter()
        .any(|s| s.ends_with("_enforce_access_policy")));

    let programs = attached.programs().to_vec();
    drop(attached);
    assert_gone(&programs);
}

#[test]
#[ignore = "needs root: scripts/test.sh runs it (or as root: cargo test -- --include-ignored)"]
fn sample_hook_runs_on_openat_and_reaches_the_tail_call() {
    let Some(_kernel) = kernel("sample_hook_runs_on_openat") else {
        return;
    };
    let attached = attach_sample();
    let read = |slot| attached.read_counter("hits", slot).expect("read hits");
    let before = [read(HIT_ENTRY), read(HIT_POLICY), read(HIT_CALLBACK)];
    open_hostname(50);
    let after = [read(HIT_ENTRY), read(HIT_POLICY), read(HIT_CALLBACK)];
    // Other processes open files too, so at least our 50.
    for (slot, (b, a)) in before.iter().zip(after).enumerate() {
        assert!(a >= b + 50, "hits[{slot}] went from {b} to {a}");
    }
    let programs = attached.programs().to_vec();
    drop(attached);
    assert_gone(&programs);
}

#[test]
#[ignore = "needs root: scripts/test.sh runs it (or as root: cargo test -- --include-ignored)"]
fn object_from_a_path_attaches_under_its_path() {
    let Some(_kernel) = kernel("object_from_a_path_attaches") else {
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("openat_hook.bpf.o");
    std::fs::write(&path, SAMPLE_HOOK).expect("write object");
    let attached = attach(ObjectSource::Path(&path)).expect("attach from path");
    assert_eq!(attached.name(), path.display().to_string());
    assert_eq!(attached.programs().iter().filter(|p| p.attached).count(), 1);
    let programs = attached.programs().to_vec();
    drop(attached);
    assert_gone(&programs);
}

#[test]
#[ignore = "needs root: scripts/test.sh runs it (or as root: cargo test -- --include-ignored)"]
fn lookup_pair_attaches_under_its_names_and_leaves_its_table_empty() {
    let Some(_kernel) = kernel("lookup_pair_attaches_under_its_names") else {
        return;
    };
    for (name, bytes) in [
        (HOOK_LOOKUPS_A_NAME, HOOK_LOOKUPS_A),
        (HOOK_LOOKUPS_B_NAME, HOOK_LOOKUPS_B),
    ] {
        let attached = attach(sample(name, bytes)).expect("attach the lookup hook");
        // The program is named after its version: lookups_2, lookups_4.
        let prog = program(&attached, name).clone();
        assert!(prog.attached, "{prog:?}");
        let symbol = format!("bpf_prog_{}_{}", prog.tag, prog.name);
        assert!(
            kallsyms().contains(&symbol),
            "{symbol} not in /proc/kallsyms"
        );
        let calls = || attached.read_counter("calls", 0).expect("read calls");
        let before = calls();
        open_hostname(100);
        assert!(
            calls() >= before + 100,
            "{name}: calls {before} -> {}",
            calls()
        );
        let maps = map_pressure(&attached.map_ids()).expect("map_pressure");
        let table = maps
            .iter()
            .find(|m| m.name == "lookup_table")
            .expect("lookup_table");
        assert_eq!((table.counted, table.entries), (true, 0), "{table:?}");
        let programs = attached.programs().to_vec();
        drop(attached);
        assert_gone(&programs);
    }
}

/// The first line of an error, and the error's exit code.
fn failure(src: ObjectSource<'_>) -> (String, i32) {
    let Err(err) = attach(src) else {
        panic!("attach unexpectedly succeeded");
    };
    (format!("{err:#}"), exit_code(&err))
}

#[test]
fn bytes_that_are_not_elf_are_refused() {
    let (message, code) = failure(sample("notes.txt", b"just some text, not an object"));
    assert!(
        message.starts_with("notes.txt is not a BPF object (ELF): "),
        "{message}"
    );
    assert_eq!(message.lines().count(), 1, "{message}");
    assert_eq!(code, 2);
}

#[test]
fn missing_file_is_a_usage_error() {
    let path = std::path::Path::new("/nonexistent/hook.bpf.o");
    let (message, code) = failure(ObjectSource::Path(path));
    assert!(message.contains("/nonexistent/hook.bpf.o"), "{message}");
    assert_eq!(code, 2);
}

#[test]
fn object_without_programs_is_refused() {
    let (message, code) = failure(sample("no_programs", SAMPLE_NO_PROGRAMS));
    assert!(
        message.starts_with("no_programs has no BPF programs"),
        "{message}"
    );
    assert_eq!(code, 2);
}

#[test]
#[ignore = "needs root: scripts/test.sh runs it (or as root: cargo test -- --include-ignored)"]
fn verifier_rejection_quotes_the_verifier_log() {
    let Some(_kernel) = kernel("verifier_rejection_quotes_the_verifier_log") else {
        return;
    };
    let (message, code) = failure(sample("verifier_reject", SAMPLE_HOOK_REJECTED));
    let first = message.lines().next().unwrap_or_default();
    assert!(
        first.contains("verifier rejected program 'missing_null_check'"),
        "{message}"
    );
    assert!(first.contains("map_value_or_null"), "{message}");
    let log_lines = message.lines().skip(2).count();
    assert!((3..=15).contains(&log_lines), "{message}");
    assert_eq!(code, 2);
}

#[test]
#[ignore = "needs root: scripts/test.sh runs it (or as root: cargo test -- --include-ignored)"]
fn unprivileged_load_says_it_needs_root() {
    let Some(_kernel) = kernel("unprivileged_load_says_it_needs_root") else {
        return;
    };
    // Credentials are per thread at the syscall level: this thread alone becomes nobody.
    let outcome = std::thread::spawn(|| {
        // SAFETY: raw setresuid changes only the calling thread, which ends right after.
        let ret = unsafe { libc::syscall(libc::SYS_setresuid, 65534, 65534, 65534) };
        assert_eq!(ret, 0, "setresuid");
        failure(sample("openat_hook", SAMPLE_HOOK))
    })
    .join()
    .expect("unprivileged thread");
    let (message, code) = outcome;
    assert!(
        message.starts_with("loading BPF programs needs root (or CAP_BPF+CAP_PERFMON)"),
        "{message}"
    );
    assert_eq!(code, 2);
}

#[test]
#[ignore = "needs root: scripts/test.sh runs it (or as root: cargo test -- --include-ignored)"]
fn lsm_variant_is_refused_here_or_attaches() {
    let Some(_kernel) = kernel("lsm_variant_is_refused_here_or_attaches") else {
        return;
    };
    let (supported, reason) = lsm_supported();
    match attach(sample("openat_hook_lsm", SAMPLE_HOOK_LSM)) {
        Ok(attached) => {
            assert!(
                supported,
                "LSM hook attached though lsm_supported said: {reason}"
            );
            let entry = program(&attached, "tail_call_security_check");
            assert!(entry.attached);
            assert!(!program(&attached, "enforce_access_policy").attached);
            let programs = attached.programs().to_vec();
            drop(attached);
            assert_gone(&programs);
        }
        Err(err) => {
            let message = format!("{err:#}");
            assert!(!supported, "lsm_supported said yes, yet: {message}");
            assert!(message.contains("lockdown"), "{message}");
            assert!(message.contains("lsm programs"), "{message}");
            assert!(reason.contains("lockdown"), "{reason}");
            assert_eq!(exit_code(&err), 2);
        }
    }
}

/// `clock_gettime`-timed raw openat(2) calls, as in the reference harness; sorted ns.
fn time_openat(calls: usize) -> Vec<u64> {
    let path = CString::new("/etc/hostname").expect("path");
    let mut samples = Vec::with_capacity(calls);
    for _ in 0..calls {
        let start = Instant::now();
        // SAFETY: a valid NUL-terminated path; the fd is closed right after.
        let fd = unsafe {
            libc::syscall(
                libc::SYS_openat,
                libc::AT_FDCWD,
                path.as_ptr(),
                libc::O_RDONLY,
            )
        };
        let took = start.elapsed();
        assert!(fd >= 0, "openat failed");
        // SAFETY: fd is ours.
        unsafe { libc::close(fd as libc::c_int) };
        samples.push(took.as_nanos() as u64);
    }
    samples.sort_unstable();
    samples
}

fn percentile(sorted: &[u64], p: usize) -> u64 {
    sorted[(sorted.len() * p / 100).min(sorted.len() - 1)]
}

/// Prints (does not assert) what the sample hook adds to one openat.
#[test]
#[ignore = "needs root: scripts/test.sh runs it (or as root: cargo test -- --include-ignored)"]
fn sample_hook_cost_per_openat() {
    let Some(_kernel) = kernel("sample_hook_cost_per_openat") else {
        return;
    };
    const CALLS: usize = 100_000;
    time_openat(CALLS / 10); // warm the dentry cache and the CPU
    let before = time_openat(CALLS);
    let attached = attach_sample();
    let hooked = time_openat(CALLS);
    let programs = attached.programs().to_vec();
    drop(attached);
    let after = time_openat(CALLS);
    let base = (percentile(&before, 50) + percentile(&after, 50)) / 2;
    let with = percentile(&hooked, 50);
    eprintln!(
        "openat of /etc/hostname, {CALLS} calls: p50 {base} ns without the hook \
         (before {}, after {}), {with} ns with it: +{} ns per call; p99 {} -> {} ns",
        percentile(&before, 50),
        percentile(&after, 50),
        with.saturating_sub(base),
        percentile(&before, 99),
        percentile(&hooked, 99),
    );
    assert_gone(&programs);
}
