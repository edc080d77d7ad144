//! The loopback sockets the socket operations share: a socket bound to an ephemeral port of
//! 127.0.0.1 and its address, RST on close, and the raw calls' error checks. Everything here
//! runs before or after the timed span.

use anyhow::Result;
use std::mem::size_of;

/// The length of a `sockaddr_in`, as the socket calls take it.
pub const ADDR_LEN: libc::socklen_t = size_of::<libc::sockaddr_in>() as libc::socklen_t;

/// The error of the last failed call, naming it.
pub fn os_err(what: &str) -> anyhow::Error {
    anyhow::anyhow!("{what}: {}", std::io::Error::last_os_error())
}

/// `ret` when it is not negative, else the last error naming `what`.
pub fn check(ret: i32, what: &str) -> Result<i32> {
    if ret < 0 {
        return Err(os_err(what));
    }
    Ok(ret)
}

/// A socket of `kind` (`SOCK_STREAM`, `SOCK_DGRAM`, with flags) bound to 127.0.0.1 on a port
/// the kernel picks, and the address it got.
pub fn bound(kind: i32) -> Result<(i32, libc::sockaddr_in)> {
    // SAFETY: plain socket calls on an fd we own; every pointer is to a live local.
    unsafe {
        let fd = check(
            libc::socket(libc::AF_INET, kind | libc::SOCK_CLOEXEC, 0),
            "socket",
        )?;
        let mut addr: libc::sockaddr_in = std::mem::zeroed();
        addr.sin_family = libc::AF_INET as libc::sa_family_t;
        addr.sin_addr.s_addr = u32::from_be_bytes([127, 0, 0, 1]).to_be();
        let bound = check(
            libc::bind(fd, (&raw const addr).cast(), ADDR_LEN),
            "bind 127.0.0.1",
        );
        let mut got_len = ADDR_LEN;
        let named = bound.and_then(|_| {
            check(
                libc::getsockname(fd, (&raw mut addr).cast(), &mut got_len),
                "getsockname",
            )
        });
        if let Err(e) = named {
            libc::close(fd);
            return Err(e);
        }
        Ok((fd, addr))
    }
}

/// Make `fd` close with a reset (SO_LINGER 0): no TIME_WAIT, so a loop of connections does not
/// run out of ports.
#[inline(always)]
pub fn reset_on_close(fd: i32) {
    let linger = libc::linger {
        l_onoff: 1,
        l_linger: 0,
    };
    // SAFETY: setting an option on an fd we own from a live local.
    unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_LINGER,
            (&raw const linger).cast(),
            size_of::<libc::linger>() as libc::socklen_t,
        );
    }
}

/// A TCP socket made to close with a reset, or -1.
#[inline(always)]
pub fn tcp_client() -> i32 {
    // SAFETY: making a socket; the fd is ours.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0) };
    if fd >= 0 {
        reset_on_close(fd);
    }
    fd
}

/// Close `fd` when it is one.
#[inline(always)]
pub fn close(fd: i32) {
    if fd >= 0 {
        // SAFETY: closing an fd this bench made and nobody else holds.
        unsafe { libc::close(fd) };
    }
}
