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
    let mut checks = Vec::new();
    for (name, what) in [
        ("net.core.bpf_jit_enable", "the JIT"),
        (
            "net.core.bpf_jit_kallsyms",
            "program symbols in /proc/kallsyms",
        ),
    ] {
        checks.push(match sysctl::probe(host, name) {
            Reading::Value(value) if value == "1" => ok(name, format!("1 ({what} on)")),
            Reading::Value(value) => warn(
                name,
                format!("{value}: record sets it to 1 for the run and restores it"),
                format!("sudo sysctl -w {name}=1"),
            ),
            Reading::Missing => fail(
                name,
                "missing: this kernel has no BPF JIT (CONFIG_BPF_JIT)",
                "use a kernel built with CONFIG_BPF_JIT=y",
            ),
            Reading::Unreadable(err) => unreadable(name, &err),
        });
    }
    let harden = "net.core.bpf_jit_harden";
    checks.push(match sysctl::probe(host, harden) {
        Reading::Value(value) if value == "0" => ok(harden, "0 (program symbols visible)"),
        Reading::Value(value) => fail(harden, format!("{value}: hardening hides every program symbol from /proc/kallsyms, so perf cannot name them"), format!("sudo sysctl -w {harden}=0")),
        Reading::Missing => ok(harden, "absent (no JIT hardening on this kernel)"),
        Reading::Unreadable(err) => unreadable(harden, &err),
    });
    checks
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
        Err(err) => fail(name, format!("{err:#}"), "mount /proc; check kernel.kptr_restrict"),
        Ok(syms) if kallsyms::addresses_hidden(&syms) && kr >= 2 => fail(name, "kptr_restrict=2: addresses are zeros even for root", "sudo sysctl -w kernel.kptr_restrict=1"),
        Ok(syms) if kallsyms::addresses_hidden(&syms) => warn(name, format!("addresses read as zeros for this user (kptr_restrict={kr}); root sees them, and record snapshots them for flame"), "sudo ebpf-prof doctor"),
        Ok(syms) => ok(name, format!("{} symbols with real addresses (kptr_restrict={kr})", syms.len())),
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
        Err(err) => {
            return fail(
                name,
                format!("cannot list the loaded programs: {err}"),
                "sudo ebpf-prof doctor",
            )
        }
    };
    match gate::decide(all, None, filter) {
        gate::Verdict::Refused(why) => fail(name, format!("record will refuse: {why}"), "load your hook (sudo ebpf-prof hook --load OBJ.bpf.o), or record with --load OBJ.bpf.o, or widen --filter"),
        gate::Verdict::Programs(shown) => match gate::unnamed(&shown).filter(|_| listing) {
            Some(why) => fail(name, format!("record will refuse: {why}"), "sudo sysctl -w net.core.bpf_jit_harden=0"),
            None => {
                let names: Vec<String> = shown.iter().map(|prog| format!("{} (id {})", prog.name, prog.id)).collect();
                let how = filter.map_or(String::new(), |pattern| format!(" matching /{}/", pattern.as_str()));
                ok(name, format!("{} of {} loaded{how} would show up: {}", shown.len(), all.len(), names.join(", ")))
            }
        },
    }
}

pub(super) fn perf_check(choice: &PerfChoice) -> Check {
    let name = "perf";
    match choice.find(true) {
        Err(err) => fail(name, format!("{err:#}"), "install perf (Debian: apt-get install linux-perf; Ubuntu: apt-get install linux-tools-$(uname -r)), or pass --perf PATH"),
        Ok(perf) => match &perf.mismatch_hint {
            Some(hint) => warn(name, format!("{} (version {}, from {:?}) runs, but does not match kernel {}", perf.path.display(), perf.version.raw, perf.source, perf.kernel_release), hint.clone()),
            None => ok(name, format!("{} (version {}, from {:?})", perf.path.display(), perf.version.raw, perf.source)),
        },
    }
}

/// Which perf was chosen and why, and whether it can annotate BPF programs: a perf built
/// without libbfd and libopcodes cannot disassemble them. Not a blocker for recording.
pub(super) fn perf_choice_and_annotate(choice: &PerfChoice) -> Vec<Check> {
    let Ok(perf) = choice.find(true) else {
        return Vec::new();
    };
    let found = crate::perf::features::annotate(&perf.path);
    let name = "perf annotate";
    let annotate = match found.can {
        Some(true) => ok(name, format!("built with a disassembler ({}): perf annotate can show BPF programs' instructions", found.evidence)),
        Some(false) => warn(name, format!("built without libbfd/libopcodes ({}): perf annotate cannot disassemble BPF programs (\"Please link with binutils's libopcode\"); recording, flame and report are unaffected", found.evidence), "for annotation, build perf with libbfd (make -C tools/perf with binutils-dev installed) and pass --perf"),
        None => warn(name, "`perf version --build-options` does not say whether it can disassemble", "try perf annotate on a recording"),
    };
    vec![ok("perf choice", perf.choice), annotate]
}

pub(super) fn pmu(host: &Host) -> Check {
    if security::hardware_pmu(host) {
        ok("pmu", "hardware PMU present: cycles:k samples real cycles")
    } else {
        warn("pmu", "no hardware PMU (a VM?): perf will sample a software clock instead of cycles (cpu-clock, or task-clock with a newer perf); still valid, time-based", "nothing to do; for cycles, enable the vPMU of the VM")
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
        security::Lockdown::Mode(mode) if mode == "none" => ok("lockdown", format!("none; {lsm_note}")),
        security::Lockdown::Mode(mode) => warn("lockdown", format!("{mode}: blocks LSM, fentry and kprobe programs and bpf_probe_read_kernel; tracepoint programs still load; {lsm_note}"), "boot with lockdown=none (or without Secure Boot) to profile LSM hooks"),
        security::Lockdown::Unknown(why) => warn("lockdown", format!("unknown: {why}; {lsm_note}"), "sudo mount -t securityfs none /sys/kernel/security"),
    }
}

pub(super) fn lsm(host: &Host) -> Check {
    match security::lsm_list(host) {
        Some(list) if list.iter().any(|entry| entry == "bpf") => ok("lsm list", list.join(",")),
        Some(list) => warn(
            "lsm list",
            format!(
                "{}: no `bpf`, so BPF LSM programs never run",
                list.join(",")
            ),
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
        .map(|tool| match which::which(tool) {
            Ok(path) => ok(tool, path.display().to_string()),
            Err(_) => fail(tool, "not found on PATH", "sudo apt-get install util-linux"),
        })
        .collect()
}

pub(super) fn cpu_check(host: &Host) -> Check {
    match cpu::default_cpu(host) {
        Some(cpu) => ok(
            "cpu",
            format!(
                "benchmark pinned to CPU {cpu} ({}); online: {}",
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
    let key = "kernel.sched_rt_runtime_us";
    match sysctl::read_int(host, key) {
        Some(-1) => ok(key, "-1: SCHED_FIFO tasks are never throttled"),
        Some(us) => ok(key, format!("{us}: a SCHED_FIFO task running over {:.2} s per second is throttled; keep -n modest (200000 openats take well under that)", us as f64 / 1e6)),
        None => warn(key, "unreadable", "sysctl kernel.sched_rt_runtime_us"),
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
#[path = "checks_tests.rs"]
mod tests;
