//! Where each loaded BPF program is attached, whoever attached it: the one owner of that
//! question. `doctor`, `--op auto`, `record`'s program list and `report`'s attach points all
//! read it through [`attachments`] (or [`Inventory`](crate::bpf::InventoryProgram), built on it).
//!
//! The ways a program is attached are read as bpftool reads them:
//! - kernel link objects (`bpftool link show`): tracepoints, raw tracepoints, LSM and tracing
//!   targets, XDP/tcx/netkit interfaces, cgroups, struct_ops, iterators ([`links`]);
//! - perf events that carry a program without a link, set with `PERF_EVENT_IOC_SET_BPF` as
//!   bpftrace and bcc do: each process's `anon_inode:[perf_event]` fds asked with
//!   `BPF_TASK_FD_QUERY` (`bpftool perf show`): tracepoints, kprobes and kretprobes with their
//!   symbol and offset, uprobes with their file and offset ([`perf_events`]);
//! - cgroup attachments made without a link (`BPF_PROG_ATTACH`, as systemd does), found with
//!   `BPF_PROG_QUERY` on every cgroup of the cgroup v2 tree (`bpftool cgroup tree`, [`cgroups`]);
//! - programs on network interfaces, with or without a link (iproute2's `ip link set … xdp`,
//!   `tc filter add … bpf`, libbpf's netlink XDP and `TcHook`, tcx and netkit lists), in every
//!   network namespace reached (`bpftool net show` in each, [`interfaces`], over the small
//!   netlink client of [`netlink`]);
//! - the functions of struct_ops maps ([`struct_ops`]).
//!
//! Socket filters (`SO_ATTACH_BPF`) are not listed anywhere the kernel lets another process
//! read: a socket's fdinfo does not name its filter, `SO_GET_FILTER` refuses an eBPF filter
//! (EACCES) and sock_diag reports classic filters only. [`nowhere`] words a program with no
//! attachment found so that it never claims more than was looked at.

mod cgroups;
mod interfaces;
mod links;
mod netlink;
mod perf_events;
mod struct_ops;

use crate::host::Host;
use serde::Serialize;
use std::fmt;

pub(crate) use links::btf_target;
pub use netlink::{FilterAction, XdpMode};
pub use perf_events::{point_of_answer, FdQueryAnswer};

/// Whether a probe runs where its function starts or where it returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Probe {
    Entry,
    Return,
}

/// One place a program is attached.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "at")]
pub enum AttachPoint {
    /// A tracepoint by its name (`sys_enter_openat`; the kernel does not give its category).
    Tracepoint { name: String },
    /// A raw tracepoint (`sys_enter`, `sched_process_fork`).
    RawTracepoint { name: String },
    /// A kprobe or kretprobe on a kernel function, `offset` bytes into it.
    Kprobe {
        probe: Probe,
        function: String,
        offset: u64,
    },
    /// A kprobe placed by address, not by name. The address is not kept: it would be a
    /// kernel address in files and output that others may read.
    KprobeAtAddress { probe: Probe },
    /// A uprobe or uretprobe on `path`, `offset` bytes into the file.
    Uprobe {
        probe: Probe,
        path: String,
        offset: u64,
    },
    /// An LSM hook or a traced kernel function (fentry, fexit, fmod_ret): its BTF name.
    Function { kind: String, name: String },
    /// A cgroup (`id N` from a link, or its path under the cgroup v2 root) and the attach type
    /// as libbpf-rs spells it (`CgroupInet4Connect`).
    Cgroup { cgroup: String, attach_type: String },
    /// A perf event that is not a tracepoint or a probe (a software or hardware counter).
    PerfEvent { event_type: u32, config: u64 },
    /// A hook on a network interface, found on the interface itself (netlink's XDP state and
    /// tc filters, the tcx and netkit program lists), whether a link holds it or not.
    Interface {
        hook: InterfaceHook,
        interface: Interface,
    },
    /// A link's interface hook whose interface was not found in any namespace read: only its
    /// index is known, and not in which namespace.
    InterfaceIndex { hook: InterfaceHook, ifindex: u32 },
    /// A function of a struct_ops map (`tcp_congestion_ops.cong_avoid` in map `dctcp`).
    StructOps {
        struct_name: String,
        member: String,
        map_name: String,
        map_id: u32,
    },
    /// Any other link, as `bpftool link show` would describe it (`netns 4026531840`).
    Other { description: String },
}

/// A network namespace, named as a person finds it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "netns")]
pub enum Netns {
    /// The namespace the tool runs in.
    Own,
    /// A namespace with a name under /run/netns (`ip netns add NAME`).
    Named { name: String },
    /// The namespace of a running process, named by its first process found.
    OfProcess { pid: u32, comm: String },
}

/// A network interface and the namespace it is in.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Interface {
    pub name: String,
    pub ifindex: u32,
    pub netns: Netns,
}

/// Which way packets pass a tcx program.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Direction {
    Ingress,
    Egress,
}

/// Where a tc (cls_bpf) filter sits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TcParent {
    /// The ingress of a clsact or ingress qdisc.
    Ingress,
    /// The egress of a clsact qdisc.
    Egress,
    /// Another qdisc, by its handle (`1:` is `0x10000`).
    Qdisc(u32),
}

/// Which end of a netkit pair a program is on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum NetkitSide {
    Primary,
    Peer,
}

/// A program's hook on an interface.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "hook")]
pub enum InterfaceHook {
    /// XDP in a mode, when the interface says which (a link does not).
    Xdp { mode: Option<XdpMode> },
    /// A cls_bpf filter under a qdisc (`tc filter add … bpf`).
    Tc {
        parent: TcParent,
        action: FilterAction,
    },
    /// A tcx entry (Linux 6.6+).
    Tcx { direction: Direction },
    /// A netkit device's program (Linux 6.7+).
    Netkit { side: NetkitSide },
}

impl InterfaceHook {
    /// The words before "on IFNAME" and the words after it: `tc ingress` … `(classifier)`.
    fn words(&self) -> (String, String) {
        let direction = |d: &Direction| match d {
            Direction::Ingress => "ingress",
            Direction::Egress => "egress",
        };
        match self {
            InterfaceHook::Xdp { mode } => {
                let mode = match mode {
                    Some(XdpMode::Native) => " (native)",
                    Some(XdpMode::Generic) => " (generic)",
                    Some(XdpMode::Offloaded) => " (offloaded)",
                    None => "",
                };
                ("xdp".into(), mode.into())
            }
            InterfaceHook::Tc { parent, action } => {
                let place = match parent {
                    TcParent::Ingress => "tc ingress".to_string(),
                    TcParent::Egress => "tc egress".to_string(),
                    TcParent::Qdisc(handle) => format!("tc qdisc {:x}:", handle >> 16),
                };
                let action = match action {
                    FilterAction::DirectAction => "",
                    FilterAction::Classifier => " (classifier, not direct-action)",
                };
                (place, action.into())
            }
            InterfaceHook::Tcx { direction: d } => (format!("tcx {}", direction(d)), String::new()),
            InterfaceHook::Netkit { side } => {
                let side = match side {
                    NetkitSide::Primary => "netkit primary",
                    NetkitSide::Peer => "netkit peer",
                };
                (side.into(), String::new())
            }
        }
    }
}

impl fmt::Display for Netns {
    /// The words after an interface's name: nothing for the tool's own namespace.
    fn fmt(&self, out: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Netns::Own => Ok(()),
            Netns::Named { name } => write!(out, " in netns {name}"),
            Netns::OfProcess { pid, comm } => write!(out, " in the netns of pid {pid} ({comm})"),
        }
    }
}

impl fmt::Display for AttachPoint {
    /// The words `--op auto` and the program lists read: `tracepoint sys_enter_openat`,
    /// `kretprobe do_sys_openat2+0x10`, `uprobe /usr/bin/bash:0x3f2c0`, `lsm bpf_lsm_file_open`.
    fn fmt(&self, out: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = |probe: &Probe, entry: &'static str, ret: &'static str| match probe {
            Probe::Entry => entry,
            Probe::Return => ret,
        };
        match self {
            AttachPoint::Tracepoint { name } => write!(out, "tracepoint {name}"),
            AttachPoint::RawTracepoint { name } => write!(out, "raw_tracepoint {name}"),
            AttachPoint::Kprobe {
                probe,
                function,
                offset,
            } => {
                write!(out, "{} {function}", kind(probe, "kprobe", "kretprobe"))?;
                match offset {
                    0 => Ok(()),
                    _ => write!(out, "+{offset:#x}"),
                }
            }
            AttachPoint::KprobeAtAddress { probe } => write!(
                out,
                "{} at an address (no symbol name)",
                kind(probe, "kprobe", "kretprobe")
            ),
            AttachPoint::Uprobe {
                probe,
                path,
                offset,
            } => write!(
                out,
                "{} {path}:{offset:#x}",
                kind(probe, "uprobe", "uretprobe")
            ),
            AttachPoint::Function { kind, name } => write!(out, "{kind} {name}"),
            AttachPoint::Cgroup {
                cgroup,
                attach_type,
            } => write!(out, "cgroup {cgroup} ({attach_type})"),
            AttachPoint::PerfEvent { event_type, config } => {
                write!(out, "perf event type {event_type} config {config}")
            }
            AttachPoint::Interface { .. }
            | AttachPoint::InterfaceIndex { .. }
            | AttachPoint::StructOps { .. } => self.network_words(out),
            AttachPoint::Other { description } => write!(out, "{description}"),
        }
    }
}

impl AttachPoint {
    /// The words of an interface's hook or a struct_ops map's function.
    fn network_words(&self, out: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AttachPoint::Interface { hook, interface } => {
                let (before, after) = hook.words();
                let Interface { name, netns, .. } = interface;
                write!(out, "{before} on {name}{after}{netns}")
            }
            AttachPoint::InterfaceIndex { hook, ifindex } => {
                let (before, after) = hook.words();
                write!(out, "{before} ifindex {ifindex}{after}")
            }
            AttachPoint::StructOps {
                struct_name,
                member,
                map_name,
                map_id,
            } => write!(
                out,
                "struct_ops {struct_name}.{member} in map {map_name} (id {map_id})"
            ),
            _ => Ok(()),
        }
    }
}

/// How an attachment was found, and so what holds it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "by")]
pub enum Holder {
    /// A kernel link object with this id.
    Link { id: u32 },
    /// A perf event fd of process `pid`.
    PerfEvent { pid: u32, fd: u32 },
    /// A cgroup's own list of programs (`BPF_PROG_QUERY`).
    Cgroup,
    /// An interface's own state: its XDP program set through netlink, a tc filter, a tcx or
    /// netkit entry made without a link.
    Interface,
    /// A struct_ops map with this id.
    StructOpsMap { id: u32 },
}

/// One program attached at one point.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Attachment {
    pub prog_id: u32,
    pub point: AttachPoint,
    pub holder: Holder,
}

/// Every attachment that can be read on `host` right now, and what could not be read.
#[derive(Debug, Default)]
pub struct Seen {
    pub attachments: Vec<Attachment>,
    /// One sentence for each thing not read: a network namespace not entered, a kernel
    /// without tcx.
    pub notes: Vec<String>,
}

/// Every attachment that can be read on `host` right now: links, perf events of every process,
/// the cgroup tree's own lists, the interfaces of every network namespace reached and the
/// struct_ops maps, each attachment once. What cannot be read (a process gone while it was
/// walked, a cgroup removed) is skipped: the list is what could be seen.
pub fn attachments(host: &Host) -> Vec<Attachment> {
    seen(host).attachments
}

/// As [`attachments`], with the notes of what was not read.
pub fn seen(host: &Host) -> Seen {
    let mut all = links::attachments();
    add_new(&mut all, perf_events::attachments(host));
    let linked_to_cgroups: Vec<u32> = all
        .iter()
        .filter(|a| matches!(a.point, AttachPoint::Cgroup { .. }))
        .map(|a| a.prog_id)
        .collect();
    let queried = cgroups::attachments(host)
        .into_iter()
        .filter(|a| !linked_to_cgroups.contains(&a.prog_id))
        .collect();
    add_new(&mut all, queried);
    let on_interfaces = interfaces::attachments(host);
    add_interfaces(&mut all, on_interfaces.attachments);
    add_new(&mut all, struct_ops::attachments());
    Seen {
        attachments: all,
        notes: on_interfaces.notes,
    }
}

/// Add what was found on interfaces to `all`. A link's own entry (`xdp ifindex 3`) takes the
/// interface's words (`xdp on va0 (native) in netns x`) instead of being listed twice: tcx and
/// netkit lists name their link; for XDP, the link with the same program and index is it.
fn add_interfaces(all: &mut Vec<Attachment>, found: Vec<Attachment>) {
    for attachment in found {
        let AttachPoint::Interface { hook, interface } = &attachment.point else {
            continue;
        };
        let same_link = all.iter_mut().find(|seen| {
            let AttachPoint::InterfaceIndex {
                hook: link_hook,
                ifindex,
            } = &seen.point
            else {
                return false;
            };
            let same_hook = match (link_hook, hook) {
                (InterfaceHook::Xdp { .. }, InterfaceHook::Xdp { .. }) => {
                    attachment.holder == Holder::Interface
                }
                _ => link_hook == hook && seen.holder == attachment.holder,
            };
            seen.prog_id == attachment.prog_id && *ifindex == interface.ifindex && same_hook
        });
        match same_link {
            Some(seen) => seen.point = attachment.point,
            None => add_new(all, vec![attachment]),
        }
    }
}

/// Add `more` to `all`, leaving out a program's point seen already (a perf event held by a
/// link is seen both as the link and as the process's perf event fd).
fn add_new(all: &mut Vec<Attachment>, more: Vec<Attachment>) {
    for attachment in more {
        let seen = all
            .iter()
            .any(|a| a.prog_id == attachment.prog_id && a.point == attachment.point);
        if !seen {
            all.push(attachment);
        }
    }
}

/// The points program `id` is attached at, in the order found.
pub fn points_of(all: &[Attachment], id: u32) -> Vec<&AttachPoint> {
    all.iter()
        .filter(|a| a.prog_id == id)
        .map(|a| &a.point)
        .collect()
}

/// The words for a program of type `prog_type` with no attachment found: "loaded, attached
/// nowhere" where every way that type can be attached was read; where the kernel keeps no list
/// to read (a socket filter's socket) or this build reads none, what is true instead.
pub fn nowhere(prog_type: &str) -> &'static str {
    match prog_type {
        "xdp" | "sched_cls" => {
            "loaded, attached nowhere (no interface of any network namespace reached holds it)"
        }
        "sched_act" => "loaded, no link attaches it (tc actions are not read)",
        "socket_filter" | "sk_reuseport" => {
            "loaded; a socket filter is attached to a socket if at all, and the kernel does not say which"
        }
        "sk_skb" | "sk_msg" => "loaded, no link attaches it (sockmap attachments are not read)",
        "struct_ops" => "loaded, in no registered struct_ops map",
        "flow_dissector" | "lirc_mode2" => {
            "loaded, no link attaches it (attachments to a namespace or device without a link are not read)"
        }
        _ => "loaded, attached nowhere",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn points_read_as_the_op_chooser_reads_them() {
        let cases = [
            (
                AttachPoint::Tracepoint {
                    name: "sys_enter_openat".into(),
                },
                "tracepoint sys_enter_openat",
            ),
            (
                AttachPoint::Kprobe {
                    probe: Probe::Return,
                    function: "do_sys_openat2".into(),
                    offset: 0,
                },
                "kretprobe do_sys_openat2",
            ),
            (
                AttachPoint::Kprobe {
                    probe: Probe::Entry,
                    function: "vfs_read".into(),
                    offset: 0x10,
                },
                "kprobe vfs_read+0x10",
            ),
            (
                AttachPoint::Uprobe {
                    probe: Probe::Entry,
                    path: "/usr/bin/bash".into(),
                    offset: 0x3f2c0,
                },
                "uprobe /usr/bin/bash:0x3f2c0",
            ),
            (
                AttachPoint::Cgroup {
                    cgroup: "/system.slice".into(),
                    attach_type: "CgroupDevice".into(),
                },
                "cgroup /system.slice (CgroupDevice)",
            ),
        ];
        for (point, want) in cases {
            assert_eq!(point.to_string(), want);
        }
    }

    #[test]
    fn a_point_seen_twice_is_kept_once() {
        let point = AttachPoint::Tracepoint {
            name: "sys_enter_openat".into(),
        };
        let mut all = vec![Attachment {
            prog_id: 7,
            point: point.clone(),
            holder: Holder::Link { id: 3 },
        }];
        let again = Attachment {
            prog_id: 7,
            point: point.clone(),
            holder: Holder::PerfEvent { pid: 10, fd: 4 },
        };
        let other = Attachment {
            prog_id: 8,
            point,
            holder: Holder::PerfEvent { pid: 10, fd: 5 },
        };
        add_new(&mut all, vec![again, other]);
        assert_eq!(all.len(), 2);
        assert_eq!(points_of(&all, 8).len(), 1);
        assert!(points_of(&all, 9).is_empty());
    }

    #[test]
    fn attached_nowhere_is_said_only_where_everything_was_read() {
        assert_eq!(nowhere("tracepoint"), "loaded, attached nowhere");
        assert_eq!(nowhere("kprobe"), "loaded, attached nowhere");
        assert!(nowhere("xdp").contains("attached nowhere (no interface"));
        assert!(nowhere("sched_cls").contains("network namespace reached"));
        assert!(nowhere("socket_filter").contains("the kernel does not say which"));
        assert!(nowhere("sk_msg").contains("not read"));
    }

    fn veth(netns: Netns) -> Interface {
        Interface {
            name: "veth0".into(),
            ifindex: 3,
            netns,
        }
    }

    #[test]
    fn interface_points_name_the_hook_the_interface_and_its_namespace() {
        let named = Netns::Named {
            name: "ebpf-prof-123".into(),
        };
        let cases = [
            (
                InterfaceHook::Xdp {
                    mode: Some(XdpMode::Generic),
                },
                named.clone(),
                "xdp on veth0 (generic) in netns ebpf-prof-123",
            ),
            (
                InterfaceHook::Tc {
                    parent: TcParent::Ingress,
                    action: FilterAction::DirectAction,
                },
                Netns::Own,
                "tc ingress on veth0",
            ),
            (
                InterfaceHook::Tc {
                    parent: TcParent::Egress,
                    action: FilterAction::Classifier,
                },
                Netns::Own,
                "tc egress on veth0 (classifier, not direct-action)",
            ),
            (
                InterfaceHook::Tcx {
                    direction: Direction::Egress,
                },
                Netns::OfProcess {
                    pid: 42,
                    comm: "cilium-agent".into(),
                },
                "tcx egress on veth0 in the netns of pid 42 (cilium-agent)",
            ),
            (
                InterfaceHook::Netkit {
                    side: NetkitSide::Peer,
                },
                Netns::Own,
                "netkit peer on veth0",
            ),
        ];
        for (hook, netns, want) in cases {
            let point = AttachPoint::Interface {
                hook,
                interface: veth(netns),
            };
            assert_eq!(point.to_string(), want);
        }
    }

    #[test]
    fn a_link_s_interface_not_found_is_named_by_its_index() {
        let by_index = AttachPoint::InterfaceIndex {
            hook: InterfaceHook::Xdp { mode: None },
            ifindex: 2,
        };
        assert_eq!(by_index.to_string(), "xdp ifindex 2");
        let under_prio = AttachPoint::Interface {
            hook: InterfaceHook::Tc {
                parent: TcParent::Qdisc(0x1_0000),
                action: FilterAction::DirectAction,
            },
            interface: veth(Netns::Own),
        };
        assert_eq!(under_prio.to_string(), "tc qdisc 1: on veth0");
    }

    #[test]
    fn packet_points_choose_the_packet_operation_and_struct_ops_none() {
        use crate::bench::choose::{fires, Fires};
        use crate::bench::operation::Operation;
        for hook in [
            InterfaceHook::Xdp {
                mode: Some(XdpMode::Native),
            },
            InterfaceHook::Tc {
                parent: TcParent::Ingress,
                action: FilterAction::DirectAction,
            },
            InterfaceHook::Tcx {
                direction: Direction::Ingress,
            },
        ] {
            let point = AttachPoint::Interface {
                hook,
                interface: veth(Netns::Own),
            };
            let reach = fires(&point.to_string());
            assert!(reach.inside(Operation::UdpVeth), "{point}: {reach:?}");
        }
        let struct_ops = AttachPoint::StructOps {
            struct_name: "tcp_congestion_ops".into(),
            member: "cong_avoid".into(),
            map_name: "dctcp".into(),
            map_id: 9,
        };
        assert!(matches!(fires(&struct_ops.to_string()), Fires::Nowhere(_)));
    }

    #[test]
    fn a_link_found_on_its_interface_is_listed_once_with_the_interface_s_words() {
        let link = |prog_id, hook, id| Attachment {
            prog_id,
            point: AttachPoint::InterfaceIndex { hook, ifindex: 3 },
            holder: Holder::Link { id },
        };
        let xdp_link = InterfaceHook::Xdp { mode: None };
        let tcx = InterfaceHook::Tcx {
            direction: Direction::Ingress,
        };
        let mut all = vec![link(7, xdp_link, 1), link(8, tcx, 2)];
        let on = |prog_id, hook, holder| Attachment {
            prog_id,
            point: AttachPoint::Interface {
                hook,
                interface: veth(Netns::Own),
            },
            holder,
        };
        let native = InterfaceHook::Xdp {
            mode: Some(XdpMode::Native),
        };
        add_interfaces(
            &mut all,
            vec![
                on(7, native, Holder::Interface),
                on(8, tcx, Holder::Link { id: 2 }),
                on(9, tcx, Holder::Interface),
            ],
        );
        let words: Vec<String> = all.iter().map(|a| a.point.to_string()).collect();
        assert_eq!(
            words,
            [
                "xdp on veth0 (native)",
                "tcx ingress on veth0",
                "tcx ingress on veth0"
            ]
        );
        assert_eq!(all[0].holder, Holder::Link { id: 1 });
        assert_eq!(all[2].holder, Holder::Interface);
    }
}
