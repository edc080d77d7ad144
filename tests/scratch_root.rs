//! As root the bench's scratch directories are made in `/tmp`, never under a `TMPDIR` another
//! user can write to: there they could swap the directory between two uses of its path.

mod common;

use common::*;
use std::os::unix::fs::PermissionsExt;

#[test]
#[ignore = "needs root: scripts/test.sh runs it (or as root: cargo test -- --include-ignored)"]
fn a_tmpdir_of_another_user_holds_no_scratch_directory() {
    if !need_root("a_tmpdir_of_another_user_holds_no_scratch_directory") {
        return;
    }
    let d = open_tempdir();
    let theirs = d.path().join("theirs");
    std::fs::create_dir(&theirs).unwrap();
    std::os::unix::fs::chown(&theirs, Some(65534), Some(65534)).unwrap();
    std::fs::set_permissions(&theirs, std::fs::Permissions::from_mode(0o777)).unwrap();
    // The scratch directory is gone when the run ends; that it was ever made there shows in
    // the directory's modification time.
    let modified = || std::fs::metadata(&theirs).unwrap().modified().unwrap();
    let before = modified();
    std::thread::sleep(std::time::Duration::from_millis(20));
    for op in ["exec", "exec-missing", "unlink"] {
        let mut bench = ebpf_prof(&["bench", "--op", op, "-n", "20"], d.path());
        bench.env("TMPDIR", &theirs);
        let r = run(bench);
        assert_eq!(r.code(), Some(0), "{op}: {r:?}");
        assert_eq!(
            modified(),
            before,
            "{op}: root made its scratch directory in another user's TMPDIR"
        );
    }
}
