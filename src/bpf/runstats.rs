//! The kernel's own accounting of BPF programs: run counts and run time, per program.
//!
//! The kernel counts `run_cnt` and `run_time_ns` for every program only while run statistics
//! are on (a static key: off costs nothing, on costs two clock readings per run).
//! Two switches turn them on, and the key is on while either is:
//! - the `BPF_ENABLE_STATS` command (Linux 5.8+): on while the fd it returns is open, so it
//!   cannot be left on by a crash; holders show as `anon_inode:bpf-stats` in `/proc/PID/fd`;
//! - the sysctl `kernel.bpf_stats_enabled`: a plain switch that stays on until written back.
//!   It reads 0 while only fds hold stats on (`sysctl kernel.bpf_stats_enabled`).
//!
//! The counters cover the program body only: not the tracepoint or trampoline dispatch that
//! reaches it. A tail call is not a run of its own: the kernel counts the time around the
//! dispatch of the program the hook called, so the tail-called program's `run_cnt` stays 0
//! and its time is part of its caller's (check with `bpftool prog show` after some runs).

use std::os::fd::{AsFd, FromRawFd, OwnedFd};

use anyhow::Context;
use libbpf_rs::libbpf_sys;

use super::ids;
use crate::error::usage;
use crate::host::sysctl::{self, SysctlGuard};
use crate::host::Host;

/// The sysctl that turns run statistics on for the whole machine.
pub const STATS_SYSCTL: &str = "kernel.bpf_stats_enabled";
/// How `/proc/PID/fd/N` names a `BPF_ENABLE_STATS` fd.
const STATS_FD_LINK: &str = "anon_inode:bpf-stats";

/// Keeps BPF run statistics on until dropped; see [`enable_run_stats`].
#[derive(Debug)]
#[must_use = "run statistics go off again as soon as the guard is dropped"]
pub struct RunStatsGuard {
    how: How,
}

#[derive(Debug)]
enum How {
    /// The fd from `BPF_ENABLE_STATS`; closing it turns our share of the stats off.
    Command { _fd: OwnedFd },
    /// The sysctl, written back to its old value on drop.
    Sysctl { _restore: SysctlGuard },
}

impl RunStatsGuard {
    /// Which switch this guard holds: `BPF_ENABLE_STATS` or `sysctl kernel.bpf_stats_enabled`.
    pub fn method(&self) -> &str {
        match self.how {
            How::Command { .. } => "BPF_ENABLE_STATS",
            How::Sysctl { .. } => "sysctl kernel.bpf_stats_enabled",
        }
    }
}

/// Turn BPF run statistics on for as long as the guard lives.
///
/// Prefers the `BPF_ENABLE_STATS` command; falls back to setting `kernel.bpf_stats_enabled`
/// to 1 (restored to its old value on drop) when the kernel lacks the command. Stats are
/// machine-wide: every program on the box pays for them while they are on.
pub fn enable_run_stats() -> anyhow::Result<RunStatsGuard> {
    let ret = if crate::failpoint::flag("runstats-sysctl") {
        -libc::EINVAL // tests: take the pre-5.8 path on a kernel that has the command
    } else {
        // SAFETY: plain syscall wrapper; a non-negative return is a new fd we own.
        unsafe { libbpf_sys::bpf_enable_stats(libbpf_sys::BPF_STATS_RUN_TIME) }
    };
    if ret >= 0 {
        // SAFETY: `ret` is a fresh fd that nothing else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(ret) };
        return Ok(RunStatsGuard {
            how: How::Command { _fd: fd },
        });
    }
    if -ret == libc::EPERM {
        return Err(ids::syscall_error("enabling BPF run stats", libc::EPERM));
    }
    // EINVAL: a kernel before 5.8 does not know the command.
    let command_error = std::io::Error::from_raw_os_error(-ret);
    enable_run_stats_via_sysctl(&Host::live()).with_context(|| {
        format!("BPF_ENABLE_STATS failed ({command_error}), and so did the sysctl fallback")
    })
}

/// The fallback of [`enable_run_stats`] on its own: `kernel.bpf_stats_enabled=1` under
/// `host`'s `/proc/sys`, restored on drop, and journalled in a state file under /run so a
/// SIGKILL cannot leave it on (the next start restores it). Public for tests.
#[doc(hidden)]
pub fn enable_run_stats_via_sysctl(host: &Host) -> anyhow::Result<RunStatsGuard> {
    let mut guard =
        SysctlGuard::new(host.clone()).with_journal(crate::host::recovery::journal(host, "stats"));
    guard.set(STATS_SYSCTL, "1")?;
    Ok(RunStatsGuard {
        how: How::Sysctl { _restore: guard },
    })
}

/// One program as the kernel accounts for it.
#[derive(Debug, Clone, serde::Serialize)]
pub struct ProgramStats {
    /// Kernel program id.
    pub id: u32,
    /// The kernel's copy of the name, cut to 15 bytes (`tail_call_secur`).
    pub name: String,
    /// Kernel tag, 16 hex digits.
    pub tag: String,
    /// Runs counted while stats were on (a tail-called program is not counted: see the module).
    pub run_cnt: u64,
    /// Total time of those runs, in ns.
    pub run_time_ns: u64,
}

impl ProgramStats {
    /// Mean time of one run, `None` before any counted run.
    pub fn mean_run_ns(&self) -> Option<f64> {
        (self.run_cnt > 0).then(|| self.run_time_ns as f64 / self.run_cnt as f64)
    }
}

/// Run count and run time of each program in `ids`, in that order. The counters are
/// cumulative since load: read before and after and subtract. A program that is not loaded
/// is an error naming its id.
pub fn program_stats(ids: &[u32]) -> anyhow::Result<Vec<ProgramStats>> {
    ids.iter().map(|&id| one_program_stats(id)).collect()
}

/// The runs of the programs `ids` together while `work` runs with run statistics on (what
/// others' programs count meanwhile is theirs): `work`'s result and the runs.
pub fn runs_during<T>(
    ids: &[u32],
    work: impl FnOnce() -> anyhow::Result<T>,
) -> anyhow::Result<(T, u64)> {
    let guard = enable_run_stats()?;
    let before = program_stats(ids)?;
    let done = work();
    let after = program_stats(ids);
    drop(guard);
    let (done, after) = (done?, after?);
    let runs = after
        .iter()
        .zip(&before)
        .map(|(a, b)| a.run_cnt.saturating_sub(b.run_cnt))
        .sum();
    Ok((done, runs))
}

fn one_program_stats(id: u32) -> anyhow::Result<ProgramStats> {
    let fd = ids::open_prog(id)?.ok_or_else(|| {
        usage(format!(
            "BPF program {id} is not loaded (it was unloaded, or the id is wrong: \
             bpftool prog show)"
        ))
    })?;
    let info = ids::prog_info(fd.as_fd(), false)?.info;
    Ok(ProgramStats {
        id,
        name: ids::object_name(&info.name),
        tag: ids::hex_tag(&info.tag),
        run_cnt: info.run_cnt,
        run_time_ns: info.run_time_ns,
    })
}

/// Who has run statistics on right now.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct RunStatsState {
    /// `kernel.bpf_stats_enabled` reads 1.
    pub sysctl: bool,
    /// Processes holding a `BPF_ENABLE_STATS` fd (this one included), ascending pids.
    pub fd_holders: Vec<u32>,
}

impl RunStatsState {
    /// Whether stats are on: every program run costs extra while they are.
    pub fn enabled(&self) -> bool {
        self.sysctl || !self.fd_holders.is_empty()
    }
}

/// Whether run statistics are on and who holds them, from `host`'s `/proc` (a latency
/// measurement wants them off: bpftop, for one, holds a `BPF_ENABLE_STATS` fd while it runs).
/// Processes whose fds we may not read are not listed.
pub fn run_stats_state(host: &Host) -> RunStatsState {
    let sysctl = sysctl::read_int(host, STATS_SYSCTL) == Some(1);
    let mut fd_holders: Vec<u32> = std::fs::read_dir(host.path("proc"))
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| entry.file_name().to_str()?.parse::<u32>().ok())
        .filter(|&pid| holds_stats_fd(host, pid))
        .collect();
    fd_holders.sort_unstable();
    RunStatsState { sysctl, fd_holders }
}

fn holds_stats_fd(host: &Host, pid: u32) -> bool {
    let Ok(fds) = std::fs::read_dir(host.path(&format!("proc/{pid}/fd"))) else {
        return false;
    };
    fds.flatten().any(|fd| {
        std::fs::read_link(fd.path()).is_ok_and(|target| target.as_os_str() == STATS_FD_LINK)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fake_proc(stats: &str) -> (tempfile::TempDir, Host) {
        let dir = tempfile::tempdir().expect("tempdir");
        let kernel = dir.path().join("proc/sys/kernel");
        std::fs::create_dir_all(&kernel).expect("mkdir");
        std::fs::write(kernel.join("bpf_stats_enabled"), stats).expect("write");
        let host = Host::at(dir.path());
        (dir, host)
    }

    fn fake_fd(dir: &tempfile::TempDir, pid: u32, fd: u32, target: &str) {
        let fds = dir.path().join(format!("proc/{pid}/fd"));
        std::fs::create_dir_all(&fds).expect("mkdir");
        std::os::unix::fs::symlink(target, fds.join(fd.to_string())).expect("symlink");
    }

    #[test]
    fn sysctl_fallback_sets_one_and_restores_on_drop() {
        let (_dir, host) = fake_proc("0\n");
        let guard = enable_run_stats_via_sysctl(&host).expect("enable");
        assert_eq!(guard.method(), "sysctl kernel.bpf_stats_enabled");
        assert_eq!(sysctl::read(&host, STATS_SYSCTL).expect("read"), "1");
        drop(guard);
        assert_eq!(sysctl::read(&host, STATS_SYSCTL).expect("read"), "0");
    }

    #[test]
    fn sysctl_fallback_is_journalled_for_a_sigkill() {
        let (dir, host) = fake_proc("0\n");
        let guard = enable_run_stats_via_sysctl(&host).expect("enable");
        let state = dir
            .path()
            .join(crate::host::recovery::STATE_DIR)
            .join(format!("{}-stats.json", std::process::id()));
        let text = std::fs::read_to_string(&state).expect("state file while on");
        assert!(text.contains(STATS_SYSCTL), "{text}");
        drop(guard);
        assert!(!state.exists(), "removed once restored");
    }

    #[test]
    fn sysctl_already_on_is_left_on() {
        let (_dir, host) = fake_proc("1\n");
        drop(enable_run_stats_via_sysctl(&host).expect("enable"));
        assert_eq!(sysctl::read(&host, STATS_SYSCTL).expect("read"), "1");
    }

    #[test]
    fn state_lists_sysctl_and_stats_fd_holders() {
        let (dir, host) = fake_proc("0\n");
        fake_fd(&dir, 42, 3, "anon_inode:bpf-stats");
        fake_fd(&dir, 7, 5, "anon_inode:bpf-prog");
        fake_fd(&dir, 7, 6, "/dev/null");
        let state = run_stats_state(&host);
        assert_eq!(state.fd_holders, [42]);
        assert!(!state.sysctl && state.enabled());
        std::fs::write(dir.path().join("proc/sys/kernel/bpf_stats_enabled"), "1").expect("w");
        std::fs::remove_file(dir.path().join("proc/42/fd/3")).expect("rm");
        let state = run_stats_state(&host);
        assert!(state.sysctl && state.fd_holders.is_empty() && state.enabled());
    }

    #[test]
    fn mean_needs_a_run() {
        let mut stats = ProgramStats {
            id: 1,
            name: "p".into(),
            tag: "00".repeat(8),
            run_cnt: 0,
            run_time_ns: 0,
        };
        assert_eq!(stats.mean_run_ns(), None);
        stats.run_cnt = 4;
        stats.run_time_ns = 1000;
        assert_eq!(stats.mean_run_ns(), Some(250.0));
    }
}
