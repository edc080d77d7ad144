//! Attaching the packet programs libbpf cannot attach from their section alone (`xdp`, `tcx/*`,
//! `tc/*`, `tc`, `classifier`): they need an interface, and the run's private network
//! (`netpath::VethPair`) gives one. While a [`TargetGuard`] lives, the loader attaches such a
//! program there: XDP and ingress programs on the peer inside the private namespace (the
//! thread enters it for the attach: an ifindex is looked up in the caller's namespace), egress
//! programs on this side's end. The place is a property of the run, not of one call, which is
//! why it is set once for every loader call (`overhead`'s arms, their re-attaches each round,
//! `record --load`) instead of passed down each of them.
//!
//! XDP is attached with a BPF link and the kernel's own choice of mode, which is native
//! (driver) mode on veth, or in generic (skb) mode when that fails; the mode it got is read
//! back and said. `tcx/*` sections are attached
//! with tcx links (kernel 6.6+; a kernel without them is said so). `tc` and `classifier`
//! sections go on a clsact qdisc's ingress (libbpf-rs `TcHook`), and come off with the qdisc.

use libbpf_rs::{libbpf_sys, AsRawLibbpf, Link, Program, TcHookBuilder, TC_INGRESS};
use std::ffi::CString;
use std::os::fd::{AsFd, AsRawFd};
use std::path::PathBuf;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

/// Where packet programs attach: the private namespace and the two ends of the veth pair.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PacketTarget {
    /// The namespace's file (`/run/netns/NAME`).
    pub netns: PathBuf,
    /// The receiving end, inside the namespace.
    pub peer_if: String,
    /// The sending end, in the tool's namespace.
    pub host_if: String,
    /// The cgroup (v2) the bench sends from.
    pub cgroup: PathBuf,
    /// The file that hands a socket filter's id to the bench, which attaches the filter to its
    /// receiving socket.
    pub socket_handover: PathBuf,
}

/// Where one packet program goes, by its section.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Place {
    /// XDP on the receiving end.
    Xdp,
    /// A clsact qdisc's ingress on the receiving end.
    TcIngress,
    /// tcx ingress on the receiving end.
    TcxIngress,
    /// tcx egress on the sending end.
    TcxEgress,
    /// The bench's cgroup (`cgroup_skb/egress` on the send, `cgroup_skb/ingress` on the
    /// receive).
    CgroupSkb,
    /// The bench's receiving socket (`SO_ATTACH_BPF`, by the id in a file the bench reads).
    SocketFilter,
    /// The bench's cgroup, for a cgroup sock or sock_addr program (`cgroup/sock_create` when
    /// the bench makes a socket, `cgroup/connect4`, `cgroup/sendmsg4`, `cgroup/recvmsg4` on
    /// those calls of its sockets).
    CgroupSock,
    /// A netfilter hook of the private namespace (`bpf::netfilter`).
    Netfilter,
}

impl Place {
    /// The place for a program of section `section`, if it is a packet program.
    pub fn of_section(section: &str) -> Option<Place> {
        let kind = section.split('/').next().unwrap_or(section);
        match (kind, section) {
            ("xdp" | "xdp.frags", _) => Some(Place::Xdp),
            (_, "tcx/egress" | "tc/egress") => Some(Place::TcxEgress),
            ("tcx", _) | (_, "tc/ingress") => Some(Place::TcxIngress),
            ("tc" | "classifier", _) => Some(Place::TcIngress),
            ("cgroup_skb", _) | (_, "cgroup/skb") => Some(Place::CgroupSkb),
            ("socket", _) => Some(Place::SocketFilter),
            (
                _,
                "cgroup/sock_create" | "cgroup/sock" | "cgroup/connect4" | "cgroup/sendmsg4"
                | "cgroup/recvmsg4",
            ) => Some(Place::CgroupSock),
            ("netfilter", _) => Some(Place::Netfilter),
            _ => None,
        }
    }
}

/// Whether the run measures what attaching a native XDP program at all costs apart (overhead's
/// trivial arm): while a [`SwitchNote`] lives, the XDP line says so instead of advising a
/// comparison with a trivial program.
static MEASURED_APART: AtomicBool = AtomicBool::new(false);

/// While this lives, the path switch of native XDP is measured apart (see [`MEASURED_APART`]).
#[derive(Debug)]
pub struct SwitchNote(());

impl SwitchNote {
    /// Say the switch is measured apart until the guard is dropped.
    pub fn measured_apart() -> SwitchNote {
        MEASURED_APART.store(true, Ordering::Relaxed);
        SwitchNote(())
    }
}

impl Drop for SwitchNote {
    fn drop(&mut self) {
        MEASURED_APART.store(false, Ordering::Relaxed);
    }
}

/// The target set for this run, if any.
static TARGET: Mutex<Option<PacketTarget>> = Mutex::new(None);

/// Packet programs attach to a target while this lives.
#[derive(Debug)]
pub struct TargetGuard(());

impl TargetGuard {
    /// Attach packet programs to `target` until the guard is dropped.
    pub fn install(target: PacketTarget) -> TargetGuard {
        *TARGET.lock().unwrap_or_else(|p| p.into_inner()) = Some(target);
        TargetGuard(())
    }
}

impl Drop for TargetGuard {
    fn drop(&mut self) {
        *TARGET.lock().unwrap_or_else(|p| p.into_inner()) = None;
    }
}

/// Where packet programs were said to be attached already: `overhead` loads an object afresh
/// for each load, and the place is the same each time.
static SAID: Mutex<Vec<String>> = Mutex::new(Vec::new());

/// Say `line` unless it was said before in this run.
pub fn say_once(line: String) {
    let mut said = SAID.lock().unwrap_or_else(|p| p.into_inner());
    if !said.contains(&line) {
        crate::out::say(&line);
        said.push(line);
    }
}

fn target() -> Option<PacketTarget> {
    TARGET.lock().unwrap_or_else(|p| p.into_inner()).clone()
}

/// A program on its packet hook, taken off when dropped: a BPF link (XDP, tcx, and every
/// program libbpf attaches itself), or a filter on a clsact qdiscs's ingress.
pub enum Attachment {
    Link(Link),
    /// A BPF link libbpf did not make (XDP in generic mode): closing its fd detaches.
    LinkFd(std::os::fd::OwnedFd),
    Tc(TcFilter),
    HandedOver(HandedOverFilter),
}

/// A socket filter whose id is in the file the bench reads when it makes its receiving socket;
/// dropping it removes the file, so the next round's socket has no filter.
pub struct HandedOverFilter {
    path: PathBuf,
}

impl Drop for HandedOverFilter {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// Write `prog`'s id to `path` for the bench (replacing a file a killed run left there). The id,
/// not a pin in bpffs: not every system mounts bpffs, and the bench runs as root, so it can
/// open a program by its id.
fn hand_over(prog: &Program<'_>, path: &std::path::Path) -> Result<HandedOverFilter, i32> {
    let errno = |err: anyhow::Error| {
        err.root_cause()
            .downcast_ref::<std::io::Error>()
            .and_then(std::io::Error::raw_os_error)
            .unwrap_or(libc::EIO)
    };
    let id = super::ids::prog_info(prog.as_fd(), false)
        .map_err(errno)?
        .info
        .id;
    let host = crate::host::Host::live();
    crate::host::recovery::write_state_file(&host, path, format!("{id}\n").as_bytes())
        .map_err(errno)?;
    Ok(HandedOverFilter {
        path: path.to_path_buf(),
    })
}

/// A `tc` program on the ingress of a clsact qdisc the tool added to the peer; dropping it
/// removes the qdisc, and the filter with it.
pub struct TcFilter {
    netns: PathBuf,
    ifname: String,
}

impl Drop for TcFilter {
    fn drop(&mut self) {
        let ifname = &self.ifname;
        let _ = crate::bench::in_namespace(&self.netns, || {
            remove_clsact(ifname);
            Ok(())
        });
    }
}

/// Remove the clsact qdisc of `ifname` (in this thread's namespace), both its directions.
fn remove_clsact(ifname: &str) {
    let Some(index) = ifindex(ifname) else {
        return;
    };
    // SAFETY: a zeroed hook with its size set is what libbpf expects.
    let mut hook: libbpf_sys::bpf_tc_hook = unsafe { std::mem::zeroed() };
    hook.sz = size_of::<libbpf_sys::bpf_tc_hook>() as libbpf_sys::size_t;
    hook.ifindex = index;
    hook.attach_point = libbpf_sys::BPF_TC_INGRESS | libbpf_sys::BPF_TC_EGRESS;
    // SAFETY: destroying the qdisc the hook names; nothing else points at the hook.
    unsafe { libbpf_sys::bpf_tc_hook_destroy(&mut hook) };
}

/// Attach `prog` (of section `section`) to the run's target when it is a packet program and a
/// target is set: `None` when it is not for here, else the attachment, with a line saying where
/// and how, or the errno.
pub fn attach(prog: &Program<'_>, section: &str) -> Option<Result<(Attachment, String), i32>> {
    let place = Place::of_section(section)?;
    let target = target()?;
    let name = prog.name().to_string_lossy().into_owned();
    Some(match place {
        Place::TcxEgress => attach_here(prog, place, &target.host_if).map(|link| {
            let line = format!("attached {name} to tcx egress of {}", target.host_if);
            (Attachment::Link(link), line)
        }),
        Place::CgroupSkb | Place::CgroupSock => attach_cgroup(prog, &target.cgroup).map(|link| {
            let line = format!("attached {name} to the cgroup {}", target.cgroup.display());
            (Attachment::Link(link), line)
        }),
        Place::SocketFilter => hand_over(prog, &target.socket_handover).map(|handed| {
            let line = format!(
                "attached {name} to the bench's receiving socket (SO_ATTACH_BPF, by the id in {})",
                target.socket_handover.display()
            );
            (Attachment::HandedOver(handed), line)
        }),
        Place::Netfilter => attach_netfilter(prog, &name, &target),
        Place::TcIngress => {
            let peer = target.peer_if.clone();
            let entered = crate::bench::in_namespace(&target.netns, || Ok(tc_filter(prog, &peer)));
            entered.unwrap_or(Err(libc::EINVAL)).map(|()| {
                let line = format!("attached {name} to the ingress of a clsact qdisc on {peer}");
                let filter = TcFilter {
                    netns: target.netns.clone(),
                    ifname: peer,
                };
                (Attachment::Tc(filter), line)
            })
        }
        Place::Xdp | Place::TcxIngress => {
            let peer = target.peer_if.clone();
            let entered = crate::bench::in_namespace(&target.netns, || {
                let attached = match place {
                    Place::Xdp => attach_xdp(prog, &peer),
                    _ => attach_here(prog, place, &peer).map(Attachment::Link),
                };
                let line = attached
                    .as_ref()
                    .ok()
                    .map(|_| describe(place, &name, &peer));
                Ok(attached.map(|a| (a, line.unwrap_or_default())))
            });
            entered.unwrap_or(Err(libc::EINVAL))
        }
    })
}

/// `prog` (named `name`) on the netfilter hook of the target's namespace, and the line saying so.
fn attach_netfilter(
    prog: &Program<'_>,
    name: &str,
    target: &PacketTarget,
) -> Result<(Attachment, String), i32> {
    let entered = crate::bench::in_namespace(&target.netns, || Ok(super::netfilter::attach(prog)));
    entered.unwrap_or(Err(libc::EINVAL)).map(|link| {
        let line = format!(
            "attached {name} to netfilter's IPv4 {} (priority {}) in the network namespace {}",
            super::netfilter::HOOK_NAME,
            super::netfilter::PRIORITY,
            target.netns.display()
        );
        (Attachment::Link(link), line)
    })
}

/// A clsact qdisc on `ifname` (in this thread's namespace) with `prog` on its ingress.
fn tc_filter(prog: &Program<'_>, ifname: &str) -> Result<(), i32> {
    let index = ifindex(ifname).ok_or(libc::ENODEV)?;
    let mut hook = TcHookBuilder::new(prog.as_fd())
        .ifindex(index)
        .replace(true)
        .handle(1)
        .priority(1)
        .hook(TC_INGRESS);
    // libbpf-rs keeps the errno only in its message; the OS error is still the last one.
    let errno = |_: libbpf_rs::Error| {
        std::io::Error::last_os_error()
            .raw_os_error()
            .unwrap_or(libc::EINVAL)
    };
    hook.create().map_err(errno)?;
    if let Err(e) = hook.attach() {
        let failed = errno(e);
        remove_clsact(ifname);
        return Err(failed);
    }
    Ok(())
}

/// XDP on `ifname` (in this thread's namespace): the kernel's choice of mode (native on veth),
/// and generic (skb) mode when that fails.
fn attach_xdp(prog: &Program<'_>, ifname: &str) -> Result<Attachment, i32> {
    let native = match crate::failpoint::flag("xdp-native-fails") {
        true => Err(libc::EOPNOTSUPP),
        false => attach_here(prog, Place::Xdp, ifname),
    };
    match native {
        Ok(link) => Ok(Attachment::Link(link)),
        Err(_) => attach_xdp_generic(prog, ifname).map(Attachment::LinkFd),
    }
}

/// XDP on `ifname` in generic (skb) mode, with a BPF link made directly.
fn attach_xdp_generic(prog: &Program<'_>, ifname: &str) -> Result<std::os::fd::OwnedFd, i32> {
    use std::os::fd::FromRawFd;
    let index = ifindex(ifname).ok_or(libc::ENODEV)?;
    // SAFETY: zeroed link-create options with their size set are what libbpf expects.
    let mut opts: libbpf_sys::bpf_link_create_opts = unsafe { std::mem::zeroed() };
    opts.sz = size_of::<libbpf_sys::bpf_link_create_opts>() as libbpf_sys::size_t;
    opts.flags = libbpf_sys::XDP_FLAGS_SKB_MODE;
    let fd = prog.as_fd().as_raw_fd();
    // SAFETY: a loaded program's fd, an interface index, options we own.
    let link = unsafe { libbpf_sys::bpf_link_create(fd, index, libbpf_sys::BPF_XDP, &opts) };
    if link < 0 {
        return Err(-link);
    }
    // SAFETY: bpf_link_create returned a new fd that nothing else owns.
    Ok(unsafe { std::os::fd::OwnedFd::from_raw_fd(link) })
}

/// Attach `prog` to the cgroup at `dir` with a BPF link.
fn attach_cgroup(prog: &Program<'_>, dir: &std::path::Path) -> Result<Link, i32> {
    let opened = std::fs::File::open(dir).map_err(|e| e.raw_os_error().unwrap_or(libc::ENOENT))?;
    let raw = prog.as_libbpf_object();
    // SAFETY: `raw` is a loaded program of a live object, the fd an open cgroup directory.
    let link = unsafe {
        libbpf_sys::bpf_program__attach_cgroup(
            raw.as_ptr(),
            std::os::fd::AsRawFd::as_raw_fd(&opened),
        )
    };
    // SAFETY: libbpf_get_error accepts any pointer libbpf returned, NULL included.
    let err = unsafe { libbpf_sys::libbpf_get_error(link.cast()) };
    match (NonNull::new(link), err) {
        // SAFETY: a non-NULL link without error is ours to own and destroy.
        (Some(link), 0) => Ok(unsafe { Link::from_ptr(link) }),
        (_, err) => Err(i32::try_from(-err).unwrap_or(libc::EINVAL)),
    }
}

/// Attach in this thread's namespace to interface `ifname` with a BPF link.
fn attach_here(prog: &Program<'_>, place: Place, ifname: &str) -> Result<Link, i32> {
    let index = ifindex(ifname).ok_or(libc::ENODEV)?;
    let raw = prog.as_libbpf_object();
    // SAFETY: `raw` is a loaded program of a live object; a NULL opts asks for the defaults.
    let link = unsafe {
        match place {
            Place::Xdp => libbpf_sys::bpf_program__attach_xdp(raw.as_ptr(), index),
            _ => libbpf_sys::bpf_program__attach_tcx(raw.as_ptr(), index, std::ptr::null()),
        }
    };
    // SAFETY: libbpf_get_error accepts any pointer libbpf returned, NULL included.
    let err = unsafe { libbpf_sys::libbpf_get_error(link.cast()) };
    match (NonNull::new(link), err) {
        // SAFETY: a non-NULL link without error is ours to own and destroy.
        (Some(link), 0) => Ok(unsafe { Link::from_ptr(link) }),
        (_, err) => Err(i32::try_from(-err).unwrap_or(libc::EINVAL)),
    }
}

/// The line for a program attached on the receiving end: XDP's mode as the kernel reports it.
fn describe(place: Place, name: &str, ifname: &str) -> String {
    match place {
        Place::Xdp => {
            let mode = xdp_mode(ifname);
            // Only a native XDP program moves veth to its NAPI receive path.
            let apart = MEASURED_APART.load(Ordering::Relaxed);
            let note = match mode {
                Some(NATIVE) if apart => "; veth moves to its XDP (NAPI) receive path for any native XDP program: the trivial arm measures that switch apart, and the program's own cost is taken against it",
                Some(NATIVE) => "; veth moves to its XDP (NAPI) receive path for any native XDP program, which a delta against nothing attached includes: compare with a trivial XDP program (--load xdp_0.bpf.o --compare yours.bpf.o; hook --write-objects DIR writes xdp_0.bpf.o) for this program's own cost",
                _ => "",
            };
            format!(
                "attached {name} to XDP of {ifname} in {} mode{note}",
                mode.unwrap_or("an unknown")
            )
        }
        _ => format!("attached {name} to tcx ingress of {ifname}"),
    }
}

/// How the native XDP mode is named.
const NATIVE: &str = "native (driver)";

/// The XDP mode of `ifname` in this thread's namespace: native (driver) or generic (skb).
fn xdp_mode(ifname: &str) -> Option<&'static str> {
    let index = ifindex(ifname)?;
    // SAFETY: a zeroed opts with its size set is what bpf_xdp_query expects.
    let mut opts: libbpf_sys::bpf_xdp_query_opts = unsafe { std::mem::zeroed() };
    opts.sz = size_of::<libbpf_sys::bpf_xdp_query_opts>() as libbpf_sys::size_t;
    // SAFETY: querying an interface into opts we own.
    if unsafe { libbpf_sys::bpf_xdp_query(index, 0, &mut opts) } != 0 {
        return None;
    }
    match u32::from(opts.attach_mode) {
        libbpf_sys::XDP_ATTACHED_DRV => Some(NATIVE),
        libbpf_sys::XDP_ATTACHED_SKB => Some("generic (skb)"),
        _ => None,
    }
}

/// The index of interface `ifname` in this thread's namespace.
fn ifindex(ifname: &str) -> Option<i32> {
    let c = CString::new(ifname).ok()?;
    // SAFETY: a NUL-terminated name we own.
    let index = unsafe { libc::if_nametoindex(c.as_ptr()) };
    i32::try_from(index).ok().filter(|i| *i > 0)
}

/// The kernel's own `ENOTSUPP` (not the C library's `ENOTSUP`), which BPF calls return.
const KERNEL_ENOTSUPP: i32 = 524;

/// What to say when attaching to the target failed with `errno`.
pub fn attach_failure(section: &str, errno: i32) -> Option<String> {
    let place = Place::of_section(section)?;
    let unsupported = matches!(errno, libc::EINVAL | libc::EOPNOTSUPP | KERNEL_ENOTSUPP);
    match place {
        Place::TcxIngress | Place::TcxEgress if unsupported => Some(format!(
            "this kernel has no tcx links (they came in 6.6), which a {section} program is attached with here"
        )),
        Place::Netfilter if unsupported => Some(
            "this kernel has no netfilter BPF links (they came in 6.4): a netfilter program cannot be attached here".to_string(),
        ),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sections_find_their_place() {
        assert_eq!(Place::of_section("xdp"), Some(Place::Xdp));
        assert_eq!(Place::of_section("xdp.frags"), Some(Place::Xdp));
        assert_eq!(Place::of_section("tcx/ingress"), Some(Place::TcxIngress));
        assert_eq!(Place::of_section("tc/ingress"), Some(Place::TcxIngress));
        assert_eq!(Place::of_section("tc"), Some(Place::TcIngress));
        assert_eq!(Place::of_section("classifier"), Some(Place::TcIngress));
        assert_eq!(Place::of_section("tcx/egress"), Some(Place::TcxEgress));
        assert_eq!(
            Place::of_section("tracepoint/syscalls/sys_enter_openat"),
            None
        );
        assert_eq!(
            Place::of_section("cgroup_skb/egress"),
            Some(Place::CgroupSkb)
        );
        assert_eq!(
            Place::of_section("cgroup_skb/ingress"),
            Some(Place::CgroupSkb)
        );
        assert_eq!(Place::of_section("socket"), Some(Place::SocketFilter));
        for cgroup_sock in ["cgroup/sock_create", "cgroup/sock", "cgroup/connect4"] {
            assert_eq!(Place::of_section(cgroup_sock), Some(Place::CgroupSock));
        }
        assert_eq!(Place::of_section("netfilter"), Some(Place::Netfilter));
        assert_eq!(Place::of_section("cgroup/sock_release"), None);
        assert_eq!(Place::of_section("sk_msg"), None);
    }

    #[test]
    fn without_a_target_nothing_is_attached_here() {
        assert!(target().is_none());
        let guard = TargetGuard::install(PacketTarget {
            netns: "/run/netns/ebpf-prof-1-0".into(),
            peer_if: "ep1p0".into(),
            host_if: "ep1h0".into(),
            cgroup: "/sys/fs/cgroup/ebpf-prof-1-0".into(),
            socket_handover: "/run/ebpf-prof/ebpf-prof-1-0.socket".into(),
        });
        assert_eq!(target().unwrap().peer_if, "ep1p0");
        drop(guard);
        assert!(target().is_none());
    }
}
