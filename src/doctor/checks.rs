//! The checks of `doctor`, each a pure function of the [`Host`] it reads.

use super::{fail, ok, warn, Check};
use crate::bpf::InventoryProgram;
use crate::host::sysctl::Reading;
use crate::host::{cpu, kallsyms, security, sysctl, Host};
use crate::perf::PerfChoice;
use crate::recording::gate;

pub(super) fn privileges(host: &Host) -> Check {
    let caps = security::effective_caps(host).unwrap_or(0);
    if security::is_root() {
        ok("privileges", "running as root")
    } else if security::can_record(caps) {
        ok(
            "privileges",
            "CAP_BPF, CAP_PERFMON and CAP_SYS_ADMIN are effective",
        )
    } else {
        fail("privileges", "not root and missing CAP_BPF/CAP_PERFMON/CAP_SYS_ADMIN: record cannot set sysctls or load programs", "sudo ebpf-prof doctor   (and sudo ebpf-prof record …)")
    }
}

pub(super) fn jit_sysctls(host: &Host) -> Vec<Check> {
    let mut v = Vec::new();
    for (name, what) in [
        ("net.core.bpf_jit_enable", "the JIT"),
        (
            "net.core.bpf_jit_kallsyms",
            "program symbols in /proc/kallsyms",
        ),
    ] {
        v.push(match sysctl::probe(host, name) {
            Reading::Value(v) if v == "1" => ok(name, format!("1 ({what} on)")),
            Reading::Value(val) => warn(
                name,
                format!("{val}: record sets it to 1 for the run and restores it"),
                format!("sudo sysctl -w {name}=1"),
            ),
            Reading::Missing => fail(
                name,
                "missing: this kernel has no BPF JIT (CONFIG_BPF_JIT)",
                "use a kernel built with CONFIG_BPF_JIT=y",
            ),
            Reading::Unreadable(e) => unreadable(name, &e),
        });
    }
    let h = "net.core.bpf_jit_harden";
    v.push(match sysctl::probe(host, h) {
        Reading::Value(v) if v == "0" => ok(h, "0 (program symbols visible)"),
        Reading::Value(n) => fail(h, format!("{n}: hardening hides every program symbol from /proc/kallsyms, so perf cannot name them"), format!("sudo sysctl -w {h}=0")),
        Reading::Missing => ok(h, "absent (no JIT hardening on this kernel)"),
        Reading::Unreadable(e) => unreadable(h, &e),
    });
    v
}

/// A sysctl this user may not read: say so, never guess its value.
fn unreadable(name: &str, err: &str) -> Check {
    warn(
        name,
        format!("not read ({err}): it needs root to read"),
        "sudo ebpf-prof doctor",
    )
}

pub(super) fn kallsyms_check(host: &Host) -> Check {
    let name = "kallsyms";
    let kr = sysctl::read_int(host, "kernel.kptr_restrict").unwrap_or(-1);
    match kallsyms::read(host) {
        Err(e) => fail(name, format!("{e:#}"), "mount /proc; check kernel.kptr_restrict"),
        Ok(s) if kallsyms::addresses_hidden(&s) && kr >= 2 => fail(name, "kptr_restrict=2: addresses are zeros even for root", "sudo sysctl -w kernel.kptr_restrict=1"),
        Ok(s) if kallsyms::addresses_hidden(&s) => warn(name, format!("addresses read as zeros for this user (kptr_restrict={kr}); root sees them, and record snapshots them for flame"), "sudo ebpf-prof doctor"),
        Ok(s) => ok(name, format!("{} symbols with real addresses (kptr_restrict={kr})", s.len())),
    }
}

/// Whether `record` with the same `--filter` would find programs to profile ([`gate`]); the
/// loaded programs themselves are listed apart from the checks.
/// `listing`: whether /proc/kallsyms lists BPF programs now (`bpf_jit_kallsyms=1`); when it does
/// not, `record` turns it on first, so programs without a listed symbol are not held against it.
pub(super) fn programs(
    loaded: &Result<Vec<InventoryProgram>, String>,
    filter: Option<&regex::Regex>,
    listing: bool,
) -> Check {
    let name = "bpf programs";
    let all = match loaded {
        Ok(all) => all,
        Err(e) => {
            return fail(
                name,
                format!("cannot list the loaded programs: {e}"),
                "sudo ebpf-prof doctor",
            )
        }
    };
    match gate::decide(all, None, filter) {
        gate::Verdict::Refused(why) => fail(name, format!("record will refuse: {why}"), "load your hook (sudo ebpf-prof hook --load OBJ.bpf.o), or record with --load OBJ.bpf.o, or widen --filter"),
        gate::Verdict::Programs(p) => match gate::unnamed(&p).filter(|_| listing) {
            Some(why) => fail(name, format!("record will refuse: {why}"), "sudo sysctl -w net.core.bpf_jit_harden=0"),
            None => {
                let names: Vec<String> = p.iter().map(|p| format!("{} (id {})", p.name, p.id)).collect();
                let how = filter.map_or(String::new(), |f| format!(" matching /{}/", f.as_str()));
                ok(name, format!("{} of {} loaded{how} would show up: {}", p.len(), all.len(), names.join(", ")))
            }
        },
    }
}

pub(super) fn perf_check(choice: &PerfChoice) -> Check {
    let name = "perf";
    match choice.find(true) {
        Err(e) => fail(name, format!("{e:#}"), "install perf (Debian: apt-get install linux-perf; Ubuntu: apt-get install linux-tools-$(uname -r)), or pass --perf PATH"),
        Ok(p) => match &p.mismatch_hint {
            Some(hint) => warn(name, format!("{} (version {}, from {:?}) runs, but does not match kernel {}", p.path.display(), p.version.raw, p.source, p.kernel_release), hint.clone()),
            None => ok(name, format!("{} (version {}, from {:?})", p.path.display(), p.version.raw, p.source)),
        },
    }
}

/// Which perf was chosen and why, and whether it can annotate BPF programs: a perf built
/// without libbfd and libopcodes cannot disassemble them. Not a blocker for recording.
pub(super) fn perf_choice_and_annotate(choice: &PerfChoice) -> Vec<Check> {
    let Ok(p) = choice.find(true) else {
        return Vec::new();
    };
    let a = crate::perf::features::annotate(&p.path);
    let name = "perf annotate";
    let annotate = match a.can {
        Some(true) => ok(name, format!("built with a disassembler ({}): perf annotate can show BPF programs' instructions", a.evidence)),
        Some(false) => warn(name, format!("built without libbfd/libopcodes ({}): perf annotate cannot disassemble BPF programs (\"Please link with binutils's libopcode\"); recording, flame and report are unaffected", a.evidence), "for annotation, build perf with libbfd (make -C tools/perf with binutils-dev installed) and pass --perf"),
        None => warn(name, "`perf version --build-options` does not say whether it can disassemble", "try perf annotate on a recording"),
    };
    vec![ok("perf choice", p.choice), annotate]
}

pub(super) fn pmu(host: &Host) -> Check {
    if security::hardware_pmu(host) {
        ok("pmu", "hardware PMU present: cycles:k samples real cycles")
    } else {
        warn("pmu", "no hardware PMU (a VM?): perf will sample cpu-clock instead of cycles; still valid, time-based", "nothing to do; for cycles, enable the vPMU of the VM")
    }
}

pub(super) fn btf(host: &Host) -> Check {
    if host.path("sys/kernel/btf/vmlinux").exists() {
        ok(
            "btf",
            "/sys/kernel/btf/vmlinux present (CO-RE objects, LSM and fentry programs can load)",
        )
    } else {
        warn("btf", "no /sys/kernel/btf/vmlinux: CO-RE objects, LSM and fentry programs cannot load; tracepoint programs without CO-RE still do", "use a kernel built with CONFIG_DEBUG_INFO_BTF=y")
    }
}

pub(super) fn lockdown(host: &Host) -> Check {
    let (lsm_ok, why) = crate::bpf::lsm_supported();
    let lsm_note = if lsm_ok {
        "LSM programs load".to_string()
    } else {
        format!("LSM programs cannot load ({why}); the demo uses the tracepoint hook")
    };
    match security::lockdown(host) {
        security::Lockdown::Mode(m) if m == "none" => ok("lockdown", format!("none; {lsm_note}")),
        security::Lockdown::Mode(m) => warn("lockdown", format!("{m}: blocks LSM, fentry and kprobe programs and bpf_probe_read_kernel; tracepoint programs still load; {lsm_note}"), "boot with lockdown=none (or without Secure Boot) to profile LSM hooks"),
        security::Lockdown::Unknown(why) => warn("lockdown", format!("unknown: {why}; {lsm_note}"), "sudo mount -t securityfs none /sys/kernel/security"),
    }
}

pub(super) fn lsm(host: &Host) -> Check {
    match security::lsm_list(host) {
        Some(l) if l.iter().any(|x| x == "bpf") => ok("lsm list", l.join(",")),
        Some(l) => warn(
            "lsm list",
            format!("{}: no `bpf`, so BPF LSM programs never run", l.join(",")),
            "add bpf to the kernel's lsm= boot parameter",
        ),
        None => warn(
            "lsm list",
            "unreadable (securityfs not mounted)",
            "sudo mount -t securityfs none /sys/kernel/security",
        ),
    }
}

pub(super) fn tools() -> Vec<Check> {
    ["taskset", "chrt"]
        .iter()
        .map(|t| match which::which(t) {
            Ok(p) => ok(t, p.display().to_string()),
            Err(_) => fail(t, "not found on PATH", "sudo apt-get install util-linux"),
        })
        .collect()
}

pub(super) fn cpu_check(host: &Host) -> Check {
    match cpu::default_cpu(host) {
        Some(c) => ok(
            "cpu",
            format!(
                "benchmark pinned to CPU {c} ({}); online: {}",
                cpu::default_reason(host),
                host.read("sys/devices/system/cpu/online")
                    .unwrap_or_default()
            ),
        ),
        None => fail(
            "cpu",
            "no online CPU listed in /sys/devices/system/cpu/online",
            "mount /sys",
        ),
    }
}

pub(super) fn rt_runtime(host: &Host) -> Check {
    let n = "kernel.sched_rt_runtime_us";
    match sysctl::read_int(host, n) {
        Some(-1) => ok(n, "-1: SCHED_FIFO tasks are never throttled"),
        Some(us) => ok(n, format!("{us}: a SCHED_FIFO task running over {:.2} s per second is throttled; keep -n modest (200000 openats take well under that)", us as f64 / 1e6)),
        None => warn(n, "unreadable", "sysctl kernel.sched_rt_runtime_us"),
    }
}

pub(super) fn stale_state(host: &Host) -> Check {
    let stale = crate::host::recovery::stale(host);
    if stale.is_empty() {
        ok("state", "no changes left behind by a killed run")
    } else {
        warn(
            "state",
            format!(
                "{} state file(s) of killed runs under /run/ebpf-prof",
                stale.len()
            ),
            "sudo ebpf-prof doctor   (any command as root restores them)",
        )
    }
}

#[cfg(test)]
mod tests {
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
        let zeros = "0000000000000000 T do_syscall_64\n0000000000000000 t bpf_prog_0123456789abcdef_x\t[bpf]\n";
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
            linked: true,
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
}
