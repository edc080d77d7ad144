//! What `overhead` prints and writes: the terminal table, `--json` with every figure, the CDF
//! plot, and every round's samples under `--keep DIR`.

use super::arms::ArmSpec;
use super::kstats::KernelView;
use super::runner::ClockCost;
use super::{OverheadOptions, Rounds};
use crate::error::usage;
use crate::plot::{cdf_svg, CdfSeries, PlotOptions};
use crate::runfiles::Owner;
use crate::stats::{self, Comparison, GateResult, Summary};
use anyhow::{Context, Result};
use serde::Serialize;
use std::io::Write;
use std::path::Path;

/// One arm's figures.
#[derive(Debug, Clone, Serialize)]
pub struct ArmReport {
    pub label: String,
    /// Summary of each round.
    pub rounds: Vec<Option<Summary>>,
    /// Summary of all rounds pooled.
    pub pooled: Option<Summary>,
}

/// Everything `--json` holds.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub mode: String,
    pub cpu: u32,
    pub priority: Option<u8>,
    pub rounds: usize,
    pub iterations: usize,
    pub bench: String,
    pub base: ArmReport,
    pub treat: ArmReport,
    pub comparison: Comparison,
    pub verdict: String,
    pub clock: ClockCost,
    pub kernel: KernelView,
    /// Latency delta at p50 minus the programs' own time per iteration: dispatch/trampoline cost.
    pub dispatch_gap_ns: Option<f64>,
    pub gates: Vec<GateResult>,
    /// The programs' maps over the rounds (full or close to full ones carry a message).
    pub maps: Vec<super::pressure::MapSummary>,
}

fn arm(spec: &ArmSpec, rounds: &[Vec<u64>]) -> ArmReport {
    let all: Vec<u64> = rounds.iter().flatten().copied().collect();
    ArmReport {
        label: spec.label(),
        rounds: rounds.iter().map(|r| Summary::of(r)).collect(),
        pooled: Summary::of(&all),
    }
}

impl Report {
    /// Assemble the report.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        mode: &str,
        base: &ArmSpec,
        treat: &ArmSpec,
        o: &OverheadOptions,
        cpu: u32,
        clock: ClockCost,
        r: &Rounds,
        comparison: Comparison,
        kernel: KernelView,
        gates: Vec<GateResult>,
    ) -> Report {
        let verdict = stats::verdict(&comparison, clock.step_ns.max(1) as f64);
        let p50 = comparison
            .diffs
            .iter()
            .find(|d| d.q == 50.0)
            .map(|d| d.delta);
        let own = match mode {
            "load" | "attach-cmd" => kernel.time_per_iteration("treat"),
            "compare" => kernel
                .time_per_iteration("treat")
                .zip(kernel.time_per_iteration("base"))
                .map(|(t, b)| t - b),
            _ => None,
        };
        Report {
            mode: mode.into(),
            cpu,
            priority: o.priority,
            rounds: o.rounds,
            iterations: o.iterations,
            bench: if o.bench.is_empty() {
                match &o.op {
                    crate::bench::OpKind::Openat(p) => {
                        format!("{} openats of {}", o.iterations, p.display())
                    }
                    crate::bench::OpKind::Connect => {
                        format!("{} loopback TCP connects", o.iterations)
                    }
                }
            } else {
                o.bench
                    .iter()
                    .map(|a| a.to_string_lossy())
                    .collect::<Vec<_>>()
                    .join(" ")
            },
            base: arm(base, &r.base),
            treat: arm(treat, &r.treat),
            comparison,
            verdict,
            clock,
            dispatch_gap_ns: p50.zip(own).map(|(d, o)| d - o),
            kernel,
            gates,
            maps: Vec::new(),
        }
    }

    /// Print (table or JSON), plot, keep.
    pub fn emit(&self, o: &OverheadOptions, r: &Rounds) -> Result<()> {
        if o.json {
            println!("{}", serde_json::to_string_pretty(self)?);
        } else {
            print!("{}", self.table());
        }
        if let Some(p) = &o.plot {
            self.plot(p, r)?;
        }
        if let Some(dir) = &o.keep {
            keep(dir, r)?;
        }
        Ok(())
    }

    /// The terminal table.
    pub fn table(&self) -> String {
        let mut s = String::new();
        let w = |s: &mut String, l: String| {
            s.push_str(&l);
            s.push('\n');
        };
        w(
            &mut s,
            format!(
                "overhead ({}): {} vs {}, {} rounds each of {}, CPU {}",
                self.mode, self.base.label, self.treat.label, self.rounds, self.bench, self.cpu
            ),
        );
        w(
            &mut s,
            format!(
                "{:<7} {:>12} {:>12} {:>28} {:>22}",
                "", "base (ns)", "treat (ns)", "delta [95% CI] (ns)", "delta %"
            ),
        );
        for d in &self.comparison.diffs {
            w(
                &mut s,
                format!(
                    "{:<7} {:>12.0} {:>12.0} {:>28} {:>22}",
                    format!("p{}", trim(d.q)),
                    d.base,
                    d.treat,
                    format!("{:+.0} [{:+.0}, {:+.0}]", d.delta, d.lo, d.hi),
                    format!("{:+.1}% [{:+.1}, {:+.1}]", d.pct, d.pct_lo, d.pct_hi)
                ),
            );
        }
        let rt = &self.comparison.rank_test;
        w(
            &mut s,
            format!(
                "rank test (Mann-Whitney, pooled): P(treat > base) = {:.3}, z = {:.1}, p = {:.2e}",
                rt.prob_greater, rt.z, rt.p_value
            ),
        );
        w(
            &mut s,
            format!(
                "clock: one reading costs {:.1} ns; readings step by {} ns",
                self.clock.read_ns, self.clock.step_ns
            ),
        );
        for p in &self.kernel.programs {
            let line = if p.runs == 0 {
                format!("kernel ({} arm): {} never ran on its own: a tail-call target's runs and time count under the program that called it", p.arm, p.name)
            } else {
                format!(
                    "kernel ({} arm, {}): {} ran {:.2} times per iteration, {:.0} ns per run",
                    p.arm, self.kernel.method, p.name, p.runs_per_iteration, p.mean_run_ns
                )
            };
            w(&mut s, line);
        }
        if let Some(g) = self.dispatch_gap_ns {
            w(&mut s, format!("latency delta at p50 minus the programs' own time: {g:+.0} ns (dispatch, trampoline, tracepoint glue)"));
        }
        for m in self.maps.iter().filter_map(|m| m.message.as_ref()) {
            w(&mut s, format!("maps: {m}"));
        }
        for n in &self.comparison.notes {
            w(&mut s, format!("note: {n}"));
        }
        for g in &self.gates {
            w(
                &mut s,
                format!(
                    "gate {}: {}",
                    if g.exceeded { "EXCEEDED" } else { "ok" },
                    g.message
                ),
            );
        }
        if let Some(hint) = self.rounds_hint() {
            w(&mut s, format!("hint: {hint}"));
        }
        w(&mut s, format!("verdict: {}", self.verdict));
        s
    }

    /// With few rounds, one burst of interference spoils a pair and widens everything: say how
    /// to resist it (more, shorter rounds turn on the trimmed estimate).
    fn rounds_hint(&self) -> Option<String> {
        let d = self.comparison.diffs.iter().find(|d| d.q == 50.0)?;
        let wide = (d.hi - d.lo) / 2.0 > 50.0;
        (wide && self.rounds < crate::stats::TRIM_FROM_PAIRS).then(|| {
            format!(
                "the p50 interval is ±{:.0} ns wide: with {} rounds a burst of interference in one round widens it for all; more, shorter rounds resist bursts (e.g. --rounds 40 -n {})",
                (d.hi - d.lo) / 2.0,
                self.rounds,
                (self.iterations * self.rounds / 40).max(1000)
            )
        })
    }

    fn plot(&self, path: &Path, r: &Rounds) -> Result<()> {
        let note = self
            .comparison
            .diffs
            .iter()
            .filter(|d| d.q == 50.0 || d.q == 99.0)
            .map(|d| {
                format!(
                    "Δp{} {:+.0} ns [{:+.0}, {:+.0}]",
                    trim(d.q),
                    d.delta,
                    d.lo,
                    d.hi
                )
            })
            .collect::<Vec<_>>()
            .join("; ");
        let series = vec![
            CdfSeries {
                label: format!("{} (base)", self.base.label),
                samples: r.base.iter().flatten().copied().collect(),
            },
            CdfSeries {
                label: format!("{} (treat)", self.treat.label),
                samples: r.treat.iter().flatten().copied().collect(),
            },
        ];
        let svg = cdf_svg(
            &series,
            &PlotOptions {
                title: format!("ebpf-prof overhead: {}", self.bench),
                legend_note: note,
            },
        );
        write_user_file(path, svg.as_bytes())
    }
}

fn trim(q: f64) -> String {
    if q.fract() == 0.0 {
        format!("{q:.0}")
    } else {
        format!("{q}")
    }
}

/// Refuse an output path that exists or whose directory does not, before measuring.
pub fn check_new_file(path: &Path) -> Result<()> {
    if std::fs::symlink_metadata(path).is_ok() {
        return Err(usage(format!(
            "{} exists: remove it or pick another name",
            path.display()
        )));
    }
    let dir = crate::runfiles::parent_dir(path);
    if !dir.is_dir() {
        return Err(usage(format!("directory {} does not exist", dir.display())));
    }
    Ok(())
}

/// Write a new file for the user (refusing to overwrite), owned by the sudo user.
pub fn write_user_file(path: &Path, bytes: &[u8]) -> Result<()> {
    let mut f = crate::commands::flame::open_output(path, false)?;
    f.write_all(bytes)?;
    if let Some(o) = Owner::from_sudo_env() {
        o.give(path)?;
    }
    Ok(())
}

/// Check `--keep DIR` before measuring: it may exist (empty) or will be created.
pub fn prepare_keep(dir: &Path) -> Result<()> {
    if dir.exists() {
        let empty = std::fs::read_dir(dir)
            .map(|mut d| d.next().is_none())
            .unwrap_or(false);
        if !dir.is_dir() || !empty {
            return Err(usage(format!(
                "{}: must be a new or empty directory",
                dir.display()
            )));
        }
    } else {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
        if let Some(o) = Owner::from_sudo_env() {
            o.give(dir)?;
        }
    }
    Ok(())
}

/// Every round's samples as `base-N.samples` / `treat-N.samples`.
fn keep(dir: &Path, r: &Rounds) -> Result<()> {
    for (name, rounds) in [("base", &r.base), ("treat", &r.treat)] {
        for (i, s) in rounds.iter().enumerate() {
            let mut buf = Vec::new();
            crate::bench::write_samples(&mut buf, s)?;
            write_user_file(&dir.join(format!("{name}-{}.samples", i + 1)), &buf)?;
        }
    }
    Ok(())
}
