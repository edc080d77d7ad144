//! Reading and writing sysctls through `/proc/sys`, and a guard that puts back what it changed.

use super::Host;
use anyhow::{Context, Result};

/// The `/proc/sys` path of a dotted sysctl name (`net.core.bpf_jit_enable`).
pub(crate) fn proc_path(name: &str) -> String {
    format!("proc/sys/{}", name.replace('.', "/"))
}

/// The current value of a sysctl, trimmed.
pub fn read(host: &Host, name: &str) -> Result<String> {
    host.read(&proc_path(name))
        .with_context(|| format!("cannot read sysctl {name}"))
}

/// What reading a sysctl found: its value, no such file (the kernel lacks it), or a file we
/// may not read (it needs root): unreadable is not missing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reading {
    Value(String),
    Missing,
    Unreadable(String),
}

/// Read `name`, telling a missing sysctl from an unreadable one.
pub fn probe(host: &Host, name: &str) -> Reading {
    match host.read(&proc_path(name)) {
        Ok(value) => Reading::Value(value),
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => Reading::Missing,
        Err(err) => Reading::Unreadable(err.to_string()),
    }
}

/// A sysctl's value as an integer, `None` when absent or not a number.
pub(crate) fn read_int(host: &Host, name: &str) -> Option<i64> {
    read(host, name).ok()?.parse().ok()
}

/// Write a sysctl; the error says how to do it by hand.
pub fn write(host: &Host, name: &str, value: &str) -> Result<()> {
    std::fs::write(host.path(&proc_path(name)), value).with_context(|| {
        format!("cannot set {name}={value} (needs root; by hand: sudo sysctl -w {name}={value})")
    })
}

/// One sysctl as it was before we changed it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Saved {
    pub name: String,
    pub before: String,
    pub during: String,
}

/// Called with every pending restoration before a change.
type Journal = Box<dyn Fn(&[Saved]) -> Result<()>>;

/// Sets sysctls and restores their previous values when dropped (or on [`SysctlGuard::restore`]).
///
/// Only values that actually change are recorded, so a setting that was already right is never
/// written at all (e.g. `bpf_jit_enable` on a CONFIG_BPF_JIT_ALWAYS_ON kernel, where writing 0
/// would fail anyway).
pub(crate) struct SysctlGuard {
    host: Host,
    saved: Vec<Saved>,
    on_change: Option<Journal>,
}

impl std::fmt::Debug for SysctlGuard {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("SysctlGuard")
            .field("saved", &self.saved)
            .finish()
    }
}

impl SysctlGuard {
    /// A guard that has changed nothing yet.
    pub fn new(host: Host) -> SysctlGuard {
        SysctlGuard {
            host,
            saved: Vec::new(),
            on_change: None,
        }
    }

    /// Call `f` with the full list of pending restorations before every change, so it can be
    /// written somewhere that survives SIGKILL, and after restoring with what is still pending
    /// (empty when everything went back).
    pub fn with_journal(
        mut self,
        journal: impl Fn(&[Saved]) -> Result<()> + 'static,
    ) -> SysctlGuard {
        self.on_change = Some(Box::new(journal));
        self
    }

    /// Set `name` to `value`, remembering the old value if it differs.
    pub fn set(&mut self, name: &str, value: &str) -> Result<()> {
        let before = read(&self.host, name)?;
        if before == value {
            return Ok(());
        }
        let entry = Saved {
            name: name.into(),
            before,
            during: value.into(),
        };
        let mut pending = self.saved.clone();
        pending.push(entry.clone());
        if let Some(journal) = &self.on_change {
            journal(&pending)?;
        }
        write(&self.host, name, value)?;
        self.saved.push(entry);
        Ok(())
    }

    /// What this guard changed, oldest first.
    pub fn changed(&self) -> &[Saved] {
        &self.saved
    }

    /// Restore every changed sysctl, newest first, then tell the journal (an empty list) when
    /// all went back. Idempotent.
    pub fn restore(&mut self) -> Result<()> {
        if self.saved.is_empty() {
            return Ok(());
        }
        let mut failed = Vec::new();
        let mut first_err = None;
        while let Some(saved) = self.saved.pop() {
            if let Some(now) = changed_by_someone_else(&self.host, &saved) {
                crate::out::say(format!(
                    "warning: left {}={now} as it is: we had set it to {}, and someone else changed it during the run (it was {} before)",
                    saved.name, saved.during, saved.before
                ));
                continue;
            }
            if let Err(err) = write(&self.host, &saved.name, &saved.before) {
                first_err.get_or_insert(err);
                failed.push(saved);
            }
        }
        if let Some(journal) = &self.on_change {
            journal(&failed)?;
        }
        first_err.map_or(Ok(()), Err)
    }
}

/// The value `s` holds now, when it is no longer the one we set: another tool (or another run)
/// changed it meanwhile, and writing our old value back would undo its change.
fn changed_by_someone_else(host: &Host, saved: &Saved) -> Option<String> {
    read(host, &saved.name)
        .ok()
        .filter(|now| *now != saved.during)
}

impl Drop for SysctlGuard {
    fn drop(&mut self) {
        if let Err(err) = self.restore() {
            crate::out::say(format!("warning: {err:#}"));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fake() -> (tempfile::TempDir, Host) {
        let dir = tempfile::tempdir().unwrap();
        let core = dir.path().join("proc/sys/net/core");
        std::fs::create_dir_all(&core).unwrap();
        std::fs::write(core.join("bpf_jit_enable"), "1\n").unwrap();
        std::fs::write(core.join("bpf_jit_kallsyms"), "0\n").unwrap();
        let host = Host::at(dir.path());
        (dir, host)
    }

    #[test]
    fn guard_restores_only_what_changed() {
        let (_d, host) = fake();
        {
            let mut g = SysctlGuard::new(host.clone());
            g.set("net.core.bpf_jit_enable", "1").unwrap();
            g.set("net.core.bpf_jit_kallsyms", "1").unwrap();
            assert_eq!(g.changed().len(), 1);
            assert_eq!(read(&host, "net.core.bpf_jit_kallsyms").unwrap(), "1");
        }
        assert_eq!(read(&host, "net.core.bpf_jit_kallsyms").unwrap(), "0");
        assert_eq!(read(&host, "net.core.bpf_jit_enable").unwrap(), "1");
    }

    #[test]
    fn journal_sees_change_before_it_happens() {
        let (_d, host) = fake();
        let seen = std::rc::Rc::new(std::cell::RefCell::new(Vec::new()));
        let s2 = seen.clone();
        let probe = host.clone();
        let mut g = SysctlGuard::new(host).with_journal(move |p| {
            let now = read(&probe, "net.core.bpf_jit_kallsyms")?;
            s2.borrow_mut().push((p.len(), now));
            Ok(())
        });
        g.set("net.core.bpf_jit_kallsyms", "1").unwrap();
        assert_eq!(*seen.borrow(), vec![(1, "0".to_string())]);
    }

    #[test]
    fn a_value_someone_else_changed_during_the_run_is_not_restored() {
        let (_d, host) = fake();
        let mut g = SysctlGuard::new(host.clone());
        g.set("net.core.bpf_jit_kallsyms", "1").unwrap();
        // Another tool sets its own value while we run.
        write(&host, "net.core.bpf_jit_kallsyms", "2").unwrap();
        g.restore().unwrap();
        assert_eq!(read(&host, "net.core.bpf_jit_kallsyms").unwrap(), "2");
        assert!(g.changed().is_empty());
    }

    #[test]
    fn missing_sysctl_is_an_error_naming_it() {
        let (_d, host) = fake();
        let mut g = SysctlGuard::new(host);
        let e = g.set("net.core.nope", "1").unwrap_err();
        assert!(format!("{e:#}").contains("net.core.nope"));
    }
}
