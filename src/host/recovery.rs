//! Surviving SIGKILL: before a run changes a sysctl it writes what it will have to restore to a
//! state file under /run/ebpf-prof; it removes the file once everything is back. The next start
//! of any command finds a file whose process is gone, restores it and says so.

use crate::host::sysctl::{self, Saved};
use crate::host::Host;
use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// Where state files live.
pub const STATE_DIR: &str = "run/ebpf-prof";

/// What a running process will have to put back.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct State {
    pub pid: u32,
    /// /proc/PID/stat start time, so a recycled pid is not mistaken for the owner.
    pub start_time: Option<u64>,
    pub sysctls: Vec<Saved>,
}

/// The state file of process `pid`.
pub fn state_path(host: &Host, pid: u32) -> PathBuf {
    host.path(STATE_DIR).join(format!("{pid}.json"))
}

fn start_time(host: &Host, pid: u32) -> Option<u64> {
    let stat = host.read(&format!("proc/{pid}/stat")).ok()?;
    // Field 22, counted after the parenthesised command name (which may hold spaces).
    let rest = &stat[stat.rfind(')')? + 2..];
    rest.split_whitespace().nth(19)?.parse().ok()
}

/// Write (replace) this process's state file atomically; an empty list removes it.
pub fn save(host: &Host, sysctls: &[Saved]) -> Result<()> {
    if sysctls.is_empty() {
        clear(host);
        return Ok(());
    }
    let pid = std::process::id();
    let dir = host.path(STATE_DIR);
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let st = State {
        pid,
        start_time: start_time(host, pid),
        sysctls: sysctls.to_vec(),
    };
    let tmp = dir.join(format!(".{pid}.tmp"));
    std::fs::write(&tmp, serde_json::to_vec_pretty(&st)?)?;
    std::fs::rename(&tmp, state_path(host, pid))?;
    Ok(())
}

/// Remove this process's state file (everything was restored).
pub fn clear(host: &Host) {
    let _ = std::fs::remove_file(state_path(host, std::process::id()));
    // Leave no empty directory behind (fails harmlessly while another run's file is there).
    let _ = std::fs::remove_dir(host.path(STATE_DIR));
}

fn owner_alive(host: &Host, st: &State) -> bool {
    match (
        host.path(&format!("proc/{}", st.pid)).exists(),
        st.start_time,
    ) {
        (false, _) => false,
        (true, None) => true,
        (true, Some(t)) => start_time(host, st.pid) == Some(t),
    }
}

/// State files left by processes that are gone.
pub fn stale(host: &Host) -> Vec<(PathBuf, State)> {
    let Ok(dir) = std::fs::read_dir(host.path(STATE_DIR)) else {
        return Vec::new();
    };
    dir.flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .filter_map(|p| {
            let st: State = serde_json::from_slice(&std::fs::read(&p).ok()?).ok()?;
            (!owner_alive(host, &st)).then_some((p, st))
        })
        .collect()
}

/// Restore what stale state files record; returns one line per restored sysctl.
pub fn recover(host: &Host) -> Vec<String> {
    let mut lines = Vec::new();
    for (path, st) in stale(host) {
        let mut ok = true;
        for s in st.sysctls.iter().rev() {
            match sysctl::write(host, &s.name, &s.before) {
                Ok(()) => lines.push(format!(
                    "restored {}={} left changed by ebpf-prof pid {} (killed before it could)",
                    s.name, s.before, st.pid
                )),
                Err(e) => {
                    ok = false;
                    lines.push(format!("could not restore {}: {e:#}", s.name));
                }
            }
        }
        if ok {
            let _ = std::fs::remove_file(&path);
            let _ = std::fs::remove_dir(host.path(STATE_DIR));
        }
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dead_owner_is_recovered_live_one_is_not() {
        let d = tempfile::tempdir().unwrap();
        let core = d.path().join("proc/sys/net/core");
        std::fs::create_dir_all(&core).unwrap();
        std::fs::write(core.join("bpf_jit_kallsyms"), "1").unwrap();
        let host = Host::at(d.path());
        let saved = vec![Saved {
            name: "net.core.bpf_jit_kallsyms".into(),
            before: "0".into(),
            during: "1".into(),
        }];
        // A dead owner: pid 999999 has no /proc entry in the fake tree.
        let dir = d.path().join(STATE_DIR);
        std::fs::create_dir_all(&dir).unwrap();
        let st = State {
            pid: 999_999,
            start_time: None,
            sysctls: saved.clone(),
        };
        std::fs::write(dir.join("999999.json"), serde_json::to_vec(&st).unwrap()).unwrap();
        // A live owner.
        std::fs::create_dir_all(d.path().join("proc/4242")).unwrap();
        let live = State {
            pid: 4242,
            start_time: None,
            sysctls: saved,
        };
        std::fs::write(dir.join("4242.json"), serde_json::to_vec(&live).unwrap()).unwrap();

        let lines = recover(&host);
        assert_eq!(lines.len(), 1, "{lines:?}");
        assert!(lines[0].contains("999999"));
        assert_eq!(
            std::fs::read_to_string(core.join("bpf_jit_kallsyms")).unwrap(),
            "0"
        );
        assert!(!dir.join("999999.json").exists());
        assert!(dir.join("4242.json").exists());
    }
}
