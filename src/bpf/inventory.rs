//! Every BPF program loaded in the kernel, as `bpftool prog show` and `bpftool link show` tell
//! it together: id, type, tag, name, where it is attached, whether its code can show up in a
//! profile of a benchmark, and — while run statistics are on — how often it ran and for how
//! long. `doctor` prints this list, `record` checks it (see `recording::gate`) and keeps it
//! in `perf.data.json`.
//!
//! Where a program is attached comes from the kernel's link objects (`BPF_LINK_GET_NEXT_ID`):
//! a tracepoint or kprobe's name for perf-event links (Linux 6.6+ says which), the raw
//! tracepoint's name, the kernel function of an LSM/fentry/fexit program (its BTF name), the
//! interface of an XDP or tc link, the cgroup of a cgroup link. A program attached without a
//! link (a perf event on kernels before 5.15, a socket filter set with `setsockopt`, a tc
//! filter) has no attach point we can read; for LSM and tracing programs the kernel still
//! keeps the function they were loaded for.

use std::collections::BTreeMap;
use std::os::fd::AsFd;

use libbpf_rs::query::{LinkInfoIter, LinkTypeInfo, PerfEventType};
use serde::{Deserialize, Serialize};

use super::ids;
use crate::host::kallsyms::BpfSymbol;

/// One loaded program.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Program {
    /// Kernel program id.
    pub id: u32,
    /// Its full name: from its `bpf_prog_<tag>_<name>` symbol when kallsyms lists it, else from
    /// its BTF (as bpftool), else the kernel's copy (cut to 15 bytes).
    pub name: String,
    /// Kernel tag, 16 hex digits.
    pub tag: String,
    /// The program type as bpftool spells it: `tracepoint`, `lsm`, `kprobe`, `cgroup_skb`, ….
    #[serde(rename = "type")]
    pub prog_type: String,
    /// Where it is attached (`tracepoint syscalls/sys_enter_openat`, `lsm bpf_lsm_file_open`,
    /// `xdp ifindex 2`, …); `None` when no link says so.
    pub attach: Option<String>,
    /// Whether a link attaches it; `false` when none does (it may still be attached without a
    /// link, or be a tail-call target).
    pub linked: bool,
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

/// Every program loaded right now, ascending ids, named from `bpf_syms` (the `[bpf]` symbols
/// of /proc/kallsyms, empty when unreadable). `stats_on`: whether run statistics are on, so
/// run counts mean something.
pub fn programs(bpf_syms: &[BpfSymbol], stats_on: bool) -> anyhow::Result<Vec<Program>> {
    let links = links();
    let mut out = Vec::new();
    for id in ids::all_prog_ids()? {
        let Some(fd) = ids::open_prog(id)? else {
            continue; // unloaded since it was listed
        };
        let prog = ids::prog_info(fd.as_fd(), true)?;
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
        let link = links.get(&id);
        let attach = link
            .cloned()
            .flatten()
            .or_else(|| btf_target(&prog_type, info.attach_btf_obj_id, info.attach_btf_id));
        out.push(Program {
            id,
            name: match sym {
                Some(symbol_seen) => symbol_seen.name.clone(),
                None => ids::full_name(fd.as_fd(), info).unwrap_or(kernel_name),
            },
            tag,
            traced_kind: is_traced_kind(&prog_type),
            prog_type,
            attach,
            linked: link.is_some(),
            symbol: sym.map(|symbol_seen| symbol_seen.symbol.clone()),
            functions: functions
                .iter()
                .map(|symbol_seen| symbol_seen.symbol.clone())
                .collect(),
            run_cnt: stats_on.then_some(info.run_cnt),
            mean_run_ns: (stats_on && info.run_cnt > 0)
                .then(|| info.run_time_ns as f64 / info.run_cnt as f64),
            map_ids: prog.map_ids,
        });
    }
    Ok(out)
}

/// The symbol of a program: same tag, and a name the kernel's 15-byte copy begins.
fn symbol_of<'a>(syms: &'a [BpfSymbol], tag: &str, kernel_name: &str) -> Option<&'a BpfSymbol> {
    syms.iter()
        .find(|s| s.tag == tag && s.name.starts_with(kernel_name))
}

/// Program id → where a link attaches it (`None` inside when the link does not say).
/// Unreadable links are skipped: the list is what we could see.
fn links() -> BTreeMap<u32, Option<String>> {
    LinkInfoIter::default()
        .map(|l| (l.prog_id, describe_link(&l.info)))
        .collect()
}

fn describe_link(info: &LinkTypeInfo) -> Option<String> {
    let text = match info {
        LinkTypeInfo::RawTracepoint(link) => format!("raw_tracepoint {}", link.name),
        LinkTypeInfo::Tracing(link) => {
            return btf_target("tracing", link.target_obj_id, link.target_btf_id)
        }
        LinkTypeInfo::Cgroup(link) => {
            format!("cgroup id {} ({:?})", link.cgroup_id, link.attach_type)
        }
        LinkTypeInfo::Xdp(link) => format!("xdp ifindex {}", link.ifindex),
        LinkTypeInfo::Tcx(link) => format!("tcx ifindex {} ({:?})", link.ifindex, link.attach_type),
        LinkTypeInfo::Netkit(link) => format!("netkit ifindex {}", link.ifindex),
        LinkTypeInfo::NetNs(link) => format!("netns {} ({:?})", link.ino, link.attach_type),
        LinkTypeInfo::Iter(link) => format!("iter {}", link.target_name.to_string_lossy()),
        LinkTypeInfo::StructOps(link) => format!("struct_ops map {}", link.map_id),
        LinkTypeInfo::Netfilter(link) => {
            format!(
                "netfilter pf {} hook {}",
                link.protocol_family, link.hooknum
            )
        }
        LinkTypeInfo::KprobeMulti(link) => format!("kprobe_multi ({} functions)", link.count),
        LinkTypeInfo::UprobeMulti(link) => format!("uprobe_multi ({} offsets)", link.count),
        LinkTypeInfo::SockMap(link) => format!("sockmap map {}", link.map_id),
        LinkTypeInfo::PerfEvent(link) => return perf_event(&link.event_type),
        LinkTypeInfo::Unknown => return None,
    };
    Some(text)
}

fn perf_event(event: &PerfEventType) -> Option<String> {
    let name = |raw: &Option<std::ffi::OsString>| {
        raw.as_ref().map(|text| text.to_string_lossy().into_owned())
    };
    match event {
        PerfEventType::Tracepoint { name: raw, .. } => Some(format!("tracepoint {}", name(raw)?)),
        PerfEventType::Kprobe {
            func_name,
            is_retprobe,
            offset,
            ..
        } => {
            let kind = if *is_retprobe { "kretprobe" } else { "kprobe" };
            let off = if *offset > 0 {
                format!("+{offset:#x}")
            } else {
                String::new()
            };
            Some(format!("{kind} {}{off}", name(func_name)?))
        }
        PerfEventType::Uprobe {
            file_name,
            is_retprobe,
            offset,
            ..
        } => {
            let kind = if *is_retprobe { "uretprobe" } else { "uprobe" };
            Some(format!("{kind} {}:{offset:#x}", name(file_name)?))
        }
        PerfEventType::Event {
            config, event_type, ..
        } => Some(format!("perf event type {event_type} config {config}")),
        PerfEventType::Unknown(_) => None,
    }
}

/// An LSM or tracing program's target function: type `btf_id` of BTF object `btf_obj_id`
/// (0 for vmlinux), or `None` for other program types or when the BTF cannot be read.
fn btf_target(prog_type: &str, btf_obj_id: u32, btf_id: u32) -> Option<String> {
    if btf_id == 0 || !matches!(prog_type, "lsm" | "tracing") {
        return None;
    }
    Some(format!(
        "{prog_type} {}",
        btf_type_name(btf_obj_id, btf_id)?
    ))
}

/// The name of type `btf_id` in kernel BTF object `btf_obj_id` (vmlinux when 0 or named
/// `vmlinux`; a module's BTF is read on top of vmlinux's).
fn btf_type_name(btf_obj_id: u32, btf_id: u32) -> Option<String> {
    use libbpf_rs::libbpf_sys as sys;
    // SAFETY: libbpf returns an owned btf or an error pointer / NULL (checked); every btf we
    // get is freed below, the split one before its base; the name pointer is read while the
    // btf that owns it lives.
    unsafe {
        let base = sys::btf__load_vmlinux_btf();
        if base.is_null() || sys::libbpf_get_error(base.cast()) != 0 {
            return None;
        }
        let (btf, split) = if btf_obj_id == 0 || is_vmlinux_btf(btf_obj_id) {
            (base, false)
        } else {
            let btf_split = sys::btf__load_from_kernel_by_id_split(btf_obj_id, base);
            if btf_split.is_null() || sys::libbpf_get_error(btf_split.cast()) != 0 {
                sys::btf__free(base);
                return None;
            }
            (btf_split, true)
        };
        let ty = sys::btf__type_by_id(btf, btf_id);
        let name = (!ty.is_null())
            .then(|| sys::btf__name_by_offset(btf, (*ty).name_off))
            .filter(|n| !n.is_null())
            .map(|n| std::ffi::CStr::from_ptr(n).to_string_lossy().into_owned());
        if split {
            sys::btf__free(btf);
        }
        sys::btf__free(base);
        name.filter(|n| !n.is_empty())
    }
}

/// Whether kernel BTF object `id` is vmlinux's.
fn is_vmlinux_btf(id: u32) -> bool {
    use libbpf_rs::libbpf_sys as sys;
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
    // SAFETY: a non-negative return is a fresh fd we own; `info` is sized `len` and its one
    // output buffer, `name`, is `name_len` bytes.
    unsafe {
        let fd = sys::bpf_btf_get_fd_by_id(id);
        if fd < 0 {
            return false;
        }
        let fd = OwnedFd::from_raw_fd(fd);
        let mut name = [0u8; 64];
        let mut info = sys::bpf_btf_info {
            name: name.as_mut_ptr() as u64,
            name_len: name.len() as u32,
            ..Default::default()
        };
        let mut len = std::mem::size_of::<sys::bpf_btf_info>() as u32;
        if sys::bpf_btf_get_info_by_fd(fd.as_raw_fd(), &mut info, &mut len) != 0 {
            return false;
        }
        info.kernel_btf != 0 && name.starts_with(b"vmlinux\0")
    }
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

    #[test]
    fn perf_event_links_name_their_event() {
        let tp = PerfEventType::Tracepoint {
            name: Some("sys_enter_openat".into()),
            cookie: 0,
        };
        assert_eq!(perf_event(&tp).unwrap(), "tracepoint sys_enter_openat");
        let kp = PerfEventType::Kprobe {
            func_name: Some("do_sys_openat2".into()),
            is_retprobe: true,
            addr: 0,
            offset: 0,
            missed: 0,
            cookie: 0,
        };
        assert_eq!(perf_event(&kp).unwrap(), "kretprobe do_sys_openat2");
        assert!(perf_event(&PerfEventType::Unknown(9)).is_none());
    }
}
