//! Unit tests of `diagnose.rs`.

use super::*;
use crate::error::exit_code;

fn lines(text: &str) -> Vec<String> {
    text.lines().map(str::to_string).collect()
}

#[test]
fn not_elf_is_a_usage_error() {
    let err = check_elf("x.o", b"hello, this is text not an object").unwrap_err();
    assert!(err.to_string().starts_with("x.o is not a BPF object (ELF)"));
    assert_eq!(exit_code(&err), 2);
}

#[test]
fn elf_for_another_machine_is_refused() {
    let mut header = vec![0u8; 64];
    header[..4].copy_from_slice(b"\x7fELF");
    header[5] = 1;
    header[18] = 62; // EM_X86_64
    let err = check_elf("ls", &header).unwrap_err();
    assert!(err.to_string().contains("machine 62"), "{err}");
    header[18] = 247;
    assert!(check_elf("ok.o", &header).is_ok());
}

#[test]
fn verifier_log_is_cut_and_trimmed() {
    let log = lines(
        "libbpf: prog 'f': BPF program load failed: Permission denied\n\
         libbpf: prog 'f': -- BEGIN PROG LOAD LOG --\n0: (b7) r1 = 0\n\n\
         1: R0 invalid mem access 'map_value_or_null'\n\
         processed 6 insns (limit 1000000)\n-- END PROG LOAD LOG --\n\
         libbpf: failed to load object 'x'",
    );
    let body = verifier_log(&log);
    assert_eq!(body.len(), 4);
    assert_eq!(trim_log(&body, 2).len(), 2);
    assert_eq!(failed_program(&log), Some("f"));
    let progs = [ProgMeta {
        name: "f".into(),
        section: "tracepoint/a/b".into(),
    }];
    let err = load_error(&Host::live(), "x", libc::EACCES, &log, &progs).to_string();
    let first = err.lines().next().unwrap_or_default();
    assert!(
        first.ends_with("R0 invalid mem access 'map_value_or_null'"),
        "{err}"
    );
    assert_eq!(err.lines().count(), 5, "{err}");
}

#[test]
fn refusal_names_lockdown_and_trampolines() {
    let lsm = refusal_cause("lsm", Some("integrity"));
    assert!(lsm.starts_with("kernel lockdown (integrity)"), "{lsm}");
    assert!(lsm.contains("trampolines"), "{lsm}");
    let tp = refusal_cause("tracepoint", Some("none"));
    assert!(tp.starts_with("kernel lockdown is off") && !tp.contains("trampolines"));
}

#[test]
fn section_prefix_names_the_type() {
    let prog = ProgMeta {
        name: "p".into(),
        section: "lsm/file_open".into(),
    };
    assert_eq!(prog.kind(), "lsm");
}

/// A fake machine: this thread's `CapEff`, the lockdown mode, and whether tracefs is there.
fn machine(cap_eff: &str, lockdown: Option<&str>, tracefs: bool) -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    let put = |rel: &str, text: &str| {
        let p = d.path().join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    };
    put(
        "proc/thread-self/status",
        &format!("Name:\tx\nCapEff:\t{cap_eff}\n"),
    );
    if let Some(mode) = lockdown {
        put("sys/kernel/security/lockdown", mode);
    }
    if tracefs {
        std::fs::create_dir_all(d.path().join("sys/kernel/tracing/events")).unwrap();
    }
    d
}

#[test]
fn eperm_is_explained_from_the_hosts_caps_and_lockdown() {
    let lsm = ProgMeta {
        name: "p".into(),
        section: "lsm/file_open".into(),
    };
    let root = "000001ffffffffff";
    let lock = "none integrity [confidentiality]";
    // (CapEff, lockdown, the program, what the line says, exit code)
    type Case<'a> = (&'a str, Option<&'a str>, Option<&'a ProgMeta>, &'a str, i32);
    let cases: &[Case] = &[
        (
            "0000000000000000",
            None,
            Some(&lsm),
            "loading BPF programs needs root",
            2,
        ),
        (
            root,
            Some(lock),
            Some(&lsm),
            "kernel lockdown (confidentiality) forbids them",
            2,
        ),
        (
            root,
            Some("[none] integrity"),
            Some(&lsm),
            "kernel lockdown is off",
            2,
        ),
        (root, None, Some(&lsm), "kernel lockdown, mode unknown", 2),
        (root, Some(lock), None, "even though we run as root", 4),
    ];
    for (caps, lockdown, prog, want, code) in cases {
        let d = machine(caps, *lockdown, true);
        let err = permission_error(&Host::at(d.path()), "x.o", *prog);
        assert!(err.to_string().contains(want), "{caps} {lockdown:?}: {err}");
        assert_eq!(exit_code(&err), *code, "{err}");
    }
}

#[test]
fn enoent_on_attach_says_when_tracefs_is_not_mounted() {
    let tp = ProgMeta {
        name: "t".into(),
        section: "tracepoint/syscalls/sys_enter_openat".into(),
    };
    for (tracefs, hint) in [(false, true), (true, false)] {
        let d = machine("0", None, tracefs);
        let err = attach_error(&Host::at(d.path()), "x.o", &tp, libc::ENOENT, &[]);
        let said = err.to_string().contains("tracefs is not mounted");
        assert_eq!(said, hint, "tracefs mounted: {tracefs}: {err}");
    }
}
