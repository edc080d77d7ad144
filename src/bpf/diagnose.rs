//! Turns libbpf and kernel failures into errors that say what is wrong and what to do.
//!
//! libbpf reports a failed load as a bare errno and prints the details (which program, the
//! verifier log) through its log callback; [`super::libbpf_log`] captures those lines and the
//! functions here read them. The first line of every error stands on its own; a verifier
//! rejection adds the tail of the verifier log below it.

use std::io;

use crate::error::usage;
use crate::host::security;
use crate::host::Host;

/// How many verifier log lines a rejection quotes (the end of the log names the fault).
const VERIFIER_LOG_LINES: usize = 15;
/// `EM_BPF` from elf.h: the `e_machine` of a BPF object.
const EM_BPF: u16 = 247;

/// A program of the object being loaded, as named by its source.
#[derive(Debug, Clone)]
pub(crate) struct ProgMeta {
    pub(crate) name: String,
    pub(crate) section: String,
}

impl ProgMeta {
    /// The program type as the section spells it: `lsm` for `lsm/file_open`.
    fn kind(&self) -> &str {
        self.section.split('/').next().unwrap_or(&self.section)
    }
}

/// Refuses bytes that are not a BPF ELF object before libbpf sees them.
pub(crate) fn check_elf(object: &str, bytes: &[u8]) -> anyhow::Result<()> {
    if bytes.len() < 20 || !bytes.starts_with(b"\x7fELF") {
        return Err(usage(format!(
            "{object} is not a BPF object (ELF): it does not start with the ELF magic bytes; \
             compile the hook with `clang -O2 -g -target bpf -c hook.bpf.c -o hook.bpf.o`"
        )));
    }
    let machine = [bytes[18], bytes[19]];
    let machine = match bytes[5] {
        2 => u16::from_be_bytes(machine),
        _ => u16::from_le_bytes(machine),
    };
    if machine != EM_BPF {
        return Err(usage(format!(
            "{object} is not a BPF object (ELF): it is an ELF file for machine {machine}, \
             not BPF ({EM_BPF}); compile the hook with `clang -target bpf`"
        )));
    }
    Ok(())
}

/// libbpf could not open (parse) the object.
pub(crate) fn open_error(object: &str, error: &libbpf_rs::Error, log: &[String]) -> anyhow::Error {
    let detail = last_warning(log).unwrap_or_else(|| error.to_string());
    usage(format!(
        "{object} could not be opened as a BPF object: {detail}"
    ))
}

/// The object has maps or data but no program to load.
pub(crate) fn no_programs(object: &str) -> anyhow::Error {
    usage(format!(
        "{object} has no BPF programs (no function in a SEC(\"...\") section such as \
         SEC(\"tracepoint/syscalls/sys_enter_openat\")), so there is nothing to profile"
    ))
}

/// `bpf_object__load` failed with `errno`.
pub(crate) fn load_error(
    host: &Host,
    object: &str,
    errno: i32,
    log: &[String],
    progs: &[ProgMeta],
) -> anyhow::Error {
    let failed = failed_program(log).and_then(|name| progs.iter().find(|p| p.name == name));
    if errno == libc::EPERM {
        return permission_error(host, object, failed);
    }
    let verifier = verifier_log(log);
    if let (Some(prog), false) = (failed, verifier.is_empty()) {
        return verifier_error(object, prog, &verifier);
    }
    let detail = last_warning(log).unwrap_or_else(|| errno_text(errno));
    let message = format!("loading {object} failed ({}): {detail}", errno_text(errno));
    match errno {
        libc::ENOMEM | libc::EAGAIN | libc::EBUSY => anyhow::anyhow!(message),
        _ => usage(message),
    }
}

/// `bpf_program__attach` failed with `errno` for `prog`.
pub(crate) fn attach_error(
    host: &Host,
    object: &str,
    prog: &ProgMeta,
    errno: i32,
    log: &[String],
) -> anyhow::Error {
    if errno == libc::EPERM {
        return permission_error(host, object, Some(prog));
    }
    let mut detail = super::packet::attach_failure(&prog.section, errno)
        .or_else(|| last_warning(log))
        .unwrap_or_else(|| errno_text(errno));
    if errno == libc::ENOENT && !crate::host::mounts::tracefs_visible(host) {
        detail.push_str(" (tracefs is not mounted: mount -t tracefs nodev /sys/kernel/tracing)");
    }
    usage(format!(
        "attaching program '{}' (SEC(\"{}\")) of {object} failed ({}): {detail}",
        prog.name,
        prog.section,
        errno_text(errno)
    ))
}

/// EPERM: either we lack the privileges, or (as root) this kernel refuses the program type.
fn permission_error(host: &Host, object: &str, prog: Option<&ProgMeta>) -> anyhow::Error {
    let caps = security::thread_caps(host);
    let privileged = caps.map_or_else(security::is_root, security::can_load_bpf);
    if !privileged {
        return usage(
            "loading BPF programs needs root (or CAP_BPF+CAP_PERFMON): run ebpf-prof with sudo",
        );
    }
    let Some(prog) = prog else {
        return anyhow::anyhow!(
            "the kernel refused to load {object} with EPERM even though we run as root \
             (kernel lockdown? an LSM policy on bpf()?)"
        );
    };
    let kind = prog.kind();
    let mode = match security::lockdown(host) {
        security::Lockdown::Mode(found) => Some(found),
        security::Lockdown::Unknown(_) => None,
    };
    let cause = refusal_cause(kind, mode.as_deref());
    usage(format!(
        "this kernel forbids loading {kind} programs: program '{}' (SEC(\"{}\")) of {object} \
         was refused with EPERM even as root; {cause}",
        prog.name, prog.section
    ))
}

/// Why a root EPERM on `kind` programs happens, as far as we can tell from here.
///
/// Mainline lockdown only removes helpers (bpf_probe_read_kernel in confidentiality mode,
/// which the verifier reports as an unknown function), but vendor kernels patch lockdown
/// to refuse bpf() outright; and a kernel that cannot patch its text (no ftrace direct
/// calls, as on some microVM guests) refuses the trampoline-based types with EPERM too.
pub(crate) fn refusal_cause(kind: &str, lockdown: Option<&str>) -> String {
    let trampoline = matches!(
        kind.trim_end_matches(".s"),
        "lsm" | "fentry" | "fexit" | "fmod_ret" | "freplace"
    );
    let lockdown = match lockdown {
        Some("none") => "kernel lockdown is off".to_string(),
        Some(mode) => format!("kernel lockdown ({mode}) forbids them"),
        None => "kernel lockdown, mode unknown, may forbid them".to_string(),
    };
    if trampoline {
        format!(
            "{lockdown}, or the kernel cannot build BPF trampolines \
             (which refuses lsm and fentry alike)"
        )
    } else {
        format!("{lockdown}, or an LSM policy on bpf() refuses them")
    }
}

/// A verifier rejection: the fault in the first line, the log's tail below it.
fn verifier_error(object: &str, prog: &ProgMeta, log: &[String]) -> anyhow::Error {
    let tail = trim_log(log, VERIFIER_LOG_LINES);
    let fault = tail
        .iter()
        .rev()
        .find(|line| !is_verifier_summary(line))
        .map_or("see the log below", |line| line.as_str());
    let mut message = format!(
        "the kernel verifier rejected program '{}' (SEC(\"{}\")) of {object}: {fault}\n  \
         verifier log (last {} lines):",
        prog.name,
        prog.section,
        tail.len()
    );
    for line in &tail {
        message.push_str("\n    ");
        message.push_str(line);
    }
    usage(message)
}

/// The closing statistics lines the verifier prints after the fault.
fn is_verifier_summary(line: &str) -> bool {
    line.starts_with("processed ")
        || line.starts_with("verification time")
        || line.starts_with("stack depth")
}

/// The last `keep` non-blank lines.
pub(crate) fn trim_log(lines: &[String], keep: usize) -> Vec<String> {
    let relevant: Vec<&String> = lines.iter().filter(|l| !l.trim().is_empty()).collect();
    let start = relevant.len().saturating_sub(keep);
    relevant[start..].iter().map(|l| l.to_string()).collect()
}

/// The lines between libbpf's `-- BEGIN PROG LOAD LOG --` and `-- END PROG LOAD LOG --`.
pub(crate) fn verifier_log(log: &[String]) -> Vec<String> {
    let Some(begin) = log
        .iter()
        .position(|l| l.contains("-- BEGIN PROG LOAD LOG --"))
    else {
        return Vec::new();
    };
    log[begin + 1..]
        .iter()
        .take_while(|l| !l.contains("-- END PROG LOAD LOG --"))
        .cloned()
        .collect()
}

/// The program named in libbpf's `prog 'NAME': BPF program load failed: …` line.
pub(crate) fn failed_program(log: &[String]) -> Option<&str> {
    log.iter().find_map(|line| {
        let rest = line.split_once("prog '")?.1;
        let (name, after) = rest.split_once("': ")?;
        after.starts_with("BPF program load failed").then_some(name)
    })
}

/// libbpf's last warning, without its `libbpf: ` prefix.
fn last_warning(log: &[String]) -> Option<String> {
    log.iter()
        .rev()
        .find_map(|line| line.strip_prefix("libbpf: "))
        .map(str::to_string)
}

fn errno_text(errno: i32) -> String {
    io::Error::from_raw_os_error(errno).to_string()
}

#[cfg(test)]
#[path = "diagnose_tests.rs"]
mod tests;
