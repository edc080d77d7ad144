//! libbpf-tools `opensnoop`: tracepoint programs for sys_enter/sys_exit of open and openat
//! (Debian's 0.26 has no openat2 ones), no prog array. Their kernel names are all
//! `tracepoint__sys` (15 bytes); only their BTF tells them apart.

use super::*;

const OPEN: [&str; 4] = [
    "tracepoint__syscalls__sys_enter_open",
    "tracepoint__syscalls__sys_exit_open",
    "tracepoint__syscalls__sys_enter_openat",
    "tracepoint__syscalls__sys_exit_openat",
];

/// The table's `kernel (…)` line about program `name`.
fn line_of<'a>(text: &'a str, name: &str) -> &'a str {
    text.lines()
        .find(|l| l.starts_with("kernel (") && l.contains(&format!(" {name} ")))
        .unwrap_or_else(|| panic!("no kernel line for {name}: {text}"))
}

/// Under the openat bench the open(2) programs do not run, and are "attached, did not
/// run (its event did not fire)", never a tail-call target; each program keeps its own line
/// (a regression: the four used to be summed under their common 15-byte kernel name).
#[test]
#[ignore = "needs root: scripts/test.sh runs it (or as root: cargo test -- --include-ignored)"]
fn opensnoop_programs_that_did_not_run_are_not_called_tail_call_targets() {
    if !need_root("opensnoop_programs_that_did_not_run_are_not_called_tail_call_targets")
        || !have_tool(OPENSNOOP)
    {
        return;
    }
    let _one = ONE.lock().unwrap_or_else(|e| e.into_inner());
    let d = tempfile::tempdir().unwrap();
    let cmd = attach_cmd(OPENSNOOP);
    let r = run(ebpf_prof(
        &[
            "overhead",
            "--attach-cmd",
            &cmd,
            "--max-time",
            "4s",
            "--export-json",
            "o.json",
        ],
        d.path(),
    ));
    assert_eq!(r.code(), Some(0), "{r:?}");
    let text = r.stdout();
    assert!(!text.contains("tail-call"), "{r:?}");
    for name in &OPEN[2..] {
        assert!(line_of(&text, name).contains(" ran "), "{r:?}");
    }
    let v: Value =
        serde_json::from_str(&std::fs::read_to_string(d.path().join("o.json")).unwrap()).unwrap();
    let progs = v["kernel"]["programs"].as_array().unwrap();
    for name in &OPEN[..2] {
        let p = progs
            .iter()
            .find(|p| p["name"] == *name)
            .unwrap_or_else(|| panic!("{name}: {progs:?}"));
        assert_eq!(p["tail_call_target"], false, "{p}");
        let line = line_of(&text, name);
        // Nothing here calls open(2); should another process on the machine, the line gives
        // its (tiny) runs instead.
        if p["runs"] == 0 {
            assert!(line.contains("is attached but did not run"), "{line}");
            assert!(line.contains("its event did not fire"), "{line}");
        } else {
            assert!(p["runs_per_iteration"].as_f64().unwrap() < 0.05, "{p}");
        }
    }
    for name in OPEN {
        let n = progs.iter().filter(|p| p["name"] == name).count();
        assert_eq!(n, 1, "one entry per program: {progs:?}");
    }
    let ids: Vec<u32> = progs
        .iter()
        .map(|p| p["id"].as_u64().unwrap() as u32)
        .collect();
    assert_gone(&ids);
    assert_the_docs_count(progs.len());
    eprintln!("{text}");
}

/// docs/commands.md says how many programs Debian's opensnoop loads: the number just seen.
fn assert_the_docs_count(loaded: usize) {
    let docs = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/commands.md"),
    )
    .unwrap();
    let claim = docs
        .split("Debian's build loads ")
        .nth(1)
        .and_then(|rest| rest.split([' ', ',']).next())
        .expect("docs/commands.md says how many programs opensnoop loads");
    let words = [
        "one", "two", "three", "four", "five", "six", "seven", "eight",
    ];
    let said = words.iter().position(|w| *w == claim).map(|at| at + 1);
    assert_eq!(
        said,
        Some(loaded),
        "the docs say {claim}, opensnoop loaded {loaded}"
    );
}
