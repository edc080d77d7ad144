//! Programs on network interfaces, attached with or without a link: in every network namespace
//! that can be reached (the tool's own, each one named under /run/netns, each one a running
//! process is in), the XDP programs of every interface (`RTM_GETLINK`, `IFLA_XDP`), the
//! cls_bpf filters under its clsact, ingress and other qdiscs (`RTM_GETTFILTER`), and its tcx
//! and netkit program lists (`BPF_PROG_QUERY` on the interface's index), as `bpftool net show`
//! reads them in one namespace.
//!
//! A namespace is entered by a thread of its own that ends when it is read (`setns` moves only
//! the calling thread). A named namespace is opened without following a link; a process's is
//! entered through a pidfd (`setns` on a pidfd, Linux 5.8+), never by opening its
//! `/proc/PID/ns/net` link, which is only read as text to tell namespaces apart.

use super::netlink::{self, RouteSocket};
use super::{AttachPoint, TcParent};
use super::{Attachment, Direction, Holder, Interface, InterfaceHook, NetkitSide, Netns};
use crate::host::Host;
use libbpf_rs::libbpf_sys;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// The most namespaces read: a container host with more has its first ones read.
const MAX_NAMESPACES: usize = 1024;
/// The most programs one tcx or netkit list is read for.
const MAX_PROGS: usize = 64;
/// `statfs` of a namespace file (`NSFS_MAGIC` in linux/magic.h).
const NSFS_MAGIC: i64 = 0x6e73_6673;
/// A qdisc's handle for the clsact and ingress qdiscs (`TC_H_INGRESS`, `ffff:`).
const INGRESS_HANDLE: u32 = 0xffff_0000;
/// The parents their filters hang under (`TC_H_MIN_INGRESS`, `TC_H_MIN_EGRESS` on `ffff:`).
const INGRESS_PARENT: u32 = 0xffff_fff2;
const EGRESS_PARENT: u32 = 0xffff_fff3;

/// What the walk found, and what it could not read.
#[derive(Debug, Default)]
pub(super) struct Found {
    pub attachments: Vec<Attachment>,
    /// One sentence for each thing not read (a namespace not entered, tcx missing).
    pub notes: Vec<String>,
}

/// One namespace to read, and how to get in.
struct Namespace {
    label: Netns,
    inode: u64,
    door: Door,
}

enum Door {
    /// The calling thread is in it already.
    Here,
    /// A file under /run/netns, opened.
    File(OwnedFd),
    /// A process that is in it.
    Process(u32),
}

/// Every interface attachment of every namespace that can be reached on `host`. On a host that
/// is not the live one (a test's fixture tree), only the tool's own namespace is read.
pub(super) fn attachments(host: &Host) -> Found {
    let mut found = Found::default();
    let mut tcx = TcxSupport::Unknown;
    for namespace in namespaces(host) {
        let read = match namespace.door {
            Door::Here => read_here(&namespace.label, &mut tcx),
            _ => read_inside(&namespace, &mut tcx),
        };
        match read {
            Ok(mut attachments) => found.attachments.append(&mut attachments),
            Err(why) => found.notes.push(format!(
                "network namespace{} not read: {why}",
                label_words(&namespace.label)
            )),
        }
    }
    if tcx == TcxSupport::Missing {
        found.notes.push(
            "this kernel has no tcx (Linux 6.6+): no program can be on an interface's tcx list"
                .into(),
        );
    }
    found
}

/// The words after "network namespace" for `label`.
fn label_words(label: &Netns) -> String {
    match label {
        Netns::Own => " (the tool's own)".into(),
        Netns::Named { name } => format!(" {name} (under /run/netns)"),
        Netns::OfProcess { pid, comm } => format!(" of pid {pid} ({comm})"),
    }
}

/// Whether this kernel has tcx, learnt from the first query.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum TcxSupport {
    Unknown,
    Present,
    Missing,
}

/// The namespaces to read, each once (told apart by inode), the tool's own first.
fn namespaces(host: &Host) -> Vec<Namespace> {
    let mut all = Vec::new();
    let own = inode_of_link(&host.path("proc/thread-self/ns/net"));
    all.push(Namespace {
        label: Netns::Own,
        inode: own.unwrap_or(0),
        door: Door::Here,
    });
    if !host.is_live() {
        return all;
    }
    for namespace in named(host).into_iter().chain(of_processes(host)) {
        if all.len() >= MAX_NAMESPACES {
            break;
        }
        if !all.iter().any(|seen| seen.inode == namespace.inode) {
            all.push(namespace);
        }
    }
    all
}

/// The inode of a `/proc/…/ns/net` link, from its text (`net:[4026531840]`), without
/// following it.
fn inode_of_link(path: &std::path::Path) -> Option<u64> {
    let target = std::fs::read_link(path).ok()?;
    let text = target.to_str()?;
    text.strip_prefix("net:[")?.strip_suffix(']')?.parse().ok()
}

/// The namespaces named under /run/netns, each opened without following a link and checked to
/// be a namespace file.
fn named(host: &Host) -> Vec<Namespace> {
    let Ok(entries) = std::fs::read_dir(host.path("run/netns")) else {
        return Vec::new();
    };
    let mut found = Vec::new();
    for entry in entries.flatten() {
        let Some(fd) = open_namespace_file(&entry.path()) else {
            continue;
        };
        // SAFETY: fstat of an fd we own into a zeroed stat we own.
        let mut stat: libc::stat = unsafe { std::mem::zeroed() };
        if unsafe { libc::fstat(fd.as_raw_fd(), &mut stat) } != 0 {
            continue;
        }
        found.push(Namespace {
            label: Netns::Named {
                name: entry.file_name().to_string_lossy().into_owned(),
            },
            inode: stat.st_ino,
            door: Door::File(fd),
        });
    }
    found
}

/// `path` opened read-only without following a link in its last component, when it is a
/// namespace file (on nsfs).
fn open_namespace_file(path: &std::path::Path) -> Option<OwnedFd> {
    use std::os::unix::fs::OpenOptionsExt;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)
        .ok()?;
    // SAFETY: fstatfs of an open fd into a zeroed statfs we own.
    let mut fs: libc::statfs = unsafe { std::mem::zeroed() };
    let on_nsfs =
        unsafe { libc::fstatfs(file.as_raw_fd(), &mut fs) } == 0 && fs.f_type as i64 == NSFS_MAGIC;
    on_nsfs.then(|| file.into())
}

/// The namespace of each running process (its first process names it).
fn of_processes(host: &Host) -> Vec<Namespace> {
    let Ok(entries) = std::fs::read_dir(host.path("proc")) else {
        return Vec::new();
    };
    let mut pids: Vec<u32> = entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse().ok())
        .collect();
    pids.sort_unstable();
    let mut found: Vec<Namespace> = Vec::new();
    for pid in pids {
        let Some(inode) = inode_of_link(&host.path(&format!("proc/{pid}/ns/net"))) else {
            continue;
        };
        if found.iter().any(|seen| seen.inode == inode) {
            continue;
        }
        let comm =
            std::fs::read_to_string(host.path(&format!("proc/{pid}/comm"))).unwrap_or_default();
        found.push(Namespace {
            label: Netns::OfProcess {
                pid,
                comm: comm.trim_end().to_string(),
            },
            inode,
            door: Door::Process(pid),
        });
    }
    found
}

/// Read `namespace` from a thread that enters it and ends with the reading.
fn read_inside(namespace: &Namespace, tcx: &mut TcxSupport) -> Result<Vec<Attachment>, String> {
    std::thread::scope(|scope| {
        let reader = scope.spawn(|| {
            enter(namespace)?;
            read_here(&namespace.label, tcx)
        });
        reader
            .join()
            .unwrap_or_else(|_| Err("its reader stopped".into()))
    })
}

/// Move this thread into `namespace`.
fn enter(namespace: &Namespace) -> Result<(), String> {
    let entered = match &namespace.door {
        Door::Here => return Ok(()),
        // SAFETY: setns on a namespace fd we hold; this thread alone moves.
        Door::File(fd) => unsafe { libc::setns(fd.as_raw_fd(), libc::CLONE_NEWNET) },
        Door::Process(pid) => {
            let pidfd = pidfd_open(*pid).map_err(|e| format!("pidfd_open: {e}"))?;
            // SAFETY: setns on a pidfd we hold enters that process's network namespace.
            let entered = unsafe { libc::setns(pidfd.as_raw_fd(), libc::CLONE_NEWNET) };
            // The pid may have been reused since its namespace was read: check it is the same.
            let now = inode_of_link(std::path::Path::new("/proc/thread-self/ns/net"));
            if entered == 0 && now != Some(namespace.inode) {
                return Err("its process ended while it was read".into());
            }
            entered
        }
    };
    match entered {
        0 => Ok(()),
        _ => Err(format!("setns: {}", std::io::Error::last_os_error())),
    }
}

fn pidfd_open(pid: u32) -> std::io::Result<OwnedFd> {
    // SAFETY: pidfd_open takes a pid and flags; a non-negative return is a new fd we own.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid as libc::c_int, 0) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: the syscall returned a fresh fd that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as i32) })
}

/// Every interface attachment of this thread's namespace, labelled `label`.
fn read_here(label: &Netns, tcx: &mut TcxSupport) -> Result<Vec<Attachment>, String> {
    let socket = RouteSocket::open().map_err(|e| format!("netlink socket: {e}"))?;
    let dump = |kind, body: Vec<u8>| {
        socket
            .dump(kind, &body)
            .map_err(|e| format!("netlink dump: {e}"))
    };
    let links = netlink::parse_links(&dump(netlink::RTM_GETLINK, netlink::link_request())?)
        .map_err(|e| format!("netlink reply: {e:?}"))?;
    let interface = |ifindex: u32| Interface {
        name: links
            .iter()
            .find(|l| l.index == ifindex)
            .map_or_else(|| format!("ifindex {ifindex}"), |l| l.name.clone()),
        ifindex,
        netns: label.clone(),
    };
    let mut found = Vec::new();
    for link in &links {
        for &(mode, prog_id) in &link.xdp {
            let hook = InterfaceHook::Xdp { mode: Some(mode) };
            found.push(on_interface(prog_id, hook, interface(link.index)));
        }
    }
    let qdiscs = netlink::parse_qdiscs(&dump(netlink::RTM_GETQDISC, netlink::tc_request(0, 0))?)
        .map_err(|e| format!("netlink reply: {e:?}"))?;
    for qdisc in &qdiscs {
        for (parent, place) in filter_parents(qdisc) {
            let request = netlink::tc_request(qdisc.ifindex, parent);
            let Ok(reply) = dump(netlink::RTM_GETTFILTER, request) else {
                continue;
            };
            for filter in netlink::parse_filters(&reply).unwrap_or_default() {
                let hook = InterfaceHook::Tc {
                    parent: place,
                    action: filter.action,
                };
                found.push(on_interface(filter.prog_id, hook, interface(qdisc.ifindex)));
            }
        }
    }
    for link in &links {
        found.extend(program_lists(link.index, tcx, &interface));
    }
    Ok(found)
}

fn on_interface(prog_id: u32, hook: InterfaceHook, interface: Interface) -> Attachment {
    Attachment {
        prog_id,
        point: AttachPoint::Interface { hook, interface },
        holder: Holder::Interface,
    }
}

/// The parents to ask a qdisc's filters under: both directions of a clsact, the ingress of an
/// ingress qdisc (asking its egress would list its ingress filters again), and any other
/// qdisc with a handle under that handle.
fn filter_parents(qdisc: &netlink::QdiscEntry) -> Vec<(u32, TcParent)> {
    match (qdisc.handle, qdisc.kind.as_str()) {
        (INGRESS_HANDLE, "clsact") => vec![
            (INGRESS_PARENT, TcParent::Ingress),
            (EGRESS_PARENT, TcParent::Egress),
        ],
        (INGRESS_HANDLE, _) => vec![(INGRESS_PARENT, TcParent::Ingress)],
        (0, _) => Vec::new(),
        (handle, _) => vec![(handle, TcParent::Qdisc(handle))],
    }
}

/// The tcx and netkit programs of interface `ifindex`, held by a link (its id) or not.
fn program_lists(
    ifindex: u32,
    tcx: &mut TcxSupport,
    interface: &dyn Fn(u32) -> Interface,
) -> Vec<Attachment> {
    let lists = [
        (
            libbpf_sys::BPF_TCX_INGRESS,
            InterfaceHook::Tcx {
                direction: Direction::Ingress,
            },
        ),
        (
            libbpf_sys::BPF_TCX_EGRESS,
            InterfaceHook::Tcx {
                direction: Direction::Egress,
            },
        ),
        (
            libbpf_sys::BPF_NETKIT_PRIMARY,
            InterfaceHook::Netkit {
                side: NetkitSide::Primary,
            },
        ),
        (
            libbpf_sys::BPF_NETKIT_PEER,
            InterfaceHook::Netkit {
                side: NetkitSide::Peer,
            },
        ),
    ];
    let mut found = Vec::new();
    for (attach_type, hook) in lists {
        let is_tcx = matches!(hook, InterfaceHook::Tcx { .. });
        if is_tcx && *tcx == TcxSupport::Missing {
            continue;
        }
        let answer = query(ifindex, attach_type);
        if is_tcx {
            *tcx = match answer {
                Err(libc::EINVAL) if *tcx == TcxSupport::Unknown => TcxSupport::Missing,
                _ => TcxSupport::Present,
            };
        }
        for (prog_id, link_id) in answer.unwrap_or_default() {
            found.push(listed(prog_id, link_id, hook, interface(ifindex)));
        }
    }
    found
}

/// A program of a tcx or netkit list: held by link `link_id`, or by the list itself when 0.
fn listed(prog_id: u32, link_id: u32, hook: InterfaceHook, interface: Interface) -> Attachment {
    let holder = match link_id {
        0 => Holder::Interface,
        id => Holder::Link { id },
    };
    Attachment {
        prog_id,
        point: AttachPoint::Interface { hook, interface },
        holder,
    }
}

/// `BPF_PROG_QUERY` of interface `ifindex`'s list `attach_type`: (program, link or 0) for each
/// entry, or the errno.
fn query(ifindex: u32, attach_type: u32) -> Result<Vec<(u32, u32)>, i32> {
    let mut prog_ids = vec![0u32; MAX_PROGS];
    let mut link_ids = vec![0u32; MAX_PROGS];
    let mut opts = libbpf_sys::bpf_prog_query_opts {
        sz: std::mem::size_of::<libbpf_sys::bpf_prog_query_opts>() as libbpf_sys::size_t,
        prog_ids: prog_ids.as_mut_ptr(),
        link_ids: link_ids.as_mut_ptr(),
        ..Default::default()
    };
    opts.__bindgen_anon_1.count = MAX_PROGS as u32;
    let target = i32::try_from(ifindex).map_err(|_| libc::EINVAL)?;
    // SAFETY: the id arrays hold `count` u32s each and outlive the call; opts is sized.
    let ret = unsafe { libbpf_sys::bpf_prog_query_opts(target, attach_type, &mut opts) };
    if ret < 0 {
        return Err(-ret);
    }
    // SAFETY: the kernel wrote the number of entries into the union's count.
    let count = (unsafe { opts.__bindgen_anon_1.count } as usize).min(MAX_PROGS);
    Ok(prog_ids[..count]
        .iter()
        .copied()
        .zip(link_ids[..count].iter().copied())
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filters_are_asked_for_under_the_parents_each_qdisc_has() {
        let qdisc = |handle, kind: &str| netlink::QdiscEntry {
            ifindex: 3,
            handle,
            kind: kind.into(),
        };
        let parents = |q| {
            filter_parents(&q)
                .into_iter()
                .map(|(p, _)| p)
                .collect::<Vec<_>>()
        };
        assert_eq!(
            parents(qdisc(INGRESS_HANDLE, "clsact")),
            [INGRESS_PARENT, EGRESS_PARENT]
        );
        assert_eq!(parents(qdisc(INGRESS_HANDLE, "ingress")), [INGRESS_PARENT]);
        assert!(parents(qdisc(0, "noqueue")).is_empty());
        assert_eq!(
            filter_parents(&qdisc(0x1_0000, "prio")),
            [(0x1_0000, TcParent::Qdisc(0x1_0000))]
        );
    }

    #[test]
    fn a_namespace_link_is_read_as_text_and_never_followed() {
        let dir = tempfile::tempdir().unwrap();
        let link = dir.path().join("net");
        std::os::unix::fs::symlink("net:[4026531840]", &link).unwrap();
        assert_eq!(inode_of_link(&link), Some(4_026_531_840));
        std::os::unix::fs::symlink("/etc/hostname", dir.path().join("other")).unwrap();
        assert_eq!(inode_of_link(&dir.path().join("other")), None);
        // A link under /run/netns is not opened: only namespace files are.
        assert!(open_namespace_file(&dir.path().join("other")).is_none());
        std::fs::write(dir.path().join("plain"), "x").unwrap();
        assert!(open_namespace_file(&dir.path().join("plain")).is_none());
    }

    #[test]
    fn a_namespace_not_read_is_named_as_it_was_found() {
        let process = Netns::OfProcess {
            pid: 42,
            comm: "containerd".into(),
        };
        assert_eq!(label_words(&process), " of pid 42 (containerd)");
        let named = Netns::Named {
            name: "blue".into(),
        };
        assert_eq!(label_words(&named), " blue (under /run/netns)");
    }

    #[test]
    fn a_fixture_host_reads_only_the_tools_own_namespace() {
        let root = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(root.path().join("run/netns")).unwrap();
        std::fs::write(root.path().join("run/netns/other"), "").unwrap();
        let all = namespaces(&Host::at(root.path()));
        assert_eq!(all.len(), 1);
        assert_eq!(all[0].label, Netns::Own);
    }
}
