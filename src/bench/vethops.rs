//! The packet operations over a veth pair into a private network namespace (made by
//! `netpath::VethPair`, named to the bench with `--netns`): `udp-veth` times a `sendto(2)` of a
//! UDP datagram from this namespace to a socket bound in the private one, and the blocking
//! `recvfrom(2)` that takes it off that socket, on one thread. The receiving socket is made
//! inside the namespace (`setns`, then back): a socket keeps the namespace it was made in.
//!
//! Both calls are in the span because the receive side of a veth does not always run inside
//! `sendto`: with an XDP program on the peer, veth hands the packet to the peer's NAPI poll,
//! which may run after the call returns (in softirq on return, or in ksoftirqd). Timing only
//! the send would bill the receive path, and the program, to nobody. The span ends when the
//! datagram has been delivered, whatever ran it.

use super::op::Op;
use super::sock::{self, ADDR_LEN};
use crate::error::usage;
use anyhow::{bail, Context, Result};
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::Path;

/// Bytes in a datagram.
pub(super) const DATAGRAM: usize = 8;

/// Where `ip netns` keeps the namespaces it names.
pub(super) const NETNS_DIR: &str = "/run/netns";

/// How long the timed receive waits for a datagram that never comes (a program dropped it):
/// the sample shows the wait instead of the loop hanging.
pub(super) const RECEIVE_TIMEOUT_MS: i64 = 200;

/// Where the run hands the bench a socket filter to attach to its receiving socket
/// (`SO_ATTACH_BPF`) when it makes the socket, at the start of each round: the run attaches the
/// filter for a round by writing the program's id there and detaches it by removing the file,
/// as the bench's sockets are its own. The file is in the tool's root-only state directory.
pub fn socket_filter_handover(netns: &str) -> std::path::PathBuf {
    crate::host::Host::live()
        .path(crate::host::recovery::STATE_DIR)
        .join(format!("{netns}.socket"))
}

/// Attach the socket filter handed over for `netns`, if one is, to `socket`.
pub(super) fn attach_handed_over_filter(netns: &str, socket: i32) -> Result<()> {
    let path = socket_filter_handover(netns);
    if std::fs::symlink_metadata(&path).is_err() {
        return Ok(());
    }
    let unreadable = || format!("cannot read the socket filter's id from {}", path.display());
    let bytes = crate::host::recovery::read_checked(&path).with_context(unreadable)?;
    let id: u32 = std::str::from_utf8(&bytes)
        .ok()
        .and_then(|text| text.trim().parse().ok())
        .with_context(unreadable)?;
    // SAFETY: plain syscall wrapper; a non-negative return is a new fd we own.
    let prog = unsafe { libbpf_rs::libbpf_sys::bpf_prog_get_fd_by_id(id) };
    if prog < 0 {
        bail!(
            "cannot open the socket filter (program id {id}) named in {}",
            path.display()
        );
    }
    // SAFETY: setting an option on our socket from a live local; then closing our fd (the
    // socket keeps its own reference to the program).
    let attached = unsafe {
        let ret = libc::setsockopt(
            socket,
            libc::SOL_SOCKET,
            libc::SO_ATTACH_BPF,
            (&raw const prog).cast(),
            size_of::<i32>() as libc::socklen_t,
        );
        libc::close(prog);
        ret
    };
    sock::check(attached, "SO_ATTACH_BPF").map(|_| ())
}

/// Whether `name` is a namespace name the tool makes (`ebpf-prof-PID-N`); the bench enters no
/// other.
pub fn valid_netns_name(name: &str) -> bool {
    let Some(rest) = name.strip_prefix("ebpf-prof-") else {
        return false;
    };
    let digits = |s: &str| !s.is_empty() && s.len() <= 10 && s.bytes().all(|b| b.is_ascii_digit());
    rest.split_once('-')
        .is_some_and(|(pid, counter)| digits(pid) && digits(counter))
}

/// The file of namespace `netns`, refused unless it is a name the tool makes.
pub(super) fn netns_path(netns: &str) -> Result<std::path::PathBuf> {
    if !valid_netns_name(netns) {
        return Err(usage(format!(
            "--netns {netns:?} is not a namespace ebpf-prof made: leave --netns out and the bench makes one"
        )));
    }
    Ok(Path::new(NETNS_DIR).join(netns))
}

/// Set `SO_RCVTIMEO` on `fd`: a receive that waits longer than [`RECEIVE_TIMEOUT_MS`] fails.
pub(super) fn receive_timeout(fd: i32) -> Result<i32> {
    let timeout = libc::timeval {
        tv_sec: 0,
        tv_usec: RECEIVE_TIMEOUT_MS * 1000,
    };
    // SAFETY: setting an option on an fd we own from a live local.
    let set = unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_RCVTIMEO,
            (&raw const timeout).cast(),
            size_of::<libc::timeval>() as libc::socklen_t,
        )
    };
    sock::check(set, "SO_RCVTIMEO")
}

/// `sendto` of a datagram to the peer namespace, then the `recvfrom` that receives it.
pub struct UdpVeth {
    sender: i32,
    receiver: i32,
    peer: libc::sockaddr_in,
    buf: [u8; DATAGRAM],
    from: libc::sockaddr_in,
    from_len: libc::socklen_t,
}

impl UdpVeth {
    /// The sockets, the receiver made inside namespace `netns`, and one datagram sent and
    /// received to prove the path works.
    pub fn new(netns: &str) -> Result<UdpVeth> {
        let (receiver, peer) = in_namespace(&netns_path(netns)?, || bound_here(libc::SOCK_DGRAM))?;
        // SAFETY: making a socket; the fd is ours.
        let sender =
            unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
        let mut op = UdpVeth {
            sender,
            receiver,
            peer,
            buf: *b"ebpfprof",
            // SAFETY: a zeroed sockaddr_in is a valid buffer for the kernel to fill.
            from: unsafe { std::mem::zeroed() },
            from_len: ADDR_LEN,
        };
        sock::check(sender, "socket")?;
        attach_handed_over_filter(netns, op.receiver)?;
        if op.run() < 0 {
            bail!(
                "the UDP datagram sent over the veth pair into {netns} did not arrive: {}",
                std::io::Error::last_os_error()
            );
        }
        Ok(op)
    }
}

impl Op for UdpVeth {
    #[inline(always)]
    fn setup(&mut self) {
        self.from_len = ADDR_LEN;
    }

    #[inline(always)]
    fn run(&mut self) -> i64 {
        // SAFETY: sending from and receiving into buffers we own, sizes given, on our sockets.
        unsafe {
            let sent = libc::syscall(
                libc::SYS_sendto,
                self.sender,
                self.buf.as_ptr(),
                DATAGRAM,
                0,
                &raw const self.peer,
                ADDR_LEN,
            );
            if sent < 0 {
                return sent;
            }
            libc::syscall(
                libc::SYS_recvfrom,
                self.receiver,
                self.buf.as_mut_ptr(),
                DATAGRAM,
                0,
                &raw mut self.from,
                &raw mut self.from_len,
            )
        }
    }

    #[inline(always)]
    fn cleanup(&mut self, _ret: i64) {}

    /// The loop makes no call outside the span.
    #[inline(always)]
    fn cleanup_without_run(&mut self) {}
}

impl Drop for UdpVeth {
    fn drop(&mut self) {
        sock::close(self.sender);
        sock::close(self.receiver);
    }
}

/// Run `make` with this thread in the network namespace at `path`, then come back.
pub fn in_namespace<T>(path: &Path, make: impl FnOnce() -> Result<T>) -> Result<T> {
    let open = |p: &Path| {
        std::fs::File::open(p)
            .map(OwnedFd::from)
            .with_context(|| format!("cannot open {}", p.display()))
    };
    let home = open(Path::new("/proc/thread-self/ns/net"))?;
    let there = open(path)?;
    // SAFETY: setns on a namespace fd we hold; this thread alone moves.
    let entered = unsafe { libc::setns(there.as_raw_fd(), libc::CLONE_NEWNET) };
    if entered < 0 {
        return Err(sock::os_err(&format!("setns {}", path.display())));
    }
    let made = make();
    // SAFETY: as above, back to the namespace this thread started in.
    if unsafe { libc::setns(home.as_raw_fd(), libc::CLONE_NEWNET) } < 0 {
        // Staying in the private namespace would send every later packet from there.
        return Err(sock::os_err(
            "setns back to the bench's own network namespace",
        ));
    }
    made
}

/// A blocking socket of `kind` (`SOCK_DGRAM`, `SOCK_STREAM`) bound to the namespace's first
/// IPv4 address that is not loopback on a port the kernel picks, with a receive timeout, and
/// its address.
pub(super) fn bound_here(kind: i32) -> Result<(i32, libc::sockaddr_in)> {
    let address = first_ipv4()?;
    // SAFETY: plain socket calls on an fd we own; every pointer is to a live local.
    unsafe {
        let fd = sock::check(
            libc::socket(libc::AF_INET, kind | libc::SOCK_CLOEXEC, 0),
            "socket",
        )?;
        let mut addr: libc::sockaddr_in = std::mem::zeroed();
        addr.sin_family = libc::AF_INET as libc::sa_family_t;
        addr.sin_addr.s_addr = u32::from(address).to_be();
        let mut len = ADDR_LEN;
        let ready = receive_timeout(fd)
            .and_then(|_| sock::check(libc::bind(fd, (&raw const addr).cast(), ADDR_LEN), "bind"))
            .and_then(|_| {
                sock::check(
                    libc::getsockname(fd, (&raw mut addr).cast(), &mut len),
                    "getsockname",
                )
            });
        if let Err(e) = ready {
            libc::close(fd);
            return Err(e);
        }
        Ok((fd, addr))
    }
}

/// The first IPv4 address of this thread's namespace that is not loopback.
pub(super) fn first_ipv4() -> Result<std::net::Ipv4Addr> {
    let mut list: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: getifaddrs fills a list we free below.
    if unsafe { libc::getifaddrs(&mut list) } < 0 {
        return Err(sock::os_err("getifaddrs"));
    }
    let mut found = None;
    let mut entry = list;
    while !entry.is_null() {
        // SAFETY: entry is a node of the list getifaddrs made, not yet freed.
        let node = unsafe { &*entry };
        let family = match node.ifa_addr.is_null() {
            true => -1,
            // SAFETY: a non-null ifa_addr points to a sockaddr of at least its family field.
            false => i32::from(unsafe { (*node.ifa_addr).sa_family }),
        };
        if family == libc::AF_INET {
            // SAFETY: an AF_INET address is a sockaddr_in.
            let sin = unsafe { &*node.ifa_addr.cast::<libc::sockaddr_in>() };
            let address = std::net::Ipv4Addr::from(u32::from_be(sin.sin_addr.s_addr));
            if !address.is_loopback() {
                found = Some(address);
                break;
            }
        }
        entry = node.ifa_next;
    }
    // SAFETY: freeing the list getifaddrs made, once.
    unsafe { libc::freeifaddrs(list) };
    found.context("the network namespace has no IPv4 address (was it made by ebpf-prof?)")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_tools_namespaces_are_entered() {
        assert!(valid_netns_name("ebpf-prof-1234-0"));
        assert!(!valid_netns_name("ebpf-prof-1234"));
        assert!(!valid_netns_name("ebpf-prof-12-0/../../x"));
        assert!(!valid_netns_name("other"));
        assert!(!valid_netns_name("ebpf-prof--0"));
    }
}
