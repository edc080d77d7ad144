//! Signals during `record`, checked against the real sysctls and the loaded programs: SIGINT,
//! SIGTERM, SIGHUP and SIGQUIT finish the profile and put everything back; a second signal aborts,
//! removes the incomplete perf.data and still puts everything back; after SIGKILL the next start
//! restores what the state file records. Root only (a failure under CI=true, a skip elsewhere).

mod common;
use common::*;
use std::io::Read;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

static SERIAL: Mutex<()> = Mutex::new(());

fn hook_loaded() -> bool {
    bpf_symbol_loaded("_path_check_callback")
}

/// Start a long recording of the sample hook; return once perf runs the benchmark.
fn start_recording(dir: &Path) -> Child {
    std::fs::write(dir.join("hook.bpf.o"), ebpf_prof::bpf::SAMPLE_HOOK).unwrap();
    let mut c = ebpf_prof(
        &[
            "record",
            "-o",
            "perf.data",
            "--load",
            "hook.bpf.o",
            "-n",
            "3000000",
        ],
        dir,
    );
    c.stdout(Stdio::null())
        .stderr(std::fs::File::create(dir.join("stderr.txt")).unwrap());
    let child = c.spawn().unwrap();
    let deadline = Instant::now() + patience(Duration::from_secs(30));
    while !std::fs::read_to_string(dir.join("stderr.txt"))
        .unwrap()
        .contains("running:")
    {
        assert!(Instant::now() < deadline, "record never started perf");
        std::thread::sleep(Duration::from_millis(20));
    }
    // perf opens its output before it starts the benchmark: a signal before then finds no
    // file to finish (under emulation that takes seconds).
    while !perf_has_its_output_open(child.id()) {
        assert!(Instant::now() < deadline, "perf never opened its output");
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(500));
    child
}

/// Whether a child of `pid` has a file named perf.data open (false once `pid` is gone).
fn perf_has_its_output_open(pid: u32) -> bool {
    let children = std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children"));
    let children = children.unwrap_or_default();
    children.split_whitespace().any(|child| {
        std::fs::read_dir(format!("/proc/{child}/fd"))
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|fd| std::fs::read_link(fd.path()).ok())
            .any(|target| target.file_name().is_some_and(|n| n == "perf.data"))
    })
}

fn wait(mut child: Child, secs: u64) -> std::process::ExitStatus {
    let deadline = Instant::now() + patience(Duration::from_secs(secs));
    loop {
        if let Some(st) = child.try_wait().unwrap() {
            return st;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("record did not end within {secs} s of the signal");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn stderr_of(dir: &Path) -> String {
    let mut s = String::new();
    std::fs::File::open(dir.join("stderr.txt"))
        .unwrap()
        .read_to_string(&mut s)
        .unwrap();
    s
}

/// perf's own temp files (a SIGKILLed perf leaves its /tmp/perf-vdso.so-* behind).
fn perf_temp_files() -> std::collections::BTreeSet<String> {
    std::fs::read_dir("/tmp")
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("perf-vdso.so-"))
        .collect()
}

fn kill(pid: u32, sig: i32) {
    // SAFETY: signalling a child we started.
    unsafe { libc::kill(pid as i32, sig) };
}

fn perf_can_read(dir: &Path) -> bool {
    Command::new("perf")
        .args(["evlist", "-i"])
        .arg(dir.join("perf.data"))
        .output()
        .is_ok_and(|o| o.status.success())
}

fn one_signal_finishes_and_restores(sig: i32) {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let d = tempfile::tempdir().unwrap();
    let _off = SysctlSet::new("net.core.bpf_jit_kallsyms", "0");
    let child = start_recording(d.path());
    kill(child.id(), sig);
    let st = wait(child, 60);
    let err = stderr_of(d.path());
    assert_eq!(st.code(), Some(128 + sig), "{err}");
    assert!(err.contains("interrupted by"), "{err}");
    // The note on the samples file named it by the private directory's fd
    // (`/proc/PID/fd/N/perf.data.samples`); it names the file the user has.
    assert!(!err.contains("/proc/"), "{err}");
    assert!(
        !err.contains("samples file") || err.contains("(perf.data.samples: "),
        "{err}"
    );
    assert!(perf_can_read(d.path()), "perf.data must be finished: {err}");
    let json: serde_json::Value =
        serde_json::from_slice(&std::fs::read(d.path().join("perf.data.json")).unwrap()).unwrap();
    assert_eq!(json["interrupted"], true);
    assert_eq!(
        sysctl("net.core.bpf_jit_kallsyms"),
        "0",
        "restored after the signal"
    );
    assert!(!hook_loaded(), "hook detached after the signal");
}

#[test]
#[ignore = "needs root: scripts/test.sh runs it (or as root: cargo test -- --include-ignored)"]
fn sigint_finishes_the_profile_and_restores() {
    if need_root("sigint_finishes_the_profile_and_restores") {
        one_signal_finishes_and_restores(libc::SIGINT);
    }
}

#[test]
#[ignore = "needs root: scripts/test.sh runs it (or as root: cargo test -- --include-ignored)"]
fn sigterm_finishes_the_profile_and_restores() {
    if need_root("sigterm_finishes_the_profile_and_restores") {
        one_signal_finishes_and_restores(libc::SIGTERM);
    }
}

#[test]
#[ignore = "needs root: scripts/test.sh runs it (or as root: cargo test -- --include-ignored)"]
fn sighup_finishes_the_profile_and_restores() {
    if need_root("sighup_finishes_the_profile_and_restores") {
        one_signal_finishes_and_restores(libc::SIGHUP);
    }
}

/// Ctrl-\\ (SIGQUIT) is a request to stop like the others, not an instant death
/// that leaves the sysctls changed and perf.data unfinished.
#[test]
#[ignore = "needs root: scripts/test.sh runs it (or as root: cargo test -- --include-ignored)"]
fn sigquit_finishes_the_profile_and_restores() {
    if need_root("sigquit_finishes_the_profile_and_restores") {
        one_signal_finishes_and_restores(libc::SIGQUIT);
    }
}

#[test]
#[ignore = "needs root: scripts/test.sh runs it (or as root: cargo test -- --include-ignored)"]
fn second_signal_aborts_removes_the_partial_file_and_restores() {
    if !need_root("second_signal_aborts_removes_the_partial_file_and_restores") {
        return;
    }
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let d = tempfile::tempdir().unwrap();
    let _off = SysctlSet::new("net.core.bpf_jit_kallsyms", "0");
    let vdso_before = perf_temp_files();
    let child = start_recording(d.path());
    kill(child.id(), libc::SIGTERM);
    std::thread::sleep(Duration::from_millis(5));
    kill(child.id(), libc::SIGTERM);
    let st = wait(child, 30);
    let err = stderr_of(d.path());
    assert_ne!(st.code(), Some(0), "{err}");
    if err.contains("incomplete file was removed") {
        assert!(!d.path().join("perf.data").exists(), "{err}");
    } else {
        // perf may have finished between the two signals: then the file must be whole.
        assert!(perf_can_read(d.path()), "{err}");
    }
    assert!(
        perf_temp_files().is_subset(&vdso_before),
        "perf's temp files cleaned up after the abort"
    );
    assert_eq!(sysctl("net.core.bpf_jit_kallsyms"), "0");
    assert!(!hook_loaded());
}

/// The children of `pid` (`/proc/PID/task/PID/children`).
fn children_of(pid: u32) -> Vec<u32> {
    std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children"))
        .unwrap()
        .split_whitespace()
        .map(|p| p.parse().unwrap())
        .collect()
}

/// The state letter of process `pid` (`/proc/PID/stat`: R, S, D, Z, …); `None` once it is gone.
fn state_of(pid: impl std::fmt::Display) -> Option<String> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after_name = stat.rsplit(") ").next()?;
    after_name.split(' ').next().map(str::to_string)
}

/// Whether process `pid` still runs: it is there and not a zombie. A zombie has ended; only its
/// reaping is left, which falls to whoever inherited it (a virtme-ng guest's init reaps late).
fn still_runs(pid: u32) -> bool {
    state_of(pid).is_some_and(|state| state != "Z")
}

/// Wait (up to 30 s, longer under emulation) until none of `pids` runs; `what` is the failure,
/// told with the state and kernel wait channel of each process still there.
fn wait_until_gone(pids: &[u32], what: &str) {
    let deadline = Instant::now() + patience(Duration::from_secs(30));
    while pids.iter().any(|&p| still_runs(p)) {
        if Instant::now() > deadline {
            // The processes and their children (perf's benchmark).
            let mut all: Vec<String> = pids.iter().map(u32::to_string).collect();
            for p in pids {
                let children = std::fs::read_to_string(format!("/proc/{p}/task/{p}/children"));
                all.extend(
                    children
                        .unwrap_or_default()
                        .split_whitespace()
                        .map(String::from),
                );
            }
            let states: Vec<String> = all
                .iter()
                .map(|p| {
                    let state = state_of(p).unwrap_or_else(|| "gone".into());
                    let wchan = std::fs::read_to_string(format!("/proc/{p}/wchan"));
                    format!("{p}: state {state} in {}", wchan.unwrap_or_default())
                })
                .collect();
            panic!("{what}: {}", states.join("; "));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
#[ignore = "needs root: scripts/test.sh runs it (or as root: cargo test -- --include-ignored)"]
fn sigkill_is_recovered_by_the_next_start() {
    if !need_root("sigkill_is_recovered_by_the_next_start") {
        return;
    }
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let d = tempfile::tempdir().unwrap();
    let _off = SysctlSet::new("net.core.bpf_jit_kallsyms", "0");
    let vdso_before = perf_temp_files();
    let child = start_recording(d.path());
    let pid = child.id();
    let perf = children_of(pid);
    assert!(!perf.is_empty(), "perf runs as our child");
    assert!(
        Path::new(&format!("/run/ebpf-prof/{pid}.json")).exists(),
        "state written before the change"
    );
    kill(pid, libc::SIGKILL);
    wait(child, 10);
    // perf is told by PR_SET_PDEATHSIG to finish; wait for it (it is not our child).
    wait_until_gone(&perf, "perf still running after its parent was killed");
    assert!(!hook_loaded(), "the links died with the process");
    assert_eq!(
        sysctl("net.core.bpf_jit_kallsyms"),
        "1",
        "nothing could restore it yet"
    );
    let r = run(ebpf_prof(&["doctor"], d.path()));
    assert!(
        r.stderr().contains("restored net.core.bpf_jit_kallsyms=0"),
        "{r:?}"
    );
    assert_eq!(sysctl("net.core.bpf_jit_kallsyms"), "0");
    assert!(!Path::new(&format!("/run/ebpf-prof/{pid}.json")).exists());
    // perf writes into the run's private directory; with the run killed, the next
    // start moved its finished file into place.
    assert!(
        r.stderr()
            .contains(&format!("moved the recording of ebpf-prof pid {pid}")),
        "{r:?}"
    );
    assert!(
        perf_can_read(d.path()),
        "perf finished its file after SIGTERM from PDEATHSIG"
    );
    let left = std::fs::read_dir(d.path())
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with(".ebpf-prof-"))
        .count();
    assert_eq!(left, 0, "the private directory is gone");
    assert!(
        perf_temp_files().is_subset(&vdso_before),
        "perf cleaned up after itself"
    );
}

#[test]
#[ignore = "needs root: scripts/test.sh runs it (or as root: cargo test -- --include-ignored)"]
fn panic_midway_unwinds_through_every_guard() {
    if !need_root("panic_midway_unwinds_through_every_guard") {
        return;
    }
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let d = tempfile::tempdir().unwrap();
    let _off = SysctlSet::new("net.core.bpf_jit_kallsyms", "0");
    std::fs::write(d.path().join("hook.bpf.o"), ebpf_prof::bpf::SAMPLE_HOOK).unwrap();
    let mut c = ebpf_prof(&["record", "--load", "hook.bpf.o", "-n", "1000"], d.path());
    c.env("EBPF_PROF_FAILPOINT", "record:after-load");
    let r = run(c);
    assert_eq!(r.code(), Some(101), "a panic: {r:?}");
    assert!(r.stderr().contains("failpoint record:after-load"), "{r:?}");
    assert_eq!(
        sysctl("net.core.bpf_jit_kallsyms"),
        "0",
        "restored while unwinding"
    );
    assert!(!hook_loaded(), "detached while unwinding");
    let pid_files = std::fs::read_dir("/run/ebpf-prof")
        .map(|d| d.count())
        .unwrap_or(0);
    assert_eq!(pid_files, 0, "state file removed after restoring");
}
