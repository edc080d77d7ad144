//! Runs that fail on what they are given or on what changes under them: an output that cannot
//! be written is refused before the machine changes, a path that is not UTF-8 is a path like
//! any other, a perf.data cut short while it is read is one line and no crash, and a demo that
//! failed does not block its own rerun. The root cases fail under CI=true and skip elsewhere.

mod common;
use common::*;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::process::Command;
use std::sync::Mutex;

static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// `record` in its own mount namespace, where `dir` is bind-mounted onto itself read-only:
/// nothing of the mount is seen outside, and it goes when the run ends.
fn record_into_read_only(dir: &Path, cwd: &Path) -> Run {
    let script = r#"mount -o bind,ro "$1" "$1" && shift && exec "$@""#;
    let mut c = Command::new("unshare");
    c.args([
        "--mount",
        "--propagation",
        "private",
        "sh",
        "-c",
        script,
        "sh",
    ])
    .arg(dir)
    .arg(bin())
    .args([
        "record",
        "--allow-no-bpf",
        "-n",
        "1000",
        "-o",
        "ro/perf.data",
    ])
    .current_dir(cwd)
    // A panic once the object is loaded: a run that gets that far ends with 101, not 2.
    .env("EBPF_PROF_FAILPOINT", "record:after-load")
    .env_remove("SUDO_UID")
    .env_remove("SUDO_GID");
    run(c)
}

#[test]
#[ignore = "needs root: scripts/test.sh runs it (or as root: cargo test -- --include-ignored)"]
fn regression_a_read_only_output_is_refused_before_anything_changes() {
    if !need_root("regression_a_read_only_output_is_refused_before_anything_changes") {
        return;
    }
    let _s = serial();
    let _off = SysctlSet::new("net.core.bpf_jit_kallsyms", "0");
    let d = tempfile::tempdir().unwrap();
    let ro = d.path().join("ro");
    std::fs::create_dir(&ro).unwrap();
    let r = record_into_read_only(&ro, d.path());
    assert_eq!(r.code(), Some(2), "{r:?}");
    let errors: Vec<String> = r
        .stderr()
        .lines()
        .filter(|l| l.contains("error:"))
        .map(String::from)
        .collect();
    assert_eq!(errors.len(), 1, "{r:?}");
    assert!(
        errors[0].contains("error: -o ro/perf.data: cannot write in ro: Read-only file system"),
        "{r:?}"
    );
    assert!(!errors[0].contains("os error"), "{r:?}");
    assert!(!r.stderr().contains("running:"), "perf never ran: {r:?}");
    assert_eq!(sysctl("net.core.bpf_jit_kallsyms"), "0", "{r:?}");
    assert_eq!(std::fs::read_dir(&ro).unwrap().count(), 0, "{r:?}");
}

#[test]
#[ignore = "needs root: scripts/test.sh runs it (or as root: cargo test -- --include-ignored)"]
fn regression_an_output_path_that_is_not_utf8_is_recorded_into() {
    if !need_root("regression_an_output_path_that_is_not_utf8_is_recorded_into") {
        return;
    }
    let _s = serial();
    let d = tempfile::tempdir().unwrap();
    let name = OsStr::from_bytes(b"caf\xe9.data");
    let mut c = ebpf_prof(&["record", "--allow-no-bpf", "-n", "1000", "-o"], d.path());
    c.arg(name);
    let r = run(c);
    assert_eq!(r.code(), Some(0), "{r:?}");
    for suffix in ["", ".json", ".kallsyms", ".samples"] {
        let mut file = name.to_os_string();
        file.push(suffix);
        assert!(d.path().join(&file).is_file(), "{file:?} missing: {r:?}");
    }
    let mut c = ebpf_prof(&["report"], d.path());
    c.arg(name);
    let read = run(c);
    assert_eq!(read.code(), Some(0), "the recording reads back: {read:?}");
}
