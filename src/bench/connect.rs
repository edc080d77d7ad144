//! The `connect` operation: TCP connect to a loopback listener the bench opens itself, the
//! sibling question for socket hooks (cgroup/connect4, sock_ops). Only the connect(2) is timed;
//! making the socket, closing it with RST (SO_LINGER 0: no TIME_WAIT, so 100000 connects do not
//! run out of ports) and accepting on the listener side all happen outside the span.

use super::op::Op;
use anyhow::{bail, Result};
use std::mem::size_of;

/// A listener on 127.0.0.1 and the address to connect to.
pub struct Connect {
    listener: i32,
    addr: libc::sockaddr_in,
    fd: i32,
}

fn os_err(what: &str) -> anyhow::Error {
    anyhow::anyhow!("{what}: {}", std::io::Error::last_os_error())
}

fn check(ret: i32, what: &str) -> Result<i32> {
    if ret < 0 {
        return Err(os_err(what));
    }
    Ok(ret)
}

impl Connect {
    /// Open the listener on an ephemeral loopback port and connect once to prove it works.
    pub fn new() -> Result<Connect> {
        // SAFETY: plain socket calls on fds we own; every pointer is to a live local.
        unsafe {
            let l = check(
                libc::socket(
                    libc::AF_INET,
                    libc::SOCK_STREAM | libc::SOCK_CLOEXEC | libc::SOCK_NONBLOCK,
                    0,
                ),
                "socket",
            )?;
            let mut addr: libc::sockaddr_in = std::mem::zeroed();
            addr.sin_family = libc::AF_INET as libc::sa_family_t;
            addr.sin_addr.s_addr = u32::from_be_bytes([127, 0, 0, 1]).to_be();
            let len = size_of::<libc::sockaddr_in>() as libc::socklen_t;
            check(
                libc::bind(l, (&raw const addr).cast(), len),
                "bind 127.0.0.1",
            )?;
            check(libc::listen(l, 1024), "listen")?;
            let mut got_len = len;
            check(
                libc::getsockname(l, (&raw mut addr).cast(), &mut got_len),
                "getsockname",
            )?;
            let mut c = Connect {
                listener: l,
                addr,
                fd: -1,
            };
            c.setup();
            let ret = c.run();
            if ret < 0 {
                bail!(
                    "cannot connect to the bench's own loopback listener: {}",
                    std::io::Error::last_os_error()
                );
            }
            c.cleanup(ret);
            Ok(c)
        }
    }

    fn drain(&mut self) {
        // SAFETY: accept on our non-blocking listener; returned fds are closed at once.
        unsafe {
            loop {
                let a = libc::accept4(
                    self.listener,
                    std::ptr::null_mut(),
                    std::ptr::null_mut(),
                    libc::SOCK_CLOEXEC,
                );
                if a < 0 {
                    break;
                }
                libc::close(a);
            }
        }
    }
}

impl Op for Connect {
    #[inline(always)]
    fn setup(&mut self) {
        // SAFETY: making a socket and setting SO_LINGER on it, both on values we own.
        unsafe {
            self.fd = libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0);
            let linger = libc::linger {
                l_onoff: 1,
                l_linger: 0,
            };
            libc::setsockopt(
                self.fd,
                libc::SOL_SOCKET,
                libc::SO_LINGER,
                (&raw const linger).cast(),
                size_of::<libc::linger>() as libc::socklen_t,
            );
        }
    }

    #[inline(always)]
    fn run(&mut self) -> i64 {
        // SAFETY: the raw connect syscall on our socket with a valid sockaddr_in.
        unsafe {
            libc::syscall(
                libc::SYS_connect,
                self.fd,
                (&raw const self.addr),
                size_of::<libc::sockaddr_in>() as libc::socklen_t,
            )
        }
    }

    #[inline(always)]
    fn cleanup(&mut self, _ret: i64) {
        if self.fd >= 0 {
            // SAFETY: closing the socket made in setup (RST thanks to SO_LINGER 0).
            unsafe { libc::close(self.fd) };
            self.fd = -1;
        }
        self.drain();
    }

    #[inline(always)]
    fn cleanup_without_run(&mut self) {
        // The socket made in setup is closed unconnected: nothing to accept on the listener.
        self.cleanup(0);
    }
}

impl Drop for Connect {
    fn drop(&mut self) {
        self.drain();
        // SAFETY: closing fds we own.
        unsafe {
            if self.fd >= 0 {
                libc::close(self.fd);
            }
            libc::close(self.listener);
        }
    }
}
