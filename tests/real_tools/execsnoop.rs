//! libbpf-tools `execsnoop` through `--attach-cmd`, held by ebpf-prof itself in a mount
//! namespace with tracefs mounted (`--attach-tracefs`): the arm is labelled by the tool, `--op
//! auto` reads its programs' attach points from their links and times exec, and the programs
//! run inside each timed exec.

use super::*;

const EXECSNOOP: &str = "/usr/sbin/execsnoop";

#[test]
#[ignore = "needs root: scripts/test.sh runs it (or as root: cargo test -- --include-ignored)"]
fn execsnoop_held_with_tracefs_is_timed_on_exec() {
    if !need_root("execsnoop_held_with_tracefs_is_timed_on_exec") || !have_tool(EXECSNOOP) {
        return;
    }
    let _one = ONE.lock().unwrap_or_else(|e| e.into_inner());
    let d = tempfile::tempdir().unwrap();
    let r = overhead_of_loader(EXECSNOOP, d.path());
    assert_eq!(r.code(), Some(0), "{r:?}");
    let v: Value = serde_json::from_str(&r.stdout()).unwrap();
    assert_eq!(v["treat"]["label"], "execsnoop", "{r:?}");
    assert_eq!(v["op"]["op"], "exec-missing", "{r:?}");
    assert!(
        v["ran"]["runs_per_op"].as_f64().unwrap() >= 0.9,
        "its sys_enter_execve program runs inside each timed exec: {r:?}"
    );
    let ids: Vec<u32> = v["kernel"]["programs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["id"].as_u64().unwrap() as u32)
        .collect();
    assert_gone(&ids);
}
