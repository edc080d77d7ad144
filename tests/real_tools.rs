//! Reading, pricing and gating on real, unmodified programs from a public tools
//! collection: Debian's `libbpf-tools` (`syscount`, `opensnoop`; scripts/install-deps.sh
//! installs it). Each tool is held as a user would hold an external loader: started by hand (or
//! by `overhead --attach-cmd`), waited for until its programs are in the kernel's program list,
//! stopped by its pid, and its programs checked gone.
//!
//! What Debian's build (0.26) really does, unlike the newer build the issue saw: syscount's
//! `start` and `data` hash maps are preallocated (`bpftool map show` prints `flags 0`, no
//! `BPF_F_NO_PREALLOC`), so its updates of an existing key reuse a spare element and the
//! profile shows `htab_map_update_elem` (self), `htab_lock_bucket` and `htab_map_hash`, no
//! allocator frames. The tests assert what is there: the update named with the map-access
//! hint, the allocation hint exactly when allocator frames sit under a map update, and never
//! advice to drop a flag the maps do not have.

mod common;
use common::*;
use serde_json::Value;
use std::collections::BTreeSet;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const SYSCOUNT: &str = "/usr/sbin/syscount";
const OPENSNOOP: &str = "/usr/sbin/opensnoop";

/// BPF_F_NO_PREALLOC in `bpf_map_info.map_flags`.
const NO_PREALLOC: u64 = 1;

/// `overhead --attach-cmd LOADER --attach-tracefs` at three rounds of 500 operations, as JSON,
/// in `dir`: how the tests price a real tool held by ebpf-prof.
fn overhead_of_loader(loader: &str, dir: &std::path::Path) -> Run {
    let args = [
        "overhead",
        "--attach-cmd",
        loader,
        "--attach-tracefs",
        "--rounds",
        "3",
        "-n",
        "500",
        "--json",
    ];
    run(ebpf_prof(&args, dir))
}

/// Whether the real tool is installed (see `common::need_tool`).
fn have_tool(path: &str) -> bool {
    common::need_tool(path, "libbpf-tools")
}

/// The command line that runs `tool` where libbpf finds tracepoint ids: in a mount namespace
/// of its own with tracefs (and debugfs: libbpf-tools' `tracepoint_exists()` looks under
/// /sys/kernel/debug/tracing, and opensnoop loads its open(2) programs only when it finds
/// sys_enter_open there) mounted; a fresh machine of this kind has neither, and the host's
/// mount table stays as it is.
fn in_tracefs_ns(tool: &str) -> Vec<String> {
    let script = format!(
        "mount -t tracefs nodev /sys/kernel/tracing 2>/dev/null; \
         mount -t debugfs nodev /sys/kernel/debug 2>/dev/null; exec {tool}"
    );
    ["unshare", "-m", "--propagation", "private", "sh", "-c"]
        .iter()
        .map(|s| s.to_string())
        .chain([script])
        .collect()
}

/// The same, as one `--attach-cmd` string.
fn attach_cmd(tool: &str) -> String {
    let argv = in_tracefs_ns(tool);
    shlex::try_join(argv.iter().map(String::as_str)).unwrap()
}

/// A real tool started by hand, stopped by its pid when dropped (also when a test fails).
struct Held {
    child: Child,
    /// Its programs: kernel id and full name (from BTF, as bpftool shows it).
    programs: Vec<(u32, String)>,
}

impl Held {
    fn start(tool: &str, names: &[&str]) -> Held {
        let before: BTreeSet<u32> = ebpf_prof::bpf::loaded_program_ids().unwrap();
        let argv = in_tracefs_ns(tool);
        let child = Command::new(&argv[0])
            .args(&argv[1..])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .spawn()
            .unwrap();
        let mut held = Held {
            child,
            programs: Vec::new(),
        };
        let t = Instant::now();
        while !names
            .iter()
            .all(|n| held.programs.iter().any(|(_, p)| p == n))
        {
            assert!(
                t.elapsed() < patience(Duration::from_secs(30)),
                "{tool} never loaded {names:?}: {:?}",
                held.programs
            );
            assert!(held.child.try_wait().unwrap().is_none(), "{tool} exited");
            std::thread::sleep(Duration::from_millis(100));
            held.programs = new_programs(&before);
        }
        held
    }

    /// The id of the program named `name`.
    fn id(&self, name: &str) -> u32 {
        self.programs.iter().find(|(_, n)| n == name).unwrap().0
    }

    /// SIGTERM by pid, reap, and check its programs are gone.
    fn stop(mut self) {
        stop_child(&mut self.child);
        let ids: Vec<u32> = self.programs.iter().map(|p| p.0).collect();
        assert_gone(&ids);
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        stop_child(&mut self.child);
    }
}

fn stop_child(child: &mut Child) {
    if child.try_wait().unwrap().is_none() {
        // SAFETY: kill on the pid of a child we spawned and have not reaped.
        unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
        let _ = child.wait();
    }
}

/// Programs loaded since `before`, with their full names.
fn new_programs(before: &BTreeSet<u32>) -> Vec<(u32, String)> {
    ebpf_prof::bpf::loaded_programs()
        .unwrap()
        .into_iter()
        .filter(|p| !before.contains(&p.id))
        .map(|p| (p.id, ebpf_prof::bpf::full_name(p.id).unwrap_or(p.name)))
        .collect()
}

/// Every one of `ids` unloaded (teardown is asynchronous: a moment is allowed).
fn assert_gone(ids: &[u32]) {
    let t = Instant::now();
    loop {
        let loaded = ebpf_prof::bpf::loaded_program_ids().unwrap();
        let left: Vec<&u32> = ids.iter().filter(|i| loaded.contains(i)).collect();
        if left.is_empty() {
            return;
        }
        assert!(
            t.elapsed() < Duration::from_secs(5),
            "{left:?} still loaded"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// `bpftool map show` of the maps of program `id`: (name, type, flags).
fn maps_of(id: u32) -> Vec<(String, String, u64)> {
    let prog = bpftool(&["prog", "show", "id", &id.to_string()]);
    let ids = prog["map_ids"].as_array().cloned().unwrap_or_default();
    ids.iter()
        .map(|m| {
            let m = bpftool(&["map", "show", "id", &m.to_string()]);
            let s = |k: &str| m[k].as_str().unwrap_or_default().to_string();
            (s("name"), s("type"), m["flags"].as_u64().unwrap())
        })
        .collect()
}

fn bpftool(args: &[&str]) -> Value {
    let out = Command::new("bpftool")
        .arg("-j")
        .args(args)
        .output()
        .unwrap();
    assert!(out.status.success(), "bpftool {args:?}: {out:?}");
    serde_json::from_slice(&out.stdout).unwrap()
}

/// The serialised test lock: these tests load programs and run perf.
static ONE: std::sync::Mutex<()> = std::sync::Mutex::new(());

#[path = "real_tools/syscount.rs"]
mod syscount;

#[path = "real_tools/opensnoop.rs"]
mod opensnoop;

#[path = "real_tools/execsnoop.rs"]
mod execsnoop;

#[path = "real_tools/bpftrace.rs"]
mod bpftrace;
