//! The overhead engine: what the hook costs, as baseline vs attached latency with its
//! uncertainty. The arms interleave round by round (detached, attached, detached, …), each
//! round a fresh pinned SCHED_FIFO benchmark, so drift of the machine hits both alike; extra
//! attached rounds read the kernel's own run stats, never during the latency rounds.

mod arms;
mod kstats;
mod output;
mod pressure;
mod profile;
mod runner;
mod sweep;
mod sweep_plot;

use crate::bench::workingset::WorkingSet;
use crate::bench::OpKind;
use crate::error::{check, usage};
use crate::host::{cpu, security, Host};
use crate::signals::Interrupts;
use crate::stats::{self, CompareOptions, Comparison, GateResult};
use anyhow::{Context, Result};
use arms::{Active, ArmSpec};
use runner::BenchRun;
use std::ffi::OsString;
use std::io::IsTerminal;
use std::path::PathBuf;

pub use output::Report;

/// The CI gates: exceeded when the lower end of the difference's interval is above the limit.
#[derive(Debug, Clone, Default)]
pub struct Gates {
    pub max_p50_ns: Option<f64>,
    pub max_p99_ns: Option<f64>,
    pub max_p50_pct: Option<f64>,
    pub max_p99_pct: Option<f64>,
}

/// Everything `overhead` takes.
#[derive(Debug, Clone)]
pub struct OverheadOptions {
    pub load: Option<PathBuf>,
    pub attach_cmd: Option<String>,
    pub compare: Option<PathBuf>,
    pub aa: bool,
    pub rounds: usize,
    pub iterations: usize,
    pub op: OpKind,
    pub cpu: Option<u32>,
    pub priority: Option<u8>,
    /// Extra attached rounds with BPF run stats on (0: none).
    pub stats_rounds: usize,
    pub json: bool,
    pub plot: Option<PathBuf>,
    pub keep: Option<PathBuf>,
    pub gates: Gates,
    /// The user's benchmark (prints one ns latency per line); empty: the built-in bench.
    pub bench: Vec<OsString>,
    pub seed: u64,
    /// Distinct files the built-in openat bench cycles over.
    pub paths: usize,
    /// Loops of the built-in bench at once, one per CPU.
    pub workers: usize,
    /// Measure at each value of `paths` or `workers` in turn.
    pub sweep: Option<sweep::Sweep>,
    /// Programs someone else loaded whose maps to watch (ids, and names as bpftool shows them).
    pub watch_ids: Vec<u32>,
    pub watch_names: Vec<String>,
    /// Record one profile per arm here after the latency rounds (for `ebpf-prof diff`).
    pub profile: Option<PathBuf>,
}

pub use sweep::{Sweep, SweepParam};

/// The two arms, base first, and the name of the mode.
fn arms(o: &OverheadOptions) -> Result<(ArmSpec, ArmSpec, &'static str)> {
    let cmd = match &o.attach_cmd {
        Some(c) => Some(
            shlex::split(c)
                .filter(|v| !v.is_empty())
                .ok_or_else(|| usage(format!("--attach-cmd {c:?} is not a command line")))?,
        ),
        None => None,
    };
    for p in o.load.iter().chain(o.compare.iter()) {
        if !p.is_file() {
            return Err(usage(format!(
                "{} is not a file: give the path of a compiled BPF object (.bpf.o)",
                p.display()
            )));
        }
    }
    match (&o.load, cmd, &o.compare, o.aa) {
        (_, _, _, true) => Ok((ArmSpec::Detached, ArmSpec::Detached, "aa")),
        (Some(a), None, Some(b), false) => Ok((ArmSpec::Object(a.clone()), ArmSpec::Object(b.clone()), "compare")),
        (Some(a), None, None, false) => Ok((ArmSpec::Detached, ArmSpec::Object(a.clone()), "load")),
        (None, Some(c), None, false) => Ok((ArmSpec::Detached, ArmSpec::Command(c), "attach-cmd")),
        (None, None, Some(_), false) => Err(usage("--compare B.bpf.o needs --load A.bpf.o: it measures A attached against B attached")),
        (Some(_), Some(_), _, _) | (None, Some(_), Some(_), _) => Err(usage("give either --load or --attach-cmd, not both")),
        (None, None, None, false) => Err(usage("nothing to measure: give --load OBJ.bpf.o, --attach-cmd 'CMD…', or --aa for the noise floor")),
    }
}

/// The CPUs for `workers` loops: `cpu` and the next highest online ones.
fn cpus_for(host: &Host, cpu: u32, workers: usize) -> Result<Vec<u32>> {
    let mut online = cpu::online(host);
    online.retain(|c| *c != cpu);
    online.sort_unstable_by(|a, b| b.cmp(a));
    let mut v = vec![cpu];
    v.extend(online.into_iter().take(workers.saturating_sub(1)));
    if v.len() < workers {
        return Err(usage(format!(
            "--workers {workers} needs as many online CPUs; this machine has {}",
            v.len()
        )));
    }
    Ok(v)
}

/// The working set for `paths` files: made here, once for all rounds (and removed when dropped,
/// also when the run fails or is interrupted), and handed to each round's bench as `--dir`.
fn working_set(o: &OverheadOptions, paths: usize) -> Result<Option<WorkingSet>> {
    match (&o.op, o.bench.is_empty(), paths > 1) {
        (OpKind::Openat(_), true, true) => Ok(Some(WorkingSet::create(paths)?)),
        _ => Ok(None),
    }
}

fn bench_run(
    o: &OverheadOptions,
    cpus: Vec<u32>,
    paths: usize,
    workers: usize,
    ws: Option<&WorkingSet>,
) -> Result<BenchRun> {
    let command = if o.bench.is_empty() {
        let me = std::env::current_exe().context("cannot find the ebpf-prof executable")?;
        let mut c: Vec<OsString> = vec![
            me.into(),
            "bench".into(),
            "-n".into(),
            o.iterations.to_string().into(),
        ];
        match &o.op {
            OpKind::Openat(p) => c.extend([
                "--op".into(),
                "openat".into(),
                "--path".into(),
                p.clone().into(),
            ]),
            OpKind::Connect => c.extend(["--op".into(), "connect".into()]),
        }
        c.extend([
            "--paths".into(),
            paths.to_string().into(),
            "--workers".into(),
            workers.to_string().into(),
        ]);
        if let Some(d) = ws.and_then(WorkingSet::temp_dir) {
            c.extend(["--dir".into(), d.as_os_str().to_owned()]);
        }
        c
    } else {
        let found = which::which(&o.bench[0]).map_err(|_| {
            usage(format!(
                "benchmark {} not found or not executable",
                o.bench[0].to_string_lossy()
            ))
        })?;
        let mut c = vec![found.into_os_string()];
        c.extend(o.bench[1..].iter().cloned());
        c
    };
    Ok(BenchRun {
        command,
        cpus,
        priority: o.priority,
    })
}

/// Samples of every round of both arms.
#[derive(Debug, Clone, Default)]
pub struct Rounds {
    pub base: Vec<Vec<u64>>,
    pub treat: Vec<Vec<u64>>,
}

/// Run the interleaved rounds: base, treat, treat, base, base, treat, … reading the maps of every attached
/// round (and of the watched programs) after its benchmark.
fn measure(
    base: &ArmSpec,
    treat: &ArmSpec,
    bench: &BenchRun,
    rounds: usize,
    watch: &[u32],
    ints: &Interrupts,
) -> Result<(Rounds, Vec<pressure::RoundMaps>)> {
    let mut r = Rounds::default();
    let mut maps = Vec::new();
    for i in 1..=rounds {
        // Alternate the order within pairs (base-treat, treat-base, …): a steady trend of the
        // machine then does not bias the delta one way.
        let mut order = [(base, &mut r.base, "base"), (treat, &mut r.treat, "treat")];
        if i % 2 == 0 {
            order.reverse();
        }
        for (spec, out, name) in order {
            ints.check()?;
            let active = Active::start(spec)?;
            if name == "treat" {
                crate::failpoint::hit("overhead:attached");
            }
            let samples = bench.run(&format!("{name} {i}"));
            let mut ids = active.map_ids();
            ids.extend_from_slice(watch);
            if !ids.is_empty() {
                maps.push(pressure::read(name, i, &ids)?);
            }
            active.stop()?;
            if samples.is_err() {
                ints.check()?; // a bench killed by the same Ctrl-C: say "interrupted"
            }
            out.push(samples?);
        }
        if std::io::stderr().is_terminal() {
            eprint!("\rebpf-prof: round {i}/{rounds} done");
        }
    }
    if std::io::stderr().is_terminal() {
        eprintln!();
    }
    Ok((r, maps))
}

/// Map ids of the programs to watch, by id or by name.
fn watched_maps(o: &OverheadOptions) -> Result<Vec<u32>> {
    if o.watch_ids.is_empty() && o.watch_names.is_empty() {
        return Ok(Vec::new());
    }
    let loaded = crate::bpf::loaded_programs()?;
    let mut maps = Vec::new();
    for id in &o.watch_ids {
        let p = loaded.iter().find(|p| p.id == *id).ok_or_else(|| {
            usage(format!(
                "--prog-id {id}: no such program is loaded (bpftool prog show)"
            ))
        })?;
        maps.extend_from_slice(&p.map_ids);
    }
    for name in &o.watch_names {
        let hits: Vec<_> = loaded
            .iter()
            .filter(|p| p.name == *name || name.starts_with(&p.name) && p.name.len() == 15)
            .collect();
        if hits.is_empty() {
            return Err(usage(format!(
                "--prog-name {name}: no loaded program has that name (bpftool prog show)"
            )));
        }
        hits.iter().for_each(|p| maps.extend_from_slice(&p.map_ids));
    }
    maps.sort_unstable();
    maps.dedup();
    Ok(maps)
}

/// A first attach of each non-detached arm before measuring: the object must load, and no
/// program of the same name may already be loaded by someone else (the baseline would not be one).
fn preflight(specs: &[&ArmSpec]) -> Result<()> {
    for spec in specs {
        if let ArmSpec::Object(p) = spec {
            let a = crate::bpf::attach(crate::bpf::ObjectSource::Path(p))?;
            let ours = a.program_ids();
            let names: Vec<String> = a
                .programs()
                .iter()
                .map(|p| p.name.chars().take(15).collect())
                .collect();
            drop(a);
            arms::ensure_gone(&ours)?;
            let clash: Vec<String> = crate::bpf::loaded_programs()?
                .into_iter()
                .filter(|l| names.contains(&l.name))
                .map(|l| format!("{} (id {})", l.name, l.id))
                .collect();
            if !clash.is_empty() {
                return Err(check(format!(
                    "{} of {} already loaded by someone else: the detached rounds would not be detached; unload it first (bpftool prog show)",
                    clash.join(", "),
                    p.display()
                )));
            }
        }
    }
    Ok(())
}

/// Run `overhead`; exit status 1 when a gate is exceeded.
pub fn run(o: &OverheadOptions) -> Result<()> {
    let (base, treat, mode) = arms(o)?;
    if !security::is_root() {
        return Err(usage(
            "overhead loads BPF programs and runs at SCHED_FIFO: run it with sudo",
        ));
    }
    if o.rounds < 2 {
        return Err(usage(
            "--rounds must be at least 2: the interval comes from the spread between rounds",
        ));
    }
    let ints = Interrupts::install()?;
    let host = Host::live();
    let cpu = o.cpu.map_or_else(
        || cpu::default_cpu(&host).context("no online CPU found"),
        Ok,
    )?;
    cpu::validate(&host, cpu)?;
    for d in o.keep.iter().chain(o.profile.iter()) {
        output::prepare_keep(d)?;
    }
    if let Some(p) = &o.plot {
        output::check_new_file(p)?;
    }
    let watch = watched_maps(o)?;
    preflight(&[&base, &treat])?;
    if let Some(sw) = &o.sweep {
        return sweep::run(o, sw, &host, cpu, (&base, &treat), &watch, &ints);
    }
    let ws = working_set(o, o.paths)?;
    let bench = bench_run(
        o,
        cpus_for(&host, cpu, o.workers)?,
        o.paths,
        o.workers,
        ws.as_ref(),
    )?;
    let clock = runner::clock_cost();
    eprintln!(
        "ebpf-prof: {} rounds per arm ({} vs {}), pinned to CPU {cpu}: {}",
        o.rounds,
        base.label(),
        treat.label(),
        bench
            .argv()
            .iter()
            .map(|a| a.to_string_lossy())
            .collect::<Vec<_>>()
            .join(" ")
    );
    let (rounds, maps) = measure(&base, &treat, &bench, o.rounds, &watch, &ints)?;
    let kernel = kstats::collect(
        &[&base, &treat],
        &bench,
        o.stats_rounds,
        o.iterations,
        &ints,
    )?;
    let cmp = stats::compare(
        &rounds.base,
        &rounds.treat,
        &CompareOptions {
            seed: o.seed,
            ..Default::default()
        },
    );
    let gates = gates(&cmp, &o.gates);
    let mut report = Report::new(
        mode, &base, &treat, o, cpu, clock, &rounds, cmp, kernel, gates,
    );
    report.maps = pressure::summarise(&maps);
    report.emit(o, &rounds)?;
    if let Some(dir) = &o.profile {
        profile::record_arms(dir, [("base", &base), ("treat", &treat)], &bench)?;
    }
    gate_exit(&report.gates)
}

/// Exit status 1 (a check) when any gate is exceeded.
fn gate_exit(gates: &[GateResult]) -> Result<()> {
    let over: Vec<&GateResult> = gates.iter().filter(|g| g.exceeded).collect();
    if !over.is_empty() {
        return Err(check(
            over.iter()
                .map(|g| g.message.clone())
                .collect::<Vec<_>>()
                .join("; "),
        ));
    }
    Ok(())
}

fn gates(c: &Comparison, g: &Gates) -> Vec<GateResult> {
    let mut v = Vec::new();
    if let Some(x) = g.max_p50_ns {
        v.push(stats::gate_ns(c, 50.0, x));
    }
    if let Some(x) = g.max_p99_ns {
        v.push(stats::gate_ns(c, 99.0, x));
    }
    if let Some(x) = g.max_p50_pct {
        v.push(stats::gate_pct(c, 50.0, x));
    }
    if let Some(x) = g.max_p99_pct {
        v.push(stats::gate_pct(c, 99.0, x));
    }
    v
}
