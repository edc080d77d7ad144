//! [`OpKind`]: an operation of the catalogue with what it works on (the file of `--path`) and
//! where it sends (the private network namespace of a packet operation, once made).

use super::entry::Network;
use super::operation::Operation;
use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// Which operation to time, with what it works on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpKind {
    op: Operation,
    /// The file, for the operations that take one.
    path: Option<PathBuf>,
    /// The private network namespace a packet operation sends into (`None` until one is made:
    /// the command running the bench makes it).
    netns: Option<String>,
}

impl OpKind {
    /// `op`, working on `path` when it takes one.
    pub fn new(op: Operation, path: PathBuf) -> OpKind {
        OpKind {
            op,
            path: op.takes_path().then_some(path),
            netns: None,
        }
    }

    /// The openat of `path`: the reference's operation.
    pub fn openat(path: impl Into<PathBuf>) -> OpKind {
        OpKind::new(Operation::Openat, path.into())
    }

    /// The operation, by name.
    pub fn operation(&self) -> Operation {
        self.op
    }

    /// The path it works on, for the operations that take one.
    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    /// The private network namespace it sends into, for the packet operations that have one.
    pub fn netns(&self) -> Option<&str> {
        self.netns.as_deref()
    }

    /// Whether it sends packets through a private network namespace the tool makes.
    pub fn needs_netns(&self) -> bool {
        self.op.network() == Network::Veth
    }

    /// Whether a run attaching programs for it makes the private network (its namespace, veth
    /// pair and cgroup): for the packet operations, and for those firing cgroup programs.
    pub fn needs_network(&self) -> bool {
        self.op.network() != Network::Nothing
    }

    /// The same operation sending into namespace `netns` (the others unchanged).
    pub fn in_netns(&self, netns: &str) -> OpKind {
        OpKind {
            netns: self.needs_netns().then(|| netns.to_string()),
            ..self.clone()
        }
    }

    /// The bench's arguments that choose it: `--op NAME`, and `--path P` where it takes one.
    pub fn bench_args(&self) -> Vec<OsString> {
        let mut v: Vec<OsString> = vec!["--op".into(), self.operation().name().into()];
        if let Some(p) = self.path() {
            v.extend(["--path".into(), p.as_os_str().to_owned()]);
        }
        if let Some(netns) = self.netns() {
            v.extend(["--netns".into(), netns.into()]);
        }
        v
    }

    /// "2000 openats of /etc/hostname", "250 forks".
    pub fn describe(&self, iterations: usize) -> String {
        let op = self.operation().plural();
        match self.path() {
            Some(p) => format!("{iterations} {op} of {}", p.display()),
            None => format!("{iterations} {op}"),
        }
    }
}
