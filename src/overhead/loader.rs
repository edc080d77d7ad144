//! The user's own loader (`--attach-cmd`): its label (the program it finally runs, through
//! wrappers such as `unshare … sh -c '… && exec execsnoop'`), its command line quoted as a shell
//! would need it, and starting it — optionally in a mount namespace of its own with tracefs
//! mounted — while its stderr is passed on and watched, so that the wait for its programs ends
//! as soon as it exits, prints an error and loads nothing, or idles without having loaded
//! anything, instead of after the whole `--attach-timeout`.
//!
//! The loader runs in a process group of its own, and stopping it ends the whole group: a
//! loader that a shell put in the background (`sh -c '… &'`) goes too. The group is recorded in
//! the restore state (`host::recovery`) while it runs, so that should this run be SIGKILLed the
//! next start ends what is left of it. Its stderr is passed on once per distinct line: a line
//! seen before (bpftrace's RLIMIT_MEMLOCK warning at each of a dozen starts) is counted, and
//! the counts are said once at the end ([`repeated_lines`]).

pub use crate::bpf::LoaderMounts;
use crate::bpf::{self, LoadedProgram, LoaderState};
use crate::error::usage;
use crate::host::recovery::{self, LoaderGroup};
use crate::host::{procs, Host};
use anyhow::Result;
use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader};
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How a loader is started and waited for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LoaderOptions {
    /// How long to wait for its programs (`--attach-timeout`).
    pub timeout: Duration,
    pub mounts: LoaderMounts,
}

impl Default for LoaderOptions {
    fn default() -> Self {
        LoaderOptions {
            timeout: Duration::from_secs(30),
            mounts: LoaderMounts::Host,
        }
    }
}

/// The user's loader: its argv and how to start it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Loader {
    pub argv: Vec<String>,
    pub options: LoaderOptions,
}

/// After printing an error, how long the loader has to load something before the wait ends.
const AFTER_ERROR: Duration = Duration::from_secs(1);
/// How long a loader that has loaded nothing may use no CPU at all before it counts as idle.
const IDLE: Duration = Duration::from_secs(2);

impl Loader {
    /// The program it finally runs, for labels ("execsnoop", not "unshare").
    pub fn label(&self) -> String {
        final_program(&self.argv)
    }

    /// The command line, each word quoted where a shell needs it.
    pub fn line(&self) -> String {
        crate::perf::record::quote_line(&self.argv)
    }

    /// Start it and wait until its new programs are loaded (see [`bpf::wait_for_loader`]): the
    /// loader, and its programs or why the wait ended without them (the caller stops it then).
    pub fn start(&self) -> Result<(Child, Result<Vec<LoadedProgram>>)> {
        let line = self.line();
        let argv = checked_argv(&self.argv)?;
        crate::failpoint::hit("loader:checked");
        let before: BTreeSet<u32> = bpf::loaded_programs()?.iter().map(|p| p.id).collect();
        let mut cmd = Command::new(&argv[0]);
        cmd.args(&argv[1..])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        prepare_child(&mut cmd, self.options.mounts);
        let mut child = cmd
            .spawn()
            .map_err(|e| usage(format!("cannot start --attach-cmd {line}: {e}")))?;
        let host = Host::live();
        recovery::save_loader_group(&host, Some(LoaderGroup::of(&host, child.id())))?;
        let errors = pass_on_stderr(&mut child);
        let mut watch = Watch::new(child.id(), errors);
        let (timeout, mounts) = (self.options.timeout, self.options.mounts);
        let waited =
            bpf::wait_for_loader(&before, timeout, mounts, &mut || watch.state(&mut child));
        Ok((child, waited))
    }
}

/// Between fork and exec: a process group of its own (so that stopping it ends what it
/// starts), stop the loader with us (the kernel sends it SIGTERM should we be SIGKILLed, and
/// the programs it holds go with it), and give it its mount namespace.
fn prepare_child(cmd: &mut Command, mounts: LoaderMounts) {
    let parent = std::process::id() as libc::pid_t;
    // SAFETY: setpgid, prctl, getppid, unshare and mount are async-signal-safe system calls,
    // and nothing here allocates or touches the parent's memory.
    unsafe {
        cmd.pre_exec(move || {
            if libc::setpgid(0, 0) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM);
            if libc::getppid() != parent {
                // We were already gone before the prctl took effect.
                libc::_exit(1);
            }
            if mounts == LoaderMounts::PrivateTracefs {
                crate::host::mounts::tracing_namespace_for_exec()?;
            }
            Ok(())
        });
    }
}

/// How a loader's stop went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stopped {
    /// It was running, and it and its group were ended.
    Ended,
    /// It had exited before it was asked to (its group was ended all the same).
    HadExited,
}

/// How long a loader's group has to go after SIGTERM before SIGKILL.
const TERM_GRACE: Duration = Duration::from_secs(5);

/// End the loader `child` and its whole process group: SIGTERM to the group, SIGKILL to what
/// is left of it after [`TERM_GRACE`]; the loader reaped, and its group's record forgotten.
pub fn stop(child: &mut Child) -> Result<Stopped> {
    let pgid = child.id();
    // A shell that put the loader in the background has exited, but the loader runs on in
    // its group: only an empty group means the loader is gone.
    let had_exited = child.try_wait()?.is_some() && crate::signals::group_is_empty(pgid);
    crate::signals::send_group(pgid, libc::SIGTERM);
    if !wait_group_gone(child, pgid, TERM_GRACE)? {
        crate::signals::send_group(pgid, libc::SIGKILL);
        child.wait()?;
        wait_group_gone(child, pgid, Duration::from_secs(1))?;
    }
    recovery::save_loader_group(&Host::live(), None)?;
    Ok(match had_exited {
        true => Stopped::HadExited,
        false => Stopped::Ended,
    })
}

/// Reap the loader when it exits, and wait up to `within` for its group to have no process
/// left; whether it has none.
fn wait_group_gone(child: &mut Child, pgid: u32, within: Duration) -> Result<bool> {
    let deadline = Instant::now() + within;
    loop {
        let reaped = child.try_wait()?.is_some();
        if reaped && crate::signals::group_is_empty(pgid) {
            return Ok(true);
        }
        if Instant::now() >= deadline {
            return Ok(false);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Every distinct line the loaders of this run printed on stderr, with how often. A loader is
/// started a dozen times in a run; its start-up lines are the same each time.
static LINES_SEEN: Mutex<BTreeMap<String, u64>> = Mutex::new(BTreeMap::new());

/// Whether to pass `line` on: the first time it is seen in this run; it is counted either way.
fn first_time(line: &str) -> bool {
    let Ok(mut seen) = LINES_SEEN.lock() else {
        return true;
    };
    let count = seen.entry(line.to_string()).or_insert(0);
    *count += 1;
    *count == 1
}

/// The lines the loaders printed more than once, each with its count, for the end of the run
/// ("… repeated N times"); the counts start again after.
pub fn repeated_lines() -> Vec<String> {
    let Ok(mut seen) = LINES_SEEN.lock() else {
        return Vec::new();
    };
    let taken = std::mem::take(&mut *seen);
    repeats_said(&taken)
}

/// The words for the lines of `seen` printed more than once.
fn repeats_said(seen: &BTreeMap<String, u64>) -> Vec<String> {
    seen.iter()
        .filter(|(_, count)| **count > 1)
        .map(|(line, count)| {
            format!(
                "the loader's line \"{}\" (shown once above) repeated {count} times in all",
                line.trim()
            )
        })
        .collect()
}

/// Pass the loader's stderr on to ours, line by line, on a thread of its own (until the loader
/// closes it), each distinct line once a run ([`first_time`]); the last line that reads as an
/// error, with when it came.
fn pass_on_stderr(child: &mut Child) -> Arc<Mutex<Option<(String, Instant)>>> {
    let last = Arc::new(Mutex::new(None));
    let Some(stderr) = child.stderr.take() else {
        return last;
    };
    let seen = Arc::clone(&last);
    let spawned = std::thread::Builder::new()
        .name("ebpf-prof-loader-stderr".into())
        .spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(|l| l.ok()) {
                if first_time(&line) {
                    crate::out::err_text(&format!("{line}\n"));
                }
                if reads_as_error(&line) {
                    if let Ok(mut slot) = seen.lock() {
                        *slot = Some((line, Instant::now()));
                    }
                }
            }
        });
    drop(spawned);
    last
}

/// Whether a line a loader printed says something failed. bpftrace's RLIMIT_MEMLOCK line
/// reads "ERROR" but is a warning it prints before loading fine (kernels since 5.11 account
/// BPF memory to the cgroup, not to that limit).
fn reads_as_error(line: &str) -> bool {
    let lower = line.to_ascii_lowercase();
    if lower.contains("rlimit_memlock") {
        return false;
    }
    [
        "error",
        "failed",
        "failure",
        "cannot",
        "can't",
        "could not",
        "not supported",
        "permission denied",
        "no such file",
    ]
    .iter()
    .any(|w| lower.contains(w))
}

/// What the wait knows of the loader: its error lines, and its CPU time over time.
struct Watch {
    pid: u32,
    errors: Arc<Mutex<Option<(String, Instant)>>>,
    ticks: u64,
    busy_at: Instant,
}

impl Watch {
    fn new(pid: u32, errors: Arc<Mutex<Option<(String, Instant)>>>) -> Watch {
        Watch {
            pid,
            errors,
            ticks: 0,
            busy_at: Instant::now(),
        }
    }

    /// Asked while none of its programs is loaded.
    fn state(&mut self, child: &mut Child) -> LoaderState {
        // The command may have exited leaving the loader it started in the background, in its
        // process group: the loader has exited when the whole group has.
        let exited = !matches!(child.try_wait(), Ok(None));
        if exited && crate::signals::group_is_empty(self.pid) {
            return LoaderState::Exited;
        }
        let error = self.errors.lock().ok().and_then(|e| e.clone());
        if let Some((line, at)) = error.filter(|(_, at)| at.elapsed() >= AFTER_ERROR) {
            let ago = at.elapsed().as_secs_f64();
            return LoaderState::WillNotLoad(format!(
                "the loader printed \"{}\" {ago:.0} s ago and has loaded nothing since",
                line.trim()
            ));
        }
        let ticks = match exited {
            false => procs::tree_cpu_ticks(&Host::live(), self.pid),
            true => procs::group_cpu_ticks(&Host::live(), self.pid),
        };
        if ticks != self.ticks {
            self.ticks = ticks;
            self.busy_at = Instant::now();
        } else if self.busy_at.elapsed() >= IDLE {
            return LoaderState::WillNotLoad(format!(
                "the loader has used no CPU for {:.0} s (it idles)",
                IDLE.as_secs_f64()
            ));
        }
        LoaderState::Running
    }
}

/// Programs that run the command after their options: their names, the options of theirs
/// that take a value (as a separate word), and how many plain words they take before it.
const WRAPPERS: &[(&str, &[&str], usize)] = &[
    (
        "unshare",
        &[
            "--propagation",
            "-R",
            "--root",
            "-w",
            "--wd",
            "-S",
            "--setuid",
            "-G",
            "--setgid",
            "--setgroups",
            "--map-user",
            "--map-group",
        ],
        0,
    ),
    (
        "nsenter",
        &["-t", "--target", "-S", "--setuid", "-G", "--setgid"],
        0,
    ),
    ("env", &["-u", "--unset", "-C", "--chdir"], 0),
    (
        "sudo",
        &["-u", "--user", "-g", "--group", "-C", "-D", "-h", "-p"],
        0,
    ),
    ("nice", &["-n", "--adjustment"], 0),
    ("ionice", &["-c", "--class", "-n", "--classdata"], 0),
    ("chrt", &[], 1),
    ("taskset", &[], 1),
    ("timeout", &["-s", "--signal", "-k", "--kill-after"], 1),
    ("stdbuf", &["-i", "-o", "-e"], 0),
    ("setsid", &[], 0),
    ("exec", &[], 0),
    ("nohup", &[], 0),
];

/// Shells whose `-c SCRIPT` runs the command.
const SHELLS: &[&str] = &["sh", "bash", "dash", "zsh", "ksh", "ash"];

/// The name of the program `argv` finally runs: wrappers, their options and shells' scripts
/// looked through (the last command of a script).
pub fn final_program(argv: &[String]) -> String {
    let mut words: Vec<String> = argv.to_vec();
    for _ in 0..16 {
        let Some(first) = words.first() else {
            break;
        };
        let name = first.rsplit('/').next().unwrap_or(first).to_string();
        if SHELLS.contains(&name.as_str()) {
            match shell_script_command(&words) {
                Some(next) => words = next,
                None => return name,
            }
            continue;
        }
        let Some((_, valued, plain)) = WRAPPERS.iter().find(|(w, _, _)| *w == name) else {
            return name;
        };
        words = after_wrapper(&words[1..], valued, *plain, name == "env");
    }
    argv.first().cloned().unwrap_or_default()
}

/// Wrappers whose command runs in another file system view (another mount namespace, another
/// root): its program cannot be checked from here, so it is left for the wrapper to find.
const OTHER_ROOT: &[&str] = &["nsenter", "chroot", "-R", "--root"];

/// `argv` with its program, and each program its wrappers run in turn, replaced by the absolute
/// path found on `PATH` and checked as root (`perf::trust::program`): `taskset -c 0 my-loader`
/// runs as `/usr/bin/taskset -c 0 /usr/local/bin/my-loader`, so a file planted later in an
/// earlier `PATH` directory is never what a wrapper starts. A shell's script is the shell's own
/// to look up.
pub fn checked_argv(argv: &[String]) -> Result<Vec<String>> {
    let mut words = argv.to_vec();
    let mut at = 0;
    while let Some(first) = words.get(at) {
        let name = first.rsplit('/').next().unwrap_or(first).to_string();
        let found = crate::perf::trust::program(std::ffi::OsStr::new(first), "--attach-cmd")?;
        words[at] = found.into_os_string().into_string().map_err(|p| {
            usage(format!(
                "--attach-cmd: {} is not a UTF-8 path",
                std::path::Path::new(&p).display()
            ))
        })?;
        let Some((_, valued, plain)) = WRAPPERS.iter().find(|(w, _, _)| *w == name) else {
            break;
        };
        let rest = &words[at + 1..];
        let start = wrapped_start(rest, valued, *plain, name == "env");
        let elsewhere = std::iter::once(&name).chain(&rest[..start]);
        if elsewhere
            .into_iter()
            .any(|w| OTHER_ROOT.contains(&w.as_str()))
        {
            break;
        }
        at += 1 + start;
    }
    Ok(words)
}

/// The words after a wrapper's options (`valued` take the next word; `plain` positional words
/// are skipped; for `env`, VAR=VALUE words too).
fn after_wrapper(words: &[String], valued: &[&str], plain: usize, env: bool) -> Vec<String> {
    let start = wrapped_start(words, valued, plain, env);
    words.get(start..).unwrap_or_default().to_vec()
}

/// Where the wrapped command starts in the words after a wrapper (see [`after_wrapper`]).
fn wrapped_start(words: &[String], valued: &[&str], plain: usize, env: bool) -> usize {
    let mut i = 0;
    let mut positional = 0;
    while i < words.len() {
        let w = words[i].as_str();
        if w == "--" {
            i += 1;
            break;
        }
        if w.starts_with('-') {
            i += if valued.contains(&w) { 2 } else { 1 };
        } else if env && w.contains('=') {
            i += 1;
        } else if positional < plain {
            positional += 1;
            i += 1;
        } else {
            break;
        }
    }
    i.min(words.len())
}

/// The last command of `sh … -c SCRIPT`'s script, as words.
fn shell_script_command(words: &[String]) -> Option<Vec<String>> {
    let at = words.iter().position(|w| w == "-c")?;
    let script = words.get(at + 1)?;
    let spaced = script
        .replace("&&", " ; ")
        .replace("||", " ; ")
        .replace(['|', ';'], " ; ");
    let parts = shlex::split(&spaced)?;
    let last = parts.split(|w| w == ";").rfind(|c| !c.is_empty())?;
    Some(last.to_vec())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(line: &str) -> Vec<String> {
        shlex::split(line).unwrap()
    }

    /// Each program a wrapper runs is run by the path that was checked, not found again on
    /// PATH by the wrapper; a shell's script and what runs in another root are left alone.
    #[test]
    fn wrapped_programs_are_run_by_their_checked_paths() {
        // (line, the words that are programs, resolved to absolute paths with these names)
        let cases: &[(&str, &[usize])] = &[
            ("env FOO=1 nice -n 5 timeout 30 true --x", &[0, 2, 5, 7]),
            ("sh -c 'true; true'", &[0]),
            ("nsenter -t 1 -m true", &[0]),
            ("true", &[0]),
        ];
        for (line, programs) in cases {
            let given = words(line);
            let checked = checked_argv(&given).unwrap();
            assert_eq!(checked.len(), given.len(), "{line}");
            for (i, (before, after)) in given.iter().zip(&checked).enumerate() {
                if programs.contains(&i) {
                    let p = std::path::Path::new(after);
                    assert!(p.is_absolute(), "{line}: word {i} is {after}");
                    assert_eq!(p.file_name().unwrap().to_str(), Some(before.as_str()));
                } else {
                    assert_eq!(before, after, "{line}: word {i} changed");
                }
            }
        }
    }

    #[test]
    fn labelled_by_the_program_it_finally_runs() {
        let cases = [
            ("/usr/sbin/execsnoop", "execsnoop"),
            (
                "unshare -m --propagation private sh -c 'mount -t tracefs nodev /sys/kernel/tracing && exec syscount -L'",
                "syscount",
            ),
            (
                "unshare -m --propagation private sh -c 'mount -t tracefs nodev /sys/kernel/tracing 2>/dev/null; mount -t debugfs nodev /sys/kernel/debug; exec /usr/sbin/opensnoop'",
                "opensnoop",
            ),
            ("env FOO=1 nice -n 5 ./agent --config x", "agent"),
            ("taskset -c 0 chrt -f 50 timeout 30 my-loader", "my-loader"),
            ("sudo -u root -- bpftrace -e x", "bpftrace"),
            ("bash -c 'cd /tmp; ./hook'", "hook"),
            ("sh", "sh"),
        ];
        for (line, want) in cases {
            assert_eq!(final_program(&words(line)), want, "{line}");
        }
    }

    #[test]
    fn error_lines_are_told_from_chatter() {
        assert!(reads_as_error(
            "libbpf: failed to determine tracepoint 'syscalls/sys_enter_stat' perf event ID"
        ));
        assert!(reads_as_error("Error: failed to load BPF object"));
        assert!(!reads_as_error(
            "ERROR: Unknown error -1: couldn't set RLIMIT_MEMLOCK for bpftrace. If your program is not loading, you can try \"ulimit -l 8192\" to fix the problem"
        ));
        assert!(!reads_as_error(
            "Tracing syscalls, printing top 10... Ctrl+C to quit."
        ));
    }

    #[test]
    fn repeated_lines_are_said_once_with_their_count() {
        let seen: BTreeMap<String, u64> = [
            ("ERROR: couldn't set RLIMIT_MEMLOCK".to_string(), 25),
            ("Attaching 1 probe...".to_string(), 1),
        ]
        .into_iter()
        .collect();
        assert_eq!(
            repeats_said(&seen),
            ["the loader's line \"ERROR: couldn't set RLIMIT_MEMLOCK\" (shown once above) repeated 25 times in all"]
        );
        assert!(first_time("a line only this test prints"));
        assert!(!first_time("a line only this test prints"));
    }

    #[test]
    fn the_line_is_quoted() {
        let l = Loader {
            argv: words("sh -c 'exec x'"),
            options: LoaderOptions::default(),
        };
        assert_eq!(l.line(), "sh -c 'exec x'");
        assert_eq!(l.label(), "x");
    }
}
