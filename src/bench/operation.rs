//! The catalogue of operations the harness can time, by name: the system call each one times,
//! and the hook points it reaches inside the timed span (tracepoints, LSM hooks, kernel
//! functions, socket attach points). `--op auto` ([`super::choose`]) picks an operation from this
//! table, and docs/commands.md shows it.
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

use serde::Serialize;

/// An operation the harness times, by name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Operation {
    Openat,
    Connect,
    #[serde(rename = "exec-missing")]
    ExecMissing,
    Exec,
    Fork,
    Stat,
    Read,
    Write,
    Mmap,
    Unlink,
    Sendto,
    Recvfrom,
    Accept,
    #[serde(rename = "udp-veth")]
    UdpVeth,
}

/// What an operation reaches inside its timed span, and the system calls its loop makes outside
/// it.
#[derive(Debug)]
pub struct Reach {
    /// The system call timed: its `syscalls/sys_enter_<name>` and `sys_exit_<name>` tracepoints.
    pub syscall: &'static str,
    /// Other tracepoints (bare names: `sched_process_fork`), also as raw tracepoints.
    pub tracepoints: &'static [&'static str],
    /// LSM hooks (`file_open`, as `SEC("lsm/file_open")` names them).
    pub lsm: &'static [&'static str],
    /// Kernel functions, for fentry, fexit, kprobe and kretprobe programs.
    pub functions: &'static [&'static str],
    /// cgroup attach points (`connect4` as in `SEC("cgroup/connect4")`), and `sockops`.
    pub sockets: &'static [&'static str],
    /// System calls the loop makes outside the span (set-up and clean-up).
    pub outside: &'static [&'static str],
}

impl Operation {
    /// Every operation, in the order `--op auto` prefers them on a tie.
    pub const ALL: [Operation; 14] = [
        Operation::Openat,
        Operation::Connect,
        Operation::ExecMissing,
        Operation::Exec,
        Operation::Fork,
        Operation::Stat,
        Operation::Read,
        Operation::Write,
        Operation::Mmap,
        Operation::Unlink,
        Operation::Sendto,
        Operation::Recvfrom,
        Operation::Accept,
        Operation::UdpVeth,
    ];

    /// The name `--op` takes.
    pub fn name(self) -> &'static str {
        match self {
            Operation::Openat => "openat",
            Operation::Connect => "connect",
            Operation::ExecMissing => "exec-missing",
            Operation::Exec => "exec",
            Operation::Fork => "fork",
            Operation::Stat => "stat",
            Operation::Read => "read",
            Operation::Write => "write",
            Operation::Mmap => "mmap",
            Operation::Unlink => "unlink",
            Operation::Sendto => "sendto",
            Operation::Recvfrom => "recvfrom",
            Operation::Accept => "accept",
            Operation::UdpVeth => "udp-veth",
        }
    }

    /// The operation named `name`, as `--op` spells it.
    pub fn from_name(name: &str) -> Option<Operation> {
        Operation::ALL.into_iter().find(|o| o.name() == name)
    }

    /// What one timed operation is, in a few words ("an openat(2) of PATH").
    pub fn what(self) -> &'static str {
        match self {
            Operation::Openat => "openat(2) of --path, closed after the span",
            Operation::Connect => "TCP connect(2) to a loopback listener, closed with RST after",
            Operation::ExecMissing => "execve(2) of a path that does not exist (fails with ENOENT in its first lookup, before the LSM exec checks)",
            Operation::Exec => "execve(2) of a file no binary format accepts (fails with ENOEXEC after the LSM exec checks)",
            Operation::Fork => "clone(2) of a child sharing the bench's memory (as vfork makes them) that exits at once, waited for after the span",
            Operation::Stat => "newfstatat(2) of --path",
            Operation::Read => "read(2) of 64 bytes of --path, rewound after the span",
            Operation::Write => "write(2) of 1 byte to /dev/null",
            Operation::Mmap => "mmap(2) of one anonymous page, unmapped after the span",
            Operation::Unlink => "unlinkat(2) of a file made before the span",
            Operation::Sendto => "sendto(2) of 8 bytes over UDP on loopback, read back after the span",
            Operation::Recvfrom => "recvfrom(2) of a UDP datagram sent on loopback before the span",
            Operation::Accept => "accept(2) of a loopback TCP connection made before the span",
            Operation::UdpVeth => "sendto(2) of 8 bytes over UDP through a veth pair into a private network namespace, and the blocking recvfrom(2) there that receives it",
        }
    }

    /// Timed operations in the plural, for "2000 execves".
    pub fn plural(self) -> &'static str {
        match self {
            Operation::Openat => "openats",
            Operation::Connect => "loopback TCP connects",
            Operation::ExecMissing => "execves of a missing path",
            Operation::Exec => "failing execves",
            Operation::Fork => "forks",
            Operation::Stat => "stats",
            Operation::Read => "reads",
            Operation::Write => "writes to /dev/null",
            Operation::Mmap => "mmaps",
            Operation::Unlink => "unlinks",
            Operation::Sendto => "UDP sendtos",
            Operation::Recvfrom => "UDP recvfroms",
            Operation::Accept => "TCP accepts",
            Operation::UdpVeth => "UDP round trips over veth",
        }
    }

    /// Whether one call builds and tears down a process, a TCP connection or a file, or sends a
    /// packet through two network stacks: several µs to tens of µs, five to fifteen times an
    /// openat.
    pub fn is_heavy(self) -> bool {
        matches!(
            self,
            Operation::Exec
                | Operation::Fork
                | Operation::Connect
                | Operation::Unlink
                | Operation::UdpVeth
        )
    }

    /// Whether it works on `--path`.
    pub fn takes_path(self) -> bool {
        matches!(self, Operation::Openat | Operation::Stat | Operation::Read)
    }

    /// What it reaches inside the timed span, and what its loop makes outside it.
    pub fn reach(self) -> &'static Reach {
        match self {
            Operation::Openat => &OPENAT,
            Operation::Connect => &CONNECT,
            Operation::ExecMissing => &EXEC_MISSING,
            Operation::Exec => &EXEC,
            Operation::Fork => &FORK,
            Operation::Stat => &STAT,
            Operation::Read => &READ,
            Operation::Write => &WRITE,
            Operation::Mmap => &MMAP,
            Operation::Unlink => &UNLINK,
            Operation::Sendto => &SENDTO,
            Operation::Recvfrom => &RECVFROM,
            Operation::Accept => &ACCEPT,
            Operation::UdpVeth => &UDP_VETH,
        }
    }
}

impl Operation {
    /// Its row of the table of operations in docs/commands.md.
    pub fn doc_row(self) -> String {
        let r = self.reach();
        let code = |v: &[&str]| {
            v.iter()
                .map(|w| format!("`{w}`"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let mut reached = vec![format!("`syscalls/sys_{{enter,exit}}_{}`", r.syscall)];
        for (what, list) in [
            ("tracepoints", r.tracepoints),
            ("LSM", r.lsm),
            ("kernel", r.functions),
            ("sockets", r.sockets),
        ] {
            if !list.is_empty() {
                reached.push(format!("{what} {}", code(list)));
            }
        }
        let outside = if r.outside.is_empty() {
            "—".to_string()
        } else {
            code(r.outside)
        };
        format!(
            "| `{}` | {} | {} | {outside} |",
            self.name(),
            self.what(),
            reached.join("; ")
        )
    }
}

impl std::fmt::Display for Operation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

const OPENAT: Reach = Reach {
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
};

const CONNECT: Reach = Reach {
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
};

const EXEC_MISSING: Reach = Reach {
    syscall: "execve",
    tracepoints: &[],
    lsm: &[],
    functions: &["do_execveat_common", "alloc_bprm", "do_open_execat"],
    sockets: &[],
    outside: &[],
};

const EXEC: Reach = Reach {
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
};

const FORK: Reach = Reach {
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
};

const STAT: Reach = Reach {
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
};

const READ: Reach = Reach {
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
};

const WRITE: Reach = Reach {
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
};

const MMAP: Reach = Reach {
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
};

const UNLINK: Reach = Reach {
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
};

const SENDTO: Reach = Reach {
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
};

const RECVFROM: Reach = Reach {
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
};

const ACCEPT: Reach = Reach {
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
};

/// The datagram leaves through the veth on this side (cgroup and tc egress, socket filters do not
/// see it) and is received on the peer inside the private namespace: XDP and tc/tcx ingress on
/// the peer, the cgroup `skb` ingress hook and a socket filter on the receiving socket. The
/// timed span holds `sendto` and `recvfrom`; the catalogue names the first.
const UDP_VETH: Reach = Reach {
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
    sockets: &["xdp", "tc", "tcx", "skb", "socket", "sendmsg4", "recvmsg4"],
    outside: &[],
};

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
        // The two execs time one system call, and udp-veth times sendto as the loopback
        // sendto does (with its recvfrom); every other operation has its own.
        assert_eq!(syscalls.len(), Operation::ALL.len() - 2);
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
