//! Every BPF program loaded in the kernel, as `bpftool prog show` and `bpftool link show` tell
//! it together: id, type, tag, name, where it is attached, whether its code can show up in a
//! profile of a benchmark, and — while run statistics are on — how often it ran and for how
//! long. `doctor` prints this list, `record` checks it (see `recording::gate`) and keeps it
//! in `perf.data.json`.
//!
//! Where a program is attached comes from [`super::attachments`]: links, perf events of every
//! process, cgroups. A program attached nowhere says so; for LSM and tracing programs the
//! kernel still keeps the function they were loaded for, kept as `loaded_for`.
//!
//! Names are whole: from the program's BTF (`func_info`), as bpftool and /proc/kallsyms give
//! them. A program without BTF (bpftrace's) has only the kernel's copy, cut to 15 bytes; a
//! name that fills those 15 bytes is shown with a trailing `…`.

use std::os::fd::AsFd;

use serde::{Deserialize, Serialize};

use super::attachments::{self, Attachment};
use super::ids;
use crate::host::kallsyms::BpfSymbol;
use crate::host::Host;

/// One loaded program.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Program {
    /// Kernel program id.
    pub id: u32,
    /// Its full name from its BTF (as bpftool), else the kernel's copy, marked with a trailing
    /// `…` when it fills the kernel's 15 bytes (see [`ids::marked_if_cut`]).
    pub name: String,
    /// Kernel tag, 16 hex digits.
    pub tag: String,
    /// The program type as bpftool spells it: `tracepoint`, `lsm`, `kprobe`, `cgroup_skb`, ….
    #[serde(rename = "type")]
    pub prog_type: String,
    /// Where it is attached (`tracepoint sys_enter_openat`, `lsm bpf_lsm_file_open`,
    /// `xdp ifindex 2`, …), every point joined by ", "; `None` when attached nowhere.
    pub attach: Option<String>,
    /// Each point it is attached at, as [`attachments::AttachPoint`] words it.
    #[serde(default)]
    pub attach_points: Vec<String>,
    /// Whether any attachment was found (a link, a perf event, a cgroup); `false` for a
    /// program attached nowhere, such as a tail-call target or one its loader never attached.
    #[serde(alias = "linked")]
    pub attached: bool,
    /// For an LSM or tracing program, the kernel function it was loaded for, attached or not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub loaded_for: Option<String>,
    /// Its symbol in /proc/kallsyms, when listed right now.
    pub symbol: Option<String>,
    /// The symbols of its JIT-ed functions (the program, then its sub-functions), as listed in
    /// /proc/kallsyms right now.
    pub functions: Vec<String>,
    /// Whether its code can run under a benchmark's system calls: tracing, LSM and socket
    /// program types. Device, sysctl, XDP, tc, struct_ops and other kinds do not, or only
    /// for traffic the benchmark does not make.
    pub traced_kind: bool,
    /// Runs counted since load, while run statistics were on; `None` when they are off now.
    pub run_cnt: Option<u64>,
    /// Mean ns per counted run; `None` when stats are off or it has not run.
    pub mean_run_ns: Option<f64>,
    /// Ids of the maps it uses.
    pub map_ids: Vec<u32>,
}

/// Program types whose code runs in the system-call path of a benchmark: tracing, LSM and
/// socket programs.
pub fn is_traced_kind(prog_type: &str) -> bool {
    matches!(
        prog_type,
        "kprobe"
            | "tracepoint"
            | "raw_tracepoint"
            | "raw_tracepoint_writable"
            | "tracing"
            | "perf_event"
            | "lsm"
            | "socket_filter"
            | "sock_ops"
            | "sk_skb"
            | "sk_msg"
            | "sk_lookup"
            | "sk_reuseport"
            | "cgroup_sock"
            | "cgroup_sock_addr"
            | "cgroup_sockopt"
            | "cgroup_skb"
    )
}

/// Every program loaded right now, ascending ids, with the symbols of `bpf_syms` (the `[bpf]`
/// symbols of /proc/kallsyms, empty when unreadable). `stats_on`: whether run statistics are
/// on, so run counts mean something.
pub fn programs(bpf_syms: &[BpfSymbol], stats_on: bool) -> anyhow::Result<Vec<Program>> {
    let found = attachments::attachments(&Host::live());
    let mut out = Vec::new();
    for id in ids::all_prog_ids()? {
        let Some(fd) = ids::open_prog(id)? else {
            continue; // unloaded since it was listed
        };
        let prog = ids::prog_info(fd.as_fd(), true)?;
        let name = ids::full_name(fd.as_fd(), &prog.info)
            .unwrap_or_else(|| ids::marked_if_cut(&ids::object_name(&prog.info.name)));
        out.push(describe(id, name, prog, (bpf_syms, &found), stats_on));
    }
    Ok(out)
}

/// One program from its info, its shown name, the kallsyms symbols and the attachments found.
fn describe(
    id: u32,
    name: String,
    prog: ids::ProgInfo,
    (bpf_syms, found): (&[BpfSymbol], &[Attachment]),
    stats_on: bool,
) -> Program {
    let info = &prog.info;
    let kernel_name = ids::object_name(&info.name);
    let tag = ids::hex_tag(&info.tag);
    let functions: Vec<&BpfSymbol> = prog
        .jited_ksyms
        .iter()
        .filter_map(|addr| {
            bpf_syms
                .iter()
                .find(|symbol_seen| symbol_seen.addr == *addr && *addr != 0)
        })
        .collect();
    let sym = functions
        .first()
        .copied()
        .or_else(|| symbol_of(bpf_syms, &tag, &kernel_name));
    let prog_type = ids::prog_type_name(info.type_);
    let attach_points: Vec<String> = attachments::points_of(found, id)
        .iter()
        .map(|point| point.to_string())
        .collect();
    let loaded_for =
        attachments::btf_target(&prog_type, info.attach_btf_obj_id, info.attach_btf_id)
            .map(|point| point.to_string());
    Program {
        id,
        name,
        tag,
        traced_kind: is_traced_kind(&prog_type),
        prog_type,
        attach: (!attach_points.is_empty()).then(|| attach_points.join(", ")),
        attached: !attach_points.is_empty(),
        attach_points,
        loaded_for,
        symbol: sym.map(|symbol_seen| symbol_seen.symbol.clone()),
        functions: functions
            .iter()
            .map(|symbol_seen| symbol_seen.symbol.clone())
            .collect(),
        run_cnt: stats_on.then_some(info.run_cnt),
        mean_run_ns: (stats_on && info.run_cnt > 0)
            .then(|| info.run_time_ns as f64 / info.run_cnt as f64),
        map_ids: prog.map_ids,
    }
}

/// The symbol of a program: same tag, and a name the kernel's 15-byte copy begins.
fn symbol_of<'a>(syms: &'a [BpfSymbol], tag: &str, kernel_name: &str) -> Option<&'a BpfSymbol> {
    syms.iter()
        .find(|s| s.tag == tag && s.name.starts_with(kernel_name))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sym(tag: &str, name: &str) -> BpfSymbol {
        BpfSymbol {
            addr: 1,
            tag: tag.into(),
            name: name.into(),
            symbol: format!("bpf_prog_{tag}_{name}"),
        }
    }

    #[test]
    fn full_names_come_from_the_symbol_with_the_same_tag() {
        let syms = [
            sym("abb7fedfb7f3aa07", "path_check_callback"),
            sym("1307ade3162da109", "tail_call_security_check"),
        ];
        let s = symbol_of(&syms, "1307ade3162da109", "tail_call_secur").unwrap();
        assert_eq!(s.name, "tail_call_security_check");
        assert!(symbol_of(&syms, "1307ade3162da109", "other").is_none());
        assert!(symbol_of(&syms, "0000000000000000", "tail_call_secur").is_none());
    }

    #[test]
    fn traced_kinds_are_tracing_lsm_and_socket_programs() {
        for t in [
            "tracepoint",
            "lsm",
            "kprobe",
            "tracing",
            "cgroup_skb",
            "sock_ops",
        ] {
            assert!(is_traced_kind(t), "{t}");
        }
        for t in [
            "xdp",
            "cgroup_device",
            "sched_cls",
            "struct_ops",
            "cgroup_sysctl",
        ] {
            assert!(!is_traced_kind(t), "{t}");
        }
    }
}
