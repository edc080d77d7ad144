//! What a failed, killed or interrupted run leaves, against the real machine as root: the
//! user's recording is never lost to a run that did not produce a newer one, a killed run's
//! recording reaches its place whatever directory the next run starts in, a signal before perf
//! starts is honoured, and a malformed object is refused without an abort. Root only (a failure
//! under CI=true, a skip elsewhere).

mod common;
use common::runs::*;
use common::*;
use std::ffi::CString;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

const MINE: &str = "the user's only recording";

/// A recording in `dir` with `extra` options (2000 iterations unless they say otherwise).
fn record(dir: &Path, extra: &[&str]) -> Run {
    let mut a = vec!["record", "--allow-no-bpf"];
    if !extra.contains(&"-n") {
        a.extend(["-n", "2000"]);
    }
    a.extend_from_slice(extra);
    run(ebpf_prof(&a, dir))
}

/// `perf.data` of `dir` is still the user's, nothing was moved aside and no private directory
/// is left.
fn only_recording_kept(dir: &Path, after: &Run) {
    let data = std::fs::read_to_string(dir.join("perf.data"));
    assert_eq!(data.ok().as_deref(), Some(MINE), "{after:?}");
    assert!(!dir.join("perf.data.old").exists(), "{after:?}");
    assert!(private_dirs(dir).is_empty(), "{after:?}");
}

#[test]
#[ignore = "needs root: scripts/test.sh runs it (or as root: cargo test -- --include-ignored)"]
fn regression_failing_records_keep_the_only_perf_data() {
    if !need_root("regression_failing_records_keep_the_only_perf_data") {
        return;
    }
    let _s = serial();
    let d = tempfile::tempdir().unwrap();
    std::fs::write(d.path().join("perf.data"), MINE).unwrap();
    for _ in 0..2 {
        let r = record(d.path(), &["--perf-arg", "--clockid=nonsense"]);
        assert_eq!(r.code(), Some(3), "perf refused its argument: {r:?}");
        only_recording_kept(d.path(), &r);
    }
    let r = record(d.path(), &["-F", "0"]);
    assert_eq!(r.code(), Some(2), "{r:?}");
    assert!(
        r.stderr().contains("error: --freq 0 is out of range"),
        "{r:?}"
    );
    only_recording_kept(d.path(), &r);
    let r = record(
        d.path(),
        &["--perf-arg", "-o", "--perf-arg", "elsewhere.data"],
    );
    assert_eq!(r.code(), Some(2), "{r:?}");
    assert!(r.stderr().contains("error: --perf-arg -o:"), "{r:?}");
    assert!(!d.path().join("elsewhere.data").exists());
    only_recording_kept(d.path(), &r);
}

/// A small tmpfs mounted on a directory for the life of the value (lazily unmounted after).
struct SmallTmpfs(PathBuf);

impl SmallTmpfs {
    fn mount(dir: &Path, bytes: u64) -> std::io::Result<SmallTmpfs> {
        let target = CString::new(dir.to_str().unwrap()).unwrap();
        let options = CString::new(format!("size={bytes},mode=0755")).unwrap();
        // SAFETY: NUL-terminated strings that outlive the call.
        let r = unsafe {
            libc::mount(
                c"tmpfs".as_ptr(),
                target.as_ptr(),
                c"tmpfs".as_ptr(),
                0,
                options.as_ptr().cast(),
            )
        };
        match r {
            0 => Ok(SmallTmpfs(dir.to_path_buf())),
            _ => Err(std::io::Error::last_os_error()),
        }
    }
}

impl Drop for SmallTmpfs {
    fn drop(&mut self) {
        let target = CString::new(self.0.to_str().unwrap()).unwrap();
        // SAFETY: a NUL-terminated path of a mount this test made.
        unsafe { libc::umount2(target.as_ptr(), libc::MNT_DETACH) };
    }
}

#[test]
#[ignore = "needs root: scripts/test.sh runs it (or as root: cargo test -- --include-ignored)"]
fn regression_a_full_disk_keeps_the_only_perf_data() {
    if !need_root("regression_a_full_disk_keeps_the_only_perf_data") {
        return;
    }
    let _s = serial();
    let d = tempfile::tempdir().unwrap();
    let small = d.path().join("small");
    std::fs::create_dir(&small).unwrap();
    // Room for a little more than the kallsyms snapshot: the run fills the disk before perf
    // can finish its file (or while writing the snapshot).
    let kallsyms = std::fs::read_to_string("/proc/kallsyms").unwrap().len() as u64;
    let _tmpfs = match SmallTmpfs::mount(&small, kallsyms + (64 << 10)) {
        Ok(m) => m,
        Err(e) if !under_ci() => {
            eprintln!("skipping the full-disk case: cannot mount a tmpfs here ({e})");
            return;
        }
        Err(e) => panic!("cannot mount a tmpfs under CI=true: {e}"),
    };
    std::fs::write(small.join("perf.data"), MINE).unwrap();
    for _ in 0..2 {
        let r = record(d.path(), &["-o", "small/perf.data", "-n", "200000"]);
        assert_ne!(r.code(), Some(0), "the disk was full: {r:?}");
        assert!(r.stderr().contains("No space left on device"), "{r:?}");
        assert!(!r.stderr().contains("panicked"), "{r:?}");
        only_recording_kept(&small, &r);
    }
}

#[test]
#[ignore = "needs root: scripts/test.sh runs it (or as root: cargo test -- --include-ignored)"]
fn regression_a_signal_before_perf_starts_ends_the_run() {
    if !need_root("regression_a_signal_before_perf_starts_ends_the_run") {
        return;
    }
    let _s = serial();
    let _off = SysctlSet::new("net.core.bpf_jit_kallsyms", "0");
    let d = tempfile::tempdir().unwrap();
    std::fs::write(d.path().join("perf.data"), MINE).unwrap();
    let child = record_with(d.path(), "stop:record:before-perf", &[]);
    let pid = child.id();
    wait_stopped(pid);
    let _resume = Resume(pid);
    kill(pid, libc::SIGTERM);
    kill(pid, libc::SIGCONT);
    let (code, err) = finish(child);
    assert_eq!(code, Some(128 + libc::SIGTERM), "{err}");
    assert!(err.contains("interrupted by SIGTERM"), "{err}");
    assert!(!err.contains("Captured and wrote"), "perf never ran: {err}");
    assert_eq!(sysctl("net.core.bpf_jit_kallsyms"), "0", "{err}");
    let data = std::fs::read_to_string(d.path().join("perf.data")).unwrap();
    assert_eq!(data, MINE, "{err}");
    assert!(!d.path().join("perf.data.old").exists(), "{err}");
    assert!(private_dirs(d.path()).is_empty(), "{err}");
}

#[test]
#[ignore = "needs root: scripts/test.sh runs it (or as root: cargo test -- --include-ignored)"]
fn regression_a_killed_recording_is_handed_over_by_a_run_from_elsewhere() {
    if !need_root("regression_a_killed_recording_is_handed_over_by_a_run_from_elsewhere") {
        return;
    }
    let _s = serial();
    let d = tempfile::tempdir().unwrap();
    let elsewhere = tempfile::tempdir().unwrap();
    std::fs::write(d.path().join("perf.data"), MINE).unwrap();
    // Stopped once perf has finished and the previous recording has moved aside, before the
    // new one is moved into place: killed there, only the next run can hand it over.
    let mut child = record_with(d.path(), "stop:record:after-rotate", &[]);
    let pid = child.id();
    wait_stopped(pid);
    let _resume = Resume(pid);
    let note = PathBuf::from(format!("/run/ebpf-prof/{pid}.files"));
    let text = std::fs::read_to_string(&note).unwrap();
    assert!(
        !text.contains("\"./"),
        "the note holds absolute paths: {text}"
    );
    kill(pid, libc::SIGKILL);
    child.wait().unwrap();
    let r = run(ebpf_prof(&["doctor"], elsewhere.path()));
    assert!(
        r.stderr()
            .contains(&format!("moved the recording of ebpf-prof pid {pid}")),
        "{r:?}"
    );
    let old = std::fs::read_to_string(d.path().join("perf.data.old")).unwrap();
    assert_eq!(old, MINE);
    assert!(d.path().join("perf.data").is_file(), "{r:?}");
    assert!(d.path().join("perf.data.json").is_file(), "{r:?}");
    assert!(private_dirs(d.path()).is_empty(), "{r:?}");
    assert!(
        !note.exists(),
        "the note went once its recording was in place"
    );
}

#[test]
#[ignore = "needs root: scripts/test.sh runs it (or as root: cargo test -- --include-ignored)"]
fn regression_a_bad_byte_in_btf_is_refused_without_an_abort() {
    if !need_root("regression_a_bad_byte_in_btf_is_refused_without_an_abort") {
        return;
    }
    let _s = serial();
    let _off = SysctlSet::new("net.core.bpf_jit_kallsyms", "0");
    let d = tempfile::tempdir().unwrap();
    std::fs::write(
        d.path().join("bad.bpf.o"),
        common::object_with_a_bad_btf_string(),
    )
    .unwrap();
    let child = record_with(d.path(), "none", &["--load", "bad.bpf.o"]);
    let pid = child.id();
    let (code, err) = finish(child);
    assert_eq!(code, Some(2), "refused as a bad object, not aborted: {err}");
    assert!(!err.contains("panicked"), "{err}");
    let errors: Vec<&str> = err.lines().filter(|l| l.contains("error:")).collect();
    assert_eq!(errors.len(), 1, "{err}");
    assert!(errors[0].contains("bad.bpf.o"), "{err}");
    assert!(
        err.contains('\u{fffd}'),
        "the bad byte is shown, not fatal: {err}"
    );
    assert_eq!(sysctl("net.core.bpf_jit_kallsyms"), "0", "{err}");
    assert!(!Path::new(&format!("/run/ebpf-prof/{pid}.json")).exists());
}

#[test]
#[ignore = "needs root: scripts/test.sh runs it (or as root: cargo test -- --include-ignored)"]
fn an_aborted_record_is_put_right_by_the_next_start() {
    if !need_root("an_aborted_record_is_put_right_by_the_next_start") {
        return;
    }
    let _s = serial();
    let _off = SysctlSet::new("net.core.bpf_jit_kallsyms", "0");
    let d = tempfile::tempdir().unwrap();
    let child = record_with(d.path(), "abort:record:after-load", &[]);
    let pid = child.id();
    let (code, err) = finish(child);
    assert_eq!(code, None, "killed by SIGABRT: {err}");
    let state = PathBuf::from(format!("/run/ebpf-prof/{pid}.json"));
    assert!(state.exists(), "nothing could put it back yet");
    assert_eq!(sysctl("net.core.bpf_jit_kallsyms"), "1");
    let r = run(ebpf_prof(&["doctor"], d.path()));
    assert!(
        r.stderr().contains("restored net.core.bpf_jit_kallsyms=0"),
        "{r:?}"
    );
    assert_eq!(sysctl("net.core.bpf_jit_kallsyms"), "0");
    assert!(!state.exists());
}
