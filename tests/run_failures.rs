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

/// Whether `pid` is stopped (a `stop:` failpoint raised SIGSTOP).
fn stopped(pid: u32) -> bool {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    stat.rfind(')')
        .and_then(|i| stat.get(i + 2..))
        .is_some_and(|rest| rest.starts_with('T'))
}

/// `flame --folded` of a copy of the fixture recording, stopped at `failpoint` every time it
/// reads the file (first for the kernel build id, then to fold it); at stop number `at` the
/// file is cut to one page (0: never). Its exit status, stdout and stderr.
fn fold_cut_at(failpoint: &str, at: usize) -> (std::process::ExitStatus, String, String) {
    use std::os::unix::process::ExitStatusExt;
    let d = tempfile::tempdir().unwrap();
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/perf-data/hook-lines.data");
    let data = d.path().join("cut.data");
    std::fs::copy(fixture, &data).unwrap();
    let mut c = ebpf_prof(&["flame", "--folded", "cut.data"], d.path());
    c.env("EBPF_PROF_FAILPOINT", format!("stop:{failpoint}"))
        .stdout(std::fs::File::create(d.path().join("out")).unwrap())
        .stderr(std::process::Stdio::piped());
    let mut child = c.spawn().unwrap();
    let _resume = common::runs::Resume(child.id());
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let mut stops = 0;
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if stopped(child.id()) {
            stops += 1;
            if stops == at {
                let file = std::fs::OpenOptions::new().write(true).open(&data).unwrap();
                file.set_len(4096).unwrap();
            }
            common::runs::kill(child.id(), libc::SIGCONT);
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the run never reached {failpoint} or never ended"
        );
        std::thread::sleep(std::time::Duration::from_millis(10));
    };
    assert!(
        stops >= at.max(2),
        "the run stopped {stops} times at {failpoint}"
    );
    let mut err = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
    assert_eq!(status.signal(), None, "killed by a signal (SIGBUS?): {err}");
    let out = std::fs::read_to_string(d.path().join("out")).unwrap();
    (status, out, err)
}

fn errors(stderr: &str) -> Vec<&str> {
    stderr.lines().filter(|l| l.contains("error:")).collect()
}

#[test]
fn regression_a_perf_data_cut_while_it_is_read_is_one_line() {
    let _s = serial();
    // Cut between the fold's measure of the file and its read.
    let (status, _, err) = fold_cut_at("perfdata:measured", 2);
    assert_eq!(status.code(), Some(2), "{err}");
    let lines = errors(&err);
    assert_eq!(lines.len(), 1, "{err}");
    assert!(
        lines[0].contains("error: cut.data: truncated")
            && lines[0].contains("52445 bytes when opened and 4096 when read"),
        "{err}"
    );
}

#[test]
fn regression_a_perf_data_cut_after_it_was_read_folds_what_was_read() {
    let _s = serial();
    // Cut once the fold holds the bytes (a mapping of the file lost its pages here: SIGBUS).
    let (cut, folded, err) = fold_cut_at("perfdata:read", 2);
    assert_eq!(cut.code(), Some(0), "{err}");
    let (whole, expected, _) = fold_cut_at("perfdata:read", 0);
    assert_eq!(whole.code(), Some(0));
    assert!(!folded.is_empty());
    assert_eq!(folded, expected, "{err}");
}

/// `demo` in `dir` with a cost budget far too short for two rounds.
fn demo_too_short(dir: &Path) -> Run {
    run(ebpf_prof(
        &["demo", "--cost-time", "0.001s", "--dir", "demo"],
        dir,
    ))
}

#[test]
#[ignore = "needs root: scripts/test.sh runs it (or as root: cargo test -- --include-ignored)"]
fn regression_a_failed_demo_names_its_own_option_and_does_not_block_its_rerun() {
    if !need_root("regression_a_failed_demo_names_its_own_option_and_does_not_block_its_rerun") {
        return;
    }
    let _s = serial();
    let d = tempfile::tempdir().unwrap();
    for attempt in 0..2 {
        let r = demo_too_short(d.path());
        assert_eq!(r.code(), Some(2), "attempt {attempt}: {r:?}");
        let lines = r.stderr();
        let error = lines.lines().find(|l| l.contains("error:")).unwrap_or("");
        assert!(
            error.contains("error: --cost-time 0.001s is too short for two rounds: one round of the cost measurement (")
                && error.contains("-n is the recording's"),
            "attempt {attempt}: {r:?}"
        );
        assert!(!lines.contains("--max-time"), "{r:?}");
    }
    let object = d.path().join("demo/hook.bpf.o");
    assert!(object.is_file(), "the failed demo wrote its object");
    // A file of the same name that demo did not write still needs --force.
    std::fs::write(&object, b"not the sample hook").unwrap();
    let r = demo_too_short(d.path());
    assert_eq!(r.code(), Some(2), "{r:?}");
    assert!(
        r.stderr()
            .contains("error: demo/hook.bpf.o exists: pass --force to replace it"),
        "{r:?}"
    );
    assert_eq!(std::fs::read(&object).unwrap(), b"not the sample hook");
}
