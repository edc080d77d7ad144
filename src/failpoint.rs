//! Fault injection for the tests of "nothing left changed, whatever happens", active only when
//! the environment variable `EBPF_PROF_FAILPOINT` is set. It holds a comma-separated list of
//! entries:
//! - `NAME`: the run panics at the point NAME (and unwinds through every guard, as a real bug
//!   would);
//! - `stop:NAME`: the run stops itself (SIGSTOP) at NAME, so a test can act at that exact point
//!   — plant a symlink between the rotation of old files and perf's start, SIGKILL it during
//!   the stats rounds — and then SIGCONT (or kill) it; nothing else happens;
//! - `abort:NAME`: the run aborts at NAME (SIGABRT, no unwinding), as a panic where it cannot
//!   unwind would; the next start must put things back as after a SIGKILL;
//! - `flag:NAME`: [`flag`] returns true for NAME, to force a path the machine would not take
//!   (the pre-5.8 sysctl fallback of run statistics on a kernel that has `BPF_ENABLE_STATS`).

/// The variable that holds the entries.
pub const VAR: &str = "EBPF_PROF_FAILPOINT";

fn entries() -> Vec<String> {
    std::env::var(VAR)
        .map(|v| v.split(',').map(|e| e.trim().to_string()).collect())
        .unwrap_or_default()
}

/// Panic here if `EBPF_PROF_FAILPOINT` lists `name`; stop this process if it lists `stop:name`;
/// abort it if it lists `abort:name`.
pub fn hit(name: &str) {
    for e in entries() {
        if e == name {
            panic!("failpoint {name} ({VAR})");
        }
        if e.strip_prefix("stop:") == Some(name) {
            // SAFETY: raise has no preconditions; SIGSTOP stops the process until SIGCONT.
            unsafe { libc::raise(libc::SIGSTOP) };
        }
        if e.strip_prefix("abort:") == Some(name) {
            std::process::abort();
        }
    }
}

/// Whether `EBPF_PROF_FAILPOINT` lists `flag:name`.
pub fn flag(name: &str) -> bool {
    entries()
        .iter()
        .any(|e| e.strip_prefix("flag:") == Some(name))
}
