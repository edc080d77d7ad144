//! Tests of the walk under explicit owners (so they run without root): links expanded and
//! walked, directories others can write refused, a link at the end refused when asked, missing
//! directories made.
use super::*;
use std::os::unix::fs::{MetadataExt, PermissionsExt};

fn ours() -> Vec<u32> {
    // SAFETY: geteuid has no preconditions.
    vec![0, unsafe { libc::geteuid() }]
}

fn rules(missing: Missing, last_link: LastLink) -> Rules {
    Rules {
        owners: Some(ours()),
        missing,
        last_link,
    }
}

fn inode(p: &Path) -> (u64, u64) {
    let m = std::fs::metadata(p).unwrap();
    (m.dev(), m.ino())
}

#[test]
fn links_on_the_way_are_expanded_and_walked() {
    let d = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(d.path().join("real/sub")).unwrap();
    std::os::unix::fs::symlink("real", d.path().join("link")).unwrap();
    let end = walk(
        &d.path().join("link/sub"),
        &rules(Missing::Refuse, LastLink::Refuse),
    )
    .unwrap();
    assert_eq!(
        (end.stat.st_dev, end.stat.st_ino),
        inode(&d.path().join("real/sub"))
    );
    assert!(end.shown.ends_with("real/sub"), "{}", end.shown.display());
}

#[test]
fn a_directory_others_can_write_on_the_way_is_refused() {
    let d = tempfile::tempdir().unwrap();
    let open = d.path().join("open");
    std::fs::create_dir_all(open.join("out")).unwrap();
    std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).unwrap();
    let stop = walk_or_stop(&open.join("out"), &rules(Missing::Refuse, LastLink::Follow));
    match stop {
        Err(Stop::Unsafe(why)) => {
            assert!(
                why.contains("open is writable by group or others (mode 777)"),
                "{why}"
            )
        }
        other => panic!("not refused: {other:?}"),
    }
    // The directory itself may be open to others: only what is looked up in is checked.
    assert!(walk(&open, &rules(Missing::Refuse, LastLink::Follow)).is_ok());
    let e = walk(&open.join("out"), &rules(Missing::Refuse, LastLink::Follow)).unwrap_err();
    assert_eq!(crate::error::exit_code(&e), 2);
    // Without owners (not root) nothing is refused.
    let anyone = Rules {
        owners: None,
        ..rules(Missing::Refuse, LastLink::Follow)
    };
    assert!(walk(&open.join("out"), &anyone).is_ok());
}

#[test]
fn a_link_at_the_end_is_refused_when_asked_and_missing_directories_are_made() {
    let d = tempfile::tempdir().unwrap();
    std::fs::create_dir(d.path().join("real")).unwrap();
    std::os::unix::fs::symlink("real", d.path().join("link")).unwrap();
    let e = walk(
        &d.path().join("link"),
        &rules(Missing::Refuse, LastLink::Refuse),
    )
    .unwrap_err();
    assert!(e.to_string().contains("link is a symbolic link"), "{e}");
    let e = walk(
        &d.path().join("no/such"),
        &rules(Missing::Refuse, LastLink::Refuse),
    )
    .unwrap_err();
    assert!(e.to_string().contains("does not exist"), "{e}");
    let made = d.path().join("new/deeper");
    walk(&made, &rules(Missing::Create(None), LastLink::Refuse)).unwrap();
    assert!(made.is_dir());
}
