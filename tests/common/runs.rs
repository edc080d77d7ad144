//! Runs stopped at a failpoint (`stop:NAME` in `EBPF_PROF_FAILPOINT`), signalled, resumed and
//! waited for: the helpers of the tests of what a killed, interrupted or failed run leaves.

use super::ebpf_prof;
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

pub fn kill(pid: u32, sig: i32) {
    // SAFETY: signalling a process this test started.
    unsafe { libc::kill(pid as i32, sig) };
}

/// Continues a stopped run when dropped, so a failed assertion never leaves it stopped while it
/// holds the root lock (every later run would wait on it).
pub struct Resume(pub u32);

impl Drop for Resume {
    fn drop(&mut self) {
        kill(self.0, libc::SIGCONT);
    }
}

/// Wait until `pid` is stopped (a `stop:` failpoint raised SIGSTOP).
pub fn wait_stopped(pid: u32) {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        let state = stat.rfind(')').and_then(|i| stat[i + 2..].chars().next());
        if state == Some('T') {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "pid {pid} never reached its failpoint"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Wait (at most 180 s) for a child whose stderr is piped; its exit code and stderr.
pub fn finish(mut c: Child) -> (Option<i32>, String) {
    let deadline = Instant::now() + Duration::from_secs(180);
    loop {
        if let Some(st) = c.try_wait().unwrap() {
            let mut err = String::new();
            if let Some(mut e) = c.stderr.take() {
                let _ = std::io::Read::read_to_string(&mut e, &mut err);
            }
            return (st.code(), err);
        }
        if Instant::now() > deadline {
            let _ = c.kill();
            panic!("the run did not end in time");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A short recording started with `failpoint` set, stderr piped.
pub fn record_with(dir: &Path, failpoint: &str, extra: &[&str]) -> Child {
    let mut a = vec!["record", "--allow-no-bpf", "-n", "2000"];
    a.extend_from_slice(extra);
    let mut c = ebpf_prof(&a, dir);
    c.env("EBPF_PROF_FAILPOINT", failpoint)
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    c.spawn().unwrap()
}

pub fn private_dirs(d: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(d)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with(".ebpf-prof-")
        })
        .collect()
}
