//! The UDP and accept operations, on loopback sockets of the bench's own: `sendto` (the
//! datagram read back after the span with read(2), so that no recvfrom hook runs in its loop),
//! `recvfrom` (the datagram sent before the span with write(2) on a connected socket, so that no
//! sendto hook runs in its loop; the sender's address asked for, as the cgroup `recvmsg4` hook
//! needs) and `accept` (a connection made before the span, both ends closed with a reset after
//! it). What each reaches is in operation.rs.

use super::op::Op;
use super::sock::{self, ADDR_LEN};
use anyhow::{bail, Result};

/// Bytes in a datagram.
const DATAGRAM: usize = 8;

/// A receiving UDP socket on loopback and a sending one.
struct UdpPair {
    receiver: i32,
    addr: libc::sockaddr_in,
    sender: i32,
}

impl UdpPair {
    /// A non-blocking receiver bound to a loopback port, and a sender (connected to it when
    /// `connected`).
    fn new(connected: bool) -> Result<UdpPair> {
        let (receiver, addr) = sock::bound(libc::SOCK_DGRAM | libc::SOCK_NONBLOCK)?;
        // SAFETY: making a socket; the fd is ours.
        let sender = unsafe {
            libc::socket(
                libc::AF_INET,
                libc::SOCK_DGRAM | libc::SOCK_CLOEXEC | libc::SOCK_NONBLOCK,
                0,
            )
        };
        let pair = UdpPair {
            receiver,
            addr,
            sender,
        };
        sock::check(sender, "socket")?;
        if connected {
            // SAFETY: connecting our socket to a valid sockaddr_in.
            let ret = unsafe { libc::connect(sender, (&raw const pair.addr).cast(), ADDR_LEN) };
            sock::check(ret, "connect")?;
        }
        Ok(pair)
    }

    /// Read one datagram off the receiver (EAGAIN when there is none).
    #[inline(always)]
    fn read_one(&self, buf: &mut [u8; DATAGRAM]) -> isize {
        // SAFETY: reading into a buffer we own, at most its size.
        unsafe { libc::read(self.receiver, buf.as_mut_ptr().cast(), DATAGRAM) }
    }
}

impl Drop for UdpPair {
    fn drop(&mut self) {
        sock::close(self.sender);
        sock::close(self.receiver);
    }
}

/// `sendto(sender, buf, 8, 0, &addr, len)` to the receiver; read back after the span.
pub struct Sendto {
    pair: UdpPair,
    buf: [u8; DATAGRAM],
}

impl Sendto {
    /// The sockets, and one datagram sent and read back to prove they work.
    pub fn new() -> Result<Sendto> {
        let mut op = Sendto {
            pair: UdpPair::new(false)?,
            buf: *b"ebpfprof",
        };
        if op.run() < 0 {
            return Err(sock::os_err("sendto on loopback"));
        }
        if op.pair.read_one(&mut op.buf) < 0 {
            bail!("the datagram sent on loopback did not arrive");
        }
        Ok(op)
    }
}

impl Op for Sendto {
    #[inline(always)]
    fn run(&mut self) -> i64 {
        // SAFETY: sending from a buffer we own to a valid sockaddr_in.
        unsafe {
            libc::syscall(
                libc::SYS_sendto,
                self.pair.sender,
                self.buf.as_ptr(),
                DATAGRAM,
                0,
                &raw const self.pair.addr,
                ADDR_LEN,
            )
        }
    }

    #[inline(always)]
    fn cleanup(&mut self, _ret: i64) {
        self.pair.read_one(&mut self.buf);
    }

    #[inline(always)]
    fn cleanup_without_run(&mut self) {
        self.cleanup(0);
    }
}

/// `recvfrom(receiver, buf, 8, 0, &from, &len)` of a datagram written before the span.
pub struct Recvfrom {
    pair: UdpPair,
    buf: [u8; DATAGRAM],
    from: libc::sockaddr_in,
    from_len: libc::socklen_t,
}

impl Recvfrom {
    /// The sockets, and one datagram sent and received to prove they work.
    pub fn new() -> Result<Recvfrom> {
        let mut op = Recvfrom {
            pair: UdpPair::new(true)?,
            buf: *b"ebpfprof",
            // SAFETY: a zeroed sockaddr_in is a valid buffer for the kernel to fill.
            from: unsafe { std::mem::zeroed() },
            from_len: ADDR_LEN,
        };
        op.setup();
        if op.run() < 0 {
            return Err(sock::os_err("recvfrom on loopback"));
        }
        Ok(op)
    }
}

impl Op for Recvfrom {
    #[inline(always)]
    fn setup(&mut self) {
        self.from_len = ADDR_LEN;
        // SAFETY: writing from a buffer we own on our connected socket.
        unsafe { libc::write(self.pair.sender, self.buf.as_ptr().cast(), DATAGRAM) };
    }

    #[inline(always)]
    fn run(&mut self) -> i64 {
        // SAFETY: receiving into buffers we own, their sizes given.
        unsafe {
            libc::syscall(
                libc::SYS_recvfrom,
                self.pair.receiver,
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

    /// Without the timed recvfrom nothing reads the datagrams: once the receiver's buffer is
    /// full the kernel drops them, and each write still succeeds.
    #[inline(always)]
    fn cleanup_without_run(&mut self) {}
}

/// `accept(listener, NULL, NULL)` of a connection made before the span.
pub struct Accept {
    listener: i32,
    addr: libc::sockaddr_in,
    /// A bound socket that does not listen: connecting to its port is refused at once, the
    /// set-up's system calls without a connection left to accept (`bench --untimed-only`).
    refusing: i32,
    refusing_addr: libc::sockaddr_in,
    client: i32,
}

impl Accept {
    /// The listener, and one connection made and accepted to prove it works.
    pub fn new() -> Result<Accept> {
        let (listener, addr) = sock::bound(libc::SOCK_STREAM)?;
        let refused = sock::bound(libc::SOCK_STREAM);
        let mut op = Accept {
            listener,
            addr,
            refusing: refused.as_ref().map_or(-1, |r| r.0),
            refusing_addr: refused.as_ref().map_or(addr, |r| r.1),
            client: -1,
        };
        refused?;
        // SAFETY: listen on the socket we just bound.
        sock::check(unsafe { libc::listen(listener, 128) }, "listen")?;
        op.setup();
        let fd = op.run();
        if fd < 0 {
            return Err(sock::os_err("accept on loopback"));
        }
        op.cleanup(fd);
        Ok(op)
    }

    /// A client connected to `addr` (the connection is complete when connect returns: the
    /// loopback handshake runs inside it).
    #[inline(always)]
    fn connect_to(&mut self, addr: libc::sockaddr_in) {
        self.client = sock::tcp_client();
        // SAFETY: connecting our socket to a valid sockaddr_in.
        unsafe { libc::connect(self.client, (&raw const addr).cast(), ADDR_LEN) };
    }
}

impl Op for Accept {
    #[inline(always)]
    fn setup(&mut self) {
        self.connect_to(self.addr);
    }

    #[inline(always)]
    fn setup_without_run(&mut self) {
        self.connect_to(self.refusing_addr);
    }

    #[inline(always)]
    fn run(&mut self) -> i64 {
        // SAFETY: accept on our listener, no address asked for.
        unsafe {
            libc::syscall(
                libc::SYS_accept,
                self.listener,
                std::ptr::null_mut::<libc::sockaddr>(),
                std::ptr::null_mut::<libc::socklen_t>(),
            )
        }
    }

    #[inline(always)]
    fn cleanup(&mut self, ret: i64) {
        if let Ok(fd) = i32::try_from(ret) {
            sock::close(fd);
        }
        sock::close(self.client);
        self.client = -1;
    }

    #[inline(always)]
    fn cleanup_without_run(&mut self) {
        // The accepted fd's close(2), on no fd; then the client's.
        // SAFETY: closing -1 touches no fd.
        unsafe { libc::close(-1) };
        self.cleanup(-1);
    }
}

impl Drop for Accept {
    fn drop(&mut self) {
        sock::close(self.client);
        sock::close(self.refusing);
        sock::close(self.listener);
    }
}

/// `socket(AF_INET, SOCK_DGRAM, 0)`: a UDP socket made in the span, closed after it. A
/// `cgroup/sock_create` program of the bench's cgroup runs inside the call.
pub struct SocketCreate;

impl SocketCreate {
    /// Make one socket to prove it works.
    pub fn new() -> Result<SocketCreate> {
        let mut op = SocketCreate;
        let ret = op.run();
        if ret < 0 {
            return Err(sock::os_err("socket"));
        }
        op.cleanup(ret);
        Ok(op)
    }
}

impl Op for SocketCreate {
    #[inline(always)]
    fn run(&mut self) -> i64 {
        // SAFETY: the raw socket syscall; the fd returned is ours.
        unsafe {
            libc::syscall(
                libc::SYS_socket,
                libc::AF_INET,
                libc::SOCK_DGRAM | libc::SOCK_CLOEXEC,
                0,
            )
        }
    }

    #[inline(always)]
    fn cleanup(&mut self, ret: i64) {
        sock::close(ret as i32);
    }

    #[inline(always)]
    fn cleanup_without_run(&mut self) {
        // The close(2) the timed loop makes, on no fd: it reaches the hooks on syscall entry
        // and exit (failing with EBADF), as the loop's close does.
        // SAFETY: closing -1 touches no fd.
        unsafe { libc::close(-1) };
    }
}
