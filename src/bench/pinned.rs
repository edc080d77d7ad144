//! The run conditions of the benchmark in the reference (README.md, "The reference"), in one place:
//! pinned to CPUs with `taskset -c`, at SCHED_FIFO with `chrt -f` (`taskset -c 3 chrt -f 99 ./bench
//! …` in the write-up). `record` hands this line to perf, `overhead` and `demo` run it themselves.

use crate::error::usage;
use std::ffi::OsString;

/// `taskset -c CPUS [chrt -f PRIORITY] COMMAND…`: pinned to `cpus` (comma-separated), at
/// SCHED_FIFO `priority` unless `None` (`--no-fifo`).
pub fn argv(cpus: &[u32], priority: Option<u8>, command: &[OsString]) -> Vec<OsString> {
    let list = cpus
        .iter()
        .map(u32::to_string)
        .collect::<Vec<_>>()
        .join(",");
    let mut a: Vec<OsString> = vec!["taskset".into(), "-c".into(), list.into()];
    if let Some(p) = priority {
        a.extend(["chrt".into(), "-f".into(), p.to_string().into()]);
    }
    a.extend(command.iter().cloned());
    a
}

/// When a pinned run failed, its stderr may say the kernel refused SCHED_FIFO (a container, an
/// RT cgroup limit, `kernel.sched_rt_runtime_us`) or the CPU: the usage error that says what
/// to do; `None` for any other failure.
pub fn refused(stderr: &str, cpus: &[u32], priority: Option<u8>) -> Option<anyhow::Error> {
    let stderr = stderr.trim();
    if stderr.contains("chrt: failed to set") {
        return Some(usage(format!(
            "chrt could not set SCHED_FIFO {} ({stderr}): RT scheduling is refused here (container, RT cgroup limit, kernel.sched_rt_runtime_us); rerun with --no-fifo",
            priority.unwrap_or(99)
        )));
    }
    if stderr.contains("taskset: failed") {
        return Some(usage(format!(
            "taskset could not pin to CPU {}: {stderr}",
            cpus.iter()
                .map(u32::to_string)
                .collect::<Vec<_>>()
                .join(",")
        )));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn argv_table() {
        let cmd: Vec<OsString> = vec!["./b".into(), "x".into()];
        // (cpus, priority, expected line)
        let cases: &[(&[u32], Option<u8>, &str)] = &[
            (&[1], Some(99), "taskset -c 1 chrt -f 99 ./b x"),
            (&[3], Some(10), "taskset -c 3 chrt -f 10 ./b x"),
            (&[1], None, "taskset -c 1 ./b x"),
            (&[1, 0], Some(99), "taskset -c 1,0 chrt -f 99 ./b x"),
        ];
        for (cpus, prio, want) in cases {
            let got: Vec<String> = argv(cpus, *prio, &cmd)
                .iter()
                .map(|a| a.to_string_lossy().into_owned())
                .collect();
            assert_eq!(got.join(" "), *want);
        }
    }

    #[test]
    fn refusals_table() {
        let fifo = "chrt: failed to set pid 12's policy: Operation not permitted";
        // (stderr, refused, message fragment)
        let cases = [
            (fifo, true, "rerun with --no-fifo"),
            (
                "taskset: failed to set pid 3's affinity: Invalid argument",
                true,
                "could not pin to CPU 1",
            ),
            ("perf: something else", false, ""),
        ];
        for (stderr, is, frag) in cases {
            let e = refused(stderr, &[1], Some(99));
            assert_eq!(e.is_some(), is, "{stderr}");
            if let Some(e) = e {
                assert!(e.to_string().contains(frag), "{e}");
                assert_eq!(crate::error::exit_code(&e), 2);
            }
        }
    }
}
