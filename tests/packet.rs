//! The private network of the packet operations, against the real kernel: `bench --op
//! udp-veth` makes a network namespace and a veth pair, times datagrams through them, and
//! leaves neither behind, whichever way it ends: normally, on an error while making them, on a
//! panic, on SIGTERM, and after SIGKILL or an abort (the next start removes them). Root only (a
//! failure under CI=true, a skip elsewhere).

mod common;
use common::*;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

static SERIAL: Mutex<()> = Mutex::new(());

/// The namespaces, interfaces (in this namespace) and cgroups that process `pid` made, by name.
fn leftovers(pid: u32) -> Vec<String> {
    let mut found: Vec<String> = std::fs::read_dir("/run/netns")
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    found.retain(|n| n.starts_with(&format!("ebpf-prof-{pid}-")));
    let links = std::fs::read_dir("/sys/class/net").unwrap();
    found.extend(
        links
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with(&format!("ep{pid}h")) || n.starts_with(&format!("ep{pid}p"))),
    );
    found.extend(
        ebpf_prof::netpath::cgroup::cgroup2_root()
            .and_then(|root| std::fs::read_dir(root).ok())
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with(&format!("ebpf-prof-{pid}-"))),
    );
    found
}

/// Wait until `pid` has made nothing that is still there (a namespace goes asynchronously).
fn assert_nothing_left(pid: u32, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while !leftovers(pid).is_empty() {
        assert!(
            Instant::now() < deadline,
            "{what}: left {:?}",
            leftovers(pid)
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(
        !Path::new(&format!("/run/ebpf-prof/{pid}.netns")).exists(),
        "{what}: the note is gone"
    );
}

fn bench(iterations: &str, failpoint: Option<&str>, dir: &Path) -> Command {
    let mut c = ebpf_prof(&["bench", "--op", "udp-veth", "-n", iterations], dir);
    if let Some(f) = failpoint {
        c.env("EBPF_PROF_FAILPOINT", f);
    }
    c
}

/// Start `c` and wait until it has stopped itself at its `stop:` failpoint. The caller waits for
/// the child it gets back.
#[allow(clippy::zombie_processes)]
fn start_stopped(mut c: Command) -> Child {
    let mut child = c
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + patience(Duration::from_secs(30));
    loop {
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", child.id())).unwrap();
        let state = stat[stat.rfind(')').unwrap() + 2..].chars().next();
        if state == Some('T') {
            return child;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("the run never reached its failpoint");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn signal(pid: u32, sig: i32) {
    // SAFETY: signalling a child we started.
    unsafe { libc::kill(pid as i32, sig) };
}

/// Run commands until one recovers what `pid` left (the recovery waits for a free run lock,
/// which another run on the machine may hold); its stderr.
fn recover(pid: u32, dir: &Path) -> String {
    let deadline = Instant::now() + patience(Duration::from_secs(120));
    loop {
        let r = run(ebpf_prof(&["bench", "-n", "10"], dir));
        assert_eq!(r.code(), Some(0), "{r:?}");
        if r.stderr().contains(&format!("left by ebpf-prof pid {pid}")) {
            return r.stderr();
        }
        assert!(
            Instant::now() < deadline,
            "nothing recovered pid {pid}: {r:?}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
#[ignore = "needs root: scripts/test.sh runs it (or as root: cargo test -- --include-ignored)"]
fn udp_veth_times_datagrams_and_removes_its_network() {
    if !need_root("udp_veth_times_datagrams_and_removes_its_network") {
        return;
    }
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let d = tempfile::tempdir().unwrap();
    let child = bench("3000", None, d.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let samples: Vec<u64> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| l.parse().unwrap())
        .collect();
    assert_eq!(samples.len(), 2700, "{stderr}");
    // A send and a delivery through two network stacks take more than a microsecond, and a
    // datagram that never arrived would show as the 200 ms receive timeout.
    let mut sorted = samples.clone();
    sorted.sort_unstable();
    assert!(
        sorted[sorted.len() / 2] > 1000,
        "p50 {}",
        sorted[sorted.len() / 2]
    );
    assert!(
        sorted[sorted.len() / 2] < 100_000_000,
        "datagrams were lost"
    );
    assert_nothing_left(pid, "a normal run");
}

#[test]
#[ignore = "needs root: scripts/test.sh runs it (or as root: cargo test -- --include-ignored)"]
fn an_error_while_making_the_network_removes_what_was_made() {
    if !need_root("an_error_while_making_the_network_removes_what_was_made") {
        return;
    }
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    // An `ip` that refuses to add an address, after the namespace and the pair exist: root's
    // own temp directory (0700), so the tool trusts it on PATH.
    let d = tempfile::tempdir().unwrap();
    let fake = d.path().join("ip");
    let real = which_ip();
    std::fs::write(
        &fake,
        format!(
            "#!/bin/sh\ncase \"$*\" in *\"addr add\"*) echo 'RTNETLINK answers: refused by the test' >&2; exit 2;; esac\nexec {} \"$@\"\n",
            real.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
    let path = format!("{}:{}", d.path().display(), std::env::var("PATH").unwrap());
    let mut c = bench("100", None, d.path());
    c.env("PATH", path)
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let child = c.spawn().unwrap();
    let pid = child.id();
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(3),
        "a program we ran failed: {stderr}"
    );
    assert!(stderr.contains("refused by the test"), "{stderr}");
    assert_eq!(
        stderr
            .lines()
            .filter(|l| l.starts_with("ebpf-prof: error"))
            .count(),
        1,
        "{stderr}"
    );
    assert_nothing_left(pid, "an error while making it");
}

fn which_ip() -> std::path::PathBuf {
    ["/usr/sbin/ip", "/sbin/ip", "/usr/bin/ip", "/bin/ip"]
        .iter()
        .map(std::path::PathBuf::from)
        .find(|p| p.exists())
        .expect("iproute2's ip")
}

#[test]
#[ignore = "needs root: scripts/test.sh runs it (or as root: cargo test -- --include-ignored)"]
fn a_panic_after_making_the_network_unwinds_through_its_removal() {
    if !need_root("a_panic_after_making_the_network_unwinds_through_its_removal") {
        return;
    }
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let d = tempfile::tempdir().unwrap();
    let child = bench("100", Some("bench-netns-ready"), d.path())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(101), "a panic: {stderr}");
    assert!(stderr.contains("failpoint bench-netns-ready"), "{stderr}");
    assert_nothing_left(pid, "a panic");
}

#[test]
#[ignore = "needs root: scripts/test.sh runs it (or as root: cargo test -- --include-ignored)"]
fn sigterm_during_the_run_removes_the_network_and_exits_143() {
    if !need_root("sigterm_during_the_run_removes_the_network_and_exits_143") {
        return;
    }
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let d = tempfile::tempdir().unwrap();
    let child = start_stopped(bench("2000", Some("stop:bench-netns-ready"), d.path()));
    let pid = child.id();
    assert!(
        !leftovers(pid).is_empty(),
        "the network exists at the failpoint"
    );
    signal(pid, libc::SIGTERM);
    signal(pid, libc::SIGCONT);
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(128 + libc::SIGTERM), "{stderr}");
    assert_nothing_left(pid, "SIGTERM");
}

fn killed_then_recovered(failpoint: &str, sig: i32) {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let d = tempfile::tempdir().unwrap();
    let child = start_stopped(bench("2000", Some(failpoint), d.path()));
    let pid = child.id();
    assert!(
        Path::new(&format!("/run/ebpf-prof/{pid}.netns")).exists(),
        "noted first"
    );
    signal(pid, sig);
    signal(pid, libc::SIGCONT);
    let out = child.wait_with_output().unwrap();
    assert!(!out.status.success());
    let stderr = recover(pid, d.path());
    assert!(stderr.contains(&format!("ebpf-prof-{pid}-0")), "{stderr}");
    assert_nothing_left(pid, failpoint);
}

#[test]
#[ignore = "needs root: scripts/test.sh runs it (or as root: cargo test -- --include-ignored)"]
fn sigkill_after_making_the_network_is_recovered_by_the_next_start() {
    if !need_root("sigkill_after_making_the_network_is_recovered_by_the_next_start") {
        return;
    }
    killed_then_recovered("stop:bench-netns-ready", libc::SIGKILL);
}

#[test]
#[ignore = "needs root: scripts/test.sh runs it (or as root: cargo test -- --include-ignored)"]
fn sigkill_between_the_note_and_the_network_is_recovered_too() {
    if !need_root("sigkill_between_the_note_and_the_network_is_recovered_too") {
        return;
    }
    killed_then_recovered("stop:netns-noted", libc::SIGKILL);
}

/// Kernel ids of the loaded programs named `name`.
fn program_ids(name: &str) -> Vec<u32> {
    let out = Command::new("bpftool")
        .args(["-j", "prog", "show"])
        .output()
        .unwrap();
    let all: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
    all.as_array()
        .into_iter()
        .flatten()
        .filter(|p| p["name"] == name)
        .filter_map(|p| p["id"].as_u64().map(|id| id as u32))
        .collect()
}

/// The operation chosen and the runs per datagram of `name`'s run: XDP, tc and cgroup_skb run
/// three arms at the defaults, the program judged on top of the trivial one, which must run
/// once per datagram as well.
fn ran_once_per_datagram(name: &str, whole: &serde_json::Value) {
    let three = matches!(name, "xdp_8" | "tc_8" | "cgroup_skb_8");
    assert_eq!(whole["program"].is_object(), three, "{name}: three arms");
    let report = if three { &whole["program"] } else { whole };
    let mut judged = vec![report];
    judged.extend(three.then_some(&whole["attach"]));
    for report in judged {
        assert_eq!(
            report["op"]["op"], "udp-veth",
            "{name}: chosen from the section"
        );
        let runs = report["ran"]["runs_per_op"].as_f64().unwrap();
        assert!(
            (0.9..1.1).contains(&runs),
            "{name}: {runs} runs per datagram"
        );
    }
}

#[test]
#[ignore = "needs root: scripts/test.sh runs it (or as root: cargo test -- --include-ignored)"]
fn overhead_attaches_packet_programs_to_the_peer_and_they_run_inside_the_span() {
    if !need_root("overhead_attaches_packet_programs_to_the_peer_and_they_run_inside_the_span") {
        return;
    }
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let d = tempfile::tempdir().unwrap();
    let hooks = ebpf_prof::bpf::PACKET_HOOKS;
    for (name, place) in [
        ("xdp_8", "to XDP of"),
        ("tcx_8", "to tcx ingress of"),
        ("tc_8", "to the ingress of a clsact qdisc on"),
        ("cgroup_skb_8", "to the cgroup"),
        (
            "socket_8",
            "to the bench's receiving socket (SO_ATTACH_BPF, by the id in",
        ),
    ] {
        let bytes = hooks.iter().find(|(n, _)| *n == name).unwrap().1;
        let object = d.path().join(format!("{name}.bpf.o"));
        std::fs::write(&object, bytes).unwrap();
        let object = object.to_string_lossy().into_owned();
        let args = ["overhead", "--load", &object, "--rounds", "4", "--json"];
        let child = ebpf_prof(&args, d.path())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let pid = child.id();
        let out = child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{name}: {stderr}");
        // The peer `epPIDp0`, or the cgroup `ebpf-prof-PID-0`: named after this run.
        let said = stderr
            .lines()
            .find(|l| l.contains(&format!("attached {name} {place} ")))
            .unwrap_or_else(|| panic!("{name}: where it went is not said: {stderr}"));
        assert!(
            said.contains(&format!("ep{pid}p0")) || said.contains(&format!("ebpf-prof-{pid}-0")),
            "{said}"
        );
        let whole: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        ran_once_per_datagram(name, &whole);
        assert_nothing_left(pid, name);
        assert!(program_ids(name).is_empty(), "{name} is unloaded");
        assert!(program_ids("ebpf_prof_pass").is_empty(), "trivial unloaded");
        assert!(!Path::new(&format!("/run/ebpf-prof/ebpf-prof-{pid}-0.socket")).exists());
    }
}

#[test]
#[ignore = "needs root: scripts/test.sh runs it (or as root: cargo test -- --include-ignored)"]
fn sigkill_of_overhead_with_its_cgroup_is_recovered_by_the_next_start() {
    if !need_root("sigkill_of_overhead_with_its_cgroup_is_recovered_by_the_next_start") {
        return;
    }
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let d = tempfile::tempdir().unwrap();
    let bytes = ebpf_prof::bpf::PACKET_HOOKS
        .iter()
        .find(|(n, _)| *n == "cgroup_skb_0")
        .unwrap()
        .1;
    std::fs::write(d.path().join("cgroup_skb_0.bpf.o"), bytes).unwrap();
    let mut c = ebpf_prof(
        &["overhead", "--load", "cgroup_skb_0.bpf.o", "--rounds", "4"],
        d.path(),
    );
    c.env("EBPF_PROF_FAILPOINT", "stop:packet-network-ready");
    let child = start_stopped(c);
    let pid = child.id();
    let cgroup = ebpf_prof::netpath::cgroup::cgroup2_root()
        .unwrap()
        .join(format!("ebpf-prof-{pid}-0"));
    let procs = std::fs::read_to_string(cgroup.join("cgroup.procs")).unwrap();
    assert!(
        procs.lines().any(|l| l == pid.to_string()),
        "moved into its cgroup"
    );
    signal(pid, libc::SIGKILL);
    signal(pid, libc::SIGCONT);
    let _ = child.wait_with_output().unwrap();
    let stderr = recover(pid, d.path());
    assert!(stderr.contains(&format!("ebpf-prof-{pid}-0")), "{stderr}");
    assert_nothing_left(pid, "overhead killed with its cgroup");
    assert!(!cgroup.exists());
}

#[test]
#[ignore = "needs root: scripts/test.sh runs it (or as root: cargo test -- --include-ignored)"]
fn demo_net_shows_the_sample_packet_hook_on_the_veth_path() {
    if !need_root("demo_net_shows_the_sample_packet_hook_on_the_veth_path") {
        return;
    }
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let d = tempfile::tempdir().unwrap();
    let args = [
        "demo",
        "--net",
        "--dir",
        "out",
        "-n",
        "20000",
        "--cost-time",
        "2s",
    ];
    let child = ebpf_prof(&args, d.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains("--op auto chose udp-veth"),
        "chosen from the hook's section: {stderr}"
    );
    assert!(
        stderr.contains(&format!("attached xdp_port_filter to XDP of ep{pid}p")),
        "{stderr}"
    );
    assert!(d.path().join("out/flame.svg").exists());
    assert_nothing_left(pid, "demo --net");
    assert!(program_ids("xdp_port_filter").is_empty());
}

#[test]
#[ignore = "needs root: scripts/test.sh runs it (or as root: cargo test -- --include-ignored)"]
fn xdp_falls_back_to_generic_mode_and_says_so() {
    if !need_root("xdp_falls_back_to_generic_mode_and_says_so") {
        return;
    }
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let d = tempfile::tempdir().unwrap();
    let bytes = ebpf_prof::bpf::PACKET_HOOKS
        .iter()
        .find(|(n, _)| *n == "xdp_8")
        .unwrap()
        .1;
    std::fs::write(d.path().join("xdp_8.bpf.o"), bytes).unwrap();
    let args = [
        "overhead",
        "--load",
        "xdp_8.bpf.o",
        "--rounds",
        "4",
        "--json",
    ];
    let mut c = ebpf_prof(&args, d.path());
    // The native attach is made to fail, as on a driver without XDP support.
    c.env("EBPF_PROF_FAILPOINT", "flag:xdp-native-fails");
    let child = c
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("in generic (skb) mode"), "{stderr}");
    assert!(!stderr.contains("NAPI"), "no native-mode note: {stderr}");
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let runs = report["program"]["ran"]["runs_per_op"].as_f64().unwrap();
    assert!((0.9..1.1).contains(&runs), "{runs} runs per datagram");
    assert_nothing_left(pid, "generic XDP");
}

/// Write the calibrated packet program `name` as `dir/NAME.bpf.o`, and give its path.
fn write_packet_hook(name: &str, dir: &Path) -> String {
    let bytes = ebpf_prof::bpf::PACKET_HOOKS
        .iter()
        .find(|(n, _)| *n == name)
        .unwrap()
        .1;
    let object = dir.join(format!("{name}.bpf.o"));
    std::fs::write(&object, bytes).unwrap();
    object.to_string_lossy().into_owned()
}

/// `overhead --load NAME.bpf.o --json` with `more` arguments (`--rounds 4` when `more` gives
/// none), in `dir`: the run's pid, its report and its stderr (the run must succeed).
fn overhead_of(name: &str, more: &[&str], dir: &Path) -> (u32, serde_json::Value, String) {
    let object = write_packet_hook(name, dir);
    let mut args = vec!["overhead", "--load", &object, "--json"];
    if !more.contains(&"--rounds") {
        args.extend(["--rounds", "4"]);
    }
    args.extend_from_slice(more);
    let child = ebpf_prof(&args, dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{name}: {stderr}");
    let report = serde_json::from_slice(&out.stdout).unwrap();
    (pid, report, stderr)
}

#[test]
#[ignore = "needs root: scripts/test.sh runs it (or as root: cargo test -- --include-ignored)"]
fn tcp_veth_runs_packet_programs_once_per_segment_inside_the_span() {
    if !need_root("tcp_veth_runs_packet_programs_once_per_segment_inside_the_span") {
        return;
    }
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let d = tempfile::tempdir().unwrap();
    // (program, runs per timed segment): a cgroup_skb egress program also sees the peer's ACK,
    // which the receiving socket (the bench's too) sends inside the timed recvfrom.
    for (name, runs_range) in [
        ("xdp_8", 0.9..1.1),
        ("tcx_8", 0.9..1.1),
        ("tc_8", 0.9..1.1),
        ("socket_8", 0.9..1.1),
        ("cgroup_skb_8", 0.9..2.1),
    ] {
        let (pid, report, stderr) = overhead_of(
            name,
            &["--op", "tcp-veth", "--trivial-arm", "off"],
            d.path(),
        );
        assert_eq!(report["op"]["op"], "tcp-veth", "{name}: {stderr}");
        let runs = report["ran"]["runs_per_op"].as_f64().unwrap();
        assert!(
            runs_range.contains(&runs),
            "{name}: {runs} runs per segment: {stderr}"
        );
        assert!(
            stderr.contains(&format!("attached {name} ")),
            "{name}: {stderr}"
        );
        assert_nothing_left(pid, name);
        assert!(program_ids(name).is_empty(), "{name} is unloaded");
    }
}

#[test]
#[ignore = "needs root: scripts/test.sh runs it (or as root: cargo test -- --include-ignored)"]
fn bench_tcp_veth_times_segments_and_removes_its_network() {
    if !need_root("bench_tcp_veth_times_segments_and_removes_its_network") {
        return;
    }
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let d = tempfile::tempdir().unwrap();
    let child = ebpf_prof(&["bench", "--op", "tcp-veth", "-n", "3000"], d.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let mut samples: Vec<u64> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| l.parse().unwrap())
        .collect();
    assert_eq!(samples.len(), 2700, "{stderr}");
    samples.sort_unstable();
    let p50 = samples[samples.len() / 2];
    // A segment through two network stacks takes more than a microsecond; one that never
    // arrived would show as the 200 ms receive timeout.
    assert!((1000..100_000_000).contains(&p50), "p50 {p50}");
    assert_nothing_left(pid, "bench --op tcp-veth");
}

/// The sum over CPUs of the `runs` counter of the loaded program named `name` (the calibrated
/// packet programs count their runs there).
fn runs_counted(name: &str) -> u64 {
    let ids = program_ids(name);
    let show = Command::new("bpftool")
        .args(["-j", "prog", "show", "id", &ids[0].to_string()])
        .output()
        .unwrap();
    let prog: serde_json::Value = serde_json::from_slice(&show.stdout).unwrap();
    let maps: Vec<u64> = prog["map_ids"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|m| m.as_u64())
        .collect();
    for map in maps {
        let dump = Command::new("bpftool")
            .args(["-j", "map", "dump", "id", &map.to_string()])
            .output()
            .unwrap();
        let entries: serde_json::Value = serde_json::from_slice(&dump.stdout).unwrap_or_default();
        let Some(values) = entries[0]["formatted"]["values"].as_array() else {
            continue;
        };
        return values.iter().filter_map(|v| v["value"].as_u64()).sum();
    }
    panic!("{name} has no per-CPU runs counter");
}

#[test]
#[ignore = "needs root: scripts/test.sh runs it (or as root: cargo test -- --include-ignored)"]
fn hook_load_of_a_packet_program_makes_the_network_and_says_how_to_reach_it() {
    if !need_root("hook_load_of_a_packet_program_makes_the_network_and_says_how_to_reach_it") {
        return;
    }
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let d = tempfile::tempdir().unwrap();
    write_packet_hook("xdp_8", d.path());
    let mut child = ebpf_prof(
        &["hook", "--load", "xdp_8.bpf.o", "--seconds", "60"],
        d.path(),
    )
    .stdout(Stdio::null())
    .stderr(Stdio::piped())
    .spawn()
    .unwrap();
    let pid = child.id();
    // Read stderr until the line that says where packets go (the run may wait for the lock).
    let mut lines = std::io::BufRead::lines(std::io::BufReader::new(child.stderr.take().unwrap()));
    let mut said = Vec::new();
    let reach = loop {
        let line = lines.next().expect("hook ended early").unwrap();
        said.push(line.clone());
        if line.contains("packets to ") {
            break line;
        }
    };
    assert!(
        said.iter()
            .any(|l| l.contains(&format!("attached xdp_8 to XDP of ep{pid}p0"))),
        "{said:?}"
    );
    let peer = reach
        .split("packets to ")
        .nth(1)
        .and_then(|rest| rest.split(' ').next())
        .unwrap()
        .to_string();
    let before = runs_counted("xdp_8");
    let socket = std::net::UdpSocket::bind("0.0.0.0:0").unwrap();
    for _ in 0..20 {
        socket.send_to(b"ebpfprof", format!("{peer}:9")).unwrap();
    }
    let deadline = Instant::now() + Duration::from_secs(5);
    while runs_counted("xdp_8") < before + 20 {
        assert!(
            Instant::now() < deadline,
            "the datagrams did not reach xdp_8"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    signal(pid, libc::SIGINT);
    let status = child.wait().unwrap();
    assert!(status.success(), "{status:?}");
    assert_nothing_left(pid, "hook --load");
    assert!(program_ids("xdp_8").is_empty(), "xdp_8 is unloaded");
}

#[test]
#[ignore = "needs root: scripts/test.sh runs it (or as root: cargo test -- --include-ignored)"]
fn cgroup_sock_and_netfilter_programs_run_once_per_op_inside_the_span() {
    if !need_root("cgroup_sock_and_netfilter_programs_run_once_per_op_inside_the_span") {
        return;
    }
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let d = tempfile::tempdir().unwrap();
    // (program, --op given or none for auto, the operation expected, where it is said to go)
    for (name, op, expected, place) in [
        ("sock_create_8", None, "socket", "to the cgroup "),
        (
            "netfilter_8",
            None,
            "udp-veth",
            "to netfilter's IPv4 NF_INET_LOCAL_IN",
        ),
        (
            "netfilter_8",
            Some("tcp-veth"),
            "tcp-veth",
            "to netfilter's IPv4 NF_INET_LOCAL_IN",
        ),
    ] {
        let more: Vec<&str> = op.map(|o| vec!["--op", o]).unwrap_or_default();
        let (pid, report, stderr) = overhead_of(name, &more, d.path());
        assert_eq!(report["op"]["op"], expected, "{name}: {stderr}");
        assert!(
            stderr.contains(&format!("attached {name} {place}")),
            "{name}: {stderr}"
        );
        let runs = report["ran"]["runs_per_op"].as_f64().unwrap();
        assert!((0.9..1.1).contains(&runs), "{name}: {runs} runs per op");
        assert_nothing_left(pid, name);
        assert!(program_ids(name).is_empty(), "{name} is unloaded");
    }
}

/// `overhead --load xdp_8.bpf.o --json` with `extra` in a scratch directory: its pid, its
/// document, its stderr; it must succeed and leave nothing behind.
fn overhead_xdp_8(extra: &[&str]) -> (u32, serde_json::Value, String) {
    let d = tempfile::tempdir().unwrap();
    let (pid, doc, stderr) = overhead_of("xdp_8", extra, d.path());
    assert_nothing_left(pid, "three arms");
    assert!(program_ids("xdp_8").is_empty(), "xdp_8 unloaded");
    assert!(program_ids("ebpf_prof_pass").is_empty(), "trivial unloaded");
    (pid, doc, stderr)
}

/// The p50 row of a report: (delta, lo, hi).
fn p50_of(report: &serde_json::Value) -> (f64, f64, f64) {
    let diffs = report["comparison"]["diffs"].as_array().unwrap();
    let row = diffs.iter().find(|d| d["q"] == 50.0).unwrap();
    let f = |k: &str| row[k].as_f64().unwrap();
    (f("delta"), f("lo"), f("hi"))
}

#[test]
#[ignore = "needs root: scripts/test.sh runs it (or as root: cargo test -- --include-ignored)"]
fn native_xdp_runs_three_arms_and_judges_the_program_on_top_of_a_trivial_one() {
    if !need_root("native_xdp_runs_three_arms_and_judges_the_program_on_top_of_a_trivial_one") {
        return;
    }
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    // A gate no run exceeds, to see whose gates they are.
    let extra = ["--rounds", "20", "--max-p50-ns", "100000"];
    let (pid, doc, stderr) = overhead_xdp_8(&extra);
    assert!(
        stderr.contains(&format!("to XDP of ep{pid}p0 in native (driver) mode")),
        "{stderr}"
    );
    assert!(
        stderr.contains("the trivial arm measures that switch apart"),
        "{stderr}"
    );
    assert!(
        !stderr.contains("--compare yours.bpf.o"),
        "no advice: {stderr}"
    );
    assert_eq!(doc["kind"], "xdp");
    let (attach, program) = (&doc["attach"], &doc["program"]);
    assert_eq!(attach["base"]["label"], "detached");
    assert_eq!(attach["treat"]["label"], "pass_xdp.bpf.o (built in)");
    assert_eq!(program["base"]["label"], "pass_xdp.bpf.o (built in)");
    assert_eq!(program["treat"]["label"], "xdp_8.bpf.o");
    assert_eq!(program["mode"], "compare");
    // Both trivial-program rounds ran it once per datagram; the program's did too.
    for (report, arm) in [(attach, "treat"), (program, "base"), (program, "treat")] {
        let programs = report["kernel"]["programs"].as_array().unwrap();
        let runs: Vec<f64> = programs
            .iter()
            .filter(|p| p["arm"] == arm)
            .filter_map(|p| p["runs_per_iteration"].as_f64())
            .collect();
        assert!(!runs.is_empty(), "{arm}: {programs:?}");
        assert!(
            runs.iter().all(|r| (0.9..1.1).contains(r)),
            "{arm}: {runs:?}"
        );
    }
    assert!(program["gates"].as_array().unwrap().len() == 1, "{doc}");
    assert!(attach["gates"].as_array().unwrap().is_empty(), "{doc}");
    summary_quotes_the_attach_figure(&doc);
    let (_, off, stderr) = overhead_xdp_8(&["--rounds", "4", "--trivial-arm", "off"]);
    assert_eq!(off["mode"], "load", "two arms: {off}");
    assert!(stderr.contains("--compare yours.bpf.o"), "{stderr}");
}

/// A three-arm XDP document's summary quotes what attaching at all costs, with its interval,
/// and says when that interval holds 0. Whether the switch to NAPI is told apart from 0 is the
/// machine's to say (the figure is scripts/packet-path.sh's).
fn summary_quotes_the_attach_figure(doc: &serde_json::Value) {
    let (a, lo, hi) = p50_of(&doc["attach"]);
    assert!(
        lo <= a && a <= hi,
        "attaching at all: {a:+.0} [{lo:+.0}, {hi:+.0}]"
    );
    let summary = doc["summary"].as_str().unwrap();
    let said = format!("at all costs {a:+.0} ns at p50 [{lo:+.0}, {hi:+.0}]");
    assert!(summary.contains(&said), "{said}: {summary}");
    assert_eq!(
        summary.contains(&format!("{said} (not told apart from 0)")),
        lo <= 0.0,
        "{summary}"
    );
    assert!(
        summary.starts_with("attaching an XDP program at all costs"),
        "{summary}"
    );
    assert!(
        summary.ends_with("the verdict and the gates are on this program's cost"),
        "{summary}"
    );
}

/// `record --load NAME.bpf.o` (over udp-veth, chosen from the section), then `report --json`
/// of the recording: the report, and the record's pid.
fn record_and_report(name: &str, dir: &Path) -> (serde_json::Value, u32) {
    let object = write_packet_hook(name, dir);
    let data = format!("{name}.data");
    let child = ebpf_prof(&["record", "--load", &object, "-o", &data], dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{name}: {stderr}");
    assert!(stderr.contains("--op auto chose udp-veth"), "{stderr}");
    let out = ebpf_prof(&["report", "--json", &data], dir)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{name}: {stderr}");
    (serde_json::from_slice(&out.stdout).unwrap(), pid)
}

#[test]
#[ignore = "needs root: scripts/test.sh runs it (or as root: cargo test -- --include-ignored)"]
fn record_of_xdp_and_tc_programs_names_them_and_reads_their_hooks() {
    if !need_root("record_of_xdp_and_tc_programs_names_them_and_reads_their_hooks") {
        return;
    }
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let d = tempfile::tempdir().unwrap();
    for (name, hook) in [("xdp_8", "xdp_native"), ("tc_8", "tc_ingress")] {
        let (report, pid) = record_and_report(name, d.path());
        let programs = report["programs"].as_array().unwrap();
        let program = programs.iter().find(|p| p["name"] == name);
        let program = program.unwrap_or_else(|| panic!("{name} not named: {programs:?}"));
        assert!(program["percent"].as_f64().unwrap() > 0.0, "{program}");
        let hooks = report["packet_hooks"].as_array().unwrap();
        assert_eq!(hooks.len(), 1, "{name}: {hooks:?}");
        assert_eq!(hooks[0]["hook"], hook, "{name}: {hooks:?}");
        // The hook holds every stack through the program that has a kernel caller.
        let inside = hooks[0]["bpf_percent"].as_f64().unwrap();
        assert!(inside > 0.0, "{name}: {hooks:?}");
        assert_nothing_left(pid, name);
        assert!(program_ids(name).is_empty(), "{name} is unloaded");
    }
}
