//! Surviving SIGKILL for the private network: before a run makes a namespace and veth pair it
//! writes `/run/ebpf-prof/PID.netns`, which names them; it rewrites the note when it removes
//! one, and removes the note with the last. The next start of any command (under the run lock,
//! like the sysctl recovery) removes what a dead run's note names. The note is read with the
//! same suspicion as the sysctl state (`host::recovery`), and only names the tool itself makes
//! (`NetNames::are_ours`) are passed to `ip`.

use super::names::NetNames;
use crate::host::recovery::{dir_problem, read_checked, start_time, write_state_file, STATE_DIR};
use crate::host::Host;
use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};
use std::path::PathBuf;
use std::sync::Mutex;

/// The extension of a note.
const EXTENSION: &str = "netns";

/// What a run has made and must remove.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Note {
    pub pid: u32,
    /// /proc/PID/stat start time, so a recycled pid is not mistaken for the owner.
    pub start_time: Option<u64>,
    pub pairs: Vec<NetNames>,
}

/// The pairs this process has now, as its note says.
static MADE: Mutex<Vec<NetNames>> = Mutex::new(Vec::new());

fn note_path(host: &Host, pid: u32) -> PathBuf {
    host.path(STATE_DIR).join(format!("{pid}.{EXTENSION}"))
}

/// Write this process's note with `pairs` (an empty list removes it).
fn save(host: &Host, pairs: &[NetNames]) -> Result<()> {
    let pid = std::process::id();
    let path = note_path(host, pid);
    if pairs.is_empty() {
        let _ = std::fs::remove_file(&path);
        let _ = std::fs::remove_dir(host.path(STATE_DIR));
        return Ok(());
    }
    let note = Note {
        pid,
        start_time: start_time(host, pid),
        pairs: pairs.to_vec(),
    };
    write_state_file(host, &path, &serde_json::to_vec_pretty(&note)?)
}

/// Note `names` before they are made.
pub fn add(host: &Host, names: &NetNames) -> Result<()> {
    let mut made = MADE.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    made.push(names.clone());
    let saved = save(host, &made);
    if saved.is_err() {
        made.pop();
    }
    saved
}

/// Forget `names`, removed.
pub fn remove(host: &Host, names: &NetNames) {
    let mut made = MADE.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    made.retain(|n| n != names);
    if let Err(e) = save(host, &made) {
        crate::out::say(format!("warning: {e:#}"));
    }
}

fn alive(host: &Host, note: &Note) -> bool {
    host.path(&format!("proc/{}", note.pid)).exists()
        && (note.start_time.is_none() || start_time(host, note.pid) == note.start_time)
}

/// The notes of dead runs, with their paths; a line for each file that could not be read.
pub fn stale(host: &Host) -> (Vec<(PathBuf, Note)>, Vec<String>) {
    let dir = host.path(STATE_DIR);
    let mut problems = Vec::new();
    if dir_problem(&dir).is_some() {
        return (Vec::new(), problems); // host::recovery::recover has said why
    }
    let Ok(list) = std::fs::read_dir(&dir) else {
        return (Vec::new(), problems);
    };
    let mut notes = Vec::new();
    for path in list.flatten().map(|e| e.path()) {
        if path.extension().is_none_or(|x| x != EXTENSION) {
            continue;
        }
        let read = read_checked(&path)
            .and_then(|b| serde_json::from_slice::<Note>(&b).context("not a note of ours"));
        match read {
            Ok(note) if alive(host, &note) => {}
            Ok(note) => notes.push((path, note)),
            Err(e) => problems.push(format!(
                "warning: ignored {}: {e:#}; remove it by hand",
                path.display()
            )),
        }
    }
    (notes, problems)
}

/// Remove what dead runs' notes name, with `remove` (the live one runs `ip`); one line per
/// note. A note stays until all it names is gone, so a later start can try again.
pub fn recover(host: &Host, remove: &dyn Fn(&NetNames) -> Vec<String>) -> Vec<String> {
    let (notes, mut lines) = stale(host);
    for (path, note) in notes {
        let mut settled = true;
        for names in &note.pairs {
            if !names.are_ours() {
                lines.push(format!(
                    "warning: not removing {:?} named in {}: not a name ebpf-prof makes",
                    names.netns,
                    path.display()
                ));
                continue;
            }
            let problems = remove(names);
            settled &= problems.is_empty();
            lines.extend(problems.into_iter().map(|p| format!("warning: {p}")));
            if settled {
                lines.push(format!(
                    "removed network namespace {} and veth {} left by ebpf-prof pid {} (killed before it could)",
                    names.netns, names.host_if, note.pid
                ));
            }
        }
        if settled {
            let _ = std::fs::remove_file(&path);
        }
    }
    let _ = std::fs::remove_dir(host.path(STATE_DIR));
    lines
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::RefCell;
    use std::os::unix::fs::DirBuilderExt;

    fn state_dir() -> (tempfile::TempDir, Host) {
        let d = tempfile::tempdir().unwrap();
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(d.path().join(STATE_DIR))
            .unwrap();
        let host = Host::at(d.path());
        (d, host)
    }

    fn write_note(host: &Host, note: &Note) -> PathBuf {
        let path = note_path(host, note.pid);
        write_state_file(host, &path, &serde_json::to_vec(note).unwrap()).unwrap();
        path
    }

    #[test]
    fn a_dead_runs_pairs_are_removed_and_its_note_goes() {
        let (_d, host) = state_dir();
        let pairs = vec![NetNames::new(999_999, 0), NetNames::new(999_999, 1)];
        let path = write_note(
            &host,
            &Note {
                pid: 999_999,
                start_time: None,
                pairs: pairs.clone(),
            },
        );
        let removed = RefCell::new(Vec::new());
        let lines = recover(&host, &|n| {
            removed.borrow_mut().push(n.clone());
            Vec::new()
        });
        assert_eq!(*removed.borrow(), pairs);
        assert_eq!(lines.len(), 2, "{lines:?}");
        assert!(lines[0].contains("ebpf-prof-999999-0") && lines[0].contains("pid 999999"));
        assert!(!path.exists());
    }

    #[test]
    fn a_note_whose_removal_failed_stays_for_the_next_start() {
        let (_d, host) = state_dir();
        let note = Note {
            pid: 999_998,
            start_time: None,
            pairs: vec![NetNames::new(999_998, 0)],
        };
        let path = write_note(&host, &note);
        let lines = recover(&host, &|_| {
            vec!["could not remove veth ep999998h0: busy".into()]
        });
        assert!(
            lines[0].starts_with("warning: could not remove"),
            "{lines:?}"
        );
        assert!(path.exists());
    }

    #[test]
    fn names_ebpf_prof_never_makes_are_not_acted_on() {
        let (_d, host) = state_dir();
        let mut names = NetNames::new(999_997, 0);
        names.host_if = "eth0".into();
        write_note(
            &host,
            &Note {
                pid: 999_997,
                start_time: None,
                pairs: vec![names],
            },
        );
        let called = RefCell::new(0);
        let lines = recover(&host, &|_| {
            *called.borrow_mut() += 1;
            Vec::new()
        });
        assert_eq!(*called.borrow(), 0);
        assert!(lines[0].contains("not a name ebpf-prof makes"), "{lines:?}");
    }

    #[test]
    fn a_live_runs_note_is_left_alone() {
        let (d, host) = state_dir();
        let me = std::process::id();
        std::fs::create_dir_all(d.path().join(format!("proc/{me}"))).unwrap();
        let path = write_note(
            &host,
            &Note {
                pid: me,
                start_time: None,
                pairs: vec![NetNames::new(me, 0)],
            },
        );
        let lines = recover(&host, &|_| panic!("a live run's pairs are its own"));
        assert!(lines.is_empty(), "{lines:?}");
        assert!(path.exists());
    }

    #[test]
    fn adding_and_removing_keeps_the_note_in_step() {
        let (_d, host) = state_dir();
        let names = NetNames::new(std::process::id(), 900);
        add(&host, &names).unwrap();
        let path = note_path(&host, std::process::id());
        let note: Note = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        assert!(note.pairs.contains(&names));
        remove(&host, &names);
        let still = std::fs::read(&path)
            .ok()
            .map(|b| serde_json::from_slice::<Note>(&b).unwrap());
        assert!(still.is_none_or(|n| !n.pairs.contains(&names)));
    }
}
