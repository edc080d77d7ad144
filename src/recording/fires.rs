//! Whether the recording's programs run under the built-in bench: the operation (`--op auto`
//! reads the programs' attach points: the object's sections, or for programs someone else
//! loaded their links), and a short run with run stats on just before perf starts. A recording
//! in which the programs never ran holds none of their frames; `record` says so before it
//! records, and keeps the figure in perf.data.json for `report`.

use super::RecordOptions;
use crate::bench::choose::Chosen;
use crate::bench::OpKind;
use crate::bpf::{self, Attached, InventoryProgram};
use crate::error::child;
use crate::out::say;
use crate::runrecord::ProgramsRan;
use anyhow::{Context, Result};
use std::ffi::OsString;
use std::process::{Command, Stdio};

/// Iterations of the short run.
const CHECK_ITERATIONS: usize = 1_000;

/// `--op` with a benchmark of one's own: refused, it makes its own operation.
pub fn refuse_op_with_own_bench(opts: &RecordOptions) -> Result<()> {
    crate::bench::choose::refuse_op_with_own_bench(
        opts.op_choice,
        opts.op.operation(),
        &opts.command,
    )
}

/// The operation for the recording's programs, said on stderr: from the loaded object's
/// sections, or the links of the programs `shown` when nothing was loaded.
pub fn operation(
    opts: &RecordOptions,
    attached: Option<&Attached>,
    shown: &[&InventoryProgram],
) -> (OpKind, Chosen) {
    let points: Vec<(String, String)> = match attached {
        Some(a) => a
            .programs()
            .iter()
            .map(|p| (p.name.clone(), p.section.clone()))
            .collect(),
        None => shown
            .iter()
            .map(|p| (p.name.clone(), p.attach.clone().unwrap_or_default()))
            .collect(),
    };
    let path = opts
        .op
        .path()
        .unwrap_or(std::path::Path::new("/etc/hostname"));
    let (op, chosen) = bpf::choice::for_points(&points, &opts.op, opts.op_choice, path);
    say(chosen.line());
    (op, chosen)
}

/// How the recording's benchmark is pinned: by which helpers, to which CPU, at which priority.
pub struct Pinning<'a> {
    pub tools: &'a crate::bench::pinned::PinTools,
    pub cpu: u32,
    pub priority: Option<u8>,
}

/// A short run of `command` (the built-in bench, `-n N` in it) pinned as the recording's
/// is, with run stats on: the programs `ids`' runs per timed operation inside the span (the
/// runs of the same loop without its timed operation, `--untimed-only`, taken off). Said on
/// stderr, as a warning when under one in two.
pub fn check(
    ids: &[u32],
    command: &[OsString],
    pinning: &Pinning<'_>,
    chosen: &Chosen,
) -> Result<ProgramsRan> {
    let short = with_iterations(command, CHECK_ITERATIONS);
    let run = |argv: Vec<OsString>| {
        let line =
            crate::bench::pinned::argv(pinning.tools, &[pinning.cpu], pinning.priority, &argv);
        move || run_quietly(&line)
    };
    let mut untimed = short.clone();
    untimed.push("--untimed-only".into());
    let ((), timed_runs) = bpf::runs_during(ids, run(short))?;
    let ((), outside_runs) = bpf::runs_during(ids, run(untimed))?;
    let runs = timed_runs.saturating_sub(outside_runs);
    let ran = ProgramsRan {
        op: chosen.op.name().into(),
        runs_per_op: runs as f64 / CHECK_ITERATIONS as f64,
        iterations: CHECK_ITERATIONS,
        programs: chosen
            .programs
            .iter()
            .map(|p| format!("{} ({})", p.program, p.point))
            .collect(),
        why: chosen.why.clone(),
    };
    say(sentence(&ran));
    Ok(ran)
}

/// "the programs ran 1.00 times per timed exec in a short run with run stats on", or the warning.
pub fn sentence(ran: &ProgramsRan) -> String {
    let (n, op) = (ran.runs_per_op, &ran.op);
    if ran.fired() {
        return format!(
            "the programs ran {n:.2} times per timed {op} in a short run with run stats on"
        );
    }
    format!(
        "warning: the programs ran {n:.2} times per timed {op} in a short run with run stats on: the recording will hold few or none of their frames ({})",
        ran.why
    )
}

/// `command` with its `-n` set to `n`.
fn with_iterations(command: &[OsString], n: usize) -> Vec<OsString> {
    let mut c = command.to_vec();
    if let Some(i) = c.iter().position(|a| a == "-n") {
        if let Some(v) = c.get_mut(i + 1) {
            *v = n.to_string().into();
        }
    }
    c
}

/// Run `argv` with its output thrown away; its stderr quoted when it fails.
fn run_quietly(argv: &[OsString]) -> Result<()> {
    let out = Command::new(&argv[0])
        .args(&argv[1..])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output()
        .context("cannot start taskset (install util-linux)")?;
    if out.status.success() {
        return Ok(());
    }
    let stderr = String::from_utf8_lossy(&out.stderr);
    Err(child(format!(
        "the benchmark failed ({}) in the short run before the recording: `{}`: {}",
        out.status,
        crate::perf::record::quote_line(
            &argv.iter().map(|a| a.to_string_lossy()).collect::<Vec<_>>()
        ),
        stderr.trim()
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_short_run_sets_its_own_iterations() {
        let c: Vec<OsString> = ["x", "bench", "-n", "200000", "--op", "exec"]
            .iter()
            .map(OsString::from)
            .collect();
        let short = with_iterations(&c, 1000);
        assert_eq!(short[3], "1000");
        assert_eq!(short[5], "exec");
    }

    #[test]
    fn a_recording_whose_programs_do_not_run_says_so() {
        let mut ran = ProgramsRan {
            op: "openat".into(),
            runs_per_op: 0.0,
            iterations: 1000,
            programs: vec!["on_execve (tracepoint/syscalls/sys_enter_execve)".into()],
            why: "--op openat fires none of on_execve".into(),
        };
        let s = sentence(&ran);
        assert!(
            s.starts_with("warning: the programs ran 0.00 times per timed openat"),
            "{s}"
        );
        assert!(s.contains("--op openat fires none"), "{s}");
        ran.runs_per_op = 1.0;
        assert!(!sentence(&ran).starts_with("warning"));
    }
}
