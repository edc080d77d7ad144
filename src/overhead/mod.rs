//! The overhead engine: what the hook costs, as baseline vs attached latency with its
//! uncertainty. The arms interleave in pairs of rounds, the order within a pair by a coin, each
//! round of a pinned SCHED_FIFO benchmark (the built-in one kept running for all rounds), so
//! drift of the machine hits both alike; pairs are
//! added until the p50 interval is narrow enough or the time budget runs out (the method is in
//! [`crate::stats`]); extra attached rounds read the kernel's own run stats, never during the
//! latency rounds.

mod anchor;
mod arms;
mod engine;
mod fires;
mod kstats;
mod loader;
mod output;
mod pressure;
mod profile;
mod ran;
mod rig;
mod rounds;
mod runner;
mod sidecost;
mod sweep;
mod thirdarm;

use crate::bench::choose::OpChoice;
use crate::bench::workingset::WorkingSet;
use crate::bench::OpKind;
use crate::error::{check, usage};
use crate::host::{cpu, security, Host};
use crate::netpath::{Bench, PacketNetwork};
use crate::out::say;
use crate::runfiles::{Contents, OutputDir, Owner};
use crate::signals::Interrupts;
use crate::stats::{self, CompareOptions, Comparison, GateResult};
use anyhow::{Context, Result};
use arms::{Arm, ArmSpec};
use runner::BenchRun;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::Duration;

pub use engine::run as run_rounds;
pub use loader::{LoaderMounts, LoaderOptions};
pub use output::Report;
pub use rounds::{
    first_look, is_look, BudgetFlag, Ended, Progress, Rig, Rounds, RoundsPlan, Side, Stop,
    StopReason, MIN_PAIRS,
};

/// The default time budget of the latency rounds.
pub const DEFAULT_MAX_TIME: Duration = Duration::from_secs(12);
pub use crate::stats::compare::DEFAULT_CONFIDENCE;
/// The default iterations of one round of the built-in bench when both arms are brought about
/// in a millisecond or two (`--compare`, `--aa`): short rounds, so the two rounds of a pair are
/// close in time and a budget holds thousands of pairs (see `bench/serve.rs` and
/// `docs/overhead-method.md` for the measurements behind it).
pub const DEFAULT_ITERATIONS: usize = 250;
/// The default when one arm is nothing attached and the other an object (`--load`): taking a
/// tracepoint program off its hook waits for grace periods in place (see `arms.rs`), which
/// dwarfs a round; longer rounds then cost almost nothing and give each pair more samples.
pub const DEFAULT_ITERATIONS_DETACHED: usize = 2_000;

/// The default iterations per round: [`DEFAULT_ITERATIONS`] when both arms are brought about
/// in a millisecond or two, or not for each round (`--compare`, `--aa`, and `--attach-cmd`,
/// whose loader is held for a block of rounds), [`DEFAULT_ITERATIONS_DETACHED`] against
/// nothing attached. An operation that builds a process, a connection or a file
/// ([`crate::bench::Operation::is_heavy`]) keeps [`DEFAULT_ITERATIONS`] there too: what moves
/// its cost is the state a round leaves for the next, so more and shorter rounds narrow its
/// interval more than longer ones.
pub fn default_iterations(subject: &Subject, op: crate::bench::Operation) -> usize {
    match subject {
        Subject::Load(_) if !op.is_heavy() => DEFAULT_ITERATIONS_DETACHED,
        _ => DEFAULT_ITERATIONS,
    }
}

/// Where a run's iterations per round come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IterationsFrom {
    /// `-n`, as given.
    Given,
    /// [`default_iterations`] for the subject and the operation timed.
    Default,
}

/// The default loads of the objects a run spreads its rounds over (`--loads`): where the
/// kernel places an object and in which order two are loaded moves their cost for as long as
/// they stay loaded, so the intervals are taken across loads (see `stats/loads.rs` and
/// `docs/overhead-method.md` for the figures behind the count).
pub const DEFAULT_LOADS: usize = 12;
/// The longest program name the kernel keeps (`BPF_OBJ_NAME_LEN` less its NUL): a longer name
/// is shown cut to this many characters.
const KERNEL_NAME_MAX: usize = 15;
/// The most pairs of rounds `--rounds` takes (more belongs to `--max-time`).
pub const MAX_PAIRS: usize = 2000;

/// Whether to measure the side cost of the attach point as well (`--side-cost`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SideCost {
    /// Only the operation chosen (the hook's own event).
    Skip,
    /// A second measurement on an operation that fires none of the programs.
    Measure,
}

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
    /// What the two arms are.
    pub subject: Subject,
    /// Loads of the arms' objects to spread the rounds over (each loaded afresh); `None`: the
    /// default ([`DEFAULT_LOADS`], or for a loader held in blocks as many as fit).
    pub loads: Option<usize>,
    /// How many pairs of rounds: a fixed count, or until a target width or a time budget.
    pub stop: Stop,
    /// The option a time budget in `stop` came from.
    pub budget_flag: BudgetFlag,
    pub iterations: usize,
    pub iterations_from: IterationsFrom,
    /// The operation timed (until `--op auto` has chosen: openat, holding `--path`).
    pub op: OpKind,
    /// Whether `op` was given, or is chosen from the programs' attach points.
    pub op_choice: OpChoice,
    /// `--path`: what the operations that take a file work on, whichever is chosen.
    pub path: PathBuf,
    /// Also measure on an operation that fires none of the programs.
    pub side_cost: SideCost,
    /// Whether a packet program is also measured against a trivial one (`--trivial-arm`).
    pub trivial_arm: TrivialArm,
    /// How the `--attach-cmd` loader is started and waited for.
    pub loader: LoaderOptions,
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
    /// Seed of the coin that orders the arms within each pair of rounds.
    pub seed: u64,
    /// Two-sided confidence of the intervals (0.5..1).
    pub confidence: f64,
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
    /// `keep` and `profile` as opened at the start ([`OpenedDirs`]); empty until then.
    pub opened: OpenedDirs,
    /// Also write the JSON document (as `--json` prints it) to this file.
    pub export_json: Option<PathBuf>,
    /// Also write the table as Markdown to this file.
    pub export_markdown: Option<PathBuf>,
}

pub use sweep::{Sweep, SweepParam};
pub use thirdarm::{PacketKind, TrivialArm};

/// `--keep DIR` and `--profile DIR`, opened once before measuring (see
/// `runfiles::OutputDir`): every file goes through these open directories, never through the
/// paths again, so a directory swapped for a link after the start receives nothing.
#[derive(Debug, Clone, Default)]
pub struct OpenedDirs {
    pub keep: Option<std::sync::Arc<OutputDir>>,
    pub profile: Option<std::sync::Arc<OutputDir>>,
}

impl OpenedDirs {
    /// Open the directories `o` names: new or empty, as root no link or directory of another
    /// user's on the way (made when missing, and handed to the sudo user).
    fn open(o: &OverheadOptions) -> Result<OpenedDirs> {
        let open = |dir: &Option<PathBuf>| -> Result<Option<std::sync::Arc<OutputDir>>> {
            dir.as_deref()
                .map(|d| OutputDir::open(d, Owner::from_sudo_env(), Contents::Empty))
                .transpose()
                .map(|d| d.map(std::sync::Arc::new))
        };
        Ok(OpenedDirs {
            keep: open(&o.keep)?,
            profile: open(&o.profile)?,
        })
    }
}

impl OverheadOptions {
    /// The same options timing `op`, chosen `by`; iterations that were not given follow it.
    pub fn with_op(&self, op: OpKind, by: OpChoice) -> OverheadOptions {
        let iterations = match self.iterations_from {
            IterationsFrom::Given => self.iterations,
            IterationsFrom::Default => default_iterations(&self.subject, op.operation()),
        };
        OverheadOptions {
            op,
            op_choice: by,
            iterations,
            ..self.clone()
        }
    }

    /// The defaults of `overhead --load OBJ`, pinned to `cpu` at `priority`, for `budget`.
    pub fn for_load(load: &Path, cpu: u32, priority: Option<u8>, budget: Duration) -> Self {
        OverheadOptions {
            subject: Subject::Load(load.to_path_buf()),
            loads: None,
            stop: Stop::Adaptive {
                target_ns: None,
                budget,
            },
            budget_flag: BudgetFlag::CostTime {
                iterations: DEFAULT_ITERATIONS_DETACHED,
            },
            iterations: DEFAULT_ITERATIONS_DETACHED,
            iterations_from: IterationsFrom::Default,
            op: OpKind::openat("/etc/hostname"),
            op_choice: OpChoice::Default,
            path: "/etc/hostname".into(),
            side_cost: SideCost::Skip,
            trivial_arm: TrivialArm::Auto,
            loader: LoaderOptions::default(),
            cpu: Some(cpu),
            priority,
            stats_rounds: 0,
            json: false,
            plot: None,
            keep: None,
            gates: Gates::default(),
            bench: Vec::new(),
            seed: crate::stats::rng::fresh_seed(),
            confidence: DEFAULT_CONFIDENCE,
            paths: 1,
            workers: 1,
            sweep: None,
            watch_ids: Vec::new(),
            watch_names: Vec::new(),
            profile: None,
            opened: OpenedDirs::default(),
            export_json: None,
            export_markdown: None,
        }
    }
}

/// The cost of `load` against nothing at the defaults, within `budget` (what `demo` reports):
/// the comparison only, nothing printed but progress.
pub fn hook_cost(
    load: &crate::bpf::ObjectBytes,
    op: &OpKind,
    cpu: u32,
    priority: Option<u8>,
    budget: Duration,
) -> Result<Comparison> {
    let ints = Interrupts::install()?;
    let network = PacketNetwork::for_op(op, Bench::BuiltIn)?;
    let op = network
        .as_ref()
        .map_or_else(|| op.clone(), |net| net.op(op));
    let o = OverheadOptions::for_load(Path::new(&load.name), cpu, priority, budget)
        .with_op(op, OpChoice::Given);
    let bench = bench_run(&o, vec![cpu], 1, 1, None)?;
    let specs = (ArmSpec::Detached, ArmSpec::InMemory(load.clone()));
    Ok(measure(&o, (&specs.0, &specs.1), &bench, (&[], 0), None, &ints)?.comparison)
}

/// What a measurement compares.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mode {
    /// `--load X`: nothing attached against X attached.
    Load,
    /// `--load A --compare B`: A attached against B attached.
    Compare,
    /// `--attach-cmd CMD`: nothing attached against the user's loader running.
    AttachCmd,
    /// `--aa`: nothing attached on both arms.
    Aa,
    /// `--aa --load X`: X on both arms, loaded separately.
    AaLoad,
}

impl std::fmt::Display for Mode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Mode::Load => "load",
            Mode::Compare => "compare",
            Mode::AttachCmd => "attach-cmd",
            Mode::Aa => "aa",
            Mode::AaLoad => "aa-load",
        })
    }
}

/// What `overhead` measures, as its options name it; each kind is one [`Mode`].
#[derive(Debug, Clone, PartialEq)]
pub enum Subject {
    /// `--load X`: nothing attached against X attached.
    Load(PathBuf),
    /// `--load A --compare B`: A attached against B attached.
    Compare { base: PathBuf, treat: PathBuf },
    /// `--attach-cmd CMD`: nothing attached against the user's loader running.
    AttachCmd(String),
    /// `--aa`: nothing attached on both arms.
    Aa,
    /// `--aa --load X`: X on both arms, loaded separately.
    AaLoad(PathBuf),
}

impl Subject {
    /// The kind of measurement, as reports and JSON name it.
    pub fn mode(&self) -> Mode {
        match self {
            Subject::Load(_) => Mode::Load,
            Subject::Compare { .. } => Mode::Compare,
            Subject::AttachCmd(_) => Mode::AttachCmd,
            Subject::Aa => Mode::Aa,
            Subject::AaLoad(_) => Mode::AaLoad,
        }
    }
}

/// The two arms, base first, and the mode.
fn arms(o: &OverheadOptions) -> Result<(ArmSpec, ArmSpec, Mode)> {
    // Each object is read once, here, through the opener every object path goes through (no
    // FIFO, no device); every load of the measurement is from these bytes.
    let spec = |object: &PathBuf| -> Result<ArmSpec> {
        let bytes = crate::input::read_whole(object, crate::input::Role::BpfObject)?;
        Ok(ArmSpec::InMemory(crate::bpf::ObjectBytes {
            name: object.display().to_string(),
            bytes: bytes.into(),
        }))
    };
    let (base, treat) = match &o.subject {
        Subject::Load(object) => (ArmSpec::Detached, spec(object)?),
        Subject::Compare { base, treat } => (spec(base)?, spec(treat)?),
        Subject::AttachCmd(command_line) => {
            let argv = shlex::split(command_line)
                .filter(|words| !words.is_empty())
                .ok_or_else(|| {
                    usage(format!(
                        "--attach-cmd {command_line:?} is not a command line"
                    ))
                })?;
            let loader = loader::Loader {
                argv,
                options: o.loader,
            };
            (ArmSpec::Detached, ArmSpec::Command(loader))
        }
        Subject::Aa => (ArmSpec::Detached, ArmSpec::Detached),
        Subject::AaLoad(object) => {
            let both = spec(object)?;
            (both.clone(), both)
        }
    };
    Ok((base, treat, o.subject.mode()))
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
    match (
        o.op.operation().takes_working_set(),
        o.bench.is_empty(),
        paths > 1,
    ) {
        (true, true, true) => Ok(Some(WorkingSet::create(paths)?)),
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
    let tools = crate::perf::trust::pinned_helpers(o.priority.is_some())?;
    let command = if o.bench.is_empty() {
        let me = std::env::current_exe().context("cannot find the ebpf-prof executable")?;
        let mut c: Vec<OsString> = vec![
            me.into(),
            "bench".into(),
            "-n".into(),
            o.iterations.to_string().into(),
        ];
        c.extend(o.op.bench_args());
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
        let found = crate::perf::trust::program(&o.bench[0], "benchmark")?;
        let mut c = vec![found.into_os_string()];
        c.extend(o.bench[1..].iter().cloned());
        c
    };
    Ok(BenchRun {
        command,
        cpus,
        priority: o.priority,
        tools,
        builtin: o.bench.is_empty(),
    })
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
            .filter(|p| {
                p.name == *name || name.starts_with(&p.name) && p.name.len() == KERNEL_NAME_MAX
            })
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

/// Before measuring: no program of the same name as one of the prepared arms' may be loaded
/// by someone else (the baseline would not be one). Both arms' programs are ours: two versions
/// of one hook (`--load v1.bpf.o --compare v2.bpf.o`) share their programs' names.
fn preflight(arms: &[&Arm], specs: &[&ArmSpec]) -> Result<()> {
    let ours: Vec<u32> = arms.iter().flat_map(|a| a.program_ids()).collect();
    for (arm, spec) in arms.iter().zip(specs) {
        let names: Vec<String> = arm
            .program_names()
            .into_iter()
            .map(|(_, name)| name.chars().take(KERNEL_NAME_MAX).collect())
            .collect();
        let clash: Vec<String> = crate::bpf::loaded_programs()?
            .into_iter()
            .filter(|l| names.contains(&l.name) && !ours.contains(&l.id))
            .map(|l| format!("{} (id {})", l.name, l.id))
            .collect();
        if !clash.is_empty() {
            return Err(check(format!(
                "{} of {} already loaded by someone else: the detached rounds would not be detached; unload it first (bpftool prog show)",
                clash.join(", "),
                spec.label()
            )));
        }
    }
    Ok(())
}

/// The checks before anything is made: the stop rule, the confidence, the options that go
/// together, root.
fn check_options(o: &OverheadOptions) -> Result<()> {
    check_stop(o.stop)?;
    check_confidence(o.confidence)?;
    fires::refuse_op_with_own_bench(o)?;
    if o.side_cost == SideCost::Measure && o.sweep.is_some() {
        return Err(usage(
            "give --side-cost or --sweep, not both: each measures the hook more than once",
        ));
    }
    if !security::is_root() {
        return Err(usage(
            "overhead loads BPF programs and runs at SCHED_FIFO: run it with sudo",
        ));
    }
    Ok(())
}

/// Check the confidence: a two-sided level between 0.5 and 1.
fn check_confidence(c: f64) -> Result<()> {
    if (0.5..1.0).contains(&c) {
        return Ok(());
    }
    Err(usage(format!(
        "--confidence {c} must be a fraction between 0.5 and 1 (0.99 for 99% intervals)"
    )))
}

/// Check the stop rule's figures.
fn check_stop(stop: Stop) -> Result<()> {
    match stop {
        Stop::Pairs(n) if n < 2 => Err(usage(
            "--rounds must be at least 2: the interval comes from the spread between pairs of rounds",
        )),
        Stop::Pairs(n) if n > MAX_PAIRS => Err(usage(format!(
            "--rounds {n} is more than {MAX_PAIRS}: use --max-time to measure longer"
        ))),
        Stop::Adaptive {
            target_ns: Some(t), ..
        } if !(t > 0.0 && t.is_finite()) => Err(usage(format!(
            "--target-ns {t} must be a width above 0 ns (the p50 interval stops the run once it is this narrow)"
        ))),
        Stop::Adaptive { budget, .. } if budget.is_zero() => Err(usage(
            "--max-time must be more than 0: it is the time the rounds may take",
        )),
        _ => Ok(()),
    }
}

/// Run `overhead`; exit status 1 when a gate is exceeded. The loaders' repeated stderr lines
/// are counted at the end, however the run ended.
pub fn run(o: &OverheadOptions) -> Result<()> {
    let result = run_measured(o);
    for line in loader::repeated_lines() {
        crate::out::say(line);
    }
    result
}

/// [`run`] itself.
fn run_measured(o: &OverheadOptions) -> Result<()> {
    let (base, treat, mode) = arms(o)?;
    check_options(o)?;
    let ints = Interrupts::install()?;
    let host = Host::live();
    let cpu = o.cpu.map_or_else(
        || cpu::default_cpu(&host).context("no online CPU found"),
        Ok,
    )?;
    cpu::validate(&host, cpu)?;
    let opened = OpenedDirs::open(o)?;
    for p in [&o.plot, &o.export_json, &o.export_markdown]
        .into_iter()
        .flatten()
    {
        output::check_new_file(p)?;
    }
    let watch = watched_maps(o)?;
    let (resolved, chosen) = fires::resolve(o, (&base, &treat))?;
    let o = &OverheadOptions { opened, ..resolved };
    let third = match &treat {
        ArmSpec::InMemory(object) => {
            thirdarm::plan(o, &crate::bpf::object_programs(object.source())?)?
        }
        _ => thirdarm::plan(o, &[])?,
    };
    let network = PacketNetwork::for_op(&o.op, bench_kind(o))?;
    let o = &match &network {
        Some(net) => o.with_op(net.op(&o.op), o.op_choice),
        None => o.clone(),
    };
    let _switch_note = third.map(|_| crate::bpf::packet::SwitchNote::measured_apart());
    if let Some(sw) = &o.sweep {
        return sweep::run(o, sw, (&host, cpu), (&base, &treat), &watch, &ints);
    }
    if o.side_cost == SideCost::Measure {
        let arms = (&base, &treat, mode);
        return sidecost::run(o, arms, (&host, cpu), chosen.as_ref(), &watch, &ints);
    }
    if let Some(kind) = third {
        let chosen = chosen.as_ref();
        return thirdarm::run(o, (kind, &treat), (&host, cpu), chosen, &watch, &ints);
    }
    let done = measure_and_report(
        o,
        (&base, &treat, mode),
        (&host, cpu),
        chosen,
        &watch,
        &ints,
    )?;
    done.report.emit(o, &done.rounds)?;
    if let Some(dir) = &o.opened.profile {
        let arms = [("base", &base), ("treat", &treat)];
        profile::record_arms(dir, arms, &done.bench, &done.report.comparison)?;
    }
    gate_exit(&done.report.gates)
}

/// Whose benchmark `o` times: a packet operation sends through a network only in the built-in
/// one.
fn bench_kind(o: &OverheadOptions) -> Bench {
    match o.bench.is_empty() {
        true => Bench::BuiltIn,
        false => Bench::Own,
    }
}

/// One measurement of `o` with its report (and the profiles of `--profile`).
fn measure_and_report(
    o: &OverheadOptions,
    (base, treat, mode): (&ArmSpec, &ArmSpec, Mode),
    (host, cpu): (&Host, u32),
    chosen: Option<crate::bench::choose::Chosen>,
    watch: &[u32],
    ints: &Interrupts,
) -> Result<Reported> {
    let ws = working_set(o, o.paths)?;
    let bench = bench_run(
        o,
        cpus_for(host, cpu, o.workers)?,
        o.paths,
        o.workers,
        ws.as_ref(),
    )?;
    let clock = runner::clock_cost();
    let m = measure(
        o,
        (base, treat),
        &bench,
        (watch, o.stats_rounds),
        chosen.as_ref(),
        ints,
    )?;
    let gates = gates(&m.comparison, &o.gates);
    let mut report = Report::new((base, treat, mode), o, cpu, clock, &m, gates);
    report.maps = pressure::summarise(&m.maps);
    report.op = chosen;
    Ok(Reported {
        report,
        rounds: m.rounds,
        bench,
        working_set: ws,
    })
}

/// A report, the rounds it was made from (for `--plot` and `--keep`) and the bench that ran
/// them with its working set (for `--profile`, which runs it again).
pub struct Reported {
    pub report: Report,
    pub rounds: Rounds,
    pub bench: BenchRun,
    pub working_set: Option<WorkingSet>,
}

/// What one measurement gives: the rounds, the comparison, the maps after each attached round
/// and the kernel's own view.
pub struct Measured {
    pub rounds: Rounds,
    pub comparison: Comparison,
    pub maps: Vec<pressure::RoundMaps>,
    pub kernel: kstats::KernelView,
    /// What ran inside the timed operation (the attached arm's programs).
    pub ran: Option<ran::Ran>,
}

/// The names the arms go by in notes and modes: "base (detached)", "treat (hook.bpf.o)".
fn arm_names(specs: (&ArmSpec, &ArmSpec)) -> [String; 2] {
    [
        format!("base ({})", specs.0.label()),
        format!("treat ({})", specs.1.label()),
    ]
}

/// The line that starts a measurement: the arms, the pinned command, how long.
fn announce(o: &OverheadOptions, specs: (&ArmSpec, &ArmSpec), bench: &BenchRun) {
    say(format!(
        "{} vs {}, pinned to CPU {}: {}; {}",
        specs.0.label(),
        specs.1.label(),
        bench.cpus.first().copied().unwrap_or_default(),
        bench.line(),
        o.stop.describe()
    ));
}

/// Prepare both arms, run the rounds (the objects loaded afresh for each load) and the stats
/// rounds, unload, and compare.
fn measure(
    o: &OverheadOptions,
    specs: (&ArmSpec, &ArmSpec),
    bench: &BenchRun,
    (watch, stats_rounds): (&[u32], usize),
    chosen: Option<&crate::bench::choose::Chosen>,
    ints: &Interrupts,
) -> Result<Measured> {
    let mut base = Arm::prepare(specs.0)?;
    let mut treat = Arm::prepare(specs.1)?;
    preflight(&[&base, &treat], &[specs.0, specs.1])?;
    let checked = fires::check([&mut base, &mut treat], bench, chosen, ints)?;
    let _anchors = arms::overlap_teardowns(&mut base, &mut treat)?;
    let opts = CompareOptions {
        arm_names: arm_names(specs),
        confidence: o.confidence,
        ..CompareOptions::default()
    };
    announce(o, specs, bench);
    let plan = RoundsPlan {
        stop: o.stop,
        budget_flag: o.budget_flag.for_rounds_of(o.iterations),
        quantiles: &opts.quantiles,
        confidence: opts.confidence,
        seed: o.seed,
        loads: o.loads,
    };
    let (rounds, maps) =
        run_on_the_machine([&mut base, &mut treat], specs, (bench, watch), &plan, ints)?;
    let kernel = kstats::collect(
        [&mut base, &mut treat],
        bench,
        stats_rounds,
        o.iterations,
        ints,
    )?;
    base.finish()?;
    treat.finish()?;
    let (b, t) = (&rounds.base, &rounds.treat);
    let comparison = stats::compare_loads(
        (&b.samples, &b.summaries),
        (&t.samples, &t.summaries),
        &rounds.loads,
        &opts,
    );
    let ran = fires::what_ran(&kernel.programs, &checked, bench, chosen);
    Ok(Measured {
        rounds,
        comparison,
        maps,
        kernel,
        ran,
    })
}

/// The rounds of `plan` on the prepared `arms`: the rounds, and the maps read after each
/// attached round.
fn run_on_the_machine(
    arms: [&mut Arm; 2],
    specs: (&ArmSpec, &ArmSpec),
    bench_and_watch: (&BenchRun, &[u32]),
    plan: &RoundsPlan,
    ints: &Interrupts,
) -> Result<(Rounds, Vec<pressure::RoundMaps>)> {
    let mut rig = rig::MachineRig::new(arms, [specs.0, specs.1], bench_and_watch, ints)?;
    let rounds = engine::run(&mut rig, plan)?;
    Ok((rounds, std::mem::take(&mut rig.maps)))
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::Operation;

    fn load_options(iterations_from: IterationsFrom, iterations: usize) -> OverheadOptions {
        OverheadOptions {
            iterations,
            iterations_from,
            ..OverheadOptions::for_load(Path::new("hook.bpf.o"), 1, None, DEFAULT_MAX_TIME)
        }
    }

    #[test]
    fn a_heavy_operation_keeps_short_rounds_unless_n_was_given() {
        let fork = OpKind::new(Operation::Fork, "/etc/hostname".into());
        let stat = OpKind::new(Operation::Stat, "/etc/hostname".into());
        let chosen = load_options(IterationsFrom::Default, DEFAULT_ITERATIONS_DETACHED);
        let on_fork = chosen.with_op(fork.clone(), OpChoice::Auto);
        assert_eq!(on_fork.iterations, DEFAULT_ITERATIONS);
        assert_eq!(on_fork.op, fork);
        assert_eq!(on_fork.op_choice, OpChoice::Auto);
        // Back to a light operation (as --side-cost's second measurement is): the long rounds.
        let on_stat = on_fork.with_op(stat, OpChoice::Given);
        assert_eq!(on_stat.iterations, DEFAULT_ITERATIONS_DETACHED);
        let given = load_options(IterationsFrom::Given, 700).with_op(fork, OpChoice::Given);
        assert_eq!(given.iterations, 700, "-n as given");
    }

    #[test]
    fn two_arms_brought_about_quickly_keep_short_rounds_whatever_the_operation() {
        let aa = Subject::Aa;
        for op in Operation::ALL {
            assert_eq!(default_iterations(&aa, op), DEFAULT_ITERATIONS, "{op}");
        }
        let load = Subject::Load("x.bpf.o".into());
        assert_eq!(
            default_iterations(&load, Operation::Openat),
            DEFAULT_ITERATIONS_DETACHED
        );
    }
}
