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
use anyhow::Result;

/// Iterations of the built-in bench in each profile, as `record`'s default: the latency rounds
/// are far too short for a profile (250 openats take under a millisecond: a few samples at 4999 Hz).
pub const PROFILE_ITERATIONS: usize = 200_000;

/// Record one profile per arm into `dir` (opened new or empty before measuring). perf writes
/// by path, so each recording first checks the path still leads to the directory opened then.
pub fn record_arms(dir: &OutputDir, arms: [(&str, &ArmSpec); 2], bench: &BenchRun) -> Result<()> {
    let bench = &bench.with_iterations(PROFILE_ITERATIONS);
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
