//! `overhead --profile DIR`: after the latency rounds, one `record` per arm (base.data,
//! treat.data) under the same pinning, priority and benchmark, so `ebpf-prof diff` can show
//! where the extra time goes.

use super::arms::{Arm, ArmSpec};
use super::runner::BenchRun;
use crate::out::say;
use crate::perf::record::Scope;
use crate::perf::PerfChoice;
use crate::recording::{self as record, Load, RecordOptions};
use crate::runfiles::OutputDir;
use crate::stats::comparison::Comparison;
use anyhow::Result;

/// Iterations of the built-in bench in each profile at most, as `record`'s default: the latency
/// rounds are far too short for a profile (250 openats take under a millisecond: a few samples
/// at 4999 Hz).
pub const PROFILE_ITERATIONS: usize = 200_000;

/// The bench time each profile aims at: about 15,000 samples at 4999 Hz.
const PROFILE_SECONDS: f64 = 3.0;

/// Iterations in each profile at least, however slow the operation.
const PROFILE_MIN_ITERATIONS: usize = 1_000;

/// How many iterations make a profile of about [`PROFILE_SECONDS`] when the attached arm's
/// operation takes `per_op_ns` (its measured p50), within [`PROFILE_MIN_ITERATIONS`] and
/// [`PROFILE_ITERATIONS`]. An ordinary machine gets the fixed count; where an operation is
/// slow (under an emulator an openat with a hook takes milliseconds, and 200,000 of them would
/// take minutes per arm) the profile keeps its length instead of its count.
pub fn profile_iterations(per_op_ns: Option<f64>) -> usize {
    match per_op_ns.filter(|ns| ns.is_finite() && *ns > 0.0) {
        Some(ns) => ((PROFILE_SECONDS * 1e9 / ns) as usize)
            .clamp(PROFILE_MIN_ITERATIONS, PROFILE_ITERATIONS),
        None => PROFILE_ITERATIONS,
    }
}

/// The attached arm's measured p50 per operation in `comparison`, if it was asked for.
fn treat_p50_ns(comparison: &Comparison) -> Option<f64> {
    comparison
        .diffs
        .iter()
        .find(|d| d.q == 50.0)
        .map(|d| d.treat)
}

/// Record one profile per arm into `dir` (opened new or empty before measuring), as many
/// iterations each as [`profile_iterations`] gives for the p50 of the measurement's
/// `comparison`. perf writes by path, so each recording first checks the path still leads to
/// the directory opened then.
pub fn record_arms(
    dir: &OutputDir,
    arms: [(&str, &ArmSpec); 2],
    bench: &BenchRun,
    comparison: &Comparison,
) -> Result<()> {
    let iterations = profile_iterations(treat_p50_ns(comparison));
    let bench = &bench.with_iterations(iterations);
    for (name, spec) in arms {
        let load = match spec {
            ArmSpec::InMemory(object) => Load::InMemory(object.clone()),
            ArmSpec::Detached | ArmSpec::Command(_) => Load::Nothing,
        };
        // The user's loader runs for the recording; objects are loaded by record itself (after
        // the JIT sysctls, so their programs get symbols).
        let mut loader = match spec {
            ArmSpec::Command(_) => Some(Arm::prepare(spec)?),
            _ => None,
        };
        let active = match loader.as_mut() {
            Some(a) => Some(a.engage()?),
            None => None,
        };
        dir.check_still_there()?;
        let opts = RecordOptions {
            output: dir.shown().join(format!("{name}.data")),
            event: "cycles:k".into(),
            freq: 4999,
            cpu: bench.cpus.first().copied(),
            priority: bench.priority,
            iterations: 0,
            // The command is the measurement's own bench, its operation in it already.
            op: crate::bench::OpKind::openat("/etc/hostname"),
            op_choice: crate::bench::choose::OpChoice::Default,
            filter: None,
            allow_no_bpf: true,
            load,
            perf_args: Vec::new(),
            perf: PerfChoice::default(),
            command: bench.command.clone(),
            scope: Scope::Bench,
            netns: None,
        };
        let recorded = record::run(&opts);
        if let Some(a) = active {
            a.disengage()?;
        }
        recorded?;
    }
    say(format!(
        "profiles: {0}/base.data, {0}/treat.data; where the extra time goes: ebpf-prof diff {0}/base.data {0}/treat.data > diff.svg",
        dir.shown().display()
    ));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_slow_operation_keeps_the_profile_short_and_a_fast_one_keeps_the_count() {
        // 1.5 µs an openat: 200,000 take 0.3 s, the fixed count.
        assert_eq!(profile_iterations(Some(1_500.0)), PROFILE_ITERATIONS);
        // 2 ms an openat (under an emulator): 1,500 make 3 s.
        assert_eq!(profile_iterations(Some(2_000_000.0)), 1_500);
        // A second an operation: the floor.
        assert_eq!(profile_iterations(Some(1e9)), PROFILE_MIN_ITERATIONS);
        // Nothing measured, or nonsense: the fixed count.
        assert_eq!(profile_iterations(None), PROFILE_ITERATIONS);
        assert_eq!(profile_iterations(Some(f64::NAN)), PROFILE_ITERATIONS);
        assert_eq!(profile_iterations(Some(0.0)), PROFILE_ITERATIONS);
    }
}
