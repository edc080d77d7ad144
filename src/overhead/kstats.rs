//! The kernel's own view: in extra attached rounds (never the latency rounds — run stats cost
//! ~20 ns a run), BPF run stats are on, and each program's run count and run time are read
//! before and after the benchmark.

use super::arms::{Active, ArmSpec};
use super::runner::BenchRun;
use crate::bpf::{self, ProgramStats};
use crate::signals::Interrupts;
use anyhow::Result;
use serde::Serialize;

/// One program's figures over the stats rounds of one arm.
#[derive(Debug, Clone, Serialize)]
pub struct ProgramView {
    pub arm: String,
    pub id: u32,
    pub name: String,
    pub runs: u64,
    pub run_time_ns: u64,
    /// Runs per benchmark iteration (other processes' events count too).
    pub runs_per_iteration: f64,
    /// Mean run time per run, ns.
    pub mean_run_ns: f64,
}

/// The kernel's view of each attached arm.
#[derive(Debug, Clone, Serialize, Default)]
pub struct KernelView {
    /// How stats were enabled (BPF_ENABLE_STATS or the sysctl).
    pub method: String,
    pub rounds: usize,
    pub programs: Vec<ProgramView>,
}

impl KernelView {
    /// The programs' own time per benchmark iteration for one arm, ns.
    pub fn time_per_iteration(&self, arm: &str) -> Option<f64> {
        let v: Vec<&ProgramView> = self.programs.iter().filter(|p| p.arm == arm).collect();
        (!v.is_empty()).then(|| v.iter().map(|p| p.runs_per_iteration * p.mean_run_ns).sum())
    }
}

/// Run `rounds` stats rounds for every attached arm.
pub fn collect(
    specs: &[&ArmSpec],
    bench: &BenchRun,
    rounds: usize,
    iterations: usize,
    ints: &Interrupts,
) -> Result<KernelView> {
    let mut view = KernelView {
        rounds,
        ..Default::default()
    };
    if rounds == 0 {
        return Ok(view);
    }
    for (i, spec) in specs.iter().enumerate() {
        if **spec == ArmSpec::Detached {
            continue;
        }
        let arm = if i == 0 { "base" } else { "treat" };
        let mut totals: Vec<ProgramStats> = Vec::new();
        for r in 1..=rounds {
            ints.check()?;
            let active = Active::start(spec)?;
            let ids = active.program_ids();
            let guard = bpf::enable_run_stats()?;
            view.method = guard.method().to_string();
            let names = active.program_names();
            let before = bpf::program_stats(&ids)?;
            let ran = bench.run(&format!("stats {arm} {r}"));
            let mut after = bpf::program_stats(&ids)?;
            for a in &mut after {
                if let Some((_, full)) = names.iter().find(|(id, _)| *id == a.id) {
                    a.name.clone_from(full);
                }
            }
            drop(guard);
            active.stop()?;
            ran?;
            accumulate(&mut totals, &before, &after);
        }
        let n = (iterations * rounds) as f64;
        view.programs
            .extend(totals.into_iter().map(|t| ProgramView {
                arm: arm.into(),
                id: t.id,
                name: t.name,
                runs: t.run_cnt,
                run_time_ns: t.run_time_ns,
                runs_per_iteration: t.run_cnt as f64 / n,
                mean_run_ns: if t.run_cnt == 0 {
                    0.0
                } else {
                    t.run_time_ns as f64 / t.run_cnt as f64
                },
            }));
    }
    Ok(view)
}

/// Add `after − before` per program name into `totals` (ids change from round to round).
fn accumulate(totals: &mut Vec<ProgramStats>, before: &[ProgramStats], after: &[ProgramStats]) {
    for a in after {
        let b = before.iter().find(|b| b.id == a.id);
        let runs = a.run_cnt.saturating_sub(b.map_or(0, |b| b.run_cnt));
        let time = a.run_time_ns.saturating_sub(b.map_or(0, |b| b.run_time_ns));
        match totals.iter_mut().find(|t| t.name == a.name) {
            Some(t) => {
                t.run_cnt += runs;
                t.run_time_ns += time;
            }
            None => totals.push(ProgramStats {
                run_cnt: runs,
                run_time_ns: time,
                ..a.clone()
            }),
        }
    }
}
