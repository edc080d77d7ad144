//! Where each loaded BPF program is attached, whoever attached it: the one owner of that
//! question. `doctor`, `--op auto`, `record`'s program list and `report`'s attach points all
//! read it through [`attachments`] (or [`Inventory`](crate::bpf::InventoryProgram), built on it).
//!
//! Three ways a program is attached are read, as bpftool reads them:
//! - kernel link objects (`bpftool link show`): tracepoints, raw tracepoints, LSM and tracing
//!   targets, XDP/tcx/netkit interfaces, cgroups, struct_ops, iterators ([`links`]);
//! - perf events that carry a program without a link, set with `PERF_EVENT_IOC_SET_BPF` as
//!   bpftrace and bcc do: each process's `anon_inode:[perf_event]` fds asked with
//!   `BPF_TASK_FD_QUERY` (`bpftool perf show`): tracepoints, kprobes and kretprobes with their
//!   symbol and offset, uprobes with their file and offset ([`perf_events`]);
//! - cgroup attachments made without a link (`BPF_PROG_ATTACH`, as systemd does), found with
//!   `BPF_PROG_QUERY` on every cgroup of the cgroup v2 tree (`bpftool cgroup tree`, [`cgroups`]).
//!
//! Not read yet: XDP and tc programs attached through netlink without a link, and socket
//! filters set with `setsockopt`. [`nowhere`] words a program with no attachment found so that
//! it never claims more than was looked at.

mod cgroups;
mod links;
mod perf_events;

use crate::host::Host;
use serde::Serialize;
use std::fmt;

pub(crate) use links::btf_target;
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
    /// Any other link, as `bpftool link show` would describe it (`xdp ifindex 2`).
    Other { description: String },
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
            AttachPoint::Other { description } => write!(out, "{description}"),
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
}

/// One program attached at one point.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Attachment {
    pub prog_id: u32,
    pub point: AttachPoint,
    pub holder: Holder,
}

/// Every attachment that can be read on `host` right now: links, perf events of every process
/// and the cgroup tree's own lists, each attachment once. What cannot be read (a process gone
/// while it was walked, a cgroup removed) is skipped: the list is what could be seen.
pub fn attachments(host: &Host) -> Vec<Attachment> {
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
    all
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
/// nowhere" where every way that type can be attached was read; for types that can be attached
/// in ways not read here (netlink XDP/tc, socket filters), that none was found, and what was
/// not looked at.
pub fn nowhere(prog_type: &str) -> &'static str {
    match prog_type {
        "xdp" | "sched_cls" | "sched_act" => {
            "loaded, no link attaches it (XDP and tc attachments made through netlink are not read)"
        }
        "socket_filter" | "sk_skb" | "sk_msg" | "sk_reuseport" => {
            "loaded, no link attaches it (socket filters and sockmaps are not read)"
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
        assert!(nowhere("xdp").contains("netlink"));
        assert!(nowhere("socket_filter").contains("not read"));
    }
}
