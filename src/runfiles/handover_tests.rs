//! Tests of the private directory and the hand-over: modes, owners, and nothing replaced or
//! followed when a link is planted at a target.
use super::*;
use crate::runfiles::RunFiles;
use std::os::unix::fs::PermissionsExt;

fn mode(p: &Path) -> u32 {
    std::fs::symlink_metadata(p).unwrap().permissions().mode() & 0o7777
}

fn family(d: &Path) -> (RunFiles, Vec<(OsString, PathBuf, u32)>) {
    let f = RunFiles::new(d.join("perf.data"));
    let list = vec![
        ("perf.data".into(), f.data.clone(), 0o600),
        ("perf.data.samples".into(), f.samples(), 0o644),
        ("perf.data.json".into(), f.json(), 0o600),
    ];
    (f, list)
}

fn fill(p: &PrivateDir, list: &[(OsString, PathBuf, u32)]) {
    for (name, _, _) in list {
        std::io::Write::write_all(&mut p.create(name, 0o600).unwrap(), b"data").unwrap();
    }
}

fn private_dirs(d: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(d)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with(".ebpf-prof-")
        })
        .collect()
}

#[test]
fn files_move_into_place_with_their_modes_and_the_directory_goes() {
    let d = tempfile::tempdir().unwrap();
    let (f, list) = family(d.path());
    let mut p = PrivateDir::beside(&f.data).unwrap();
    assert_eq!(mode(p.shown()), 0o700);
    assert!(p.shown().starts_with(d.path()));
    fill(&p, &list);
    // perf reaches the directory through our fd, whatever its name becomes.
    assert_eq!(
        std::fs::read(p.work_path(OsStr::new("perf.data"))).unwrap(),
        b"data"
    );
    p.hand_over(&list, None).unwrap();
    drop(p);
    assert_eq!(mode(&f.data), 0o600);
    assert_eq!(mode(&f.samples()), 0o644);
    assert_eq!(mode(&f.json()), 0o600, "holds kernel addresses");
    assert!(private_dirs(d.path()).is_empty());
}

#[test]
fn a_link_planted_at_a_target_is_neither_followed_nor_replaced() {
    let d = tempfile::tempdir().unwrap();
    let victim = d.path().join("victim");
    std::fs::write(&victim, "keep").unwrap();
    let (f, list) = family(d.path());
    let mut p = PrivateDir::beside(&f.data).unwrap();
    fill(&p, &list);
    std::os::unix::fs::symlink(&victim, &f.data).unwrap();
    let e = p.hand_over(&list, None).unwrap_err();
    let msg = format!("{e:#}");
    assert!(msg.contains("appeared during the run"), "{msg}");
    assert!(msg.contains(&p.shown().display().to_string()), "{msg}");
    let kept = p.shown().to_path_buf();
    drop(p);
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep");
    assert!(std::fs::symlink_metadata(&f.data)
        .unwrap()
        .file_type()
        .is_symlink());
    assert!(
        kept.join("perf.data").exists(),
        "the recording is kept for the user"
    );
    assert!(!f.json().exists(), "nothing half-moved after the conflict");
}

#[test]
fn dropping_without_a_hand_over_leaves_nothing() {
    let d = tempfile::tempdir().unwrap();
    let (f, list) = family(d.path());
    let p = PrivateDir::beside(&f.data).unwrap();
    fill(&p, &list);
    drop(p);
    assert!(private_dirs(d.path()).is_empty());
    assert!(!f.data.exists());
}

fn whole(_: &File) -> Option<String> {
    None
}

fn cut_short(_: &File) -> Option<String> {
    Some("its data size is 0".into())
}

#[test]
fn rotation_never_follows_links() {
    let d = tempfile::tempdir().unwrap();
    let victim = d.path().join("victim");
    std::fs::write(&victim, "keep").unwrap();
    let (f, list) = family(d.path());
    std::fs::write(&f.data, "old").unwrap();
    std::os::unix::fs::symlink(&victim, f.old().data).unwrap();
    std::os::unix::fs::symlink(&victim, f.old().json()).unwrap();
    std::os::unix::fs::symlink(&victim, f.json()).unwrap();
    let mut p = PrivateDir::beside(&f.data).unwrap();
    fill(&p, &list);
    assert!(p.replace_family(&list, None, whole).unwrap());
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep");
    assert_eq!(std::fs::read_to_string(f.old().data).unwrap(), "old");
    // The planted json link moved as a link, not through it.
    assert!(std::fs::symlink_metadata(f.old().json())
        .unwrap()
        .file_type()
        .is_symlink());
    assert_eq!(std::fs::read_to_string(&f.data).unwrap(), "data");
}

#[test]
fn rotation_moves_the_family_and_drops_stale_old_sidecars() {
    let d = tempfile::tempdir().unwrap();
    let (f, list) = family(d.path());
    std::fs::write(&f.data, "previous").unwrap();
    std::fs::write(f.old().samples(), "stale").unwrap();
    let mut p = PrivateDir::beside(&f.data).unwrap();
    fill(&p, &list);
    assert!(p.replace_family(&list, None, whole).unwrap());
    assert_eq!(std::fs::read_to_string(f.old().data).unwrap(), "previous");
    assert!(
        !f.old().samples().exists(),
        "a stale sidecar would pair with the wrong data"
    );
    assert_eq!(std::fs::read_to_string(f.samples()).unwrap(), "data");
}

#[test]
fn regression_an_old_recording_without_a_newer_one_is_never_removed() {
    let d = tempfile::tempdir().unwrap();
    let (f, list) = family(d.path());
    std::fs::write(f.old().data, "the only recording").unwrap();
    std::fs::write(f.old().json(), "{}").unwrap();
    let mut p = PrivateDir::beside(&f.data).unwrap();
    fill(&p, &list);
    assert!(!p.replace_family(&list, None, whole).unwrap());
    assert_eq!(
        std::fs::read_to_string(f.old().data).unwrap(),
        "the only recording"
    );
    assert_eq!(std::fs::read_to_string(f.old().json()).unwrap(), "{}");
    assert_eq!(std::fs::read_to_string(&f.data).unwrap(), "data");
}

#[test]
fn regression_a_recording_perf_did_not_finish_displaces_nothing() {
    let d = tempfile::tempdir().unwrap();
    let (f, list) = family(d.path());
    std::fs::write(&f.data, "previous").unwrap();
    std::fs::write(f.old().data, "older").unwrap();
    let untouched = || {
        assert_eq!(std::fs::read_to_string(&f.data).unwrap(), "previous");
        assert_eq!(std::fs::read_to_string(f.old().data).unwrap(), "older");
        assert!(private_dirs(d.path()).is_empty());
    };
    let mut p = PrivateDir::beside(&f.data).unwrap();
    fill(&p, &list);
    let e = p.replace_family(&list, None, cut_short).unwrap_err();
    assert_eq!(crate::error::exit_code(&e), 3, "{e:#}");
    assert!(e.to_string().contains("its data size is 0"), "{e:#}");
    drop(p);
    untouched();
    let mut p = PrivateDir::beside(&f.data).unwrap();
    let e = p.replace_family(&list, None, whole).unwrap_err();
    assert!(e.to_string().contains("perf wrote no file"), "{e:#}");
    drop(p);
    untouched();
}

/// As root, files change hands through their fd, and only they do.
#[test]
#[ignore = "needs root (chown): scripts/test.sh runs it"]
fn as_root_the_files_and_only_they_are_handed_to_the_user() {
    if !crate::host::security::root_or_skip(
        "as_root_the_files_and_only_they_are_handed_to_the_user",
    ) {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let victim = d.path().join("victim");
    std::fs::write(&victim, "keep").unwrap();
    let (f, list) = family(d.path());
    let mut p = PrivateDir::beside(&f.data).unwrap();
    fill(&p, &list);
    let nobody = Owner {
        uid: 65534,
        gid: 65534,
    };
    p.hand_over(&list, Some(nobody)).unwrap();
    for (_, target, _) in &list {
        assert_eq!(
            std::fs::metadata(target).unwrap().uid(),
            65534,
            "{}",
            target.display()
        );
    }
    assert_eq!(std::fs::metadata(&victim).unwrap().uid(), 0);
}
