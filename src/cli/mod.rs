//! The command line (clap derive). Each subcommand's arguments convert into the plain option
//! struct its command takes; nothing past this module sees clap.

mod args;
mod convert;
pub mod oparg;
pub mod ranges;
mod testrun;
#[cfg(test)]
mod tests;

pub use args::*;
pub use convert::run;

use clap::{Parser, Subcommand};

/// What an eBPF hook costs and where that time goes.
#[derive(Debug, Parser)]
#[command(name = "ebpf-prof", version, about, propagate_version = true)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    // The count of operations is the catalogue's.
    #[command(about = bench_about(), long_about = bench_long_about())]
    Bench(BenchArgs),
    /// Check every precondition of `record`, with the command that fixes each problem.
    Doctor(DoctorArgs),
    /// perf record around a pinned SCHED_FIFO benchmark, BPF symbols on (needs root).
    Record(RecordArgs),
    /// Render a profile (perf.data, perf script text or folded stacks) as a flame graph (no root).
    Flame(FlameArgs),
    /// Load a BPF object (the bundled sample hook by default) and hold it attached until Ctrl-C
    /// (or --seconds).
    Hook(HookArgs),
    /// The whole method on the bundled sample hook (or --load yours): its cost, a recording, the
    /// flame graph.
    Demo(DemoArgs),
    /// Detached vs attached latency (or A vs B), interleaved rounds, p50 to p99.9 deltas with 99%
    /// intervals.
    Overhead(Box<OverheadArgs>),
    /// What a profile says about its BPF programs: shares, attach points, helpers, hints (no root).
    Report(ReportArgs),
    /// Which lines of BPF C source the time goes to, per program, from a perf.data (no root).
    Annotate(AnnotateArgs),
    /// Differential flame graph of a base and a hooked profile, or with --text a table (no root).
    Diff(DiffArgs),
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell) to stdout.
    Completions(CompletionsArgs),
    /// Print a man page (roff) to stdout: `ebpf-prof man | man -l -`, `ebpf-prof man overhead`.
    Man(ManArgs),
}

/// A duration: `30s`, `2m`, `500ms`, or plain seconds (`1.5`).
pub fn parse_duration(s: &str) -> Result<f64, String> {
    let t = s.trim();
    let (num, scale) = if let Some(n) = t.strip_suffix("ms") {
        (n, 0.001)
    } else if let Some(n) = t.strip_suffix('s') {
        (n, 1.0)
    } else if let Some(n) = t.strip_suffix('m') {
        (n, 60.0)
    } else if let Some(n) = t.strip_suffix('h') {
        (n, 3600.0)
    } else {
        (t, 1.0)
    };
    match num.trim().parse::<f64>() {
        Ok(v) if v > 0.0 && v.is_finite() => Ok(v * scale),
        Ok(v) if v.is_finite() => Err(format!(
            "{s:?}: a duration must be more than 0 (e.g. 30s, 2m, 500ms)"
        )),
        _ => Err(format!("{s:?} is not a duration: give e.g. 30s, 2m, 500ms")),
    }
}

/// Remove a killed run's namespace and veth pair with the checked `ip`.
fn remove_network(names: &crate::netpath::names::NetNames) -> Vec<String> {
    match crate::perf::trust::program(std::ffi::OsStr::new("ip"), "ip (iproute2)") {
        Ok(ip) => crate::netpath::remove(&ip, names),
        Err(e) => vec![format!(
            "cannot remove network namespace {}: {e:#}",
            names.netns
        )],
    }
}

/// As root, put back what a killed earlier run left changed, and say so: only under the run
/// lock (`locked`: this run holds it; otherwise it is taken for the recovery if free), never
/// while another run is in progress.
pub(super) fn recover_stale(locked: bool) {
    if !crate::host::security::is_root() {
        return;
    }
    let _lock = match locked {
        true => None,
        false => match crate::host::lock::for_recovery() {
            Some(l) => Some(l),
            None => return,
        },
    };
    let host = crate::host::Host::live();
    let lines = crate::host::recovery::recover(&host);
    let networks = crate::netpath::journal::recover(&host, &remove_network);
    for line in lines
        .into_iter()
        .chain(crate::runfiles::pending::recover(
            &host,
            crate::profile::perfdata::unfinished,
        ))
        .chain(networks)
    {
        crate::out::say(line);
    }
}

/// `bench`'s line in the list of commands, with the catalogue's count of operations.
fn bench_about() -> String {
    format!(
        "The timing loop record and overhead run: {} operations (openat by default), one latency (ns) per line on stdout, a summary on stderr",
        crate::bench::Operation::ALL.len()
    )
}

/// `bench --help`'s description: the line, then how it is pinned.
fn bench_long_about() -> String {
    format!(
        "{}.\n\nIt does not pin itself: record and overhead start it under taskset and chrt (SCHED_FIFO on one CPU); run by hand, pin it the same way (`taskset -c 1 chrt -f 99 ebpf-prof bench`). Only with --workers K does it pin each of its K loops to its own CPU of the allowed set.",
        bench_about()
    )
}
