//! `tcp-veth`: a data segment on an established TCP connection through the veth pair into the
//! private network namespace. The span holds one `sendto(2)` of 8 bytes on the connection's
//! sending end (in the bench's namespace) and the blocking `recvfrom(2)` that takes them off the
//! accepted end (made inside the private namespace), on one thread, as `udp-veth` holds a
//! datagram's send and delivery.
//!
//! This is what a program filtering TCP traffic sees most: a segment of a flow that is already
//! up, once per segment at XDP and tc/tcx ingress on the peer, at a socket filter on the
//! receiving socket, at a cgroup_skb egress program on its way out. The connection is made (the
//! handshake crosses the pair) when the timed body is made, at the start of each round, outside
//! every span. `TCP_NODELAY` sends each 8 bytes at once as a segment of its own, so one timed
//! call is one segment whatever the receiver's delayed acknowledgements do. The peer's ACKs
//! travel the other way: they pass the peer's egress and this side's ingress (a cgroup_skb
//! program sees them too, the accepted socket being the bench's), never the peer's XDP or
//! ingress hooks; they may be sent inside the span or after it.

use super::op::Op;
use super::sock::{self, ADDR_LEN};
use super::vethops::{
    attach_handed_over_filter, bound_here, in_namespace, netns_path, receive_timeout, DATAGRAM,
};
use anyhow::{bail, Result};

/// Connections the listener holds before they are accepted: one at a time is made.
const BACKLOG: i32 = 1;

/// How long the connect waits for the handshake (its `SO_SNDTIMEO`): a program that drops the
/// handshake's segments makes the set-up fail instead of waiting for TCP's retries.
const CONNECT_TIMEOUT_S: libc::time_t = 2;

/// `sendto` of 8 bytes on an established connection into the peer namespace, then the
/// `recvfrom` there that receives them.
pub struct TcpVeth {
    sender: i32,
    receiver: i32,
    buf: [u8; DATAGRAM],
}

impl TcpVeth {
    /// The connection: a listener made inside namespace `netns`, a connect to it from here, the
    /// accepted end with its receive timeout (and the socket filter handed over, if any); then 8
    /// bytes sent and received to prove the path works.
    pub fn new(netns: &str) -> Result<TcpVeth> {
        let (listener, address) = in_namespace(&netns_path(netns)?, || {
            let (fd, address) = bound_here(libc::SOCK_STREAM)?;
            // SAFETY: listen on the socket we just bound.
            match sock::check(unsafe { libc::listen(fd, BACKLOG) }, "listen") {
                Ok(_) => Ok((fd, address)),
                Err(e) => {
                    sock::close(fd);
                    Err(e)
                }
            }
        })?;
        let connected = connect_and_accept(listener, &address);
        sock::close(listener);
        let (sender, receiver) = connected?;
        let mut op = TcpVeth {
            sender,
            receiver,
            buf: *b"ebpfprof",
        };
        receive_timeout(op.receiver)?;
        attach_handed_over_filter(netns, op.receiver)?;
        if op.run() != DATAGRAM as i64 {
            bail!(
                "the 8 bytes sent on a TCP connection over the veth pair into {netns} did not arrive: {}",
                std::io::Error::last_os_error()
            );
        }
        Ok(op)
    }
}

/// A TCP socket of this namespace connected to `address` (`TCP_NODELAY`, reset on close), and
/// the end `listener` accepts.
fn connect_and_accept(listener: i32, address: &libc::sockaddr_in) -> Result<(i32, i32)> {
    let sender = sock::check(sock::tcp_client(), "socket")?;
    let on: i32 = 1;
    let timeout = libc::timeval {
        tv_sec: CONNECT_TIMEOUT_S,
        tv_usec: 0,
    };
    // SAFETY: setting options on our socket from live locals, connecting it to a valid
    // sockaddr_in (blocking, bounded by its send timeout: the handshake crosses the pair), and
    // accepting on our listener, whose receive timeout bounds the wait.
    let accepted = unsafe {
        let nodelay = libc::setsockopt(
            sender,
            libc::IPPROTO_TCP,
            libc::TCP_NODELAY,
            (&raw const on).cast(),
            size_of::<i32>() as libc::socklen_t,
        );
        let bounded = libc::setsockopt(
            sender,
            libc::SOL_SOCKET,
            libc::SO_SNDTIMEO,
            (&raw const timeout).cast(),
            size_of::<libc::timeval>() as libc::socklen_t,
        );
        sock::check(nodelay, "TCP_NODELAY")
            .and_then(|_| sock::check(bounded, "SO_SNDTIMEO"))
            .and_then(|_| {
                let connected = libc::connect(
                    sender,
                    (address as *const libc::sockaddr_in).cast(),
                    ADDR_LEN,
                );
                sock::check(connected, "connect over the veth pair")
            })
            .and_then(|_| {
                let fd = libc::accept4(
                    listener,
                    std::ptr::null_mut(),
                    std::ptr::null_mut(),
                    libc::SOCK_CLOEXEC,
                );
                sock::check(fd, "accept in the private namespace")
            })
    };
    match accepted {
        Ok(receiver) => {
            sock::reset_on_close(receiver);
            Ok((sender, receiver))
        }
        Err(e) => {
            sock::close(sender);
            Err(e)
        }
    }
}

impl Op for TcpVeth {
    #[inline(always)]
    fn run(&mut self) -> i64 {
        // SAFETY: sending from and receiving into a buffer we own, its size given, on our
        // connected sockets.
        unsafe {
            let sent = libc::syscall(
                libc::SYS_sendto,
                self.sender,
                self.buf.as_ptr(),
                DATAGRAM,
                0,
                std::ptr::null::<libc::sockaddr>(),
                0,
            );
            if sent < 0 {
                return sent;
            }
            libc::syscall(
                libc::SYS_recvfrom,
                self.receiver,
                self.buf.as_mut_ptr(),
                DATAGRAM,
                libc::MSG_WAITALL,
                std::ptr::null_mut::<libc::sockaddr>(),
                std::ptr::null_mut::<libc::socklen_t>(),
            )
        }
    }

    #[inline(always)]
    fn cleanup(&mut self, _ret: i64) {}

    /// The loop makes no call outside the span.
    #[inline(always)]
    fn cleanup_without_run(&mut self) {}
}

impl Drop for TcpVeth {
    fn drop(&mut self) {
        sock::close(self.sender);
        sock::close(self.receiver);
    }
}
