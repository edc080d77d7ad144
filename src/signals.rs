//! Signals during a run that changes the machine. SIGINT, SIGTERM, SIGHUP and SIGQUIT are caught
//! (not obeyed at once) so the run can finish perf's file and put everything back; the counters are
//! read at phase boundaries and while waiting for children.
//!
//! While perf runs, a terminal's Ctrl-C reaches perf directly (same process group) and perf
//! finishes perf.data; a SIGTERM/SIGHUP/SIGQUIT sent to us alone is forwarded to perf as SIGINT
//! (perf ignores SIGQUIT itself: left to its default, Ctrl-\ would kill perf mid-file). A second
//! signal means "abort now".

use anyhow::Result;
use signal_hook::SigId;
use std::sync::atomic::{AtomicI32, AtomicUsize, Ordering};
use std::sync::Arc;

/// Catches SIGINT/SIGTERM/SIGHUP/SIGQUIT for as long as it lives.
pub struct Interrupts {
    count: Arc<AtomicUsize>,
    last: Arc<AtomicI32>,
    ids: Vec<SigId>,
}

/// The signals we catch. SIGQUIT (Ctrl-\) is one more way of asking a run to stop: left to its
/// default it would end the process at once, without putting anything back.
pub(crate) const CAUGHT: [i32; 4] = [libc::SIGINT, libc::SIGTERM, libc::SIGHUP, libc::SIGQUIT];

impl Interrupts {
    /// Start catching.
    pub fn install() -> Result<Interrupts> {
        let count = Arc::new(AtomicUsize::new(0));
        let last = Arc::new(AtomicI32::new(0));
        let mut ids = Vec::new();
        for sig in CAUGHT {
            let count_seen = count.clone();
            let last_seen = last.clone();
            // SAFETY: the handler only touches atomics, which is async-signal-safe.
            let id = unsafe {
                signal_hook::low_level::register(sig, move || {
                    last_seen.store(sig, Ordering::SeqCst);
                    count_seen.fetch_add(1, Ordering::SeqCst);
                })
            }?;
            ids.push(id);
        }
        Ok(Interrupts { count, last, ids })
    }

    /// How many signals arrived so far.
    pub fn count(&self) -> usize {
        self.count.load(Ordering::SeqCst)
    }

    /// The last signal received, if any.
    pub fn last(&self) -> Option<i32> {
        match self.last.load(Ordering::SeqCst) {
            0 => None,
            signal => Some(signal),
        }
    }

    /// An error if a signal has arrived: call between phases so a run stops cleanly.
    pub fn check(&self) -> Result<()> {
        match self.last() {
            Some(signal) => Err(Interrupted(signal).into()),
            None => Ok(()),
        }
    }
}

impl Drop for Interrupts {
    fn drop(&mut self) {
        for id in self.ids.drain(..) {
            signal_hook::low_level::unregister(id);
        }
    }
}

/// A run stopped by a signal; exits 128 + signal number.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Interrupted(pub i32);

impl std::fmt::Display for Interrupted {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            formatter,
            "interrupted by {}; everything changed was put back",
            signal_name(self.0)
        )
    }
}

impl std::error::Error for Interrupted {}

/// SIGINT, SIGTERM, … for a number.
pub(crate) fn signal_name(sig: i32) -> String {
    match sig {
        libc::SIGINT => "SIGINT".into(),
        libc::SIGTERM => "SIGTERM".into(),
        libc::SIGHUP => "SIGHUP".into(),
        libc::SIGQUIT => "SIGQUIT".into(),
        libc::SIGKILL => "SIGKILL".into(),
        libc::SIGSEGV => "SIGSEGV".into(),
        libc::SIGABRT => "SIGABRT".into(),
        number => format!("signal {number}"),
    }
}

/// Send `sig` to a process we started.
pub fn send(pid: u32, sig: i32) {
    // SAFETY: kill has no memory-safety preconditions; the pid is one of our children.
    unsafe { libc::kill(pid as libc::pid_t, sig) };
}

/// Send `sig` to the process group `pgid`, which a child of ours leads (it was started with
/// `setpgid(0, 0)`).
pub fn send_group(pgid: u32, sig: i32) {
    if pgid <= 1 {
        return;
    }
    // SAFETY: kill has no memory-safety preconditions; a negative pid names the group.
    unsafe { libc::kill(-(pgid as libc::pid_t), sig) };
}

/// Whether process group `pgid` has no process left (zombies count until reaped).
pub fn group_is_empty(pgid: u32) -> bool {
    // SAFETY: signal 0 only checks that the group exists; nothing is sent.
    let ret = unsafe { libc::kill(-(pgid as libc::pid_t), 0) };
    ret != 0 && std::io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH)
}
