//! The BPF loader: opens a libbpf-style object, loads it, attaches its programs by their
//! SEC() names and keeps them attached until the returned [`Attached`] is dropped.
//!
//! Also bundles the sample hooks that `build.rs` compiles from `fixtures/hooks/`:
//! `tail_call_security_check` tail-calls `enforce_access_policy`, which calls the
//! `path_check_callback` subprogram, the shape of the hook in "Profiling eBPF Code".
//! Loading needs root; some kernels refuse LSM programs even to root (see `lsm_supported`).
//!
//! Beside the loader: the kernel's run statistics per program ([`enable_run_stats`],
//! [`program_stats`]), what is loaded ([`loaded_programs`], [`wait_for_new_programs`]) and how
//! full maps are ([`map_pressure`]).

pub mod attachments;
pub(crate) mod btf;
pub mod choice;
mod diagnose;
pub(crate) mod ids;
mod introspect;
mod inventory;
mod libbpf_log;
mod loader;
pub mod netfilter;
pub mod packet;
mod pins;
mod pressure;
mod runstats;

use std::sync::OnceLock;

pub use ids::marked_if_cut;
pub use introspect::{
    full_name, links_to, loaded_program_ids, loaded_programs, wait_for_loader,
    wait_for_new_programs, LoadedProgram, LoaderMounts, LoaderState,
};
pub use inventory::{is_traced_kind, programs as inventory, Program as InventoryProgram};
pub use loader::{attach, object_programs, Attached};
pub(crate) use loader::{check_object, load_only};
pub use pressure::{key_digests, map_pressure, tail_call_targets, MapPressure};
#[doc(hidden)]
pub use runstats::enable_run_stats_via_sysctl;
pub use runstats::{
    enable_run_stats, program_stats, run_stats_state, runs_during, ProgramStats, RunStatsGuard,
    RunStatsState, STATS_SYSCTL,
};

// The objects the documentation's examples load, written out by `hook --write-objects`.
include!(concat!(env!("OUT_DIR"), "/hooks/examples.rs"));

/// Bytes of the bundled sample hooks, compiled by build.rs: the tracepoint variant
/// (`tracepoint/syscalls/sys_enter_openat`).
pub const SAMPLE_HOOK: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/hooks/openat_hook.bpf.o"));
/// The LSM variant of the sample hook (`lsm/file_open`), same program names.
pub const SAMPLE_HOOK_LSM: &[u8] =
    include_bytes!(concat!(env!("OUT_DIR"), "/hooks/openat_hook_lsm.bpf.o"));
/// The sample packet hook (`demo --net`): `xdp_port_filter`, an XDP filter parsing Ethernet,
/// IPv4 and UDP and looking the destination port up in a hash map per packet
/// (fixtures/hooks/packet_hook.bpf.c).
pub const SAMPLE_PACKET_HOOK: &[u8] =
    include_bytes!(concat!(env!("OUT_DIR"), "/hooks/packet_hook.bpf.o"));
/// A test object the verifier rejects (a map value read without its NULL check).
#[doc(hidden)]
pub const SAMPLE_HOOK_REJECTED: &[u8] =
    include_bytes!(concat!(env!("OUT_DIR"), "/hooks/bad/verifier_reject.bpf.o"));
/// A test object with a map and no programs.
#[doc(hidden)]
pub const SAMPLE_NO_PROGRAMS: &[u8] =
    include_bytes!(concat!(env!("OUT_DIR"), "/hooks/bad/no_programs.bpf.o"));

/// The calibrated packet programs (fixtures/hooks/packet/): for each kind (`xdp`, `tc`,
/// `tcx/ingress`, `cgroup_skb/egress`, `socket`, `cgroup/sock_create`, `netfilter`) one doing 0
/// and one doing 8 hash-map look-ups per packet (per socket made, for `cgroup/sock_create`)
/// before letting it through, by name (`xdp_8`, which is also the program's name).
#[doc(hidden)]
pub const PACKET_HOOKS: [(&str, &[u8]); 14] = [
    (
        "xdp_0",
        include_bytes!(concat!(env!("OUT_DIR"), "/hooks/packet/xdp_0.bpf.o")),
    ),
    (
        "xdp_8",
        include_bytes!(concat!(env!("OUT_DIR"), "/hooks/packet/xdp_8.bpf.o")),
    ),
    (
        "tc_0",
        include_bytes!(concat!(env!("OUT_DIR"), "/hooks/packet/tc_0.bpf.o")),
    ),
    (
        "tc_8",
        include_bytes!(concat!(env!("OUT_DIR"), "/hooks/packet/tc_8.bpf.o")),
    ),
    (
        "tcx_0",
        include_bytes!(concat!(env!("OUT_DIR"), "/hooks/packet/tcx_0.bpf.o")),
    ),
    (
        "tcx_8",
        include_bytes!(concat!(env!("OUT_DIR"), "/hooks/packet/tcx_8.bpf.o")),
    ),
    (
        "cgroup_skb_0",
        include_bytes!(concat!(env!("OUT_DIR"), "/hooks/packet/cgroup_skb_0.bpf.o")),
    ),
    (
        "cgroup_skb_8",
        include_bytes!(concat!(env!("OUT_DIR"), "/hooks/packet/cgroup_skb_8.bpf.o")),
    ),
    (
        "socket_0",
        include_bytes!(concat!(env!("OUT_DIR"), "/hooks/packet/socket_0.bpf.o")),
    ),
    (
        "socket_8",
        include_bytes!(concat!(env!("OUT_DIR"), "/hooks/packet/socket_8.bpf.o")),
    ),
    (
        "sock_create_0",
        include_bytes!(concat!(
            env!("OUT_DIR"),
            "/hooks/packet/sock_create_0.bpf.o"
        )),
    ),
    (
        "sock_create_8",
        include_bytes!(concat!(
            env!("OUT_DIR"),
            "/hooks/packet/sock_create_8.bpf.o"
        )),
    ),
    (
        "netfilter_0",
        include_bytes!(concat!(env!("OUT_DIR"), "/hooks/packet/netfilter_0.bpf.o")),
    ),
    (
        "netfilter_8",
        include_bytes!(concat!(env!("OUT_DIR"), "/hooks/packet/netfilter_8.bpf.o")),
    ),
];

/// Hook A of the sensitivity pair: `tracepoint/syscalls/sys_enter_openat` doing
/// [`HOOK_LOOKUPS_A_COUNT`] hash-map look-ups per call (fixtures/hooks/lookups_common.h).
#[doc(hidden)]
pub const HOOK_LOOKUPS_A: &[u8] =
    include_bytes!(concat!(env!("OUT_DIR"), "/hooks/lookups_2.bpf.o"));
/// Hook B of the sensitivity pair: the same program with [`HOOK_LOOKUPS_B_COUNT`] look-ups.
#[doc(hidden)]
pub const HOOK_LOOKUPS_B: &[u8] =
    include_bytes!(concat!(env!("OUT_DIR"), "/hooks/lookups_4.bpf.o"));
/// The in-between version: [`HOOK_LOOKUPS_MID_COUNT`] look-ups, about half the A–B difference
/// from either.
#[doc(hidden)]
pub const HOOK_LOOKUPS_MID: &[u8] =
    include_bytes!(concat!(env!("OUT_DIR"), "/hooks/lookups_3.bpf.o"));
/// The finest step: [`HOOK_LOOKUPS_A`] plus four array-map look-ups per call, the size of the
/// smallest difference `overhead` is built to resolve (figures in docs/overhead-method.md).
#[doc(hidden)]
pub const HOOK_LOOKUPS_FINE: &[u8] =
    include_bytes!(concat!(env!("OUT_DIR"), "/hooks/lookups_2a.bpf.o"));
/// Look-ups per call of [`HOOK_LOOKUPS_MID`].
#[doc(hidden)]
pub const HOOK_LOOKUPS_MID_COUNT: u32 = 3;
/// Display name (and file stem) of [`HOOK_LOOKUPS_A`].
#[doc(hidden)]
pub const HOOK_LOOKUPS_A_NAME: &str = "lookups_2";
/// Display name (and file stem) of [`HOOK_LOOKUPS_B`].
#[doc(hidden)]
pub const HOOK_LOOKUPS_B_NAME: &str = "lookups_4";
/// Look-ups per call of [`HOOK_LOOKUPS_A`].
#[doc(hidden)]
pub const HOOK_LOOKUPS_A_COUNT: u32 = 2;
/// Look-ups per call of [`HOOK_LOOKUPS_B`].
#[doc(hidden)]
pub const HOOK_LOOKUPS_B_COUNT: u32 = 4;
/// The per-path verdict cache hook (fixtures/hooks/verdict_cache.bpf.c): its map
/// `verdict_cache` (hash, [`VERDICT_CACHE_ENTRIES`] entries) fills and then refuses new paths.
#[doc(hidden)]
pub const HOOK_VERDICT_CACHE: &[u8] =
    include_bytes!(concat!(env!("OUT_DIR"), "/hooks/verdict_cache.bpf.o"));
/// Display name of [`HOOK_VERDICT_CACHE`].
#[doc(hidden)]
pub const HOOK_VERDICT_CACHE_NAME: &str = "verdict_cache";
/// `max_entries` of the verdict cache hook's `verdict_cache` map.
#[doc(hidden)]
pub const VERDICT_CACHE_ENTRIES: u32 = 1024;

/// A hook on every system call (raw_syscalls sys_enter and sys_exit) with a hash map created
/// with `BPF_F_NO_PREALLOC`, updated on entry and deleted on exit (fixtures/hooks/every_syscall.bpf.c).
#[doc(hidden)]
pub const HOOK_EVERY_SYSCALL: &[u8] =
    include_bytes!(concat!(env!("OUT_DIR"), "/hooks/every_syscall.bpf.o"));
/// A hook whose one map (`ebpf_prof_pinned`, an array of one counter that each openat raises)
/// is pinned by name (fixtures/hooks/pinned_counter.bpf.c): the test of private pin directories.
#[doc(hidden)]
pub const HOOK_PINNED: &[u8] =
    include_bytes!(concat!(env!("OUT_DIR"), "/hooks/pinned_counter.bpf.o"));
/// Three programs on sys_enter_open, sys_enter_openat and sys_enter_openat2
/// (fixtures/hooks/open_family.bpf.c): the openat bench triggers one of them.
#[doc(hidden)]
pub const HOOK_OPEN_FAMILY: &[u8] =
    include_bytes!(concat!(env!("OUT_DIR"), "/hooks/open_family.bpf.o"));

/// Hooks of other events than openat, each four hash-map look-ups per call
/// (fixtures/hooks/on_<event>.bpf.c): its program's name (and the file's stem), its attach
/// point, its bytes.
#[doc(hidden)]
pub const EVENT_HOOKS: [(&str, &str, &[u8]); 5] = [
    (
        "on_execve",
        "tracepoint/syscalls/sys_enter_execve",
        include_bytes!(concat!(env!("OUT_DIR"), "/hooks/on_execve.bpf.o")),
    ),
    (
        "on_newfstatat",
        "tracepoint/syscalls/sys_enter_newfstatat",
        include_bytes!(concat!(env!("OUT_DIR"), "/hooks/on_newfstatat.bpf.o")),
    ),
    (
        "on_sendto",
        "tracepoint/syscalls/sys_enter_sendto",
        include_bytes!(concat!(env!("OUT_DIR"), "/hooks/on_sendto.bpf.o")),
    ),
    (
        "on_fork",
        "tracepoint/sched/sched_process_fork",
        include_bytes!(concat!(env!("OUT_DIR"), "/hooks/on_fork.bpf.o")),
    ),
    (
        "on_vhangup",
        "tracepoint/syscalls/sys_enter_vhangup",
        include_bytes!(concat!(env!("OUT_DIR"), "/hooks/on_vhangup.bpf.o")),
    ),
];

/// Display name of the tracepoint sample hook, for [`ObjectSource::Bytes`].
pub const SAMPLE_HOOK_NAME: &str = "openat_hook";
/// Display name of the LSM sample hook.
pub const SAMPLE_HOOK_LSM_NAME: &str = "openat_hook_lsm";

/// Where an object comes from.
#[derive(Debug, Clone, Copy)]
pub enum ObjectSource<'a> {
    /// A `.bpf.o` file on disk.
    Path(&'a std::path::Path),
    /// An object already in memory (such as [`SAMPLE_HOOK`]); `name` is used in messages.
    Bytes {
        /// The name errors and [`Attached::name`] use.
        name: &'a str,
        /// The ELF object.
        bytes: &'a [u8],
    },
}

/// A BPF object read into memory once: every load is from these bytes, never from the file
/// again, so nothing swapped in at its path afterwards is what gets loaded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectBytes {
    /// The name messages use (the file's name, or the sample hook's).
    pub name: String,
    pub bytes: std::sync::Arc<[u8]>,
}

impl ObjectBytes {
    /// Where loads of it come from.
    pub fn source(&self) -> ObjectSource<'_> {
        ObjectSource::Bytes {
            name: &self.name,
            bytes: &self.bytes,
        }
    }
}

/// One loaded program.
#[derive(Debug, Clone, serde::Serialize)]
pub struct ProgramInfo {
    /// Kernel program id (`bpftool prog show id N`).
    pub id: u32,
    /// Full function name from the object (the kernel's own copy is cut to 15 bytes).
    pub name: String,
    /// Kernel tag, 16 hex digits, as in `/proc/kallsyms`' `bpf_prog_<tag>_<name>`.
    pub tag: String,
    /// The ELF section (`SEC()` name) the program came from.
    pub section: String,
    /// Whether it was attached; tail-call targets are loaded only.
    pub attached: bool,
}

/// Whether this kernel lets us load LSM programs, with a human reason string.
///
/// Probed by loading (not attaching) the bundled LSM sample hook rather than with
/// `libbpf_probe_bpf_prog_type`: a real load meets whatever refuses LSM programs (EPERM from
/// lockdown or from a kernel without BPF trampolines) and its error says which. Then `bpf`
/// must be in the active LSM list for the hook to run. The answer is cached for the process.
pub fn lsm_supported() -> (bool, String) {
    static ANSWER: OnceLock<(bool, String)> = OnceLock::new();
    ANSWER.get_or_init(probe_lsm).clone()
}

fn probe_lsm() -> (bool, String) {
    if let Err(err) = loader::load_only(SAMPLE_HOOK_LSM_NAME, SAMPLE_HOOK_LSM) {
        let reason = format!(
            "{} (probed by loading the LSM sample hook)",
            first_line(&err)
        );
        return (false, reason);
    }
    bpf_lsm_active(&crate::host::Host::live())
}

/// Once the LSM sample hook loads: whether `bpf` is among the host's active LSMs (an LSM
/// program loads either way, but runs only then). An unreadable list is taken as yes.
fn bpf_lsm_active(host: &crate::host::Host) -> (bool, String) {
    match crate::host::security::lsm_list(host) {
        Some(list) if !list.iter().any(|l| l == "bpf") => (
            false,
            format!(
                "LSM programs load, but `bpf` is not an active LSM ({}): boot with lsm=...,bpf",
                list.join(",")
            ),
        ),
        _ => (
            true,
            "the LSM sample hook loads (probed by loading it, not attached)".to_string(),
        ),
    }
}

fn first_line(err: &anyhow::Error) -> String {
    let text = err.to_string();
    text.lines().next().unwrap_or_default().to_string()
}

/// The sample hook this kernel can run: LSM variant where allowed, else tracepoint;
/// returns (display name, bytes).
pub fn sample_hook_for_this_kernel() -> (&'static str, &'static [u8]) {
    if lsm_supported().0 {
        (SAMPLE_HOOK_LSM_NAME, SAMPLE_HOOK_LSM)
    } else {
        (SAMPLE_HOOK_NAME, SAMPLE_HOOK)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::host::Host;

    #[test]
    fn bpf_lsm_active_reads_the_hosts_lsm_list() {
        // (the list in securityfs, whether LSM hooks run, what the reason says)
        let cases = [
            (
                Some("lockdown,capability,yama"),
                false,
                "not an active LSM (lockdown,capability,yama)",
            ),
            (Some("capability,bpf\n"), true, "the LSM sample hook loads"),
            (None, true, "the LSM sample hook loads"),
        ];
        for (list, active, said) in cases {
            let d = tempfile::tempdir().unwrap();
            if let Some(list) = list {
                let sec = d.path().join("sys/kernel/security");
                std::fs::create_dir_all(&sec).unwrap();
                std::fs::write(sec.join("lsm"), list).unwrap();
            }
            let (ok, reason) = bpf_lsm_active(&Host::at(d.path()));
            assert_eq!(ok, active, "{list:?}: {reason}");
            assert!(reason.contains(said), "{list:?}: {reason}");
        }
    }
}
