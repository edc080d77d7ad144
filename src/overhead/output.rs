//! What `overhead` prints and writes: the terminal table, `--json` with every figure, the CDF
//! plot, and every round's samples under `--keep DIR`.

use super::arms::ArmSpec;
use super::kstats::KernelView;
use super::rounds::{ArmRounds, Ended, Rounds};
use super::runner::ClockCost;
use super::{Measured, OverheadOptions};
use crate::error::usage;
use crate::plot::{cdf_svg, CdfSeries, PlotOptions};
use crate::runfiles::{Existing, OutputDir};
use crate::stats::{self, Comparison, GateResult, Summary};
use anyhow::Result;
use serde::Serialize;
use std::path::Path;

/// One arm's figures.
#[derive(Debug, Clone, Serialize)]
pub struct ArmReport {
    pub label: String,
    /// Summary of each round (nearest-rank percentiles).
    pub rounds: Vec<Option<Summary>>,
    /// Seconds from the start of the rounds to the start of each round.
    pub started_s: Vec<f64>,
    /// Summary of all rounds pooled.
    pub pooled: Option<Summary>,
}

/// Everything `--json` holds.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// The version of this document ([`crate::out::JSON_SCHEMA`]).
    pub schema: u32,
    pub mode: super::Mode,
    pub cpu: u32,
    pub priority: Option<u8>,
    /// Pairs of rounds compared.
    pub rounds: usize,
    /// The loads of the arms' objects the rounds were spread over, each with its pairs and
    /// the order it was loaded in.
    pub loads: Vec<crate::stats::Load>,
    pub iterations: usize,
    /// Seed of the coin that ordered each pair (`--seed` repeats it).
    pub seed: u64,
    /// Why the rounds ended: the count asked for, the target width, or the time budget.
    pub ended: Ended,
    pub bench: String,
    pub base: ArmReport,
    pub treat: ArmReport,
    pub comparison: Comparison,
    pub verdict: String,
    pub clock: ClockCost,
    pub kernel: KernelView,
    /// Latency delta at p50 minus the programs' own time inside the timed span: the dispatch,
    /// trampoline and glue cost; `None` when it cannot be separated (see `dispatch`).
    pub dispatch_gap_ns: Option<f64>,
    /// How the latency delta at p50 splits into the programs' own time and the rest.
    pub dispatch: Option<Dispatch>,
    pub gates: Vec<GateResult>,
    /// The programs' maps over the rounds (full or close to full ones carry a message).
    pub maps: Vec<super::pressure::MapSummary>,
    /// The operation timed: how it was chosen, and which programs it fires (`None` with a
    /// benchmark of one's own, and for `--aa`).
    pub op: Option<crate::bench::choose::Chosen>,
    /// What ran inside the timed operation: the attached arm's programs' runs per timed
    /// operation inside the span, and what the delta then is.
    pub ran: Option<super::ran::Ran>,
}

/// The latency delta at p50 against the programs' own time inside the timed span.
#[derive(Debug, Clone, Serialize)]
pub struct Dispatch {
    /// The programs' own time per iteration inside the span (treat − base with `--compare`),
    /// ns, with run stats on; `None` when the bench cannot tell how often they run inside it.
    pub own_ns: Option<f64>,
    /// Δp50 − own_ns and its interval (the p50 interval less own_ns), ns.
    pub gap_ns: Option<f64>,
    pub gap_lo: Option<f64>,
    pub gap_hi: Option<f64>,
    /// One sentence: the gap, or why it is not shown.
    pub sentence: String,
}

impl Dispatch {
    /// Split the p50 difference `(delta, lo, hi)` by the programs' own time `own` (None: not
    /// separable). A gap whose whole interval is below 0 is not a cost: said, not printed.
    pub fn new((delta, lo, hi): (f64, f64, f64), own: Option<f64>) -> Dispatch {
        let Some(own) = own else {
            return Dispatch {
                own_ns: None,
                gap_ns: None,
                gap_lo: None,
                gap_hi: None,
                sentence: "the programs also run outside the timed span, and this bench cannot tell how often: their own time inside it, and the dispatch cost, are not separated (the built-in bench can)".into(),
            };
        };
        let (gap, glo, ghi) = (delta - own, lo - own, hi - own);
        let sentence = if ghi < 0.0 {
            format!("the programs' own time inside the timed span, {own:.0} ns per iteration (with run stats on, which add ~20–30 ns a run), is more than the latency delta at p50 ({delta:+.0} ns [{lo:+.0}, {hi:+.0}]): the dispatch cost cannot be separated here")
        } else {
            let none = if glo <= 0.0 { "; none detectable" } else { "" };
            format!("latency delta at p50 beyond the programs' own time inside the timed span ({own:.0} ns): {gap:+.0} ns [{glo:+.0}, {ghi:+.0}] (dispatch, trampoline, tracepoint glue){none}")
        };
        let shown = ghi >= 0.0;
        Dispatch {
            own_ns: Some(own),
            gap_ns: shown.then_some(gap),
            gap_lo: shown.then_some(glo),
            gap_hi: shown.then_some(ghi),
            sentence,
        }
    }
}

impl Dispatch {
    /// The split for `mode`, when the kernel view has the programs of the attached arm(s).
    fn of(mode: super::Mode, c: &Comparison, kernel: &KernelView) -> Option<Dispatch> {
        let p50 = c
            .diff(50.0)
            .filter(|d| d.lo.is_finite())
            .map(|d| (d.delta, d.lo, d.hi))?;
        let has = |arm: &str| kernel.programs.iter().any(|p| p.arm == arm);
        match mode {
            super::Mode::Load | super::Mode::AttachCmd if has("treat") => {
                Some(Dispatch::new(p50, kernel.time_in_span("treat")))
            }
            super::Mode::Compare | super::Mode::AaLoad if has("treat") && has("base") => {
                let own = kernel
                    .time_in_span("treat")
                    .zip(kernel.time_in_span("base"));
                Some(Dispatch::new(p50, own.map(|(t, b)| t - b)))
            }
            _ => None,
        }
    }
}

/// "250 openats of /etc/hostname", or the user's bench command line.
fn bench_label(o: &OverheadOptions) -> String {
    if !o.bench.is_empty() {
        return o
            .bench
            .iter()
            .map(|a| a.to_string_lossy())
            .collect::<Vec<_>>()
            .join(" ");
    }
    o.op.describe(o.iterations)
}

fn arm(spec: &ArmSpec, rounds: &ArmRounds) -> ArmReport {
    let all: Vec<u64> = rounds.samples.iter().flatten().copied().collect();
    ArmReport {
        label: spec.label(),
        rounds: rounds.samples.iter().map(|r| Summary::of(r)).collect(),
        started_s: rounds.started_s.clone(),
        pooled: Summary::of(&all),
    }
}

impl Report {
    /// Assemble the report.
    pub fn new(
        (base, treat, mode): (&ArmSpec, &ArmSpec, super::Mode),
        o: &OverheadOptions,
        cpu: u32,
        clock: ClockCost,
        m: &Measured,
        gates: Vec<GateResult>,
    ) -> Report {
        let (r, comparison, kernel) = (&m.rounds, m.comparison.clone(), m.kernel.clone());
        let figures = stats::verdict(&comparison, clock.step_ns.max(1) as f64);
        let verdict = match &m.ran {
            Some(ran) if comparison.rounds > 0 => ran.verdict(&figures),
            _ => figures,
        };
        // Programs that did not run inside the timed operation have no dispatch cost there:
        // the whole delta is their attach point's side cost, which the verdict says.
        let not_run = m
            .ran
            .as_ref()
            .is_some_and(|r| r.inside == super::ran::Inside::NotRun);
        let dispatch = Dispatch::of(mode, &comparison, &kernel).filter(|_| !not_run);
        Report {
            schema: crate::out::JSON_SCHEMA,
            mode,
            cpu,
            priority: o.priority,
            rounds: comparison.rounds,
            loads: r.loads.clone(),
            iterations: o.iterations,
            seed: o.seed,
            ended: r.ended.clone(),
            bench: bench_label(o),
            base: arm(base, &r.base),
            treat: arm(treat, &r.treat),
            comparison,
            verdict,
            clock,
            dispatch_gap_ns: dispatch.as_ref().and_then(|d| d.gap_ns),
            dispatch,
            kernel,
            gates,
            maps: Vec::new(),
            op: None,
            ran: m.ran.clone(),
        }
    }

    /// Print (table or JSON), write the exports and the plot, keep the rounds.
    pub fn emit(&self, o: &OverheadOptions, r: &Rounds) -> Result<()> {
        let json = serde_json::to_string_pretty(self)? + "\n";
        crate::out::stdout(&if o.json { json.clone() } else { self.table() })?;
        if let Some(p) = &o.export_json {
            write_user_file(p, EXPORT_JSON, json.as_bytes())?;
        }
        self.write_files(o, r)
    }

    /// Write the Markdown export and the plot, keep the rounds.
    pub fn write_files(&self, o: &OverheadOptions, r: &Rounds) -> Result<()> {
        if let Some(p) = &o.export_markdown {
            write_user_file(p, EXPORT_MARKDOWN, self.markdown().as_bytes())?;
        }
        if let Some(p) = &o.plot {
            self.plot(p, r)?;
        }
        if let Some(dir) = &o.opened.keep {
            keep(dir, r)?;
        }
        Ok(())
    }

    /// The comparison as a Markdown table, with the run's conditions and the verdict (hyperfine's
    /// `--export-markdown`).
    pub fn markdown(&self) -> String {
        let conf = 100.0 * self.comparison.confidence;
        let mut s = format!(
            "**overhead ({})**: {} vs {}, {} pairs of rounds of {}, CPU {}\n\n",
            self.mode, self.base.label, self.treat.label, self.rounds, self.bench, self.cpu
        );
        s.push_str(&format!(
            "| quantile | base (ns) | treat (ns) | Δ (ns) | {conf:.0}% interval (ns) | Δ % |\n|---|---:|---:|---:|---|---:|\n"
        ));
        for d in &self.comparison.diffs {
            s.push_str(&format!(
                "| p{} | {:.0} | {:.0} | {:+.0} | {} | {:+.1}% |\n",
                trim(d.q),
                d.base,
                d.treat,
                d.delta,
                interval(d, d.lo, d.hi),
                d.pct
            ));
        }
        s.push_str(&format!(
            "\n{}\n\nverdict: {}\n",
            self.ended.sentence(),
            self.verdict
        ));
        s
    }

    /// The terminal table.
    pub fn table(&self) -> String {
        let mut lines = vec![
            format!(
                "overhead ({}): {} vs {}, {} pairs of rounds of {}, CPU {}",
                self.mode, self.base.label, self.treat.label, self.rounds, self.bench, self.cpu
            ),
            self.ended.sentence(),
        ];
        lines.extend(self.rows());
        lines.extend(self.explanations());
        lines.push(format!("verdict: {}", self.verdict));
        lines.iter().map(|l| format!("{l}\n")).collect()
    }

    /// The header and one row per quantile.
    fn rows(&self) -> Vec<String> {
        let conf = format!("{:.0}%", 100.0 * self.comparison.confidence);
        let mut v = vec![format!(
            "{:<7} {:>12} {:>12} {:>28} {:>22}",
            "",
            "base (ns)",
            "treat (ns)",
            format!("delta [{conf} CI] (ns)"),
            "delta %"
        )];
        v.extend(self.comparison.diffs.iter().map(|d| {
            format!(
                "{:<7} {:>12.0} {:>12.0} {:>28} {:>22}",
                format!("p{}", trim(d.q)),
                d.base,
                d.treat,
                format!("{:+.0} {}", d.delta, interval(d, d.lo, d.hi)),
                format!("{:+.1}% {}", d.pct, interval_pct(d))
            )
        }));
        v
    }

    /// The method, modes, clock, kernel view, dispatch, maps, notes, gates and hints.
    fn explanations(&self) -> Vec<String> {
        let mut v = vec![self.method_line()];
        v.extend(self.loads_line());
        v.extend(
            self.comparison
                .modes
                .iter()
                .map(|m| format!("modes: {}", mode_sentence(m, &self.arm_starts(m)))),
        );
        v.push(format!(
            "clock: one reading costs {:.1} ns; readings step by {} ns",
            self.clock.read_ns, self.clock.step_ns
        ));
        v.extend(
            self.kernel
                .programs
                .iter()
                .map(|p| p.sentence(&self.kernel.method)),
        );
        v.extend(self.dispatch.iter().map(|d| d.sentence.clone()));
        v.extend(
            self.maps
                .iter()
                .filter_map(|m| m.message.as_ref())
                .map(|m| format!("maps: {m}")),
        );
        v.extend(self.comparison.notes.iter().map(|n| format!("note: {n}")));
        v.extend(self.gates.iter().map(|g| {
            let state = if g.exceeded { "EXCEEDED" } else { "ok" };
            format!("gate {state}: {}", g.message)
        }));
        v.extend(self.rounds_hint().map(|h| format!("hint: {h}")));
        v
    }

    /// How the intervals were made: over the pairs of one load, or across loads.
    fn method_line(&self) -> String {
        let c = &self.comparison;
        let conf = format!("{:.0}%", 100.0 * c.confidence);
        if c.method == stats::METHOD_LOADS {
            let (per, across) = match self.mode {
                super::Mode::AttachCmd => ("per loader start", "starts"),
                _ => ("per load of the objects", "loads"),
            };
            return format!(
                "method: per-round mid-quantiles, paired in time (coin seed {}); {per} the median of its pair differences{}; across the {} {across} the mean, with its Student t {conf} interval",
                self.seed,
                pooled_clause(c),
                c.loads
            );
        }
        format!(
            "method: per-round mid-quantiles, paired in time (coin seed {}); the median of the {} pair differences with its sign-test {conf} interval{}",
            self.seed,
            self.rounds,
            pooled_clause(c)
        )
    }

    /// How many loads each arm had, in which orders, and how much of the p50 interval comes
    /// from load to load.
    fn loads_line(&self) -> Option<String> {
        let c = &self.comparison;
        let p50 = c.diff(50.0)?;
        if c.method != stats::METHOD_LOADS {
            return None;
        }
        let objects = loads_words(self.mode, &self.treat.label, c.loads);
        let first = match self.mode {
            super::Mode::AttachCmd => "whether the loader ran first",
            _ => "which object was loaded first",
        };
        let order = p50.order_effect.map_or_else(String::new, |effect| {
            format!(
                ", half of them in each order ({first} moved the p50 difference by ±{:.1} ns; the estimate is free of it)",
                effect.abs()
            )
        });
        let share = p50.load_share.map_or_else(String::new, |share| {
            let advice = if share >= 0.5 {
                "more loads (a longer --max-time, or --loads) narrow it, longer rounds would not"
            } else {
                "more pairs of rounds per load narrow it as much as more loads"
            };
            format!(
                "; {:.0}% of the p50 interval's variance comes from load to load: {advice}",
                100.0 * share
            )
        });
        Some(format!("loads: {objects}{order}{share}"))
    }

    /// With a fixed `--rounds`, a wide p50 interval: say that the default adds pairs until
    /// it is narrow.
    fn rounds_hint(&self) -> Option<String> {
        let d = self.comparison.diffs.iter().find(|d| d.q == 50.0)?;
        let wide = d.hi - d.lo > 50.0;
        (wide && self.ended.reason == super::StopReason::Rounds).then(|| {
            format!(
                "the p50 interval is {:.0} ns wide after {} pairs: without --rounds, overhead adds pairs for {:.0} s (--max-time)",
                d.hi - d.lo,
                self.rounds,
                super::DEFAULT_MAX_TIME.as_secs_f64()
            )
        })
    }

    /// When each round of the arm of mode `m` started.
    fn arm_starts(&self, m: &crate::stats::Mode) -> Vec<f64> {
        let arm = if m.arm.starts_with("base") {
            &self.base
        } else {
            &self.treat
        };
        m.rounds
            .iter()
            .filter_map(|&i| arm.started_s.get(i).copied())
            .collect()
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
                samples: r.base.samples.iter().flatten().copied().collect(),
            },
            CdfSeries {
                label: format!("{} (treat)", self.treat.label),
                samples: r.treat.samples.iter().flatten().copied().collect(),
            },
        ];
        let svg = cdf_svg(
            &series,
            &PlotOptions {
                title: format!("ebpf-prof overhead: {}", self.bench),
                legend_note: note,
            },
        );
        write_user_file(path, PLOT, svg.as_bytes())
    }
}

/// Runs of rounds a `modes:` line names before it says how many more there are.
const MODE_RUNS_SHOWN: usize = 6;

/// "treat (hook.bpf.o): 3 of 48 rounds sat above the rest by +180 to +610 ns (median +240):
/// rounds 5, 17, 33, between 0.4 and 3.3 s; kept, …". A short summary a person reads: at most
/// [`MODE_RUNS_SHOWN`] runs of round numbers, then how many rounds in all (`--json` lists each
/// one), and the span of their start times only when they span a tenth of a second or more.
fn mode_sentence(m: &crate::stats::Mode, starts: &[f64]) -> String {
    let runs_text = crate::stats::modes::round_list(&m.rounds);
    let runs: Vec<&str> = runs_text.split(", ").collect();
    let listed = if runs.len() > MODE_RUNS_SHOWN {
        format!(
            "{}, … ({} rounds; --json lists them)",
            runs[..MODE_RUNS_SHOWN].join(", "),
            m.rounds.len()
        )
    } else {
        runs_text.clone()
    };
    let first = starts.iter().copied().fold(f64::INFINITY, f64::min);
    let last = starts.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let span = if last - first >= 0.1 {
        format!(", between {first:.1} and {last:.1} s")
    } else {
        String::new()
    };
    format!(
        "{}: {} of {} rounds sat {} the rest by {:+.0} to {:+.0} ns (median {:+.0}): round{} {listed}{span}; kept, as each moves the median of the pair differences by at most one place",
        m.arm,
        m.rounds.len(),
        m.of,
        if m.above { "above" } else { "below" },
        m.range_ns.0,
        m.range_ns.1,
        m.offset_ns,
        if m.rounds.len() == 1 { "" } else { "s" },
    )
}

/// "[+1633, +1748]", or "[no interval]" for a quantile compared over a single block.
fn interval(d: &stats::QuantileDiff, lo: f64, hi: f64) -> String {
    if stats::shows_interval(d) {
        format!("[{lo:+.0}, {hi:+.0}]")
    } else {
        "[no interval]".into()
    }
}

/// The same in percent: "[+65.2, +69.8]".
fn interval_pct(d: &stats::QuantileDiff) -> String {
    if stats::shows_interval(d) {
        format!("[{:+.1}, {:+.1}]", d.pct_lo, d.pct_hi)
    } else {
        "[no interval]".into()
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

/// What `--export-json` writes, as the line that says so names it.
pub const EXPORT_JSON: &str = "the JSON document (--export-json)";
/// What `--export-markdown` writes.
pub const EXPORT_MARKDOWN: &str = "the Markdown table (--export-markdown)";
/// What `--plot` writes.
pub const PLOT: &str = "the plot (--plot)";

/// Write a new file for the user (refusing to overwrite; complete or not at all), owned by the
/// sudo user, and say which file, and what it holds, in one line.
pub fn write_user_file(path: &Path, what: &str, bytes: &[u8]) -> Result<()> {
    crate::runfiles::write_file(path, bytes, crate::runfiles::Existing::KeepWithoutForce)?;
    crate::out::say(format!("wrote {what} to {}", path.display()));
    Ok(())
}

/// "; p99.9 over 61 blocks of 45 pairs, each arm's rounds pooled" for the pooled quantiles.
fn pooled_clause(c: &stats::Comparison) -> String {
    let pooled: Vec<String> = c
        .diffs
        .iter()
        .filter(|d| d.block > 1)
        .map(|d| {
            format!(
                "{} over {} blocks of {} pairs",
                stats::q_label(d.q),
                d.block_deltas.len(),
                d.block
            )
        })
        .collect();
    if pooled.is_empty() {
        return String::new();
    }
    format!(
        "; {}, each arm's rounds of a block pooled (too few samples beyond them in a round)",
        pooled.join(", ")
    )
}

/// Every round's samples as `base-N.samples` / `treat-N.samples`, written through the
/// directory opened at the start.
fn keep(dir: &OutputDir, r: &Rounds) -> Result<()> {
    for (name, rounds) in [("base", &r.base), ("treat", &r.treat)] {
        for (i, s) in rounds.samples.iter().enumerate() {
            let mut buf = Vec::new();
            crate::bench::write_samples(&mut buf, s)?;
            dir.write(&format!("{name}-{}.samples", i + 1), &buf, Existing::Keep)?;
        }
    }
    // Which pairs each load of the objects held, and in which order it was made: what
    // scripts/fit-load-model.py reads beside the rounds.
    let loads = serde_json::to_string_pretty(&r.loads)? + "\n";
    dir.write("loads.json", loads.as_bytes(), Existing::Keep)?;
    let rounds = (r.base.samples.len(), r.treat.samples.len());
    crate::out::say(format!(
        "kept the rounds in {}: base-1.samples … base-{}.samples, treat-1.samples … treat-{}.samples (one latency in ns per line) and loads.json",
        dir.shown().display(),
        rounds.0,
        rounds.1
    ));
    Ok(())
}

/// How many loads each arm had, in words: objects are loaded, a loader (`--attach-cmd`) is
/// started.
fn loads_words(mode: super::Mode, label: &str, loads: usize) -> String {
    match mode {
        super::Mode::Load => format!("{label} loaded {loads} times"),
        super::Mode::AaLoad => format!("{label} loaded {loads} times on each arm"),
        super::Mode::AttachCmd => format!("{loads} loader starts of {label}"),
        super::Mode::Compare | super::Mode::Aa => format!("each object loaded {loads} times"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dispatch_is_never_a_negative_cost() {
        // (p50 difference, own time, gap shown, sentence holds)
        let cases = [
            (
                (1524.0, 1428.0, 1578.0),
                Some(1280.0),
                Some(244.0),
                "+244 ns [+148, +298]",
            ),
            (
                (40.0, 30.0, 50.0),
                Some(45.0),
                Some(-5.0),
                "none detectable",
            ),
            (
                (39.0, 30.0, 48.0),
                Some(55.0),
                None,
                "cannot be separated here",
            ),
            ((900.0, 850.0, 950.0), None, None, "cannot tell how often"),
        ];
        for (diff, own, gap, text) in cases {
            let d = Dispatch::new(diff, own);
            assert_eq!(d.gap_ns, gap, "{}", d.sentence);
            assert!(d.sentence.contains(text), "{}", d.sentence);
        }
    }

    /// A report over seeded synthetic rounds: the treatment ~300 ns slower.
    fn synthetic_report() -> Report {
        let mut rng = crate::stats::rng::Rng::new(14);
        let mut arm = |shift: f64| -> Vec<Vec<u64>> {
            (0..12)
                .map(|_| {
                    (0..400)
                        .map(|_| (1000.0 + shift + 200.0 * -rng.uniform().ln()) as u64)
                        .collect()
                })
                .collect()
        };
        let (base, treat) = (arm(0.0), arm(300.0));
        let comparison = stats::compare(&base, &treat, &stats::CompareOptions::default());
        let arm_report = |label: &str| ArmReport {
            label: label.into(),
            rounds: Vec::new(),
            started_s: Vec::new(),
            pooled: None,
        };
        Report {
            schema: crate::out::JSON_SCHEMA,
            mode: super::super::Mode::Load,
            cpu: 1,
            priority: Some(50),
            rounds: comparison.rounds,
            loads: Vec::new(),
            iterations: 400,
            seed: 7,
            ended: Ended {
                reason: super::super::StopReason::Rounds,
                loads: 1,
                pairs: 12,
                seconds: 1.5,
                p50_width_ns: Some(20.0),
                target_ns: None,
                max_time_s: None,
            },
            bench: "400 openats of /etc/hostname".into(),
            base: arm_report("baseline"),
            treat: arm_report("attached: hook.bpf.o"),
            verdict: stats::verdict(&comparison, 10.0),
            comparison,
            clock: ClockCost {
                read_ns: 20.0,
                step_ns: 10,
            },
            kernel: KernelView::default(),
            dispatch_gap_ns: None,
            dispatch: None,
            gates: Vec::new(),
            maps: Vec::new(),
            op: None,
            ran: None,
        }
    }

    #[test]
    fn a_loader_is_started_not_loaded() {
        use super::super::Mode;
        assert_eq!(
            loads_words(Mode::AttachCmd, "bpftrace", 12),
            "12 loader starts of bpftrace"
        );
        assert_eq!(
            loads_words(Mode::Load, "hook.bpf.o", 12),
            "hook.bpf.o loaded 12 times"
        );
        assert_eq!(
            loads_words(Mode::Compare, "b.bpf.o", 4),
            "each object loaded 4 times"
        );
    }

    #[test]
    fn markdown_export_is_a_table_of_every_quantile_with_the_verdict() {
        let r = synthetic_report();
        let md = r.markdown();
        let first = md.lines().next().unwrap();
        assert_eq!(
            first,
            "**overhead (load)**: baseline vs attached: hook.bpf.o, 12 pairs of rounds of 400 openats of /etc/hostname, CPU 1"
        );
        let rows: Vec<&str> = md.lines().filter(|l| l.starts_with('|')).collect();
        assert_eq!(rows.len(), 2 + r.comparison.diffs.len(), "{md}");
        assert!(rows[0].contains("| 99% interval (ns) |"), "{}", rows[0]);
        assert_eq!(rows[1], "|---|---:|---:|---:|---|---:|");
        for (row, d) in rows[2..].iter().zip(&r.comparison.diffs) {
            assert_eq!(row.matches('|').count(), 7, "six columns: {row}");
            let want = format!(
                "| p{} | {:.0} | {:.0} | {:+.0} |",
                trim(d.q),
                d.base,
                d.treat,
                d.delta
            );
            assert!(row.starts_with(&want), "{row} vs {want}");
        }
        let p50 = r.comparison.diff(50.0).unwrap();
        assert!(
            p50.delta > 200.0 && p50.lo > 0.0,
            "the seeded shift shows: {p50:?}"
        );
        assert!(md.contains(&r.ended.sentence()), "{md}");
        assert!(md.ends_with(&format!("\nverdict: {}\n", r.verdict)), "{md}");
    }
    /// A mode of many rounds, as a long noisy run gives, reads as a short line: the first runs
    /// of rounds, how many in all, and no start times when they all read the same.
    #[test]
    fn modes_line_is_a_short_summary() {
        let rounds: Vec<usize> = (0..400).filter(|round| round % 3 == 0).collect();
        let mode = crate::stats::Mode {
            arm: "treat (hook.bpf.o)".into(),
            above: true,
            rounds: rounds.clone(),
            of: 400,
            offset_ns: 240.0,
            range_ns: (180.0, 610.0),
        };
        let same_start = vec![0.0; rounds.len()];
        let line = mode_sentence(&mode, &same_start);
        assert!(line.len() < 260, "{} characters: {line}", line.len());
        assert!(
            line.starts_with("treat (hook.bpf.o): 134 of 400 rounds sat above the rest by +180 to +610 ns (median +240): rounds 1, 4, 7, 10, 13, 16, … (134 rounds; --json lists them); kept"),
            "{line}"
        );
        assert!(
            !line.contains(" s;"),
            "no start times when all are 0.0 s: {line}"
        );
        let spread: Vec<f64> = rounds.iter().map(|&round| round as f64 * 0.05).collect();
        let line = mode_sentence(&mode, &spread);
        assert!(line.contains(", between 0.0 and 20.0 s; kept"), "{line}");
        let one = crate::stats::Mode {
            rounds: vec![4],
            ..mode
        };
        let line = mode_sentence(&one, &[1.25]);
        assert!(line.contains("(median +240): round 5; kept"), "{line}");
    }
}
