//! A recording whose run was killed (SIGKILL) before it could move its files into place. perf,
//! told by `PR_SET_PDEATHSIG`, still finishes perf.data in the run's private directory (see
//! `runfiles::handover`). While a run records, a note `/run/ebpf-prof/<pid>.files` says where
//! that directory is, where each file goes and to whom; the next start, under the run lock like
//! the sysctl recovery, hands a dead run's files over as the run would have: by fd, with their
//! modes, replacing nothing. The note is read with the same suspicion as the sysctl state.

use super::{Owner, PrivateDir, Unfinished};
use crate::host::recovery::{dir_problem, read_checked, start_time, write_state_file, STATE_DIR};
use crate::host::Host;
use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};
use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// What a recording will have to move into place.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Pending {
    pub pid: u32,
    /// /proc/PID/stat start time, so a recycled pid is not mistaken for the owner.
    pub start_time: Option<u64>,
    /// The private directory, by its absolute path.
    #[serde(with = "path_bytes")]
    pub dir: PathBuf,
    /// Each file: its name in `dir`, its target (absolute), its mode.
    #[serde(with = "files_bytes")]
    pub files: Vec<(OsString, PathBuf, u32)>,
    /// Who gets the files (the user who ran sudo).
    pub owner: Option<Owner>,
}

/// A path in the note as its bytes: a Linux path need not be UTF-8, and serde's own form of a
/// `PathBuf` refuses one that is not (the run would end after the machine was changed).
mod path_bytes {
    use serde::{Deserialize, Deserializer, Serialize, Serializer};
    use std::ffi::OsString;
    use std::path::{Path, PathBuf};

    pub fn serialize<S: Serializer>(path: &Path, to: S) -> Result<S::Ok, S::Error> {
        path.as_os_str().serialize(to)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(from: D) -> Result<PathBuf, D::Error> {
        OsString::deserialize(from).map(PathBuf::from)
    }
}

/// The note's list of files, each target path as its bytes (see [`path_bytes`]).
mod files_bytes {
    use serde::{Deserialize, Deserializer, Serialize, Serializer};
    use std::ffi::{OsStr, OsString};
    use std::path::PathBuf;

    type File = (OsString, PathBuf, u32);

    pub fn serialize<S: Serializer>(files: &[File], to: S) -> Result<S::Ok, S::Error> {
        let as_bytes: Vec<(&OsStr, &OsStr, u32)> = files
            .iter()
            .map(|(name, target, mode)| (name.as_os_str(), target.as_os_str(), *mode))
            .collect();
        as_bytes.serialize(to)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(from: D) -> Result<Vec<File>, D::Error> {
        let read = Vec::<(OsString, OsString, u32)>::deserialize(from)?;
        Ok(read
            .into_iter()
            .map(|(name, target, mode)| (name, PathBuf::from(target), mode))
            .collect())
    }
}

fn note_path(host: &Host, pid: u32) -> PathBuf {
    host.path(STATE_DIR).join(format!("{pid}.files"))
}

/// Write this process's note before perf starts. `dir` is the private directory by its
/// absolute path ([`PrivateDir::shown`]); each target is noted by its absolute path too, in
/// the directory `dir` is in, so a run started from anywhere finds them.
pub fn save(
    host: &Host,
    dir: &Path,
    files: &[(OsString, PathBuf, u32)],
    owner: Option<Owner>,
) -> Result<()> {
    let pid = std::process::id();
    let beside = super::parent_dir(dir);
    let absolute = |target: &Path| beside.join(target.file_name().unwrap_or_default());
    let note = Pending {
        pid,
        start_time: start_time(host, pid),
        dir: dir.to_path_buf(),
        files: files
            .iter()
            .map(|(name, target, mode)| (name.clone(), absolute(target), *mode))
            .collect(),
        owner,
    };
    write_state_file(
        host,
        &note_path(host, pid),
        &serde_json::to_vec_pretty(&note)?,
    )
}

/// Remove this process's note (the files were handed over, or removed).
pub fn clear(host: &Host) {
    let _ = std::fs::remove_file(note_path(host, std::process::id()));
    let _ = std::fs::remove_dir(host.path(STATE_DIR));
}

fn alive(host: &Host, p: &Pending) -> bool {
    host.path(&format!("proc/{}", p.pid)).exists()
        && (p.start_time.is_none() || start_time(host, p.pid) == p.start_time)
}

/// Hand over the files of every dead run's note; one line per note. `unfinished` is the
/// profile reader's check of perf's file: only a whole recording moves the previous one aside.
/// A note stays until its recording was handed over (or is gone), so a later run can try again.
pub fn recover(host: &Host, unfinished: Unfinished) -> Vec<String> {
    let dir = host.path(STATE_DIR);
    if dir_problem(&dir).is_some() {
        return Vec::new(); // host::recovery::recover has said why
    }
    let Ok(list) = std::fs::read_dir(&dir) else {
        return Vec::new();
    };
    let notes = list
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "files"));
    let mut lines = Vec::new();
    for path in notes {
        let read = read_checked(&path)
            .and_then(|b| serde_json::from_slice::<Pending>(&b).context("not a note of ours"));
        let (line, settled) = match read {
            Ok(p) if alive(host, &p) => continue,
            Ok(p) => hand_over(&p, unfinished),
            Err(e) => (
                format!(
                    "warning: ignored {}: {e:#}; remove it by hand",
                    path.display()
                ),
                false,
            ),
        };
        lines.push(line);
        if settled {
            let _ = std::fs::remove_file(&path);
        }
    }
    let _ = std::fs::remove_dir(&dir);
    lines
}

/// Move a dead run's files into place; the line that says what happened, and whether the note
/// is settled (the files were moved, or left for the user in their directory, or are gone).
fn hand_over(p: &Pending, unfinished: Unfinished) -> (String, bool) {
    let data = p
        .files
        .first()
        .map_or_else(String::new, |f| f.1.display().to_string());
    let who = format!("the recording of ebpf-prof pid {} (killed)", p.pid);
    let mut private = match PrivateDir::reopen(&p.dir) {
        Ok(d) => d,
        Err(_) if std::fs::symlink_metadata(&p.dir).is_err() && p.dir.is_absolute() => {
            let line = format!(
                "warning: {who} is gone: {} no longer exists",
                p.dir.display()
            );
            return (line, true);
        }
        Err(e) => {
            let line =
                format!("warning: {who} was not moved into place: {e:#}; the next run tries again");
            return (line, false);
        }
    };
    match private.replace_family(&p.files, p.owner, unfinished) {
        Ok(_) => (
            format!("moved the recording of ebpf-prof pid {} (killed before it could) into place: {data} and its sidecars", p.pid),
            true,
        ),
        Err(e) => {
            private.leave(&p.files, p.owner);
            let line = format!(
                "warning: {who} was not moved into place: {e:#}; it is in {}",
                private.shown().display()
            );
            (line, true)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::{DirBuilderExt, PermissionsExt};

    /// A fake root with a state directory, an output directory, and a dead run's private
    /// directory holding a finished perf.data and its samples.
    fn killed_run() -> (tempfile::TempDir, Host, PathBuf, Pending) {
        let d = tempfile::tempdir().unwrap();
        let state = d.path().join(STATE_DIR);
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&state)
            .unwrap();
        let out = d.path().join("out");
        std::fs::create_dir(&out).unwrap();
        let private = out.join(".ebpf-prof-999999-abcdef");
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(&private)
            .unwrap();
        std::fs::write(private.join("perf.data"), "data").unwrap();
        std::fs::write(private.join("perf.data.samples"), "1\n").unwrap();
        let note = Pending {
            pid: 999_999,
            start_time: None,
            dir: private,
            files: vec![
                ("perf.data".into(), out.join("perf.data"), 0o600),
                (
                    "perf.data.samples".into(),
                    out.join("perf.data.samples"),
                    0o644,
                ),
                ("perf.data.json".into(), out.join("perf.data.json"), 0o600),
            ],
            owner: None,
        };
        let host = Host::at(d.path());
        let bytes = serde_json::to_vec(&note).unwrap();
        write_state_file(&host, &state.join("999999.files"), &bytes).unwrap();
        (d, host, out, note)
    }

    fn whole(_: &std::fs::File) -> Option<String> {
        None
    }

    fn cut_short(_: &std::fs::File) -> Option<String> {
        Some("its data size is 0".into())
    }

    #[test]
    fn a_killed_runs_recording_is_moved_into_place_by_the_next_start() {
        let (d, host, out, note) = killed_run();
        let lines = recover(&host, whole);
        assert_eq!(lines.len(), 1, "{lines:?}");
        assert!(
            lines[0].starts_with("moved the recording of ebpf-prof pid 999999"),
            "{lines:?}"
        );
        assert_eq!(
            std::fs::read_to_string(out.join("perf.data")).unwrap(),
            "data"
        );
        let mode = std::fs::metadata(out.join("perf.data"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        assert!(!note.dir.exists(), "the private directory is gone");
        assert!(!d.path().join(STATE_DIR).join("999999.files").exists());
    }

    #[test]
    fn a_note_pointing_at_a_directory_others_can_enter_moves_nothing() {
        let (d, host, out, note) = killed_run();
        std::fs::set_permissions(&note.dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        let lines = recover(&host, whole);
        assert!(lines[0].contains("was not moved into place"), "{lines:?}");
        assert!(!out.join("perf.data").exists());
        assert!(
            d.path().join(STATE_DIR).join("999999.files").exists(),
            "the note stays while its recording is not handed over"
        );
    }

    #[test]
    fn a_killed_runs_recording_moves_the_previous_one_aside() {
        let (_d, host, out, _) = killed_run();
        std::fs::write(out.join("perf.data"), "previous").unwrap();
        let lines = recover(&host, whole);
        assert!(lines[0].starts_with("moved the recording"), "{lines:?}");
        let read = |name: &str| std::fs::read_to_string(out.join(name)).unwrap();
        assert_eq!(read("perf.data.old"), "previous");
        assert_eq!(read("perf.data"), "data");
    }

    #[test]
    fn a_recording_perf_did_not_finish_is_left_in_its_directory() {
        let (d, host, out, note) = killed_run();
        std::fs::write(out.join("perf.data"), "previous").unwrap();
        let lines = recover(&host, cut_short);
        assert!(lines[0].contains("its data size is 0"), "{lines:?}");
        assert!(lines[0].contains("it is in"), "{lines:?}");
        assert_eq!(
            std::fs::read_to_string(out.join("perf.data")).unwrap(),
            "previous"
        );
        assert!(!out.join("perf.data.old").exists());
        assert!(note.dir.join("perf.data").is_file(), "kept, not removed");
        assert!(!d.path().join(STATE_DIR).join("999999.files").exists());
    }

    #[test]
    fn regression_a_note_whose_directory_cannot_be_reached_is_kept() {
        let (d, host, _out, note) = killed_run();
        let relative = Pending {
            dir: PathBuf::from("./.ebpf-prof-999999-abcdef"),
            ..note
        };
        let state = d.path().join(STATE_DIR).join("999999.files");
        let bytes = serde_json::to_vec(&relative).unwrap();
        write_state_file(&host, &state, &bytes).unwrap();
        let lines = recover(&host, whole);
        assert!(lines[0].contains("the next run tries again"), "{lines:?}");
        assert!(state.exists());
    }

    #[test]
    fn a_live_runs_note_is_left_alone() {
        let (d, host, out, _) = killed_run();
        std::fs::create_dir_all(d.path().join("proc/999999")).unwrap();
        assert!(recover(&host, whole).is_empty());
        assert!(!out.join("perf.data").exists());
    }
}
