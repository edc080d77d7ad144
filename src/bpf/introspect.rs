//! What is loaded in the kernel: every BPF program with its type and maps (as
//! `bpftool prog show`), the ids an [`Attached`] object owns, and a watcher that waits for a
//! loader someone else wrote (`overhead --attach-cmd`) to finish loading its programs.

use std::collections::BTreeSet;
use std::os::fd::AsFd;
use std::time::{Duration, Instant};

use libbpf_rs::MapCore;

use super::ids;
use super::Attached;
use crate::error::{child, usage};
use crate::host::{kallsyms, sysctl, Host};

/// How often the watcher lists program ids.
const POLL: Duration = Duration::from_millis(20);
/// How long the set of new programs must stay the same before the loader counts as done:
/// libbpf-based loaders load probe programs and drop them again while they start.
const SETTLE: Duration = Duration::from_millis(200);

/// One program loaded in the kernel, by whoever loaded it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct LoadedProgram {
    /// Kernel program id.
    pub id: u32,
    /// The kernel's copy of the name, cut to 15 bytes; kallsyms has the full one.
    pub name: String,
    /// Kernel tag, 16 hex digits.
    pub tag: String,
    /// The program type as libbpf and bpftool spell it: `tracepoint`, `lsm`, `kprobe`, ….
    pub prog_type: String,
    /// Ids of the maps the program uses.
    pub map_ids: Vec<u32>,
}

impl Attached {
    /// Kernel ids of the object's programs, attached or not, in the object's order.
    pub fn program_ids(&self) -> Vec<u32> {
        self.programs().iter().map(|p| p.id).collect()
    }

    /// Kernel ids of the maps the object created (its internal `.rodata`/`.bss` maps and
    /// tail-call tables included).
    pub fn map_ids(&self) -> Vec<u32> {
        self.object()
            .maps()
            .filter_map(|map| map.info().ok().map(|info| info.info.id))
            .collect()
    }
}

/// Ids of the BPF links that attach any of the programs `progs` (see `bpftool link show`).
pub fn links_to(progs: &[u32]) -> anyhow::Result<Vec<u32>> {
    ids::links_to(progs)
}

/// Ids of every program loaded right now.
pub fn loaded_program_ids() -> anyhow::Result<BTreeSet<u32>> {
    Ok(ids::all_prog_ids()?.into_iter().collect())
}

/// Every program loaded right now, ascending ids.
pub fn loaded_programs() -> anyhow::Result<Vec<LoadedProgram>> {
    describe(ids::all_prog_ids()?)
}

/// Program `id`'s full name from its BTF (see [`ids::full_name`]); `None` when it is gone or
/// has no BTF (show the kernel's name through [`ids::marked_if_cut`] then).
pub fn full_name(id: u32) -> Option<String> {
    let fd = ids::open_prog(id).ok()??;
    let info = ids::prog_info(fd.as_fd(), false).ok()?;
    ids::full_name(fd.as_fd(), &info.info)
}

/// The programs among `ids` that are still loaded.
fn describe(ids: impl IntoIterator<Item = u32>) -> anyhow::Result<Vec<LoadedProgram>> {
    let mut programs = Vec::new();
    for id in ids {
        let Some(fd) = ids::open_prog(id)? else {
            continue; // unloaded since it was listed
        };
        let info = ids::prog_info(fd.as_fd(), true)?;
        programs.push(LoadedProgram {
            id,
            name: ids::object_name(&info.info.name),
            tag: ids::hex_tag(&info.info.tag),
            prog_type: ids::prog_type_name(info.info.type_),
            map_ids: info.map_ids,
        });
    }
    Ok(programs)
}

/// Wait until programs that are not in `before` have been loaded and the loader is done.
///
/// Polls the program ids every 20 ms and returns the new programs once there are some, the
/// set has not changed for 200 ms, and (when `net.core.bpf_jit_kallsyms` is 1) each one's
/// `bpf_prog_<tag>_<name>` symbol is in /proc/kallsyms, so a profile started now names them.
/// `still_running` reports whether the loader process is alive: once it is not, the wait fails
/// unless its programs outlived it (pinned). Take `before` with [`loaded_program_ids`] just
/// before starting the loader. Errors are one line, usage kind; add the command line with
/// `.context()`. Programs loaded meanwhile by anyone else count as new too.
pub fn wait_for_new_programs(
    before: &BTreeSet<u32>,
    timeout: Duration,
    still_running: &mut dyn FnMut() -> bool,
) -> anyhow::Result<Vec<LoadedProgram>> {
    wait_for_loader(before, timeout, LoaderMounts::Host, &mut || {
        if still_running() {
            LoaderState::Running
        } else {
            LoaderState::Exited
        }
    })
}

/// Where a loader finds its filesystems.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LoaderMounts {
    /// The host's, as they are.
    Host,
    /// A mount namespace of its own with tracefs (and debugfs) mounted (`--attach-tracefs`).
    PrivateTracefs,
}

/// What the loader being waited for is doing, as its watcher sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LoaderState {
    /// Still starting, or loading.
    Running,
    /// Its process is gone.
    Exited,
    /// It is up but shows it will not load anything: the sentence says how (an error it
    /// printed, or that it idles).
    WillNotLoad(String),
}

/// [`wait_for_new_programs`], told by `state` what the loader does: the wait ends as soon as
/// the loader has exited or shows it will not load, with no new program loaded. `mounts`: how
/// the loader was started, so that a hint never asks for what was given. A loader that exits
/// or will not load is a program we ran that failed (exit code 3); a wait that times out is
/// not (2: allow more time).
pub fn wait_for_loader(
    before: &BTreeSet<u32>,
    timeout: Duration,
    mounts: LoaderMounts,
    state: &mut dyn FnMut() -> LoaderState,
) -> anyhow::Result<Vec<LoadedProgram>> {
    let start = Instant::now();
    let mut settle = Settle::default();
    let mut ever_seen = false;
    loop {
        let now = Instant::now();
        let fresh = loaded_program_ids()?.difference(before).copied().collect();
        settle.observe(fresh, now);
        ever_seen |= !settle.set.is_empty();
        if settle.settled(now) {
            let programs = describe(settle.set.iter().copied())?;
            if !programs.is_empty() && kallsyms_lists(&programs)? {
                return Ok(programs);
            }
        }
        if settle.set.is_empty() {
            match state() {
                LoaderState::Running => {}
                LoaderState::Exited => return Err(exited_error(ever_seen, mounts)),
                LoaderState::WillNotLoad(how) => {
                    return Err(child(format!(
                        "{how}, and no BPF program of its is loaded{}",
                        tracefs_hint(mounts)
                    )))
                }
            }
        }
        if start.elapsed() >= timeout {
            return Err(timeout_error(timeout, &settle, ever_seen));
        }
        std::thread::sleep(POLL);
    }
}

/// The set of new program ids and since when it has been what it is.
#[derive(Debug, Default)]
struct Settle {
    set: BTreeSet<u32>,
    since: Option<Instant>,
}

impl Settle {
    fn observe(&mut self, set: BTreeSet<u32>, now: Instant) {
        if self.since.is_none() || set != self.set {
            self.set = set;
            self.since = Some(now);
        }
    }

    /// Non-empty and unchanged for [`SETTLE`].
    fn settled(&self, now: Instant) -> bool {
        let stable = self.since.is_some_and(|t| now.duration_since(t) >= SETTLE);
        stable && !self.set.is_empty()
    }
}

/// Whether every program's symbol is in /proc/kallsyms (always true when the kernel does not
/// publish BPF symbols: `bpf_jit_kallsyms` off, or `bpf_jit_harden` on, which disables them).
fn kallsyms_lists(programs: &[LoadedProgram]) -> anyhow::Result<bool> {
    let host = Host::live();
    let published = sysctl::read_int(&host, "net.core.bpf_jit_kallsyms") == Some(1)
        && sysctl::read_int(&host, "net.core.bpf_jit_harden").unwrap_or(0) == 0;
    if !published {
        return Ok(true);
    }
    let text = kallsyms::read_text(&host)?;
    Ok(missing_symbols(programs, &text).is_empty())
}

/// Ids of the programs with no `bpf_prog_<tag>_<name>` line in `kallsyms_text`. kallsyms has
/// the full (BTF) name, which starts with the kernel's 15-byte copy.
fn missing_symbols(programs: &[LoadedProgram], kallsyms_text: &str) -> Vec<u32> {
    let lines = kallsyms_text.lines().filter(|l| l.ends_with("[bpf]"));
    let symbols =
        kallsyms::bpf_programs(&lines.filter_map(kallsyms::parse_line).collect::<Vec<_>>());
    programs
        .iter()
        .filter(|p| {
            !symbols
                .iter()
                .any(|s| s.tag == p.tag && s.name.starts_with(&p.name))
        })
        .map(|p| p.id)
        .collect()
}

fn exited_error(ever_seen: bool, mounts: LoaderMounts) -> anyhow::Error {
    let why = if ever_seen {
        "the command exited, and the BPF programs it had loaded were unloaded with it: \
         a loader must keep running (or pin its programs) while it is measured"
    } else {
        "the command exited before loading any BPF program: run it by hand to see why \
         (it must load and attach its programs, then keep running)"
    };
    child(format!("{why}{}", tracefs_hint(mounts)))
}

/// What a libbpf loader meets here when tracefs is not mounted (libbpf-tools' `syscount`
/// prints "failed to determine tracepoint … perf event ID" and exits). Given
/// `--attach-tracefs`, tracefs was there: the loader's own lines say why it failed.
fn tracefs_hint(mounts: LoaderMounts) -> &'static str {
    if mounts == LoaderMounts::PrivateTracefs {
        return "; it ran with tracefs and debugfs mounted (--attach-tracefs), so its own error lines above say why";
    }
    if crate::host::mounts::tracefs_visible(&crate::host::Host::live()) {
        return "";
    }
    "; tracefs is not mounted, so a libbpf-based loader cannot attach tracepoints: \
     give --attach-tracefs (the loader then runs in a mount namespace of its own with \
     tracefs mounted there), or mount -t tracefs nodev /sys/kernel/tracing"
}

fn timeout_error(timeout: Duration, settle: &Settle, ever_seen: bool) -> anyhow::Error {
    let secs = seconds(timeout);
    let ids = settle
        .set
        .iter()
        .map(u32::to_string)
        .collect::<Vec<_>>()
        .join(", ");
    if !ever_seen {
        return usage(format!(
            "no new BPF program appeared within {secs} after starting the command: check that \
             it loads BPF programs (bpftool prog show while it runs), or allow it more time"
        ));
    }
    if settle.settled(Instant::now()) {
        return usage(format!(
            "new BPF programs (ids {ids}) appeared, but their bpf_prog_<tag>_<name> symbols were \
             not in /proc/kallsyms within {secs}: check `sysctl net.core.bpf_jit_kallsyms`"
        ));
    }
    usage(format!(
        "BPF programs kept appearing and disappearing for {secs} after starting the command \
         (new now: {}): it never settled; allow it more time",
        if ids.is_empty() { "none" } else { &ids }
    ))
}

/// `10 s`, `2.5 s`.
fn seconds(d: Duration) -> String {
    let s = d.as_secs_f64();
    if s.fract() == 0.0 {
        format!("{s:.0} s")
    } else {
        format!("{s:.1} s")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn program(id: u32, name: &str, tag: &str) -> LoadedProgram {
        LoadedProgram {
            id,
            name: name.into(),
            tag: tag.into(),
            prog_type: "tracepoint".into(),
            map_ids: vec![],
        }
    }

    #[test]
    fn settles_after_an_unchanged_non_empty_set() {
        let t0 = Instant::now();
        let mut s = Settle::default();
        s.observe(BTreeSet::new(), t0);
        assert!(!s.settled(t0 + SETTLE * 2), "an empty set never settles");
        s.observe([5].into(), t0 + POLL);
        assert!(!s.settled(t0 + POLL + SETTLE / 2));
        s.observe([5, 6].into(), t0 + SETTLE);
        assert!(
            !s.settled(t0 + SETTLE + POLL),
            "a change restarts the clock"
        );
        s.observe([5, 6].into(), t0 + SETTLE * 2);
        assert!(s.settled(t0 + SETTLE * 2));
    }

    #[test]
    fn kallsyms_match_on_tag_and_name_prefix() {
        let text = "ffffffffc0000000 t bpf_prog_1307ade3162da109_tail_call_security_check\t[bpf]\n\
                    ffffffffc0001000 t bpf_prog_ced0c9407c526ed9_enforce_access_policy\t[bpf]\n\
                    ffffffff81000000 T _stext\n";
        let programs = [
            program(1, "tail_call_secur", "1307ade3162da109"),
            program(2, "enforce_access_", "ced0c9407c526ed9"),
            program(3, "enforce_access_", "0000000000000000"),
        ];
        assert_eq!(missing_symbols(&programs, text), [3]);
    }

    #[test]
    fn errors_are_one_line_usage_errors() {
        let settle = Settle::default();
        let err = timeout_error(Duration::from_secs(10), &settle, false);
        let text = err.to_string();
        assert!(
            text.starts_with("no new BPF program appeared within 10 s after starting"),
            "{text}"
        );
        assert_eq!(text.lines().count(), 1);
        assert_eq!(crate::error::exit_code(&err), 2);
        let exited = exited_error(false, LoaderMounts::Host);
        let err = exited.to_string();
        assert!(err.starts_with("the command exited before loading any BPF program"));
        assert_eq!(
            crate::error::exit_code(&exited),
            3,
            "a program we ran failed"
        );
        let given = exited_error(false, LoaderMounts::PrivateTracefs).to_string();
        assert!(!given.contains("give --attach-tracefs"), "{given}");
        assert!(
            given.contains("ran with tracefs and debugfs mounted"),
            "{given}"
        );
        assert_eq!(seconds(Duration::from_millis(2500)), "2.5 s");
    }
}
