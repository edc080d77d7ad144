//! Under sudo, and two runs beside other tools, against the real machine as root:
//! a link planted between the rotation and the hand-over (a deterministic failpoint stops the
//! run there), untrusted binaries, modes and owners of what a run leaves, the run lock, the
//! stats fallback's state file, the `--attach-cmd` loader's end, and another user's
//! directories, links and planted programs on the way to what root writes, loads and runs.
//! Root only (a failure under CI=true, a skip elsewhere).

mod common;
use common::runs::*;
use common::*;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

static SERIAL: Mutex<()> = Mutex::new(());
const NOBODY: u32 = 65534;

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// 12.1: between the rotation and the hand-over, a user plants `perf.data → victim` (and the
/// run record's name too). Root must neither truncate the victim nor replace the links.
#[test]
#[ignore = "needs root: scripts/test.sh runs it (or as root: cargo test -- --include-ignored)"]
fn link_planted_between_rotation_and_hand_over_is_not_followed() {
    if !need_root("link_planted_between_rotation_and_hand_over_is_not_followed") {
        return;
    }
    let _s = serial();
    let d = tempfile::tempdir().unwrap();
    let victims = tempfile::tempdir().unwrap();
    let victim = victims.path().join("nologin");
    std::fs::write(&victim, "keep").unwrap();
    std::fs::write(d.path().join("perf.data"), "previous").unwrap();
    let child = record_with(d.path(), "stop:record:after-rotate", &[]);
    let pid = child.id();
    wait_stopped(pid);
    let _resume = Resume(pid);
    assert_eq!(
        std::fs::read_to_string(d.path().join("perf.data.old")).unwrap(),
        "previous",
        "rotated before the failpoint"
    );
    std::os::unix::fs::symlink(&victim, d.path().join("perf.data")).unwrap();
    std::os::unix::fs::symlink(&victim, d.path().join("perf.data.json")).unwrap();
    kill(pid, libc::SIGCONT);
    let (code, err) = finish(child);
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains("appeared during the run and was left alone"),
        "{err}"
    );
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep", "{err}");
    for name in ["perf.data", "perf.data.json"] {
        let m = std::fs::symlink_metadata(d.path().join(name)).unwrap();
        assert!(m.file_type().is_symlink(), "{name} still the planted link");
    }
    let kept = private_dirs(d.path());
    assert_eq!(kept.len(), 1, "the recording is kept aside: {err}");
    assert!(kept[0].join("perf.data").is_file());
    assert_eq!(std::fs::metadata(&kept[0]).unwrap().mode() & 0o777, 0o700);
}

/// The private directory is made in the directory that was opened and checked, by its fd: a
/// directory swapped in at the same path after the check receives nothing.
#[test]
#[ignore = "needs root: scripts/test.sh runs it (or as root: cargo test -- --include-ignored)"]
fn the_private_directory_lands_in_the_directory_opened_not_one_swapped_in() {
    if !need_root("the_private_directory_lands_in_the_directory_opened_not_one_swapped_in") {
        return;
    }
    let _s = serial();
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("out");
    std::fs::create_dir(&out).unwrap();
    let args = ["-o", "out/perf.data"];
    let child = record_with(d.path(), "stop:private:parent-opened", &args);
    let pid = child.id();
    wait_stopped(pid);
    let _resume = Resume(pid);
    let moved = d.path().join("moved");
    std::fs::rename(&out, &moved).unwrap();
    std::fs::create_dir(&out).unwrap();
    kill(pid, libc::SIGCONT);
    let (code, err) = finish(child);
    assert_eq!(code, Some(0), "{err}");
    assert!(moved.join("perf.data").is_file(), "{err}");
    let swapped_in: Vec<_> = std::fs::read_dir(&out).unwrap().flatten().collect();
    assert!(swapped_in.is_empty(), "{swapped_in:?}");
    assert!(private_dirs(&moved).is_empty(), "{err}");
}

/// 12.3 and 12.4: under sudo, every file goes to the invoking user; those with kernel
/// addresses are 0600; no private directory is left.
#[test]
#[ignore = "needs root: scripts/test.sh runs it (or as root: cargo test -- --include-ignored)"]
fn files_go_to_the_sudo_user_and_those_with_kernel_addresses_are_0600() {
    if !need_root("files_go_to_the_sudo_user_and_those_with_kernel_addresses_are_0600") {
        return;
    }
    let _s = serial();
    let d = tempfile::tempdir().unwrap();
    let mut c = ebpf_prof(&["record", "--allow-no-bpf", "-n", "2000"], d.path());
    c.env("SUDO_UID", NOBODY.to_string())
        .env("SUDO_GID", NOBODY.to_string());
    let r = run(c);
    assert_eq!(r.code(), Some(0), "{r:?}");
    let want = [
        ("perf.data", 0o600),
        ("perf.data.kallsyms", 0o600),
        ("perf.data.json", 0o600),
        ("perf.data.samples", 0o644),
    ];
    for (name, mode) in want {
        let m = std::fs::symlink_metadata(d.path().join(name)).unwrap();
        assert_eq!(m.mode() & 0o7777, mode, "{name}");
        assert_eq!((m.uid(), m.gid()), (NOBODY, NOBODY), "{name}");
    }
    let json = std::fs::read_to_string(d.path().join("perf.data.json")).unwrap();
    assert!(json.contains("bpf_programs"), "{json}");
    assert!(private_dirs(d.path()).is_empty());
}

/// 12.1: demo's default `./ebpf-prof-demo` must not be a planted link or another user's dir.
#[test]
#[ignore = "needs root: scripts/test.sh runs it (or as root: cargo test -- --include-ignored)"]
fn demo_refuses_a_planted_link_or_another_users_directory() {
    if !need_root("demo_refuses_a_planted_link_or_another_users_directory") {
        return;
    }
    let _s = serial();
    let d = tempfile::tempdir().unwrap();
    let elsewhere = d.path().join("elsewhere");
    std::fs::create_dir(&elsewhere).unwrap();
    std::os::unix::fs::symlink(&elsewhere, d.path().join("ebpf-prof-demo")).unwrap();
    let r = run(ebpf_prof(&["demo"], d.path()));
    assert_eq!(r.code(), Some(2), "{r:?}");
    assert!(r.stderr().contains("is a symbolic link"), "{r:?}");
    assert_eq!(std::fs::read_dir(&elsewhere).unwrap().count(), 0);
    std::fs::remove_file(d.path().join("ebpf-prof-demo")).unwrap();
    let theirs = d.path().join("ebpf-prof-demo");
    std::fs::create_dir(&theirs).unwrap();
    std::os::unix::fs::chown(&theirs, Some(NOBODY), Some(NOBODY)).unwrap();
    let r = run(ebpf_prof(&["demo"], d.path()));
    assert_eq!(r.code(), Some(2), "{r:?}");
    assert!(r.stderr().contains("belongs to uid 65534"), "{r:?}");
    assert_eq!(std::fs::read_dir(&theirs).unwrap().count(), 0);
}

/// A copy of the real perf in `dir` (created), owned by `uid`, the directory at `mode`.
fn perf_copy(dir: &Path, uid: u32, mode: u32) -> PathBuf {
    std::fs::create_dir_all(dir).unwrap();
    let p = dir.join("perf");
    std::fs::write(&p, "#!/bin/sh\nexec /usr/bin/perf \"$@\"\n").unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::os::unix::fs::chown(&p, Some(uid), None).unwrap();
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(mode)).unwrap();
    p
}

/// 12.2: as root, a perf owned by another user (--perf, $PERF) or under a 0777 directory is
/// refused (no working perf: exit 1); so is a benchmark found on PATH in a directory others can
/// write (exit 2).
#[test]
#[ignore = "needs root: scripts/test.sh runs it (or as root: cargo test -- --include-ignored)"]
fn untrusted_perf_and_bench_are_refused_as_root() {
    if !need_root("untrusted_perf_and_bench_are_refused_as_root") {
        return;
    }
    let _s = serial();
    let d = tempfile::tempdir().unwrap();
    let theirs = perf_copy(&d.path().join("theirs"), NOBODY, 0o755);
    let p = theirs.to_str().unwrap();
    let r = run(ebpf_prof(
        &["record", "--allow-no-bpf", "--perf", p],
        d.path(),
    ));
    assert_eq!(r.code(), Some(1), "no working perf: {r:?}");
    assert!(r.stderr().contains("refusing to run --perf"), "{r:?}");
    assert!(r.stderr().contains("belongs to uid 65534"), "{r:?}");
    let mut c = ebpf_prof(&["record", "--allow-no-bpf"], d.path());
    c.env("PERF", p);
    let r = run(c);
    assert_eq!(r.code(), Some(1), "no working perf: {r:?}");
    assert!(r.stderr().contains("refusing to run $PERF="), "{r:?}");
    let deep = perf_copy(&d.path().join("open/sub"), 0, 0o755);
    std::fs::set_permissions(
        d.path().join("open"),
        std::fs::Permissions::from_mode(0o777),
    )
    .unwrap();
    let r = run(ebpf_prof(
        &["record", "--allow-no-bpf", "--perf", deep.to_str().unwrap()],
        d.path(),
    ));
    assert_eq!(r.code(), Some(1), "no working perf: {r:?}");
    assert!(
        r.stderr()
            .contains("open is writable by group or others (mode 777)"),
        "{r:?}"
    );
    let bench = d.path().join("open/mybench");
    std::fs::write(&bench, "#!/bin/sh\necho 1\n").unwrap();
    std::fs::set_permissions(&bench, std::fs::Permissions::from_mode(0o755)).unwrap();
    let mut c = ebpf_prof(&["record", "--allow-no-bpf", "mybench"], d.path());
    c.env(
        "PATH",
        format!("{}:/usr/bin:/bin", d.path().join("open").display()),
    );
    let r = run(c);
    assert_eq!(r.code(), Some(2), "{r:?}");
    assert!(r.stderr().contains("refusing to run benchmark"), "{r:?}");
    untrusted_helpers_on_path_are_refused(d.path());
}

/// 12.2, the helpers: a `taskset` or `chrt` (which the pinned bench execs by name) and an
/// `--attach-cmd` loader found on PATH in a directory others can write are refused as root,
/// before anything runs (the planted scripts leave a marker when they run).
fn untrusted_helpers_on_path_are_refused(d: &Path) {
    let open = d.join("open");
    let path = format!("{}:/usr/sbin:/usr/bin:/sbin:/bin", open.display());
    let marker = plant(&open, "taskset", "exec /usr/bin/taskset \"$@\"");
    let mut c = ebpf_prof(&["record", "--allow-no-bpf", "-n", "2000"], d);
    c.env("PATH", &path);
    let r = run(c);
    assert_eq!(r.code(), Some(2), "{r:?}");
    assert!(r.stderr().contains("refusing to run taskset"), "{r:?}");
    std::fs::remove_file(open.join("taskset")).unwrap();
    plant(&open, "chrt", "exec /usr/bin/chrt \"$@\"");
    let mut c = ebpf_prof(&["record", "--allow-no-bpf", "-n", "2000"], d);
    c.env("PATH", &path);
    let r = run(c);
    assert_eq!(r.code(), Some(2), "{r:?}");
    assert!(r.stderr().contains("refusing to run chrt"), "{r:?}");
    std::fs::remove_file(open.join("chrt")).unwrap();
    plant(&open, "myloader", "sleep 60");
    let mut c = ebpf_prof(
        &[
            "overhead",
            "--attach-cmd",
            "myloader",
            "--rounds",
            "2",
            "-n",
            "1000",
        ],
        d,
    );
    c.env("PATH", &path);
    let r = run(c);
    assert_eq!(r.code(), Some(2), "{r:?}");
    assert!(r.stderr().contains("refusing to run --attach-cmd"), "{r:?}");
    assert!(!marker.exists(), "a planted helper ran as root: {r:?}");
}

/// A script at `dir/name` that leaves `dir/pwned` behind and then runs `then`.
fn plant(dir: &Path, name: &str, then: &str) -> PathBuf {
    let p = dir.join(name);
    let marker = dir.join("pwned");
    let text = format!("#!/bin/sh\ntouch {}\n{then}\n", marker.display());
    std::fs::write(&p, text).unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    marker
}

/// 12.2: as root, a relative PATH entry never chooses what runs: with `.` first on PATH, a
/// benchmark named without a path is not taken from the current directory (main ran
/// `./mybench` as root), nor is a `taskset` planted there.
#[test]
#[ignore = "needs root: scripts/test.sh runs it (or as root: cargo test -- --include-ignored)"]
fn relative_path_entries_are_dropped_as_root() {
    if !need_root("relative_path_entries_are_dropped_as_root") {
        return;
    }
    let _s = serial();
    let d = tempfile::tempdir().unwrap();
    let marker = plant(d.path(), "mybench", "echo 1000");
    plant(d.path(), "taskset", "exec /usr/bin/taskset \"$@\"");
    let path = ".:/usr/sbin:/usr/bin:/sbin:/bin";
    let mut c = ebpf_prof(&["record", "--allow-no-bpf", "mybench"], d.path());
    c.env("PATH", path);
    let r = run(c);
    assert_eq!(r.code(), Some(2), "{r:?}");
    assert!(r.stderr().contains("benchmark mybench not found"), "{r:?}");
    assert!(!marker.exists(), "the planted ./mybench ran as root: {r:?}");
    let mut c = ebpf_prof(&["record", "--allow-no-bpf", "-n", "2000"], d.path());
    c.env("PATH", path);
    let r = run(c);
    assert_eq!(r.code(), Some(0), "{r:?}");
    assert!(!marker.exists(), "the planted ./taskset ran as root: {r:?}");
}

/// 12.12: a second root run refuses with --no-wait naming the first's pid, or waits for it.
#[test]
#[ignore = "needs root: scripts/test.sh runs it (or as root: cargo test -- --include-ignored)"]
fn a_second_root_run_waits_for_the_first_or_refuses_with_no_wait() {
    if !need_root("a_second_root_run_waits_for_the_first_or_refuses_with_no_wait") {
        return;
    }
    let _s = serial();
    let (d1, d2) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let first = record_with(d1.path(), "stop:record:after-rotate", &[]);
    let pid = first.id();
    wait_stopped(pid);
    let _resume = Resume(pid);
    let r = run(ebpf_prof(
        &["record", "--allow-no-bpf", "--no-wait"],
        d2.path(),
    ));
    assert_eq!(r.code(), Some(1), "{r:?}");
    assert!(r.stderr().contains(&format!("(pid {pid})")), "{r:?}");
    let r = run(ebpf_prof(
        &["hook", "--no-wait", "--seconds", "1"],
        d2.path(),
    ));
    assert_eq!(r.code(), Some(1), "hook is serialised too: {r:?}");
    let mut second = record_with(d2.path(), "none", &[]);
    std::thread::sleep(Duration::from_millis(1000));
    assert!(second.try_wait().unwrap().is_none(), "the second run waits");
    assert!(
        !d2.path().join("perf.data.kallsyms").exists(),
        "and has not started"
    );
    kill(pid, libc::SIGCONT);
    let (code1, err1) = finish(first);
    let (code2, err2) = finish(second);
    assert_eq!(code1, Some(0), "{err1}");
    assert_eq!(code2, Some(0), "{err2}");
    assert!(
        err2.contains(&format!("waiting for ebpf-prof pid {pid} to finish")),
        "{err2}"
    );
    assert!(d2.path().join("perf.data").is_file());
}

/// 12.13: the pre-5.8 run-statistics fallback (forced by a failpoint flag) is in a state file,
/// so a SIGKILL during the stats rounds is put right by the next start.
#[test]
#[ignore = "needs root: scripts/test.sh runs it (or as root: cargo test -- --include-ignored)"]
fn stats_sysctl_fallback_left_by_sigkill_is_restored_by_the_next_start() {
    if !need_root("stats_sysctl_fallback_left_by_sigkill_is_restored_by_the_next_start") {
        return;
    }
    let _s = serial();
    let _off = SysctlSet::new("kernel.bpf_stats_enabled", "0");
    let d = tempfile::tempdir().unwrap();
    std::fs::write(d.path().join("hook.bpf.o"), ebpf_prof::bpf::SAMPLE_HOOK).unwrap();
    let mut c = ebpf_prof(
        &[
            "overhead",
            "--load",
            "hook.bpf.o",
            "--rounds",
            "2",
            "-n",
            "5000",
            "--stats-rounds",
            "1",
        ],
        d.path(),
    );
    c.env(
        "EBPF_PROF_FAILPOINT",
        "flag:runstats-sysctl,stop:overhead:stats-on",
    )
    .stdout(Stdio::null())
    .stderr(Stdio::null());
    let mut child = c.spawn().unwrap();
    let pid = child.id();
    wait_stopped(pid);
    let _resume = Resume(pid);
    assert_eq!(
        sysctl("kernel.bpf_stats_enabled"),
        "1",
        "the fallback is on"
    );
    let state = PathBuf::from(format!("/run/ebpf-prof/{pid}-stats.json"));
    assert!(state.is_file(), "journalled before the change");
    kill(pid, libc::SIGKILL);
    child.wait().unwrap();
    assert_eq!(
        sysctl("kernel.bpf_stats_enabled"),
        "1",
        "nothing could restore it yet"
    );
    let r = run(ebpf_prof(&["doctor"], d.path()));
    assert!(
        r.stderr().contains("restored kernel.bpf_stats_enabled=0"),
        "{r:?}"
    );
    assert_eq!(sysctl("kernel.bpf_stats_enabled"), "0");
    assert!(!state.exists());
}

/// The children of `pid`, from /proc.
fn children(pid: u32) -> Vec<u32> {
    std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children"))
        .unwrap_or_default()
        .split_whitespace()
        .filter_map(|p| p.parse().ok())
        .collect()
}

fn gone_within(pid: u32, secs: u64) -> bool {
    let deadline = Instant::now() + Duration::from_secs(secs);
    while Path::new(&format!("/proc/{pid}")).exists() {
        // A zombie is gone for our purpose: its programs are released.
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        if stat.rfind(')').and_then(|i| stat[i + 2..].chars().next()) == Some('Z') {
            return true;
        }
        if Instant::now() > deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    true
}

/// Start `overhead --attach-cmd 'ebpf-prof hook …'` with `failpoint` (in its stats round,
/// while the loader runs).
fn overhead_with_loader(dir: &Path, failpoint: &str) -> Child {
    std::fs::write(dir.join("hook.bpf.o"), ebpf_prof::bpf::SAMPLE_HOOK).unwrap();
    let cmd = format!("{} hook --load hook.bpf.o", bin().display());
    let mut c = ebpf_prof(
        &[
            "overhead",
            "--attach-cmd",
            &cmd,
            "--rounds",
            "2",
            "-n",
            "5000",
            "--stats-rounds",
            "1",
        ],
        dir,
    );
    c.env("EBPF_PROF_FAILPOINT", failpoint)
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    c.spawn().unwrap()
}

/// 13: the --attach-cmd loader dies with overhead, SIGKILL included (PR_SET_PDEATHSIG).
#[test]
#[ignore = "needs root: scripts/test.sh runs it (or as root: cargo test -- --include-ignored)"]
fn attach_cmd_loader_dies_with_a_sigkilled_overhead() {
    if !need_root("attach_cmd_loader_dies_with_a_sigkilled_overhead") {
        return;
    }
    let _s = serial();
    let d = tempfile::tempdir().unwrap();
    let mut child = overhead_with_loader(d.path(), "stop:overhead:stats-on");
    let pid = child.id();
    wait_stopped(pid);
    let _resume = Resume(pid);
    let loaders = children(pid);
    assert_eq!(loaders.len(), 1, "the loader runs: {loaders:?}");
    assert!(
        bpf_symbol_loaded("_path_check_callback"),
        "its programs are loaded"
    );
    kill(pid, libc::SIGKILL);
    child.wait().unwrap();
    assert!(
        gone_within(loaders[0], 10),
        "the loader outlived a SIGKILLed overhead"
    );
    let deadline = Instant::now() + Duration::from_secs(10);
    while bpf_symbol_loaded("_path_check_callback") {
        assert!(
            Instant::now() < deadline,
            "the loader's programs are still loaded"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// 13: an early error of overhead (here a panic at the same point) stops the loader too.
#[test]
#[ignore = "needs root: scripts/test.sh runs it (or as root: cargo test -- --include-ignored)"]
fn attach_cmd_loader_is_stopped_on_an_early_error() {
    if !need_root("attach_cmd_loader_is_stopped_on_an_early_error") {
        return;
    }
    let _s = serial();
    let d = tempfile::tempdir().unwrap();
    let child = overhead_with_loader(d.path(), "overhead:stats-on");
    let (code, err) = finish(child);
    assert_eq!(code, Some(101), "{err}");
    assert!(err.contains("failpoint overhead:stats-on"), "{err}");
    assert!(
        !bpf_symbol_loaded("_path_check_callback"),
        "loader stopped: {err}"
    );
}

/// 12.12: `hook` loads under the lock, then releases it while it holds its programs, so the
/// documented workflow (hook in one terminal, record in another) does not wait forever.
#[test]
#[ignore = "needs root: scripts/test.sh runs it (or as root: cargo test -- --include-ignored)"]
fn hook_releases_the_lock_once_attached() {
    if !need_root("hook_releases_the_lock_once_attached") {
        return;
    }
    let _s = serial();
    let d = tempfile::tempdir().unwrap();
    let log = d.path().join("hook.txt");
    let mut hook = ebpf_prof(&["hook", "--seconds", "60"], d.path())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while !std::fs::read_to_string(&log).unwrap().contains("holding") {
        assert!(Instant::now() < deadline, "the hook never attached");
        std::thread::sleep(Duration::from_millis(50));
    }
    let r = run(ebpf_prof(
        &["record", "--no-wait", "--allow-no-bpf", "-n", "2000"],
        d.path(),
    ));
    kill(hook.id(), libc::SIGTERM);
    hook.wait().unwrap();
    assert_eq!(
        r.code(),
        Some(0),
        "record did not wait for the holding hook: {r:?}"
    );
}

/// 12.12: the state of a killed run is not restored while another run holds the lock (it
/// could put back a value that run relies on); once the lock is free, the next start does.
#[test]
#[ignore = "needs root: scripts/test.sh runs it (or as root: cargo test -- --include-ignored)"]
fn a_killed_runs_state_is_recovered_only_when_no_run_is_in_progress() {
    if !need_root("a_killed_runs_state_is_recovered_only_when_no_run_is_in_progress") {
        return;
    }
    let _s = serial();
    let _on = SysctlSet::new("net.core.bpf_jit_kallsyms", "1");
    let dead = 4_000_001u32;
    assert!(!Path::new(&format!("/proc/{dead}")).exists());
    let d = tempfile::tempdir().unwrap();
    let first = record_with(d.path(), "stop:record:after-rotate", &[]);
    wait_stopped(first.id());
    let dir = Path::new("/run/ebpf-prof");
    std::fs::create_dir_all(dir).unwrap();
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700)).unwrap();
    let state = dir.join(format!("{dead}.json"));
    let text = format!(
        r#"{{"pid":{dead},"start_time":null,"sysctls":[{{"name":"net.core.bpf_jit_kallsyms","before":"0","during":"1"}}]}}"#
    );
    std::fs::write(&state, text).unwrap();
    std::fs::set_permissions(&state, std::fs::Permissions::from_mode(0o600)).unwrap();
    let r = run(ebpf_prof(&["doctor"], d.path()));
    assert!(!r.stderr().contains("restored"), "{r:?}");
    assert_eq!(
        sysctl("net.core.bpf_jit_kallsyms"),
        "1",
        "not under a running record"
    );
    assert!(state.exists());
    kill(first.id(), libc::SIGCONT);
    let (code, err) = finish(first);
    assert_eq!(code, Some(0), "{err}");
    let r = run(ebpf_prof(&["doctor"], d.path()));
    assert!(
        r.stderr().contains(&format!(
            "restored net.core.bpf_jit_kallsyms=0 left changed by ebpf-prof pid {dead}"
        )),
        "{r:?}"
    );
    assert!(!state.exists());
}

/// 12.12: a JIT sysctl that someone else changes while a run holds it is left as they set it,
/// and the run says so (it was 0, the run set 1, another tool set it back to 0 meanwhile).
#[test]
#[ignore = "needs root: scripts/test.sh runs it (or as root: cargo test -- --include-ignored)"]
fn a_sysctl_changed_by_someone_else_during_the_run_is_left_with_a_warning() {
    if !need_root("a_sysctl_changed_by_someone_else_during_the_run_is_left_with_a_warning") {
        return;
    }
    let _s = serial();
    let _off = SysctlSet::new("net.core.bpf_jit_kallsyms", "0");
    let d = tempfile::tempdir().unwrap();
    let child = record_with(d.path(), "stop:record:after-rotate", &[]);
    let pid = child.id();
    wait_stopped(pid);
    let _resume = Resume(pid);
    assert_eq!(sysctl("net.core.bpf_jit_kallsyms"), "1", "set by the run");
    std::fs::write("/proc/sys/net/core/bpf_jit_kallsyms", "0").unwrap();
    kill(pid, libc::SIGCONT);
    let (code, err) = finish(child);
    assert_eq!(code, Some(0), "{err}");
    assert!(
        err.contains("warning: left net.core.bpf_jit_kallsyms=0 as it is: we had set it to 1, and someone else changed it during the run"),
        "{err}"
    );
    assert_eq!(sysctl("net.core.bpf_jit_kallsyms"), "0");
}

// Another user against root: a swapped object, output directories reached through other
// users' links or swapped after the start, PATH lookups after the check, and perf's build-id
// cache.

/// A directory at `p` (made) owned by `uid`, mode 0755.
fn dir_of(p: &Path, uid: u32) -> PathBuf {
    std::fs::create_dir_all(p).unwrap();
    std::os::unix::fs::chown(p, Some(uid), Some(uid)).unwrap();
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o755)).unwrap();
    p.to_path_buf()
}

/// A link at `link` to `target`, owned by `uid` (as another user would have made it).
fn link_of(target: &Path, link: &Path, uid: u32) {
    std::os::unix::fs::symlink(target, link).unwrap();
    std::os::unix::fs::lchown(link, Some(uid), Some(uid)).unwrap();
}

/// The names in `d`, sorted.
fn names_in(d: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(d)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

/// As [`finish`], continuing the run each time a `stop:` failpoint met again stops it.
fn finish_continuing(mut c: Child) -> (Option<i32>, String) {
    let deadline = Instant::now() + Duration::from_secs(300);
    while c.try_wait().unwrap().is_none() {
        assert!(Instant::now() < deadline, "the run did not end in time");
        kill(c.id(), libc::SIGCONT);
        std::thread::sleep(Duration::from_millis(20));
    }
    finish(c)
}

/// The run started with `failpoint`, stdout dropped, stderr piped.
fn spawn_with(mut c: std::process::Command, failpoint: &str) -> Child {
    c.env("EBPF_PROF_FAILPOINT", failpoint)
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    c.spawn().unwrap()
}

/// demo writes hook.bpf.o for the user and loads the bytes it holds: an object renamed over
/// the file between the write and the loads (a failpoint stops the run there, as an inotify
/// watcher would act) is never what root loads, measures or records.
#[test]
#[ignore = "needs root: scripts/test.sh runs it (or as root: cargo test -- --include-ignored)"]
fn demo_loads_its_object_from_memory_not_a_file_swapped_in_after_the_write() {
    if !need_root("demo_loads_its_object_from_memory_not_a_file_swapped_in_after_the_write") {
        return;
    }
    let _s = serial();
    let d = tempfile::tempdir().unwrap();
    let args = ["demo", "--dir", "demo", "-n", "20000", "--cost-time", "1s"];
    let child = spawn_with(ebpf_prof(&args, d.path()), "stop:demo:object-written");
    let pid = child.id();
    wait_stopped(pid);
    let _resume = Resume(pid);
    let evil = d.path().join("demo/demo.evil");
    std::fs::write(&evil, b"\x7fELF an attacker's object").unwrap();
    std::fs::rename(&evil, d.path().join("demo/hook.bpf.o")).unwrap();
    kill(pid, libc::SIGCONT);
    let (code, err) = finish(child);
    assert_eq!(code, Some(0), "the swapped file was read: {err}");
    assert!(err.contains("_tail_call_security_check ["), "{err}");
    assert!(err.contains("_enforce_access_policy ["), "{err}");
    assert!(!bpf_symbol_loaded("_tail_call_security_check"));
}

/// demo's directory: one under a directory of another user's is refused before anything is
/// written; flame.svg or hook.bpf.o of an earlier demo are replaced only with --force.
#[test]
#[ignore = "needs root: scripts/test.sh runs it (or as root: cargo test -- --include-ignored)"]
fn demo_refuses_another_users_parent_and_replaces_its_files_only_with_force() {
    if !need_root("demo_refuses_another_users_parent_and_replaces_its_files_only_with_force") {
        return;
    }
    let _s = serial();
    let d = tempfile::tempdir().unwrap();
    let shared = dir_of(&d.path().join("shared"), NOBODY);
    let r = run(ebpf_prof(&["demo", "--dir", "shared/demo"], d.path()));
    assert_eq!(r.code(), Some(2), "{r:?}");
    assert!(r.stderr().contains("shared belongs to uid 65534"), "{r:?}");
    assert!(names_in(&shared).is_empty(), "{r:?}");
    std::fs::create_dir(d.path().join("demo")).unwrap();
    for name in ["flame.svg", "hook.bpf.o"] {
        let mine = d.path().join("demo").join(name);
        std::fs::write(&mine, "mine").unwrap();
        let r = run(ebpf_prof(&["demo", "--dir", "demo"], d.path()));
        assert_eq!(r.code(), Some(2), "{r:?}");
        let want = format!("error: demo/{name} exists: pass --force to replace it");
        assert!(r.stderr().contains(&want), "{r:?}");
        assert_eq!(std::fs::read_to_string(&mine).unwrap(), "mine");
        std::fs::remove_file(&mine).unwrap();
    }
    // With --force the run goes on: stopped by a panic right after it rewrote the object.
    let object = d.path().join("demo/hook.bpf.o");
    std::fs::write(&object, "mine").unwrap();
    let mut c = ebpf_prof(&["demo", "--dir", "demo", "--force"], d.path());
    c.env("EBPF_PROF_FAILPOINT", "demo:object-written");
    let r = run(c);
    assert_eq!(r.code(), Some(101), "{r:?}");
    assert!(
        std::fs::read(&object).unwrap().starts_with(b"\x7fELF"),
        "{r:?}"
    );
}

/// `overhead --keep DIR` and `--profile DIR`: another user's link to a root-only directory is
/// refused; a directory swapped for a link after the start (a failpoint stops the run at its
/// first attached round) receives nothing, the rounds go to the directory opened at the start
/// and the profiles are not recorded.
#[test]
#[ignore = "needs root: scripts/test.sh runs it (or as root: cargo test -- --include-ignored)"]
fn overhead_output_dirs_refuse_other_users_links_and_get_nothing_once_swapped() {
    if !need_root("overhead_output_dirs_refuse_other_users_links_and_get_nothing_once_swapped") {
        return;
    }
    let _s = serial();
    let d = tempfile::tempdir().unwrap();
    let root_only = d.path().join("rootdir");
    std::fs::create_dir(&root_only).unwrap();
    std::fs::set_permissions(&root_only, std::fs::Permissions::from_mode(0o700)).unwrap();
    let att = dir_of(&d.path().join("att"), NOBODY);
    link_of(&root_only, &att.join("out"), NOBODY);
    for flag in ["--keep", "--profile"] {
        let args = [
            "overhead", "--aa", "--rounds", "2", "-n", "1000", flag, "att/out",
        ];
        let r = run(ebpf_prof(&args, d.path()));
        assert_eq!(r.code(), Some(2), "{r:?}");
        assert!(r.stderr().contains("att belongs to uid 65534"), "{r:?}");
        assert!(names_in(&root_only).is_empty(), "{r:?}");
    }
    std::fs::write(d.path().join("hook.bpf.o"), ebpf_prof::bpf::SAMPLE_HOOK).unwrap();
    let victim = d.path().join("victim");
    std::fs::create_dir(&victim).unwrap();
    for (flag, want) in [("--keep", Some(0)), ("--profile", Some(2))] {
        let dir = d.path().join("out");
        let args = [
            "overhead",
            "--load",
            "hook.bpf.o",
            "--rounds",
            "2",
            "-n",
            "1000",
        ];
        let mut c = ebpf_prof(&args, d.path());
        c.args([flag, "out"]);
        let child = spawn_with(c, "stop:overhead:attached");
        wait_stopped(child.id());
        let _resume = Resume(child.id());
        let moved = d.path().join(format!("moved{flag}"));
        std::fs::rename(&dir, &moved).unwrap();
        std::os::unix::fs::symlink(&victim, &dir).unwrap();
        let (code, err) = finish_continuing(child);
        assert_eq!(code, want, "{flag}: {err}");
        assert!(names_in(&victim).is_empty(), "{flag}: {err}");
        std::fs::remove_file(&dir).unwrap();
        if flag == "--keep" {
            assert!(moved.join("base-1.samples").is_file(), "{err}");
        } else {
            assert!(err.contains("out was replaced during the run"), "{err}");
        }
    }
}

/// `record -o` through another user's link (`att/out → rootdir`) is refused before anything
/// changes: the run, failing or not, creates nothing in root's directory and deletes nothing
/// there (main's rotation removed rootdir/perf.data.old).
#[test]
#[ignore = "needs root: scripts/test.sh runs it (or as root: cargo test -- --include-ignored)"]
fn record_output_through_another_users_link_is_refused_and_deletes_nothing() {
    if !need_root("record_output_through_another_users_link_is_refused_and_deletes_nothing") {
        return;
    }
    let _s = serial();
    let d = tempfile::tempdir().unwrap();
    let root_only = d.path().join("rootdir");
    std::fs::create_dir(&root_only).unwrap();
    std::fs::set_permissions(&root_only, std::fs::Permissions::from_mode(0o700)).unwrap();
    std::fs::write(root_only.join("perf.data.old"), "mine").unwrap();
    let att = dir_of(&d.path().join("att"), NOBODY);
    link_of(&root_only, &att.join("out"), NOBODY);
    let args = [
        "record",
        "--allow-no-bpf",
        "-n",
        "2000",
        "-o",
        "att/out/perf.data",
        "--perf-arg=--clockid=nonsense",
    ];
    let r = run(ebpf_prof(&args, d.path()));
    assert_eq!(r.code(), Some(2), "{r:?}");
    assert!(r.stderr().contains("att belongs to uid 65534"), "{r:?}");
    assert_eq!(names_in(&root_only), ["perf.data.old"], "{r:?}");
    let kept = std::fs::read_to_string(root_only.join("perf.data.old")).unwrap();
    assert_eq!(kept, "mine");
}

/// taskset and chrt, and what an `--attach-cmd` wrapper runs, are run by the absolute paths
/// that were checked: a file planted after the check in a PATH directory ahead of the checked
/// one (a world-writable one that held nothing of that name then) never runs.
#[test]
#[ignore = "needs root: scripts/test.sh runs it (or as root: cargo test -- --include-ignored)"]
fn a_helper_planted_on_path_after_the_check_never_runs() {
    if !need_root("a_helper_planted_on_path_after_the_check_never_runs") {
        return;
    }
    let _s = serial();
    let d = tempfile::tempdir().unwrap();
    let open = d.path().join("open");
    std::fs::create_dir(&open).unwrap();
    std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).unwrap();
    let trusted = dir_of(&d.path().join("trusted"), 0);
    let path = format!(
        "{}:{}:/usr/sbin:/usr/bin:/sbin:/bin",
        open.display(),
        trusted.display()
    );
    let mut c = ebpf_prof(&["record", "--allow-no-bpf", "-n", "2000"], d.path());
    c.env("PATH", &path);
    let child = spawn_with(c, "stop:record:after-rotate");
    wait_stopped(child.id());
    let _resume = Resume(child.id());
    let marker = plant(&open, "taskset", "exec /usr/bin/taskset \"$@\"");
    plant(&open, "chrt", "exec /usr/bin/chrt \"$@\"");
    kill(child.id(), libc::SIGCONT);
    let (code, err) = finish(child);
    assert_eq!(code, Some(0), "{err}");
    assert!(
        !marker.exists(),
        "the planted taskset or chrt ran as root: {err}"
    );
    std::fs::remove_file(open.join("taskset")).unwrap();
    std::fs::remove_file(open.join("chrt")).unwrap();
    plant(&trusted, "myloader", "exit 1");
    std::fs::remove_file(trusted.join("pwned")).ok();
    let args = ["overhead", "--attach-cmd", "taskset -c 0 myloader"];
    let mut c = ebpf_prof(&args, d.path());
    c.args(["--rounds", "2", "-n", "1000"]).env("PATH", &path);
    let child = spawn_with(c, "stop:loader:checked");
    wait_stopped(child.id());
    let _resume = Resume(child.id());
    plant(&open, "myloader", "sleep 1");
    let (code, err) = finish_continuing(child);
    assert_ne!(code, Some(0), "the loader exits at once: {err}");
    assert!(!marker.exists(), "the planted loader ran as root: {err}");
}

/// perf runs with --no-buildid-cache: a recording with HOME a 0755 directory (as under
/// `sudo -E`) leaves no copy of /proc/kallsyms there that others could read.
#[test]
#[ignore = "needs root: scripts/test.sh runs it (or as root: cargo test -- --include-ignored)"]
fn record_leaves_no_kallsyms_for_others_in_perfs_build_id_cache() {
    if !need_root("record_leaves_no_kallsyms_for_others_in_perfs_build_id_cache") {
        return;
    }
    let _s = serial();
    let d = open_tempdir();
    let home = dir_of(&d.path().join("home"), 0);
    let mut c = ebpf_prof(&["record", "--allow-no-bpf", "-n", "20000"], d.path());
    c.env("HOME", &home).env_remove("PERF_BUILDID_DIR");
    let r = run(c);
    assert_eq!(r.code(), Some(0), "{r:?}");
    let mut pending = vec![home.clone()];
    while let Some(dir) = pending.pop() {
        for entry in std::fs::read_dir(&dir).unwrap().flatten() {
            let m = std::fs::symlink_metadata(entry.path()).unwrap();
            if m.is_dir() {
                pending.push(entry.path());
            } else if m.mode() & 0o004 != 0 {
                let text = std::fs::read(entry.path()).unwrap_or_default();
                let text = String::from_utf8_lossy(&text);
                assert!(
                    !text.contains(" T _text") && !text.contains(" t bpf_prog_"),
                    "{} holds kernel addresses and others can read it",
                    entry.path().display()
                );
            }
        }
    }
}
