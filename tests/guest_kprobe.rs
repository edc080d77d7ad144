//! A bpftrace kprobe one-liner read by the attachment finder, where kprobes attach: the kernel
//! matrix's guests (scripts/kernels.sh). This project's own machines have no kprobe PMU, so the
//! test cannot run there, and it must not count as passed there either: Cargo.toml declares
//! this target with `test = false`, so a plain `cargo test` (and scripts/test.sh) neither builds
//! nor runs it; scripts/kernels.sh builds it by name and the guests run it from
//! scripts/kernels-subset.txt. Run anywhere else, a kernel without kprobes fails it, naming
//! what is missing: nothing here skips.
//!
//! bpftrace attaches a kprobe with `perf_event_open` on the kprobe PMU and
//! `PERF_EVENT_IOC_SET_BPF`, no link: the finder reads it from bpftrace's perf-event fds with
//! `BPF_TASK_FD_QUERY`, which gives the probed function's name.

mod common;
use common::*;
use ebpf_prof::bpf::attachments::{self, AttachPoint, Holder, Probe};
use serde_json::Value;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const BPFTRACE: &str = "/usr/bin/bpftrace";
const FUNCTION: &str = "do_sys_openat2";

/// The one-liner: count the calls of the function `openat` goes through.
fn program() -> String {
    format!("kprobe:{FUNCTION} {{ @ = count(); }}")
}

/// The kernel's kprobe PMU, which `perf_event_open` of a kprobe needs (since 4.17).
fn have_kprobe_pmu() -> bool {
    Path::new("/sys/bus/event_source/devices/kprobe/type").exists()
}

/// Fails, naming what is missing, where this test cannot run.
fn require_kprobes() {
    assert!(
        have_kprobe_pmu(),
        "this kernel has no kprobe PMU (/sys/bus/event_source/devices/kprobe): the test runs in \
         scripts/kernels.sh's guests, whose kernels have one"
    );
}

/// bpftrace running the one-liner in a mount namespace with tracefs, stopped when dropped.
struct Bpftrace {
    child: Child,
}

impl Bpftrace {
    /// Start it and wait until one of its perf events carries a program: that attachment's
    /// program id and point.
    fn start() -> (Bpftrace, u32, AttachPoint) {
        let script = format!(
            "mount -t tracefs nodev /sys/kernel/tracing 2>/dev/null; exec {BPFTRACE} -e {}",
            shlex::try_quote(&program()).unwrap()
        );
        // unshare execs sh, which execs bpftrace: the child's pid is bpftrace's.
        let child = Command::new("unshare")
            .args(["-m", "--propagation", "private", "sh", "-c", &script])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut held = Bpftrace { child };
        let pid = held.child.id();
        let started = Instant::now();
        loop {
            let host = ebpf_prof::host::Host::live();
            let found = attachments::attachments(&host).into_iter().find(
                |a| matches!(a.holder, Holder::PerfEvent { pid: holder, .. } if holder == pid),
            );
            if let Some(attachment) = found {
                return (held, attachment.prog_id, attachment.point);
            }
            assert!(held.child.try_wait().unwrap().is_none(), "bpftrace exited");
            assert!(
                started.elapsed() < patience(Duration::from_secs(30)),
                "no perf event of bpftrace's carries a program"
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

impl Drop for Bpftrace {
    /// SIGINT, bpftrace's own way to stop; SIGKILL when it has not exited in time.
    fn drop(&mut self) {
        // SAFETY: kill on the pid of a child we spawned and have not reaped.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGINT) };
        let started = Instant::now();
        while started.elapsed() < patience(Duration::from_secs(5)) {
            if self.child.try_wait().unwrap().is_some() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Held by hand: the finder names the kprobe by its function, `doctor` lists the program
/// there; then `overhead --attach-cmd` at its defaults picks `openat`, whose path runs
/// do_sys_openat2, and what ran agrees with it.
#[test]
#[ignore = "needs root and kprobes: scripts/kernels.sh's guests run it"]
fn bpftrace_kprobe_is_found_and_priced_on_openat() {
    if !need_root("bpftrace_kprobe_is_found_and_priced_on_openat")
        || !need_tool(BPFTRACE, "bpftrace")
    {
        return;
    }
    require_kprobes();
    let dir = tempfile::tempdir().unwrap();
    let (held, id, point) = Bpftrace::start();
    assert_eq!(
        point,
        AttachPoint::Kprobe {
            probe: Probe::Entry,
            function: FUNCTION.into(),
            offset: 0,
        }
    );
    assert_eq!(point.to_string(), format!("kprobe {FUNCTION}"));
    let doctor = run(ebpf_prof(&["doctor"], dir.path()));
    let line = doctor
        .stdout()
        .lines()
        .find(|l| l.trim_start().starts_with(&format!("{id} ")))
        .map(str::to_string)
        .unwrap_or_else(|| panic!("program {id} not listed: {doctor:?}"));
    assert!(line.contains(&format!("kprobe {FUNCTION}")), "{line}");
    drop(held);

    let cmd = format!("{BPFTRACE} -e {}", shlex::try_quote(&program()).unwrap());
    let count = iterations(500);
    let args = [
        "overhead",
        "--attach-cmd",
        &cmd,
        "--attach-tracefs",
        "--rounds",
        "3",
        "-n",
        &count,
        "--json",
    ];
    let priced = run(ebpf_prof(&args, dir.path()));
    assert_eq!(priced.code(), Some(0), "{priced:?}");
    let v: Value = serde_json::from_str(&priced.stdout()).unwrap();
    assert_eq!(v["op"]["op"], "openat", "{priced:?}");
    assert_eq!(
        v["op"]["programs"][0]["point"],
        format!("kprobe {FUNCTION}"),
        "{priced:?}"
    );
    assert_eq!(v["ran"]["inside"], "ran", "{priced:?}");
    assert!(v["ran"]["correction"].is_null(), "{priced:?}");
    for contradiction in [
        "the measurement wins",
        "will not run inside it",
        "did not run",
    ] {
        assert!(!priced.stderr().contains(contradiction), "{priced:?}");
    }
}
