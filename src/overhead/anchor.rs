//! `--compare`: each tracepoint both objects attach to is held registered for the whole
//! measurement by a perf event of our own, opened disabled (it counts nothing and is on no
//! CPU's list, so the tracepoint's handler runs exactly as with either object alone), and that
//! event tells which programs are on the tracepoint (`PERF_EVENT_IOC_QUERY_BPF`).
//!
//! Why: detaching a tracepoint program waits in `close` for grace periods — an RCU tasks-trace
//! one after the program is off the hook (`perf_event_detach_bpf_prog`), and when the
//! tracepoint's last perf event goes, `tracepoint_synchronize_unregister` too: tens of ms,
//! against rounds of a millisecond (docs/overhead-method.md). So the links are closed on helper
//! threads ([`super::arms`]), and the next round waits only until the program is off the hook.
//! The kernel's link list cannot say when that is: `bpf_link_free` gives up the link's id
//! *before* it takes the program off, and in testing the next attach of the same program
//! then failed with EEXIST — it was still on the hook rounds later, so it would have run in
//! the other arm's rounds too. The query reads the tracepoint's own program array, so a round
//! starts only once the other arm's programs are out of it. Holding the tracepoint registered
//! also spares the unregistering; both arms attach it anyway, so it changes what neither costs.
//!
//! A tracepoint only one of the objects uses is not held: that arm's own cost includes its
//! registration, and its programs are detached in place.

use crate::host::mounts::{self, tracefs_visible, with_private_mount};
use crate::host::Host;
use anyhow::{Context, Result};
use std::collections::BTreeSet;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::time::{Duration, Instant};

/// The tracepoints held, each by a disabled perf event (closed on drop).
pub struct Anchors {
    held: Vec<(String, OwnedFd)>,
}

impl Anchors {
    /// Nothing held.
    pub fn none() -> Anchors {
        Anchors { held: Vec::new() }
    }

    /// The tracepoints held, as `category/name`.
    pub fn names(&self) -> Vec<&str> {
        self.held.iter().map(|(n, _)| n.as_str()).collect()
    }

    /// Whether every section is a tracepoint held here (and there is one).
    pub fn cover(&self, sections: &[String]) -> bool {
        !sections.is_empty()
            && sections
                .iter()
                .all(|s| tracepoint_of(s).is_some_and(|tp| self.held.iter().any(|(n, _)| *n == tp)))
    }

    /// The ids of the programs on the held tracepoints now.
    pub fn programs_on(&self) -> Result<Vec<u32>> {
        let mut ids = Vec::new();
        for (name, fd) in &self.held {
            ids.extend(
                query_bpf(fd).with_context(|| format!("cannot list the programs on {name}"))?,
            );
        }
        Ok(ids)
    }

    /// Wait until none of `ids` is on a held tracepoint (up to 2 s).
    pub fn wait_off(&self, ids: &[u32]) -> Result<()> {
        let deadline = Instant::now() + Duration::from_secs(2);
        loop {
            let on: Vec<u32> = self
                .programs_on()?
                .into_iter()
                .filter(|i| ids.contains(i))
                .collect();
            if on.is_empty() {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err(crate::error::child(format!(
                    "programs {on:?} are still on their tracepoints 2 s after their links were closed"
                )));
            }
            std::thread::sleep(Duration::from_micros(50));
        }
    }
}

/// `PERF_EVENT_IOC_QUERY_BPF`: `_IOWR('$', 10, struct perf_event_query_bpf *)` (the size field
/// is a pointer's; the direction bits are those of x86 and arm64).
const QUERY_BPF: libc::c_ulong =
    (3 << 30) | ((std::mem::size_of::<*mut u32>() as libc::c_ulong) << 16) | (0x24 << 8) | 10;
/// Program ids one query reads at most (the kernel's limit on a tracepoint is 64).
const MAX_IDS: usize = 64;

/// The ids of the programs on the tracepoint of perf event `fd`.
fn query_bpf(fd: &OwnedFd) -> std::io::Result<Vec<u32>> {
    // struct perf_event_query_bpf { __u32 ids_len; __u32 prog_cnt; __u32 ids[]; }
    let mut buf = [0u32; 2 + MAX_IDS];
    buf[0] = MAX_IDS as u32;
    // SAFETY: the buffer holds the header and `ids_len` ids, as the kernel will write.
    let r = unsafe { libc::ioctl(fd.as_raw_fd(), QUERY_BPF as _, buf.as_mut_ptr()) };
    if r < 0 {
        return Err(std::io::Error::last_os_error());
    }
    let n = (buf[1] as usize).min(MAX_IDS);
    Ok(buf[2..2 + n].to_vec())
}

/// `category/name` of a tracepoint program's section (`tracepoint/…` or `tp/…`).
pub fn tracepoint_of(section: &str) -> Option<String> {
    let rest = section
        .strip_prefix("tracepoint/")
        .or_else(|| section.strip_prefix("tp/"))?;
    let (cat, name) = rest.split_once('/')?;
    let ok = |s: &str| !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    (ok(cat) && ok(name)).then(|| format!("{cat}/{name}"))
}

/// The tracepoints both section lists attach to.
pub fn common(a: &[String], b: &[String]) -> BTreeSet<String> {
    let set =
        |v: &[String]| -> BTreeSet<String> { v.iter().filter_map(|s| tracepoint_of(s)).collect() };
    set(a).intersection(&set(b)).cloned().collect()
}

/// Hold each of `tracepoints` registered (tracefs is mounted privately to read their ids
/// where it is not mounted).
pub fn hold(tracepoints: &BTreeSet<String>) -> Result<Anchors> {
    if tracepoints.is_empty() {
        return Ok(Anchors { held: Vec::new() });
    }
    let open_all = || -> Result<Vec<(String, OwnedFd)>> {
        tracepoints
            .iter()
            .map(|tp| Ok((tp.clone(), open_disabled(tracepoint_id(tp)?)?)))
            .collect()
    };
    let held = if tracefs_visible(&Host::live()) {
        open_all()
    } else {
        with_private_mount(c"tracefs", mounts::TRACEFS, open_all)
    }?;
    Ok(Anchors { held })
}

/// The tracepoint's id from tracefs.
fn tracepoint_id(tp: &str) -> Result<u64> {
    let base = mounts::TRACEFS.to_string_lossy();
    let path = format!("{base}/events/{tp}/id");
    let text = std::fs::read_to_string(&path).with_context(|| format!("cannot read {path}"))?;
    text.trim()
        .parse()
        .with_context(|| format!("{path} holds {:?}, not a tracepoint id", text.trim()))
}

/// `struct perf_event_attr` as of its first version (`PERF_ATTR_SIZE_VER0`, 64 bytes): all a
/// disabled tracepoint event needs.
#[repr(C)]
#[derive(Default)]
struct PerfEventAttrV0 {
    kind: u32,
    size: u32,
    config: u64,
    sample_period: u64,
    sample_type: u64,
    read_format: u64,
    flags: u64,
    wakeup_events: u32,
    bp_type: u32,
    config1: u64,
}

const PERF_TYPE_TRACEPOINT: u32 = 2;
/// `PERF_FLAG_FD_CLOEXEC`.
const FD_CLOEXEC: libc::c_ulong = 1 << 3;
/// `disabled`, the first bit of the flags.
const DISABLED: u64 = 1;

/// A disabled perf event on tracepoint `id`, on CPU 0 for every task, as libbpf opens the
/// events it attaches programs to: a per-task event would switch on perf's context-switch
/// hooks for the whole machine while it is open.
fn open_disabled(id: u64) -> Result<OwnedFd> {
    let attr = PerfEventAttrV0 {
        kind: PERF_TYPE_TRACEPOINT,
        size: std::mem::size_of::<PerfEventAttrV0>() as u32,
        config: id,
        flags: DISABLED,
        ..Default::default()
    };
    // SAFETY: perf_event_open(2) with a valid, initialised attr of the size it states; the
    // result is checked before it is owned.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_perf_event_open,
            &attr as *const PerfEventAttrV0,
            -1,
            0,
            -1,
            FD_CLOEXEC,
        )
    };
    if fd < 0 {
        return Err(std::io::Error::last_os_error())
            .context(format!("cannot open a perf event on tracepoint id {id}"));
    }
    // SAFETY: fd is a new descriptor this process owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as i32) })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tracepoint_sections_table() {
        for (section, want) in [
            (
                "tracepoint/syscalls/sys_enter_openat",
                Some("syscalls/sys_enter_openat"),
            ),
            ("tp/sched/sched_switch", Some("sched/sched_switch")),
            ("tracepoint", None),
            ("tracepoint/syscalls", None),
            ("raw_tracepoint/sys_enter", None),
            ("lsm/file_open", None),
            ("tp/../x", None),
        ] {
            assert_eq!(tracepoint_of(section).as_deref(), want, "{section}");
        }
        let a = [
            "tracepoint/syscalls/sys_enter_openat".to_string(),
            "lsm/file_open".into(),
        ];
        let b = [
            "tp/syscalls/sys_enter_openat".to_string(),
            "tp/syscalls/sys_exit_openat".into(),
        ];
        assert_eq!(
            common(&a, &b).into_iter().collect::<Vec<_>>(),
            ["syscalls/sys_enter_openat"]
        );
    }

    /// The mechanism `--compare` relies on: a program whose link is closed on another thread is
    /// seen on the tracepoint while it is there and off it once it is gone.
    #[test]
    #[ignore = "needs root (loads BPF): scripts/test.sh runs it"]
    fn a_program_is_seen_on_and_off_its_tracepoint_through_the_held_event() {
        if !crate::host::security::root_or_skip(
            "a_program_is_seen_on_and_off_its_tracepoint_through_the_held_event",
        ) {
            return;
        }
        let section = ["tracepoint/syscalls/sys_enter_openat".to_string()];
        let anchors = hold(&common(&section, &section)).unwrap();
        assert_eq!(anchors.names(), ["syscalls/sys_enter_openat"]);
        assert!(anchors.cover(&section));
        let mut a = crate::bpf::attach(crate::bpf::ObjectSource::Bytes {
            name: "lookups_2.bpf.o",
            bytes: crate::bpf::HOOK_LOOKUPS_A,
        })
        .unwrap();
        let ids = a.program_ids();
        let on = anchors.programs_on().unwrap();
        assert!(
            !ids.is_empty() && ids.iter().all(|i| on.contains(i)),
            "{ids:?} on {on:?}"
        );
        let links = a.take_links();
        let closing = std::thread::spawn(move || drop(links));
        anchors.wait_off(&ids).unwrap();
        let on = anchors.programs_on().unwrap();
        assert!(
            ids.iter().all(|i| !on.contains(i)),
            "{ids:?} still on {on:?}"
        );
        closing.join().unwrap();
    }

    #[test]
    fn perf_event_attr_is_the_first_abi_size() {
        assert_eq!(std::mem::size_of::<PerfEventAttrV0>(), 64);
    }
}
