//! The `connect` operation: TCP connect to a loopback listener the bench opens itself, the
//! sibling question for socket hooks (cgroup/connect4, sock_ops). Only the connect(2) is timed;
//! making the socket, closing it with RST (SO_LINGER 0: no TIME_WAIT, so 100000 connects do not
//! run out of ports) and accepting on the listener side all happen outside the span.

use super::op::Op;
use super::sock::{self, ADDR_LEN};
use anyhow::{bail, Result};

/// A listener on 127.0.0.1 and the address to connect to.
pub struct Connect {
    listener: i32,
    addr: libc::sockaddr_in,
    fd: i32,
}

impl Connect {
    /// Open the listener on an ephemeral loopback port and connect once to prove it works.
    pub fn new() -> Result<Connect> {
        let (listener, addr) = sock::bound(libc::SOCK_STREAM | libc::SOCK_NONBLOCK)?;
        let mut c = Connect {
            listener,
            addr,
            fd: -1,
        };
        // SAFETY: listen on the socket we just bound.
        sock::check(unsafe { libc::listen(listener, 1024) }, "listen")?;
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
        self.fd = sock::tcp_client();
    }

    #[inline(always)]
    fn run(&mut self) -> i64 {
        // SAFETY: the raw connect syscall on our socket with a valid sockaddr_in.
        unsafe { libc::syscall(libc::SYS_connect, self.fd, &raw const self.addr, ADDR_LEN) }
    }

    #[inline(always)]
    fn cleanup(&mut self, _ret: i64) {
        sock::close(self.fd);
        self.fd = -1;
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
        sock::close(self.fd);
        sock::close(self.listener);
    }
}
