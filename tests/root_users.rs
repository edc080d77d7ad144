//! Root against another user, round four: files swapped in at a path root already read or
//! checked (the object `overhead` loads, the directory `record -o` writes into, the kallsyms
//! sidecar), perf options that would move its output, pinned maps shared with whoever pinned
//! the name first, debug files planted in the current directory, and names that carry terminal
//! escapes. Races are won by a deterministic failpoint (`stop:NAME`), as an inotify watcher
//! would win them. Root only (a failure under CI=true, a skip elsewhere), but for the test of
//! escaped names, which runs as any user.

mod common;
use common::runs::*;
use common::*;
use std::collections::BTreeSet;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Child, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// The run started with `failpoint`, stdout dropped, stderr piped.
fn spawn_with(mut c: std::process::Command, failpoint: &str) -> Child {
    c.env("EBPF_PROF_FAILPOINT", failpoint)
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    c.spawn().unwrap()
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

/// The tags of the BPF programs `pid` holds open, read from its fds' `prog_tag:` lines.
fn program_tags(pid: u32) -> BTreeSet<String> {
    let mut tags = BTreeSet::new();
    let fdinfo = format!("/proc/{pid}/fdinfo");
    for entry in std::fs::read_dir(fdinfo).unwrap().flatten() {
        let text = std::fs::read_to_string(entry.path()).unwrap_or_default();
        let tag = text.lines().find_map(|l| l.strip_prefix("prog_tag:"));
        tags.extend(tag.map(|t| t.trim().to_string()));
    }
    tags
}

/// `overhead --load` reads the object once: another object renamed over the file after the
/// first reload (a failpoint stops the run there) is not what the next loads load — the
/// programs held after the second reload have the tags of the first.
#[test]
#[ignore = "needs root: scripts/test.sh runs it (or as root: cargo test -- --include-ignored)"]
fn overhead_loads_every_generation_from_the_bytes_read_at_the_start() {
    if !need_root("overhead_loads_every_generation_from_the_bytes_read_at_the_start") {
        return;
    }
    let _s = serial();
    let d = tempfile::tempdir().unwrap();
    std::fs::write(d.path().join("hook.bpf.o"), ebpf_prof::bpf::SAMPLE_HOOK).unwrap();
    let args = ["overhead", "--load", "hook.bpf.o", "--loads", "3"];
    let mut c = ebpf_prof(&args, d.path());
    c.args(["--max-time", "2s", "-n", "1000"]);
    let child = spawn_with(c, "stop:overhead:reloaded");
    let pid = child.id();
    wait_stopped(pid);
    let _resume = Resume(pid);
    let first = program_tags(pid);
    assert!(!first.is_empty(), "no program held after the first reload");
    let other = d.path().join("other.bpf.o");
    std::fs::write(&other, ebpf_prof::bpf::HOOK_LOOKUPS_A).unwrap();
    std::fs::rename(&other, d.path().join("hook.bpf.o")).unwrap();
    kill(pid, libc::SIGCONT);
    std::thread::sleep(Duration::from_millis(50));
    wait_stopped(pid);
    let second = program_tags(pid);
    assert_eq!(first, second, "the file swapped in was loaded");
    let (code, err) = finish_continuing(child);
    assert_eq!(code, Some(0), "{err}");
}

/// A process name that carries terminal escapes (a title change, a screen clear, a C1 CSI)
/// reaches the terminal through neither `report` nor `diff --text` nor `flame --folded`: each
/// shows it escaped, and its `;` does not split its frame. Runs as any user: the names come
/// from a `perf script` text as perf prints another user's process.
#[test]
fn names_with_terminal_escapes_are_shown_escaped_in_every_text_output() {
    let d = tempfile::tempdir().unwrap();
    let comm = "\x1b]0;pwn\x07\x1b[2J\u{9b}1m";
    let mut script = String::new();
    for (at, leaf) in [(1, "do_sys_openat2"), (2, "bpf_prog_0123456789abcdef_hook")] {
        script.push_str(&format!(
            "{comm} 4242 [000] {at}.000000: 1 cycles:k: \n\tffffffff81000000 {leaf}+0x0 ([kernel.kallsyms])\n\n"
        ));
    }
    std::fs::write(d.path().join("evil.txt"), &script).unwrap();
    let runs = [
        vec!["report", "evil.txt"],
        vec!["diff", "evil.txt", "evil.txt", "--text"],
        vec!["flame", "evil.txt", "--folded"],
    ];
    for args in runs {
        let r = run(ebpf_prof(&args, d.path()));
        assert_eq!(r.code(), Some(0), "{args:?}: {r:?}");
        let out = r.stdout() + &r.stderr();
        let obeyed = out
            .chars()
            .any(|c| c.is_control() && c != '\n' && c != '\t');
        assert!(
            !obeyed,
            "{args:?}: a control character reached the output: {out:?}"
        );
        if args[0] == "flame" {
            for line in r.stdout().lines() {
                let (stack, _count) = line.rsplit_once(' ').unwrap();
                assert_eq!(stack.split(';').count(), 2, "{line}");
                assert!(stack.starts_with("\\x1b]0:pwn\\x07\\x1b[2J"), "{line}");
            }
        }
    }
}

/// Wait for a run that must end soon; kill it and fail when it does not (a hang).
fn finish_within(mut c: Child, secs: u64) -> (Option<i32>, String) {
    let deadline = Instant::now() + Duration::from_secs(secs);
    while c.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = c.kill();
            let _ = c.wait();
            panic!("the run hung on the file swapped in");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    finish(c)
}

/// The kallsyms snapshot beside a recording is read once, through the descriptor that was
/// checked: a FIFO renamed over it after the check (the failpoint `profile:symbols-read` stops
/// `report` there) is never opened, by the built-in reader or by perf (which is handed a
/// private copy of the text), so the run neither hangs nor loses its kernel names.
#[test]
fn a_fifo_swapped_in_for_the_kallsyms_snapshot_is_never_opened() {
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/perf-data");
    for via_perf in [false, true] {
        let d = tempfile::tempdir().unwrap();
        for name in [
            "hook-lines.data",
            "hook-lines.data.json",
            "hook-lines.data.kallsyms",
        ] {
            std::fs::copy(fixture.join(name), d.path().join(name)).unwrap();
        }
        let mut c = ebpf_prof(&["report", "hook-lines.data"], d.path());
        if via_perf {
            c.arg("--via-perf");
        }
        let out = std::fs::File::create(d.path().join("report.txt")).unwrap();
        c.env("EBPF_PROF_FAILPOINT", "stop:profile:symbols-read")
            .stdout(out)
            .stderr(Stdio::piped());
        let child = c.spawn().unwrap();
        let pid = child.id();
        wait_stopped(pid);
        let _resume = Resume(pid);
        let fifo = d.path().join("fifo");
        let name = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: a NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(name.as_ptr(), 0o644) }, 0);
        std::fs::rename(&fifo, d.path().join("hook-lines.data.kallsyms")).unwrap();
        kill(pid, libc::SIGCONT);
        let (code, err) = finish_within(child, 60);
        assert_eq!(code, Some(0), "via perf {via_perf}: {err}");
        let report = std::fs::read_to_string(d.path().join("report.txt")).unwrap();
        assert!(
            report.contains("htab_map_lookup_elem"),
            "via perf {via_perf}: kernel frames lost their names: {report}"
        );
    }
}

const NOBODY: u32 = 65534;

/// `record -o att/out/perf.data` under sudo by the user who owns `att`: after the checks (the
/// failpoint `record:after-load` stops the run there, as the check bench's child would signal
/// it), that user swaps `att/out` for a link to a directory of root's. The run must write,
/// rotate and hand over only in the directory it checked: root's directory is untouched (its
/// `perf.data` not rotated, its `.old` files neither overwritten nor deleted).
#[test]
#[ignore = "needs root: scripts/test.sh runs it (or as root: cargo test -- --include-ignored)"]
fn record_writes_only_into_the_directory_it_checked_not_a_link_swapped_in() {
    if !need_root("record_writes_only_into_the_directory_it_checked_not_a_link_swapped_in") {
        return;
    }
    let _s = serial();
    let d = tempfile::tempdir().unwrap();
    let root_only = d.path().join("rootdir");
    std::fs::create_dir(&root_only).unwrap();
    std::fs::set_permissions(&root_only, std::fs::Permissions::from_mode(0o700)).unwrap();
    for name in ["perf.data", "perf.data.old", "perf.data.old.kallsyms"] {
        std::fs::write(root_only.join(name), format!("root's {name}")).unwrap();
    }
    let att = d.path().join("att");
    std::fs::create_dir_all(att.join("out")).unwrap();
    for dir in [&att, &att.join("out")] {
        std::os::unix::fs::chown(dir, Some(NOBODY), Some(NOBODY)).unwrap();
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let mut c = ebpf_prof(
        &[
            "record",
            "--allow-no-bpf",
            "-n",
            "2000",
            "-o",
            "att/out/perf.data",
        ],
        d.path(),
    );
    c.env("SUDO_UID", NOBODY.to_string())
        .env("SUDO_GID", NOBODY.to_string());
    let child = spawn_with(c, "stop:record:after-load");
    let pid = child.id();
    wait_stopped(pid);
    let _resume = Resume(pid);
    std::fs::rename(att.join("out"), att.join("moved")).unwrap();
    std::os::unix::fs::symlink(&root_only, att.join("out")).unwrap();
    std::os::unix::fs::lchown(att.join("out"), Some(NOBODY), Some(NOBODY)).unwrap();
    kill(pid, libc::SIGCONT);
    let (code, err) = finish(child);
    let mut names: Vec<String> = std::fs::read_dir(&root_only)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(
        names,
        ["perf.data", "perf.data.old", "perf.data.old.kallsyms"],
        "{err}"
    );
    for name in names {
        let text = std::fs::read_to_string(root_only.join(&name)).unwrap();
        assert_eq!(text, format!("root's {name}"), "{err}");
    }
    assert_eq!(code, Some(0), "{err}");
    assert!(att.join("moved/perf.data").is_file(), "{err}");
    assert!(private_dirs(&att.join("moved")).is_empty(), "{err}");
}

/// A pin removed when dropped (the test's own decoy).
struct Pin(&'static str);

impl Drop for Pin {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(self.0);
    }
}

/// bpffs at /sys/fs/bpf for the test's pins: mounted by the test when the machine had none there
/// (bpftool would mount it for the decoy and leave it), and unmounted again when dropped.
struct Bpffs {
    mounted_here: bool,
}

impl Bpffs {
    fn ensure() -> Bpffs {
        const BPF_FS_MAGIC: i64 = 0xcafe4a11;
        // SAFETY: a zeroed statfs for the call to fill, and a NUL-terminated path.
        let mut fs: libc::statfs = unsafe { std::mem::zeroed() };
        let there = unsafe { libc::statfs(c"/sys/fs/bpf".as_ptr(), &mut fs) } == 0
            && fs.f_type as i64 == BPF_FS_MAGIC;
        if there {
            return Bpffs {
                mounted_here: false,
            };
        }
        let status = std::process::Command::new("mount")
            .args(["-t", "bpf", "bpf", "/sys/fs/bpf"])
            .status()
            .unwrap();
        assert!(status.success(), "mounting bpffs at /sys/fs/bpf failed");
        Bpffs { mounted_here: true }
    }
}

impl Drop for Bpffs {
    fn drop(&mut self) {
        if self.mounted_here {
            let _ = std::process::Command::new("umount")
                .arg("/sys/fs/bpf")
                .status();
        }
    }
}

/// The bytes of the one value of the array map pinned at `path`.
fn pinned_value(path: &str) -> Vec<String> {
    let out = std::process::Command::new("bpftool")
        .args(["-j", "map", "dump", "pinned", path])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let dump: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let value = dump[0]["value"].as_array().cloned().unwrap_or_default();
    value
        .iter()
        .map(|b| b.as_str().unwrap_or("?").to_string())
        .collect()
}

/// The pins and private pin directories of ebpf-prof's at the top of bpffs, sorted (other
/// tools' pins are not looked at).
fn bpffs_names() -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir("/sys/fs/bpf")
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|name| name.starts_with("ebpf-prof-") || name.starts_with("ebpf_prof_pinned"))
        .collect();
    names.sort();
    names
}

/// An object whose map is pinned by name (`LIBBPF_PIN_BY_NAME`) is loaded with a private pin
/// directory: someone else's pin of the same name at /sys/fs/bpf (a deployed agent's) is
/// neither reused nor written to, and nothing is left pinned after `hook` or `overhead`.
#[test]
#[ignore = "needs root: scripts/test.sh runs it (or as root: cargo test -- --include-ignored)"]
fn maps_pinned_by_name_get_a_private_pin_directory_and_leave_nothing() {
    if !need_root("maps_pinned_by_name_get_a_private_pin_directory_and_leave_nothing")
        || !need_tool("/usr/sbin/bpftool", "bpftool")
    {
        return;
    }
    let _s = serial();
    let _bpffs = Bpffs::ensure();
    let decoy = "/sys/fs/bpf/ebpf_prof_pinned";
    let _ = std::fs::remove_file(decoy);
    let made = std::process::Command::new("bpftool")
        .args([
            "map", "create", decoy, "type", "array", "key", "4", "value", "8",
        ])
        .args(["entries", "1", "name", "ebpf_prof_pinned"])
        .status()
        .unwrap();
    assert!(made.success());
    let _decoy = Pin(decoy);
    let before = bpffs_names();
    let zero = pinned_value(decoy);
    let d = tempfile::tempdir().unwrap();
    std::fs::write(d.path().join("pinned.bpf.o"), ebpf_prof::bpf::HOOK_PINNED).unwrap();
    let runs = [
        vec!["hook", "--load", "pinned.bpf.o", "--seconds", "1"],
        vec![
            "overhead",
            "--load",
            "pinned.bpf.o",
            "--loads",
            "2",
            "--max-time",
            "1s",
            "-n",
            "1000",
        ],
    ];
    for args in runs {
        let r = run(ebpf_prof(&args, d.path()));
        assert_eq!(r.code(), Some(0), "{args:?}: {r:?}");
        assert!(
            r.stderr().contains("pinned in /sys/fs/bpf/ebpf-prof-"),
            "{r:?}"
        );
        assert_eq!(
            pinned_value(decoy),
            zero,
            "{args:?}: the other pin was written to"
        );
        assert_eq!(bpffs_names(), before, "{args:?}: a pin was left");
    }
}
