//! The catalogue of operations the harness can time: one entry per operation, with everything
//! said about it in one place (entry.rs says what each field means): its name, what one timed
//! call is, the hook points it reaches inside the timed span (tracepoints, LSM hooks, kernel
//! functions, socket and packet attach points), the calls its loop makes outside the span, what
//! it works on and needs, and how its timed body (a type implementing `Op`, in the file of its
//! kind) is made. `--op` and its help, `--op auto` ([`super::choose`]), the bench's dispatch,
//! and the table in docs/commands.md all read it: adding an operation is one entry here and its
//! timed body.
//!
//! What each one reaches was read off the kernel's source (6.x): the exec probe, for one, is an
//! `execve` of an executable file whose first bytes are printable text and no binary format's
//! magic. `do_execveat_common` opens it (`do_open_execat`: the `file_open` and
//! `inode_permission` LSM hooks), `bprm_execve` prepares the credentials (`cred_prepare`) and
//! calls `security_bprm_creds_for_exec`, `exec_binprm` calls `search_binary_handler`, which reads
//! the first bytes and calls `security_bprm_check` before it asks every format; each answers
//! `-ENOEXEC`, and as the first four bytes are printable no `binfmt-XXXX` module is requested
//! (`request_module` would start modprobe). The exec fails there with `ENOEXEC`, before the
//! point of no return: `sched_process_exec` and the LSM hooks of a successful exec
//! (`bprm_creds_from_file`, `bprm_committing_creds`, `bprm_committed_creds`) are not reached.
//!
//! That exec sets up a new memory map before the checks and takes about ten times as long as
//! one that fails at once, and a slower operation gives a wider interval. `exec-missing` is the
//! cheap one: an `execve` of a path that does not exist. `alloc_bprm` opens the file first
//! (`do_open_execat`), the path walk fails with `ENOENT`, and the call returns, past the syscall
//! tracepoints and little else. A hook on `sys_enter_execve` or `sys_exit_execve` alone is
//! timed on it; it comes before `exec` in the catalogue so that `--op auto` prefers it on a tie.

use super::entry::{catalogue, Entry, Network, Operand, Reach, Weight};
use super::{connect, fileops, netops, op, procops, tcpveth, vethops};

catalogue! {
    Openat {
        name: "openat",
        plural: "openats",
        what: "openat(2) of --path, closed after the span",
        weight: Light,
        operand: PathOrWorkingSet,
        network: Nothing,
        reach: Reach {
            syscall: "openat",
            tracepoints: &[],
            lsm: &["file_open", "inode_permission", "file_alloc_security"],
            functions: &[
                "do_sys_openat2",
                "do_filp_open",
                "path_openat",
                "vfs_open",
                "do_dentry_open",
                "security_file_open",
                "security_inode_permission",
            ],
            sockets: &[],
            outside: &["close"],
        },
        make: |setup| op::Openat::new(setup.paths()?, setup.start),
    },
    Connect {
        name: "connect",
        plural: "loopback TCP connects",
        what: "TCP connect(2) to a loopback listener, closed with RST after",
        weight: Heavy,
        operand: Nothing,
        network: Nothing,
        reach: Reach {
            syscall: "connect",
            tracepoints: &["inet_sock_set_state"],
            lsm: &["socket_connect"],
            functions: &[
                "__sys_connect",
                "inet_stream_connect",
                "__inet_stream_connect",
                "tcp_v4_connect",
                "tcp_connect",
                "security_socket_connect",
            ],
            sockets: &["connect4", "sockops"],
            outside: &["socket", "setsockopt", "close", "accept4"],
        },
        make: |setup| connect::Connect::new(),
    },
    ExecMissing {
        name: "exec-missing",
        plural: "execves of a missing path",
        what: "execve(2) of a path that does not exist (fails with ENOENT in its first lookup, before the LSM exec checks)",
        weight: Light,
        operand: Nothing,
        network: Nothing,
        reach: Reach {
            syscall: "execve",
            tracepoints: &[],
            lsm: &[],
            functions: &["do_execveat_common", "alloc_bprm", "do_open_execat"],
            sockets: &[],
            outside: &[],
        },
        make: |setup| procops::Exec::missing(),
    },
    Exec {
        name: "exec",
        plural: "failing execves",
        what: "execve(2) of a file no binary format accepts (fails with ENOEXEC after the LSM exec checks)",
        weight: Heavy,
        operand: Nothing,
        network: Nothing,
        reach: Reach {
            syscall: "execve",
            tracepoints: &[],
            lsm: &[
                "bprm_creds_for_exec",
                "bprm_check_security",
                "cred_prepare",
                "file_open",
                "inode_permission",
            ],
            functions: &[
                "do_execveat_common",
                "alloc_bprm",
                "bprm_execve",
                "do_open_execat",
                "exec_binprm",
                "search_binary_handler",
                "security_bprm_creds_for_exec",
                "security_bprm_check",
            ],
            sockets: &[],
            outside: &[],
        },
        make: |setup| procops::Exec::new(),
    },
    Fork {
        name: "fork",
        plural: "forks",
        what: "clone(2) of a child sharing the bench's memory (as vfork makes them) that exits at once, waited for after the span",
        weight: Heavy,
        operand: Nothing,
        network: Nothing,
        reach: Reach {
            syscall: "clone",
            tracepoints: &["sched_process_fork", "task_newtask", "sched_wakeup_new"],
            lsm: &["task_alloc", "cred_prepare"],
            functions: &[
                "kernel_clone",
                "copy_process",
                "wake_up_new_task",
                "security_task_alloc",
            ],
            sockets: &[],
            outside: &["wait4", "exit_group"],
        },
        make: |setup| procops::Fork::new(),
    },
    Stat {
        name: "stat",
        plural: "stats",
        what: "newfstatat(2) of --path",
        weight: Light,
        operand: Path,
        network: Nothing,
        reach: Reach {
            syscall: "newfstatat",
            tracepoints: &[],
            lsm: &["inode_getattr"],
            functions: &[
                "vfs_fstatat",
                "vfs_statx",
                "vfs_getattr",
                "security_inode_getattr",
            ],
            sockets: &[],
            outside: &[],
        },
        make: |setup| fileops::Stat::new(setup.path()?),
    },
    Read {
        name: "read",
        plural: "reads",
        what: "read(2) of 64 bytes of --path, rewound after the span",
        weight: Light,
        operand: Path,
        network: Nothing,
        reach: Reach {
            syscall: "read",
            tracepoints: &[],
            lsm: &["file_permission"],
            functions: &[
                "ksys_read",
                "vfs_read",
                "rw_verify_area",
                "security_file_permission",
            ],
            sockets: &[],
            outside: &["lseek"],
        },
        make: |setup| fileops::Read::new(setup.path()?),
    },
    Write {
        name: "write",
        plural: "writes to /dev/null",
        what: "write(2) of 1 byte to /dev/null",
        weight: Light,
        operand: Nothing,
        network: Nothing,
        reach: Reach {
            syscall: "write",
            tracepoints: &[],
            lsm: &["file_permission"],
            functions: &[
                "ksys_write",
                "vfs_write",
                "rw_verify_area",
                "security_file_permission",
            ],
            sockets: &[],
            outside: &[],
        },
        make: |setup| fileops::Write::new(),
    },
    Mmap {
        name: "mmap",
        plural: "mmaps",
        what: "mmap(2) of one anonymous page, unmapped after the span",
        weight: Light,
        operand: Nothing,
        network: Nothing,
        reach: Reach {
            syscall: "mmap",
            tracepoints: &[],
            lsm: &["mmap_file", "mmap_addr"],
            functions: &[
                "ksys_mmap_pgoff",
                "vm_mmap_pgoff",
                "do_mmap",
                "mmap_region",
                "security_mmap_file",
            ],
            sockets: &[],
            outside: &["munmap"],
        },
        make: |setup| anyhow::Ok(fileops::Mmap),
    },
    Unlink {
        name: "unlink",
        plural: "unlinks",
        what: "unlinkat(2) of a file made before the span",
        weight: Heavy,
        operand: Nothing,
        network: Nothing,
        reach: Reach {
            syscall: "unlinkat",
            tracepoints: &[],
            lsm: &["path_unlink", "inode_unlink"],
            functions: &[
                "do_unlinkat",
                "vfs_unlink",
                "security_path_unlink",
                "security_inode_unlink",
            ],
            sockets: &[],
            outside: &["openat", "close"],
        },
        make: |setup| fileops::Unlink::new(),
    },
    Sendto {
        name: "sendto",
        plural: "UDP sendtos",
        what: "sendto(2) of 8 bytes over UDP on loopback, read back after the span",
        weight: Light,
        operand: Nothing,
        network: Nothing,
        reach: Reach {
            syscall: "sendto",
            tracepoints: &["net_dev_queue", "net_dev_xmit", "netif_rx"],
            lsm: &["socket_sendmsg"],
            functions: &[
                "__sys_sendto",
                "sock_sendmsg",
                "udp_sendmsg",
                "security_socket_sendmsg",
            ],
            sockets: &["sendmsg4"],
            outside: &["read"],
        },
        make: |setup| netops::Sendto::new(),
    },
    Recvfrom {
        name: "recvfrom",
        plural: "UDP recvfroms",
        what: "recvfrom(2) of a UDP datagram sent on loopback before the span",
        weight: Light,
        operand: Nothing,
        network: Nothing,
        reach: Reach {
            syscall: "recvfrom",
            tracepoints: &[],
            lsm: &["socket_recvmsg"],
            functions: &[
                "__sys_recvfrom",
                "sock_recvmsg",
                "udp_recvmsg",
                "security_socket_recvmsg",
            ],
            sockets: &["recvmsg4"],
            outside: &["write"],
        },
        make: |setup| netops::Recvfrom::new(),
    },
    Accept {
        name: "accept",
        plural: "TCP accepts",
        what: "accept(2) of a loopback TCP connection made before the span",
        weight: Light,
        operand: Nothing,
        network: Nothing,
        reach: Reach {
            syscall: "accept",
            tracepoints: &[],
            lsm: &["socket_accept"],
            functions: &[
                "__sys_accept4",
                "do_accept",
                "inet_accept",
                "inet_csk_accept",
                "security_socket_accept",
            ],
            sockets: &[],
            outside: &["socket", "setsockopt", "connect", "close"],
        },
        make: |setup| netops::Accept::new(),
    },
    /// `socket(2)`: the call a `cgroup/sock_create` program runs in (`inet_create` calls it
    /// once the socket exists). The run that attaches such a program makes the private
    /// network for its cgroup, which the bench runs in; the bench alone needs nothing.
    Socket {
        name: "socket",
        plural: "UDP sockets made",
        what: "socket(2) of a UDP socket (in the run's cgroup when it attaches cgroup programs), closed after the span",
        weight: Light,
        operand: Nothing,
        network: Cgroup,
        reach: Reach {
            syscall: "socket",
            tracepoints: &[],
            lsm: &["socket_create", "socket_post_create"],
            functions: &[
                "__sys_socket",
                "__sock_create",
                "inet_create",
                "security_socket_create",
            ],
            sockets: &["sock_create"],
            outside: &["close"],
        },
        make: |setup| netops::SocketCreate::new(),
    },
    /// The datagram leaves through the veth on this side (a cgroup `skb` egress program sees it
    /// on its way out) and is received on the peer inside the private namespace: XDP and tc/tcx
    /// ingress on the peer, then the receiving socket (a socket filter). The timed span holds
    /// `sendto` and `recvfrom`; the catalogue names the first.
    UdpVeth {
        name: "udp-veth",
        plural: "UDP round trips over veth",
        what: "sendto(2) of 8 bytes over UDP through a veth pair into a private network namespace, and the blocking recvfrom(2) there that receives it",
        weight: Heavy,
        operand: Nothing,
        network: Veth,
        reach: Reach {
            syscall: "sendto",
            tracepoints: &["net_dev_queue", "net_dev_xmit", "netif_receive_skb"],
            lsm: &["socket_sendmsg", "socket_recvmsg"],
            functions: &[
                "__sys_sendto",
                "udp_sendmsg",
                "veth_xmit",
                "__netif_receive_skb_core",
                "udp_rcv",
                "__sys_recvfrom",
                "udp_recvmsg",
            ],
            sockets: &[
                "xdp",
                "tc",
                "tcx",
                "skb",
                "socket",
                "netfilter",
                "sendmsg4",
                "recvmsg4",
            ],
            outside: &[],
        },
        make: |setup| vethops::UdpVeth::new(setup.netns()?),
    },
    /// One segment of an established connection through the same pair (tcpveth.rs): the
    /// segment passes what the datagram of `udp-veth` passes, once per timed call; the peer's
    /// ACKs go back the other way, past neither XDP nor tc/tcx ingress of the peer. After
    /// `udp-veth` so that `--op auto` keeps choosing that one for a packet program.
    TcpVeth {
        name: "tcp-veth",
        plural: "TCP segments over veth",
        what: "sendto(2) of 8 bytes on an established TCP connection (TCP_NODELAY, made before the round) through a veth pair into a private network namespace, and the blocking recvfrom(2) there that receives them",
        weight: Heavy,
        operand: Nothing,
        network: Veth,
        reach: Reach {
            syscall: "sendto",
            tracepoints: &["net_dev_queue", "net_dev_xmit", "netif_receive_skb"],
            lsm: &["socket_sendmsg", "socket_recvmsg", "socket_sock_rcv_skb"],
            functions: &[
                "__sys_sendto",
                "tcp_sendmsg",
                "tcp_write_xmit",
                "veth_xmit",
                "__netif_receive_skb_core",
                "tcp_v4_rcv",
                "__sys_recvfrom",
                "tcp_recvmsg",
            ],
            sockets: &["xdp", "tc", "tcx", "skb", "socket", "netfilter"],
            outside: &[],
        },
        make: |setup| tcpveth::TcpVeth::new(setup.netns()?),
    },
}

impl Operation {
    /// The name `--op` takes.
    pub fn name(self) -> &'static str {
        self.entry().name
    }

    /// The operation named `name`, as `--op` spells it.
    pub fn from_name(name: &str) -> Option<Operation> {
        Operation::ALL.into_iter().find(|o| o.name() == name)
    }

    /// What one timed operation is, in a few words ("an openat(2) of PATH").
    pub fn what(self) -> &'static str {
        self.entry().what
    }

    /// Timed operations in the plural, for "2000 execves".
    pub fn plural(self) -> &'static str {
        self.entry().plural
    }

    /// Whether one call builds and tears down a process, a TCP connection or a file, or sends a
    /// packet through two network stacks: several µs to tens of µs, five to fifteen times an
    /// openat.
    pub fn is_heavy(self) -> bool {
        self.entry().weight == Weight::Heavy
    }

    /// Whether it works on `--path`.
    pub fn takes_path(self) -> bool {
        self.entry().operand != Operand::Nothing
    }

    /// Whether it cycles over a working set of files (`--paths`, `--dir`).
    pub fn takes_working_set(self) -> bool {
        self.entry().operand == Operand::PathOrWorkingSet
    }

    /// What it needs besides the bench: nothing, or the private network.
    pub fn network(self) -> Network {
        self.entry().network
    }

    /// What it reaches inside the timed span, and what its loop makes outside it.
    pub fn reach(self) -> &'static Reach {
        &self.entry().reach
    }

    /// Its row of the table of operations in docs/commands.md.
    pub fn doc_row(self) -> String {
        Entry::doc_row(self.entry())
    }
}

impl serde::Serialize for Operation {
    /// As `--op` names it.
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.name())
    }
}

impl std::fmt::Display for Operation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_each_times_its_own_system_call() {
        let mut syscalls = Vec::new();
        for op in Operation::ALL {
            assert_eq!(Operation::from_name(op.name()), Some(op));
            let json = serde_json::to_value(op).unwrap();
            assert_eq!(json, op.name(), "the JSON names it as --op does");
            assert!(!op.reach().outside.contains(&op.reach().syscall), "{op}");
            syscalls.push(op.reach().syscall);
        }
        syscalls.sort_unstable();
        syscalls.dedup();
        // The two execs time one system call, and udp-veth and tcp-veth time sendto as the
        // loopback sendto does (with their recvfrom); every other operation has its own.
        assert_eq!(syscalls.len(), Operation::ALL.len() - 3);
        assert_eq!(Operation::from_name("auto"), None);
    }

    #[test]
    fn the_cheap_exec_reaches_part_of_what_the_full_one_does() {
        let (cheap, full) = (Operation::ExecMissing.reach(), Operation::Exec.reach());
        assert_eq!(cheap.syscall, full.syscall);
        assert!(cheap.lsm.iter().all(|hook| full.lsm.contains(hook)));
        assert!(cheap.functions.iter().all(|f| full.functions.contains(f)));
        assert!(cheap.lsm.is_empty() && !full.lsm.is_empty());
    }

    #[test]
    fn the_table_in_the_docs_is_this_catalogue() {
        let doc = include_str!("../../docs/commands.md");
        let missing: Vec<String> = Operation::ALL
            .iter()
            .map(|op| op.doc_row())
            .filter(|row| !doc.lines().any(|l| l == row))
            .collect();
        assert!(
            missing.is_empty(),
            "docs/commands.md lacks these rows of the table of operations (or they differ):\n{}",
            missing.join("\n")
        );
    }
}
