//! CPUs: which are online and isolated, the one to pin the benchmark to, and validating a choice.

use super::Host;
use crate::error::usage;
use anyhow::Result;

/// Parse a kernel cpulist (`0-3,6,8-9`); empty text is an empty list.
pub fn parse_cpulist(text: &str) -> Option<Vec<u32>> {
    let mut out = Vec::new();
    for part in text.trim().split(',').filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((first, last)) => {
                let (first, last): (u32, u32) =
                    (first.trim().parse().ok()?, last.trim().parse().ok()?);
                if first > last {
                    return None;
                }
                out.extend(first..=last);
            }
            None => out.push(part.trim().parse().ok()?),
        }
    }
    Some(out)
}

fn list(host: &Host, file: &str) -> Vec<u32> {
    host.read(&format!("sys/devices/system/cpu/{file}"))
        .ok()
        .and_then(|t| parse_cpulist(&t))
        .unwrap_or_default()
}

/// Online CPUs.
pub(crate) fn online(host: &Host) -> Vec<u32> {
    list(host, "online")
}

/// CPUs isolated from the scheduler (`isolcpus=`).
pub(crate) fn isolated(host: &Host) -> Vec<u32> {
    list(host, "isolated")
}

/// The CPU to pin to: the highest isolated online CPU if any, else the highest online one.
pub(crate) fn default_cpu(host: &Host) -> Option<u32> {
    let online = online(host);
    let iso = isolated(host);
    iso.iter()
        .filter(|c| online.contains(c))
        .max()
        .or_else(|| online.iter().max())
        .copied()
}

/// Why the default CPU was chosen, for doctor and the run record.
pub(crate) fn default_reason(host: &Host) -> String {
    let online = online(host);
    if isolated(host).iter().any(|c| online.contains(c)) {
        "isolated".into()
    } else {
        "highest online (no isolated CPU)".into()
    }
}

/// Check that `cpu` exists and is online, before anything runs.
pub(crate) fn validate(host: &Host, cpu: u32) -> Result<()> {
    let online = online(host);
    if online.contains(&cpu) {
        return Ok(());
    }
    let possible = list(host, "possible");
    let online_text = host
        .read("sys/devices/system/cpu/online")
        .unwrap_or_default();
    if possible.contains(&cpu) {
        Err(usage(format!(
            "CPU {cpu} is offline; online CPUs: {online_text} (pick one with --cpu, or bring it up: echo 1 | sudo tee /sys/devices/system/cpu/cpu{cpu}/online)"
        )))
    } else {
        Err(usage(format!(
            "CPU {cpu} does not exist on this machine; online CPUs: {online_text} (pick one with --cpu)"
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn host(online: &str, isolated: &str, possible: &str) -> (tempfile::TempDir, Host) {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("sys/devices/system/cpu");
        std::fs::create_dir_all(&p).unwrap();
        std::fs::write(p.join("online"), online).unwrap();
        std::fs::write(p.join("isolated"), isolated).unwrap();
        std::fs::write(p.join("possible"), possible).unwrap();
        let h = Host::at(d.path());
        (d, h)
    }

    #[test]
    fn cpulists() {
        assert_eq!(parse_cpulist("0-1\n"), Some(vec![0, 1]));
        assert_eq!(parse_cpulist("0,2-4,7"), Some(vec![0, 2, 3, 4, 7]));
        assert_eq!(parse_cpulist("\n"), Some(vec![]));
        assert_eq!(parse_cpulist("3-1"), None);
        assert_eq!(parse_cpulist("a"), None);
    }

    #[test]
    fn default_prefers_isolated_then_highest() {
        let (_d, h) = host("0-3\n", "1\n", "0-3\n");
        assert_eq!(default_cpu(&h), Some(1));
        let (_d, h) = host("0-3\n", "\n", "0-3\n");
        assert_eq!(default_cpu(&h), Some(3));
        let (_d, h) = host("0-1\n", "5\n", "0-7\n");
        assert_eq!(
            default_cpu(&h),
            Some(1),
            "an offline isolated CPU is not chosen"
        );
    }

    #[test]
    fn offline_and_absent_are_refused() {
        let (_d, h) = host("0-1\n", "\n", "0-3\n");
        assert!(validate(&h, 1).is_ok());
        let e = validate(&h, 3).unwrap_err().to_string();
        assert!(e.contains("offline"), "{e}");
        let e = validate(&h, 9).unwrap_err().to_string();
        assert!(e.contains("does not exist"), "{e}");
    }
}
