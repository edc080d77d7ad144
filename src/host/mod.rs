//! Everything that reads or writes the machine's `/proc` and `/sys`: sysctls (with a guard that
//! restores old values), kallsyms, CPUs, lockdown and LSMs, the PMU, capabilities.
//!
//! Functions take a [`Host`] whose root is `/` in production and a temp tree in tests.

pub mod cpu;
pub mod kallsyms;
pub mod lock;
pub mod mounts;
pub mod notes;
pub mod procs;
pub mod recovery;
pub mod security;
pub mod sysctl;

use std::path::{Path, PathBuf};

/// The machine being inspected: a root directory under which `proc/` and `sys/` live.
#[derive(Debug, Clone)]
pub struct Host {
    root: PathBuf,
}

impl Host {
    /// The running machine.
    pub fn live() -> Host {
        Host {
            root: PathBuf::from("/"),
        }
    }

    /// A fake machine rooted at `root` (tests).
    pub fn at(root: impl Into<PathBuf>) -> Host {
        Host { root: root.into() }
    }

    /// `rel` (like `proc/sys/net/core/bpf_jit_enable`) under this host's root.
    pub fn path(&self, rel: &str) -> PathBuf {
        self.root.join(rel.trim_start_matches('/'))
    }

    /// The root directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Whether this is the running machine (root `/`), not a fixture tree.
    pub fn is_live(&self) -> bool {
        self.root == Path::new("/")
    }

    /// Read a small text file under the root, trimmed.
    pub fn read(&self, rel: &str) -> std::io::Result<String> {
        std::fs::read_to_string(self.path(rel)).map(|s| s.trim().to_string())
    }

    /// The running kernel's release (`uname -r`); `proc/sys/kernel/osrelease` under the root.
    pub fn kernel_release(&self) -> String {
        self.read("proc/sys/kernel/osrelease")
            .unwrap_or_else(|_| "unknown".into())
    }
}
