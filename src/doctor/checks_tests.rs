//! Unit tests of `checks.rs`.

use super::super::Status;
use super::*;

/// A fake machine: `files` are (path under root, content).
fn tree(files: &[(&str, &str)]) -> (tempfile::TempDir, Host) {
    let d = tempfile::tempdir().unwrap();
    for (p, c) in files {
        let f = d.path().join(p);
        std::fs::create_dir_all(f.parent().unwrap()).unwrap();
        std::fs::write(f, c).unwrap();
    }
    let h = Host::at(d.path());
    (d, h)
}

fn status(c: &[Check], name: &str) -> Status {
    c.iter()
        .find(|c| c.name == name)
        .unwrap_or_else(|| panic!("no {name}"))
        .status
}

#[test]
fn hardened_jit_fails_with_the_fix() {
    let (_d, h) = tree(&[
        ("proc/sys/net/core/bpf_jit_enable", "1"),
        ("proc/sys/net/core/bpf_jit_kallsyms", "0"),
        ("proc/sys/net/core/bpf_jit_harden", "2"),
    ]);
    let v = jit_sysctls(&h);
    assert_eq!(status(&v, "net.core.bpf_jit_enable"), Status::Ok);
    assert_eq!(status(&v, "net.core.bpf_jit_kallsyms"), Status::Warn);
    let harden = v
        .iter()
        .find(|c| c.name == "net.core.bpf_jit_harden")
        .unwrap();
    assert_eq!(harden.status, Status::Fail);
    assert_eq!(
        harden.fix.as_deref(),
        Some("sudo sysctl -w net.core.bpf_jit_harden=0")
    );
}

#[test]
fn no_jit_at_all_fails() {
    let (_d, h) = tree(&[("proc/sys/net/core/bpf_jit_harden", "0")]);
    assert_eq!(
        status(&jit_sysctls(&h), "net.core.bpf_jit_enable"),
        Status::Fail
    );
}

#[test]
fn kptr_restrict_2_hides_addresses_even_from_root() {
    let zeros =
        "0000000000000000 T do_syscall_64\n0000000000000000 t bpf_prog_0123456789abcdef_x\t[bpf]\n";
    let (_d, h) = tree(&[
        ("proc/kallsyms", zeros),
        ("proc/sys/kernel/kptr_restrict", "2"),
    ]);
    let c = kallsyms_check(&h);
    assert_eq!(c.status, Status::Fail);
    assert!(c.fix.unwrap().contains("kptr_restrict=1"));
    let (_d, h) = tree(&[
        ("proc/kallsyms", zeros),
        ("proc/sys/kernel/kptr_restrict", "1"),
    ]);
    assert_eq!(kallsyms_check(&h).status, Status::Warn);
}

fn prog(id: u32, name: &str, prog_type: &str) -> InventoryProgram {
    InventoryProgram {
        id,
        name: name.into(),
        tag: "0123456789abcdef".into(),
        prog_type: prog_type.into(),
        attach: None,
        attach_points: vec![],
        attached: true,
        loaded_for: None,
        symbol: Some(format!("bpf_prog_0123456789abcdef_{name}")),
        functions: vec![format!("bpf_prog_0123456789abcdef_{name}")],
        traced_kind: crate::bpf::is_traced_kind(prog_type),
        run_cnt: None,
        mean_run_ns: None,
        map_ids: Vec::new(),
    }
}

#[test]
fn programs_fail_exactly_when_record_would_refuse() {
    let f = |s: &str| regex::Regex::new(s).unwrap();
    let none: Result<Vec<InventoryProgram>, String> = Ok(Vec::new());
    assert_eq!(programs(&none, None, true).status, Status::Fail);
    let only_xdp = Ok(vec![prog(3, "xdp_pass", "xdp")]);
    let c = programs(&only_xdp, None, true);
    assert_eq!(c.status, Status::Fail, "{}", c.detail);
    assert!(c.detail.contains("xdp_pass"), "{}", c.detail);
    let hook = Ok(vec![
        prog(3, "xdp_pass", "xdp"),
        prog(7, "on_enter", "raw_tracepoint"),
    ]);
    let c = programs(&hook, None, true);
    assert_eq!(c.status, Status::Ok, "{}", c.detail);
    assert!(c.detail.contains("on_enter (id 7)"), "{}", c.detail);
    assert_eq!(programs(&hook, Some(&f("^on_")), true).status, Status::Ok);
    assert_eq!(
        programs(&hook, Some(&f("zzz_nomatch")), true).status,
        Status::Fail
    );
    let denied: Result<Vec<InventoryProgram>, String> = Err("Operation not permitted".into());
    assert_eq!(programs(&denied, None, true).status, Status::Fail);
}

/// Record refuses to run when programs would show up but none has a listed `bpf_prog_`
/// symbol, because they are hardened or not JIT-ed. Doctor fails then too, once the listing
/// is on. With `bpf_jit_kallsyms=0` record turns the listing on first, so doctor does not
/// hold that against the machine.
#[test]
fn programs_without_symbols_fail_as_record_refuses_them() {
    let mut p = prog(7, "on_enter", "raw_tracepoint");
    p.symbol = None;
    p.functions.clear();
    let unnamed = Ok(vec![p]);
    let c = programs(&unnamed, None, true);
    assert_eq!(c.status, Status::Fail, "{}", c.detail);
    assert!(
        c.detail
            .contains("none of the programs has a bpf_prog_ symbol"),
        "{}",
        c.detail
    );
    assert_eq!(programs(&unnamed, None, false).status, Status::Ok);
}

#[test]
fn unreadable_sysctls_are_not_called_missing_nor_given_a_value() {
    use std::os::unix::fs::PermissionsExt;
    let (d, h) = tree(&[
        ("proc/sys/net/core/bpf_jit_enable", "1"),
        ("proc/sys/net/core/bpf_jit_kallsyms", "1"),
        ("proc/sys/net/core/bpf_jit_harden", "0"),
    ]);
    for f in ["bpf_jit_kallsyms", "bpf_jit_harden"] {
        let p = d.path().join("proc/sys/net/core").join(f);
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o000)).unwrap();
        // root reads through mode bits; make it a directory so reading fails for anyone
        if std::fs::read_to_string(&p).is_ok() {
            std::fs::remove_file(&p).unwrap();
            std::fs::create_dir(&p).unwrap();
        }
    }
    let v = jit_sysctls(&h);
    for name in ["net.core.bpf_jit_kallsyms", "net.core.bpf_jit_harden"] {
        let c = v.iter().find(|c| c.name == name).unwrap();
        assert_eq!(c.status, Status::Warn, "{name}: {}", c.detail);
        assert!(c.detail.contains("needs root to read"), "{}", c.detail);
        assert!(
            !c.detail.contains("missing") && !c.detail.starts_with('0'),
            "{}",
            c.detail
        );
    }
}

#[test]
fn vm_without_pmu_or_btf_and_locked_down() {
    let (_d, h) = tree(&[
        ("sys/bus/event_source/devices/software/type", "1"),
        (
            "sys/kernel/security/lockdown",
            "none [integrity] confidentiality",
        ),
        ("sys/kernel/security/lsm", "lockdown,capability,landlock"),
    ]);
    assert_eq!(pmu(&h).status, Status::Warn);
    assert_eq!(btf(&h).status, Status::Warn);
    let l = lockdown(&h);
    assert_eq!(l.status, Status::Warn);
    assert!(l.detail.starts_with("integrity"), "{}", l.detail);
    assert_eq!(lsm(&h).status, Status::Warn);
    let (_d, h) = tree(&[
        ("sys/kernel/security/lsm", "lockdown,capability,bpf"),
        ("sys/kernel/btf/vmlinux", ""),
    ]);
    assert_eq!(lsm(&h).status, Status::Ok);
    assert_eq!(btf(&h).status, Status::Ok);
}

#[test]
fn rt_runtime_and_cpu() {
    let (_d, h) = tree(&[
        ("proc/sys/kernel/sched_rt_runtime_us", "-1"),
        ("sys/devices/system/cpu/online", "0-3"),
        ("sys/devices/system/cpu/isolated", "2"),
    ]);
    assert_eq!(rt_runtime(&h).status, Status::Ok);
    let c = cpu_check(&h);
    assert!(c.detail.contains("CPU 2 (isolated)"), "{}", c.detail);
    let (_d, h) = tree(&[]);
    assert_eq!(cpu_check(&h).status, Status::Fail);
}
