//! Who we are and what the kernel lets us do: effective capabilities, kernel lockdown, the
//! active LSM list, and whether a hardware PMU exists.

use super::Host;

/// Capability numbers from `include/uapi/linux/capability.h`.
pub const CAP_SYS_ADMIN: u32 = 21;
pub const CAP_PERFMON: u32 = 38;
pub const CAP_BPF: u32 = 39;

/// The effective capability mask of this process (`CapEff` in /proc/self/status).
pub(crate) fn effective_caps(host: &Host) -> Option<u64> {
    let status = host.read("proc/self/status").ok()?;
    parse_cap_eff(&status)
}

/// The effective capability mask of the calling thread (`/proc/thread-self/status`:
/// credentials are per thread, and /proc/self shows the main thread's).
pub(crate) fn thread_caps(host: &Host) -> Option<u64> {
    let status = host.read("proc/thread-self/status").ok()?;
    parse_cap_eff(&status)
}

/// Whether `mask` may load and attach tracing BPF programs at all: CAP_SYS_ADMIN, or CAP_BPF
/// with CAP_PERFMON.
pub(crate) fn can_load_bpf(mask: u64) -> bool {
    has_cap(mask, CAP_SYS_ADMIN) || (has_cap(mask, CAP_BPF) && has_cap(mask, CAP_PERFMON))
}

/// `CapEff:` from a /proc/PID/status text.
pub fn parse_cap_eff(status: &str) -> Option<u64> {
    let line = status.lines().find(|l| l.starts_with("CapEff:"))?;
    u64::from_str_radix(line.trim_start_matches("CapEff:").trim(), 16).ok()
}

/// Whether `mask` holds capability `cap`.
pub(crate) fn has_cap(mask: u64, cap: u32) -> bool {
    cap < 64 && mask & (1u64 << cap) != 0
}

/// Whether the capabilities needed by `record` are there: all of CAP_BPF, CAP_PERFMON and
/// CAP_SYS_ADMIN (sysctls and /proc/kallsyms addresses need the latter).
pub fn can_record(mask: u64) -> bool {
    [CAP_BPF, CAP_PERFMON, CAP_SYS_ADMIN]
        .iter()
        .all(|&c| has_cap(mask, c))
}

/// Whether the effective user id is 0.
pub(crate) fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// For unit tests that need root: whether `test` may go on. Root runs it; elsewhere it is
/// skipped, and under CI=true (where the runner gives root) a skip is a failure.
#[cfg(test)]
pub(crate) fn root_or_skip(test: &str) -> bool {
    if is_root() {
        return true;
    }
    let ci = std::env::var("CI").is_ok_and(|v| v == "true" || v == "1");
    assert!(
        !ci,
        "{test}: needs root, and CI=true: it must run, not skip"
    );
    eprintln!("SKIP {test}: needs root");
    false
}

/// Kernel lockdown as securityfs shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Lockdown {
    /// `none`, `integrity` or `confidentiality`.
    Mode(String),
    /// securityfs is not mounted or not readable.
    Unknown(String),
}

/// Parse `none [integrity] confidentiality`: the bracketed word is the active mode.
pub fn parse_lockdown(text: &str) -> Option<String> {
    let start = text.find('[')?;
    let end = text[start..].find(']')? + start;
    Some(text[start + 1..end].to_string())
}

/// A securityfs file: under the host's root, or on the live machine through a private mount
/// of securityfs when the system has none mounted.
fn securityfs(host: &Host, name: &str) -> std::io::Result<String> {
    match host.read(&format!("sys/kernel/security/{name}")) {
        Err(_) if host.is_live() => super::mounts::read_securityfs(name)
            .map(|t| t.trim().to_string())
            .ok_or_else(|| std::io::Error::other("securityfs could not be mounted")),
        other => other,
    }
}

/// The lockdown mode, read from `/sys/kernel/security/lockdown`.
pub fn lockdown(host: &Host) -> Lockdown {
    match securityfs(host, "lockdown") {
        Ok(text) => parse_lockdown(&text).map_or_else(|| Lockdown::Unknown(text), Lockdown::Mode),
        Err(err) => Lockdown::Unknown(format!(
            "{err} (securityfs not mounted? sudo mount -t securityfs none /sys/kernel/security)"
        )),
    }
}

/// The active LSMs, from `/sys/kernel/security/lsm`.
pub(crate) fn lsm_list(host: &Host) -> Option<Vec<String>> {
    let text = securityfs(host, "lsm").ok()?;
    Some(text.split(',').map(str::to_string).collect())
}

/// Whether a hardware PMU is registered (x86 `cpu`, hybrid `cpu_core`/`cpu_atom`, Arm `armv8_*`).
/// Without one, `cycles` is not supported and perf samples `cpu-clock` instead.
pub(crate) fn hardware_pmu(host: &Host) -> bool {
    let Ok(dir) = std::fs::read_dir(host.path("sys/bus/event_source/devices")) else {
        return false;
    };
    dir.flatten().any(|entry| {
        let name = entry.file_name().to_string_lossy().to_string();
        name == "cpu"
            || name.starts_with("cpu_")
            || name.starts_with("armv")
            || name.contains("_pmu")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lockdown_mode_is_the_bracketed_word() {
        assert_eq!(
            parse_lockdown("none integrity [confidentiality]\n").as_deref(),
            Some("confidentiality")
        );
        assert_eq!(
            parse_lockdown("[none] integrity confidentiality").as_deref(),
            Some("none")
        );
        assert_eq!(parse_lockdown("garbage"), None);
    }

    #[test]
    fn capabilities() {
        let root = parse_cap_eff("Name:\tx\nCapEff:\t000001ffffffffff\n").unwrap();
        assert!(can_record(root) && can_load_bpf(root));
        let bpf_perfmon = (1u64 << CAP_BPF) | (1u64 << CAP_PERFMON);
        assert!(can_load_bpf(bpf_perfmon) && !can_record(bpf_perfmon));
        assert!(!can_load_bpf(1u64 << CAP_BPF));
        let none = parse_cap_eff("CapEff:\t0000000000000000\n").unwrap();
        assert!(!can_record(none));
        let bpf_only = (1u64 << CAP_BPF) | (1u64 << CAP_PERFMON);
        assert!(!can_record(bpf_only));
        assert!(has_cap(bpf_only, CAP_BPF));
    }

    #[test]
    fn pmu_from_sysfs_tree() {
        let d = tempfile::tempdir().unwrap();
        let devs = d.path().join("sys/bus/event_source/devices");
        for n in ["software", "tracepoint", "msr"] {
            std::fs::create_dir_all(devs.join(n)).unwrap();
        }
        assert!(!hardware_pmu(&Host::at(d.path())));
        std::fs::create_dir_all(devs.join("cpu")).unwrap();
        assert!(hardware_pmu(&Host::at(d.path())));
    }
}
