//! What the benchmark examples share: the built binary beside them, a run of it that waits
//! its turn for the run lock without counting the wait, and the machine's load average.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

/// The `ebpf-prof` built beside the example.
pub fn bin() -> PathBuf {
    let exe = std::env::current_exe().expect("current exe");
    exe.parent()
        .and_then(Path::parent)
        .expect("target dir")
        .join("ebpf-prof")
}

/// Run ebpf-prof with `args` in `dir` as soon as no other root run holds the lock; its output
/// and its own wall time.
pub fn run(args: &[String], dir: &Path) -> (Output, f64) {
    let first = Instant::now();
    loop {
        let t = Instant::now();
        let out = Command::new(bin())
            .args(args)
            .arg("--no-wait")
            .current_dir(dir)
            .output()
            .expect("run ebpf-prof");
        let err = String::from_utf8_lossy(&out.stderr);
        let held = err.contains("ebpf-prof.lock") || err.contains("another root run");
        if out.status.code() == Some(1) && held && first.elapsed() < Duration::from_secs(1800) {
            std::thread::sleep(Duration::from_secs(2));
            continue;
        }
        return (out, t.elapsed().as_secs_f64());
    }
}

/// The 1, 5 and 15 minute load averages, as /proc/loadavg gives them.
pub fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}
