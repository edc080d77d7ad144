//! `overhead --sweep paths=1,10,100,1000,10000` (or `workers=1,2`): the whole overhead
//! measurement at each point of a working-set (or parallelism) sweep, with the map pressure at
//! each, to find where an in-kernel cache stops holding the working set — the cliff.

use super::arms::ArmSpec;
use super::pressure::{self, MapSummary};
use super::rounds::Ended;
use super::{bench_run, cpus_for, measure, OverheadOptions};
use crate::error::usage;
use crate::host::Host;
use crate::signals::Interrupts;
use crate::stats::{Comparison, QuantileDiff};
use anyhow::Result;
use serde::Serialize;

/// What is swept.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum SweepParam {
    /// Distinct files the openat loop cycles over.
    Paths,
    /// Loops at once, one per CPU.
    Workers,
}

/// The most points of a sweep: each is a whole overhead measurement.
pub const MAX_POINTS: usize = 32;

/// A sweep: the parameter and its values, in the order given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sweep {
    pub param: SweepParam,
    pub values: Vec<usize>,
}

impl std::str::FromStr for Sweep {
    type Err = String;

    fn from_str(s: &str) -> Result<Sweep, String> {
        let bad = || format!("--sweep {s:?}: give paths=1,10,100 or workers=1,2");
        let (name, list) = s.split_once('=').ok_or_else(bad)?;
        let param = match name.trim() {
            "paths" => SweepParam::Paths,
            "workers" => SweepParam::Workers,
            _ => return Err(bad()),
        };
        let values: Vec<usize> = list
            .split(',')
            .map(|v| v.trim().parse().map_err(|_| bad()))
            .collect::<Result<_, _>>()?;
        if values.is_empty() || values.contains(&0) {
            return Err(bad());
        }
        let most = match param {
            SweepParam::Paths => crate::bench::MAX_PATHS,
            SweepParam::Workers => crate::bench::MAX_WORKERS,
        };
        if values.len() > MAX_POINTS || values.iter().any(|v| *v > most) {
            return Err(format!(
                "--sweep {s:?} is out of range: give at most {MAX_POINTS} values, each from 1 to {most}"
            ));
        }
        Ok(Sweep { param, values })
    }
}

/// One point of the sweep.
#[derive(Debug, Clone, Serialize)]
pub struct SweepPoint {
    pub value: usize,
    /// Why this point's rounds ended.
    pub ended: Ended,
    pub comparison: Comparison,
    pub maps: Vec<MapSummary>,
}

impl SweepPoint {
    fn diff(&self, q: f64) -> Option<&QuantileDiff> {
        self.comparison.diffs.iter().find(|d| d.q == q)
    }

    /// Names of the maps that were full at this point.
    pub fn full_maps(&self) -> Vec<&MapSummary> {
        self.maps
            .iter()
            .filter(|m| m.full_after_round.is_some())
            .collect()
    }
}

/// Where the first map filled, and what the p50 delta did there.
#[derive(Debug, Clone, Serialize)]
pub struct Cliff {
    pub value: usize,
    pub previous: Option<usize>,
    pub map: String,
    pub message: String,
}

/// Everything `--sweep --json` prints.
#[derive(Debug, Clone, Serialize)]
pub struct SweepReport {
    /// The version of this document ([`crate::out::JSON_SCHEMA`]).
    pub schema: u32,
    pub param: SweepParam,
    pub base: String,
    pub treat: String,
    pub iterations: usize,
    /// Seed of the coin that ordered each pair, at every point (`--seed` repeats it).
    pub seed: u64,
    pub points: Vec<SweepPoint>,
    pub cliff: Option<Cliff>,
}

/// Measure every point, then print the table (or JSON) and the plot.
pub fn run(
    o: &OverheadOptions,
    sw: &Sweep,
    (host, cpu): (&Host, u32),
    arms: (&ArmSpec, &ArmSpec),
    watch: &[u32],
    ints: &Interrupts,
) -> Result<()> {
    if sw.param == SweepParam::Paths && !o.op.operation().takes_working_set() {
        return Err(usage("--sweep paths is for --op openat"));
    }
    let mut points = Vec::new();
    for &v in &sw.values {
        let (paths, workers) = match sw.param {
            SweepParam::Paths => (v, o.workers),
            SweepParam::Workers => (o.paths, v),
        };
        let ws = super::working_set(o, paths)?;
        let bench = bench_run(
            o,
            cpus_for(host, cpu, workers)?,
            paths,
            workers,
            ws.as_ref(),
        )?;
        crate::out::say(format!("sweep {}={v}", name(sw.param)));
        let m = measure(o, arms, &bench, (watch, 0), None, ints)?;
        points.push(SweepPoint {
            value: v,
            ended: m.rounds.ended,
            comparison: m.comparison,
            maps: pressure::summarise(&m.maps),
        });
    }
    let report = SweepReport {
        schema: crate::out::JSON_SCHEMA,
        param: sw.param,
        base: arms.0.label(),
        treat: arms.1.label(),
        iterations: o.iterations,
        seed: o.seed,
        cliff: cliff(&points),
        points,
    };
    let json = serde_json::to_string_pretty(&report)? + "\n";
    crate::out::stdout(&if o.json { json.clone() } else { table(&report) })?;
    if let Some(p) = &o.export_json {
        super::output::write_user_file(p, super::output::EXPORT_JSON, json.as_bytes())?;
    }
    if let Some(p) = &o.export_markdown {
        let markdown = format!("```\n{}```\n", table(&report));
        super::output::write_user_file(p, super::output::EXPORT_MARKDOWN, markdown.as_bytes())?;
    }
    if let Some(p) = &o.plot {
        let svg = crate::plot::sweep_svg(&plot_of(&report));
        super::output::write_user_file(p, super::output::PLOT, svg.as_bytes())?;
    }
    Ok(())
}

/// What the sweep plot draws, from the report.
fn plot_of(r: &SweepReport) -> crate::plot::SweepPlot {
    let d = |p: &SweepPoint, q: f64| p.diff(q).map(|d| (d.delta, d.lo, d.hi));
    crate::plot::SweepPlot {
        title: format!("ebpf-prof overhead sweep: {} vs {}", r.base, r.treat),
        param: name(r.param).to_string(),
        confidence: r.points.first().map_or(0.0, |p| p.comparison.confidence),
        points: r
            .points
            .iter()
            .map(|p| crate::plot::SweepPoint {
                value: p.value,
                p50: d(p, 50.0),
                p99: d(p, 99.0),
                full_maps: p.full_maps().iter().map(|m| m.name.clone()).collect(),
            })
            .collect(),
    }
}

fn name(p: SweepParam) -> &'static str {
    match p {
        SweepParam::Paths => "paths",
        SweepParam::Workers => "workers",
    }
}

/// The first point at which a map was full, with the p50 delta before and there: the p99 of a
/// few rounds moves with whatever else runs on the box, enough to misrank two points.
pub fn cliff(points: &[SweepPoint]) -> Option<Cliff> {
    let i = points.iter().position(|p| !p.full_maps().is_empty())?;
    let p = &points[i];
    let map = p.full_maps()[0];
    let prev = i.checked_sub(1).map(|j| &points[j]);
    let d50 = |pt: &SweepPoint| pt.diff(50.0).map_or(f64::NAN, |d| d.delta);
    let mut message = format!(
        "{} filled at {}: {}",
        map.name,
        p.value,
        map.message.clone().unwrap_or_default()
    );
    if let Some(pr) = prev {
        message.push_str(&format!(
            "; Δp50 {:+.0} ns there, {:+.0} ns at {} before it",
            d50(p),
            d50(pr),
            pr.value
        ));
    }
    Some(Cliff {
        value: p.value,
        previous: prev.map(|p| p.value),
        map: map.name.clone(),
        message,
    })
}

fn cell(d: Option<&QuantileDiff>) -> String {
    d.map_or_else(
        || "-".into(),
        |d| format!("{:+.0} [{:+.0}, {:+.0}]", d.delta, d.lo, d.hi),
    )
}

/// The terminal table.
pub fn table(r: &SweepReport) -> String {
    let mut s = format!(
        "sweep {}: {} vs {}, rounds of {} iterations, coin seed {}\n",
        name(r.param),
        r.base,
        r.treat,
        r.iterations,
        r.seed
    );
    let conf = r
        .points
        .first()
        .map_or(0.0, |p| 100.0 * p.comparison.confidence);
    s.push_str(&format!(
        "{:>8} {:>6} {:>26} {:>26}  maps\n",
        name(r.param),
        "pairs",
        format!("Δp50 [{conf:.0}% CI] (ns)"),
        format!("Δp99 [{conf:.0}% CI] (ns)")
    ));
    for p in &r.points {
        let maps = p
            .maps
            .iter()
            .map(|m| {
                format!(
                    "{} {}/{}{}",
                    m.name,
                    m.peak,
                    m.max_entries,
                    if m.full_after_round.is_some() {
                        " FULL"
                    } else {
                        ""
                    }
                )
            })
            .collect::<Vec<_>>()
            .join(", ");
        s.push_str(&format!(
            "{:>8} {:>6} {:>26} {:>26}  {maps}\n",
            p.value,
            p.comparison.rounds,
            cell(p.diff(50.0)),
            cell(p.diff(99.0))
        ));
    }
    match &r.cliff {
        Some(c) => s.push_str(&format!("cliff: {}\n", c.message)),
        None => s.push_str("no map filled at any point of the sweep\n"),
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_sweeps() {
        assert_eq!(
            "paths=1,10,100".parse::<Sweep>(),
            Ok(Sweep {
                param: SweepParam::Paths,
                values: vec![1, 10, 100]
            })
        );
        assert_eq!(
            "workers=1, 2".parse::<Sweep>().map(|s| s.values),
            Ok(vec![1, 2])
        );
        for bad in ["paths", "size=1", "paths=", "paths=0", "paths=x"] {
            assert!(bad.parse::<Sweep>().is_err(), "{bad}");
        }
    }

    /// A sweep point past the bench's own ranges (4294967295 files, more workers than any
    /// kernel has CPUs) or past the count of points is refused while parsing.
    #[test]
    fn regression_sweep_values_past_the_bench_ranges_are_refused() {
        let many = format!("workers={}", vec!["1"; MAX_POINTS + 1].join(","));
        for bad in [
            "paths=4294967295",
            "paths=1,100001",
            "workers=8193",
            many.as_str(),
        ] {
            let e = bad.parse::<Sweep>().unwrap_err();
            assert!(e.contains("is out of range"), "{bad}: {e}");
        }
        assert!("paths=100000".parse::<Sweep>().is_ok());
    }

    /// A sweep point of seeded rounds: the attached arm `shift` ns slower at every sample, and
    /// a slow tail of `tail` ns in one sample in twenty of the attached rounds.
    fn point(value: usize, shift: f64, tail: f64, full: bool) -> SweepPoint {
        let mut rng = crate::stats::rng::Rng::new(value as u64);
        let mut arm = |shift: f64, tail: f64| -> Vec<Vec<u64>> {
            (0..12)
                .map(|_| {
                    (0..400)
                        .map(|i| {
                            let slow = if i % 20 == 0 { tail } else { 0.0 };
                            (1000.0 + shift + slow + 100.0 * -rng.uniform().ln()) as u64
                        })
                        .collect()
                })
                .collect()
        };
        let (base, treat) = (arm(0.0, 0.0), arm(shift, tail));
        let comparison = crate::stats::compare(&base, &treat, &Default::default());
        let map = MapSummary {
            name: "verdict_cache".into(),
            map_type: "lru_hash".into(),
            max_entries: 1024,
            peak: 1024,
            full_after_round: full.then_some(1),
            per_round: Vec::new(),
            churn: Vec::new(),
            message: full.then(|| "evicting".into()),
        };
        SweepPoint {
            value,
            ended: Ended {
                reason: crate::overhead::StopReason::Rounds,
                pairs: 12,
                loads: 1,
                seconds: 1.0,
                p50_width_ns: None,
                target_ns: None,
                max_time_s: None,
            },
            comparison,
            maps: vec![map],
        }
    }

    /// The cliff sentence compares the p50s, which the cliff moves, not the p99s, which the
    /// tail before it moved more.
    #[test]
    fn cliff_sentence_compares_p50s() {
        let points = [
            point(64, 50.0, 5000.0, false),
            point(4096, 600.0, 0.0, true),
        ];
        let p50 = |p: &SweepPoint| p.diff(50.0).unwrap().delta;
        assert!(p50(&points[1]) > p50(&points[0]) + 400.0);
        assert!(points[0].diff(99.0).unwrap().delta > points[1].diff(99.0).unwrap().delta);
        let cliff = cliff(&points).unwrap();
        let want = format!(
            "verdict_cache filled at 4096: evicting; Δp50 {:+.0} ns there, {:+.0} ns at 64 before it",
            p50(&points[1]),
            p50(&points[0])
        );
        assert_eq!(cliff.message, want);
    }
}
