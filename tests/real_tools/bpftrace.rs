//! bpftrace one-liners (Debian's bpftrace 0.17): bpftrace attaches its tracepoint programs to
//! perf events with `PERF_EVENT_IOC_SET_BPF`, without a link. The attachment finder reads them
//! from the process's perf-event fds (`BPF_TASK_FD_QUERY`), so `doctor` shows each attach
//! point, `overhead --attach-cmd` at its defaults times the operation that fires the program,
//! and the op line, the check before measuring and the verdict agree. bpftrace 0.17 gives its
//! programs no BTF: their names are the kernel's 15 bytes, shown as cut (`…`).

use super::*;
use ebpf_prof::bpf::attachments::{self, AttachPoint, Holder};

const BPFTRACE: &str = "/usr/bin/bpftrace";

/// (probe, the tracepoint's name, the operation `--op auto` must pick)
const ONE_LINERS: [(&str, &str, &str); 3] = [
    (
        "tracepoint:syscalls:sys_enter_openat",
        "sys_enter_openat",
        "openat",
    ),
    (
        "tracepoint:syscalls:sys_enter_execve",
        "sys_enter_execve",
        "exec-missing",
    ),
    (
        "tracepoint:sched:sched_process_fork",
        "sched_process_fork",
        "fork",
    ),
];

/// The bpftrace program for `probe`: count events by process name.
fn program(probe: &str) -> String {
    format!("{probe} {{ @[comm] = count(); }}")
}

/// bpftrace running `probe` in a mount namespace with tracefs, stopped by its pid when dropped.
struct Bpftrace {
    child: Child,
}

impl Bpftrace {
    /// Start it and wait until its perf event carries a program: that program's id and point.
    fn start(probe: &str) -> (Bpftrace, u32, AttachPoint) {
        let script = format!(
            "mount -t tracefs nodev /sys/kernel/tracing 2>/dev/null; exec {BPFTRACE} -e {}",
            shlex::try_quote(&program(probe)).unwrap()
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
        let t = Instant::now();
        loop {
            let host = ebpf_prof::host::Host::live();
            let found = attachments::attachments(&host).into_iter().find(
                |a| matches!(a.holder, Holder::PerfEvent { pid: holder, .. } if holder == pid),
            );
            if let Some(a) = found {
                return (held, a.prog_id, a.point);
            }
            assert!(held.child.try_wait().unwrap().is_none(), "bpftrace exited");
            assert!(
                t.elapsed() < Duration::from_secs(30),
                "{probe}: no perf event"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for Bpftrace {
    /// SIGINT, bpftrace's own way to stop; SIGKILL when it has not exited after 5 s (a
    /// bpftrace signalled while still attaching has been seen to ignore it).
    fn drop(&mut self) {
        // SAFETY: kill on the pid of a child we spawned and have not reaped.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGINT) };
        let t = Instant::now();
        while t.elapsed() < Duration::from_secs(5) {
            if self.child.try_wait().unwrap().is_some() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Each one-liner held by hand: its perf event is found, and `doctor` lists its program with
/// that attach point and its name marked as cut.
#[test]
#[ignore = "needs root: scripts/test.sh runs it (or as root: cargo test -- --include-ignored)"]
fn bpftrace_perf_event_attachments_are_shown_by_doctor() {
    if !need_root("bpftrace_perf_event_attachments_are_shown_by_doctor")
        || !common::need_tool(BPFTRACE, "bpftrace")
    {
        return;
    }
    let _one = ONE.lock().unwrap_or_else(|e| e.into_inner());
    let d = tempfile::tempdir().unwrap();
    for (probe, tracepoint, _) in ONE_LINERS {
        let (held, id, point) = Bpftrace::start(probe);
        assert_eq!(
            point,
            AttachPoint::Tracepoint {
                name: tracepoint.into()
            }
        );
        let doctor = run(ebpf_prof(&["doctor"], d.path()));
        let line = doctor
            .stdout()
            .lines()
            .find(|l| l.trim_start().starts_with(&format!("{id} ")))
            .map(str::to_string)
            .unwrap_or_else(|| panic!("program {id} not listed: {doctor:?}"));
        assert!(line.contains(&format!("tracepoint {tracepoint}")), "{line}");
        let kernel_name: String = tracepoint.chars().take(15).collect();
        assert!(
            line.ends_with(&format!("{kernel_name}…"))
                || line.contains(&format!("{kernel_name}… ")),
            "a name without BTF is marked as cut: {line}"
        );
        drop(held);
        assert_gone(&[id]);
    }
}

/// `overhead --attach-cmd 'bpftrace -e …' --attach-tracefs` at its defaults picks the
/// operation that fires the program, and what ran agrees with it: no correction, no warning.
#[test]
#[ignore = "needs root: scripts/test.sh runs it (or as root: cargo test -- --include-ignored)"]
fn bpftrace_overhead_picks_the_operation_that_fires_it() {
    if !need_root("bpftrace_overhead_picks_the_operation_that_fires_it")
        || !common::need_tool(BPFTRACE, "bpftrace")
    {
        return;
    }
    let _one = ONE.lock().unwrap_or_else(|e| e.into_inner());
    let d = tempfile::tempdir().unwrap();
    for (probe, tracepoint, op) in ONE_LINERS {
        let cmd = format!(
            "{BPFTRACE} -e {}",
            shlex::try_quote(&program(probe)).unwrap()
        );
        let r = overhead_of_loader(&cmd, d.path());
        assert_eq!(r.code(), Some(0), "{probe}: {r:?}");
        let v: Value = serde_json::from_str(&r.stdout()).unwrap();
        assert_eq!(v["op"]["op"], op, "{probe}: {r:?}");
        assert_eq!(
            v["op"]["programs"][0]["point"],
            format!("tracepoint {tracepoint}"),
            "{r:?}"
        );
        assert_eq!(v["ran"]["inside"], "ran", "{probe}: {r:?}");
        assert!(v["ran"]["correction"].is_null(), "{probe}: {r:?}");
        let stderr = r.stderr();
        for contradiction in [
            "the measurement wins",
            "will not run inside it",
            "did not run",
        ] {
            assert!(!stderr.contains(contradiction), "{probe}: {r:?}");
        }
        // bpftrace warns about RLIMIT_MEMLOCK at each of its starts: passed on once.
        let warnings = stderr
            .lines()
            .filter(|l| l.contains("RLIMIT_MEMLOCK") && !l.contains("the loader's line"))
            .count();
        assert!(warnings <= 1, "{probe}: {r:?}");
    }
}

/// The openat one-liner held by hand and recorded: bpftrace 0.17 gives its program no BTF, so
/// `report`, `flame` and `annotate` name it by the kernel's 15 bytes marked as cut; `annotate`
/// says it carries no line info without advice about clang, and `--asm` names the helpers its
/// code calls (`bpf_get_current_comm` for `comm`) from the recording's kallsyms snapshot.
#[test]
#[ignore = "needs root: scripts/test.sh runs it (or as root: cargo test -- --include-ignored)"]
fn bpftrace_recorded_is_named_as_cut_and_its_helper_calls_named() {
    if !need_root("bpftrace_recorded_is_named_as_cut_and_its_helper_calls_named")
        || !common::need_tool(BPFTRACE, "bpftrace")
    {
        return;
    }
    let _one = ONE.lock().unwrap_or_else(|e| e.into_inner());
    let d = tempfile::tempdir().unwrap();
    let (probe, _, _) = ONE_LINERS[0];
    let (held, id, _) = Bpftrace::start(probe);
    let rec = run(ebpf_prof(
        &["record", "-n", &iterations(200_000), "-F", "4999"],
        d.path(),
    ));
    assert_eq!(rec.code(), Some(0), "{rec:?}");
    drop(held);
    assert_gone(&[id]);
    let shown = "sys_enter_opena…";
    let json = run(ebpf_prof(&["report", "--json", "perf.data"], d.path()));
    let report: Value = serde_json::from_str(&json.stdout()).unwrap();
    let program = report["programs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["id"] == id)
        .unwrap_or_else(|| panic!("program {id} in the report: {report}"));
    assert_eq!(program["name"], shown, "{program}");
    let folded = run(ebpf_prof(&["flame", "--folded", "perf.data"], d.path())).stdout();
    assert!(folded.contains(&format!("_{shown}")), "{folded}");
    let id_arg = id.to_string();
    let args = [
        "annotate",
        "--asm",
        "--top",
        "1000",
        "--prog",
        &id_arg,
        "perf.data",
    ];
    let annotate = run(ebpf_prof(&args, d.path()));
    assert_eq!(annotate.code(), Some(0), "{annotate:?}");
    let text = annotate.stdout();
    assert!(
        text.contains(&format!(
            "{shown} (id {id}) carries no BTF, so no line info"
        )),
        "{text}"
    );
    assert!(!text.contains("clang"), "{text}");
    assert!(text.contains("<bpf_get_current_comm>"), "{text}");
    assert!(!text.contains("(unknown target)"), "{text}");
}
