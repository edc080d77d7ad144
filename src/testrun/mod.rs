//! `overhead --test-run`: what a packet program costs per packet class, from the kernel's own
//! test run (`BPF_PROG_TEST_RUN`). The object is loaded, nothing is attached; each packet runs
//! once to learn its verdict and whether the program rewrites it; the packets are grouped into
//! classes (verdict × IP version × protocol × destination port); then batches time every class
//! by the slope of two repeat counts ([`measure`]) from a pinned thread, with the kernel's run
//! statistics off. Each class gets the median of its batches with a sign-test interval.
//!
//! What the test run does not include, so what its figures leave out: no driver, no DMA, no
//! GRO, no qdisc; a fresh skb or xdp_buff is built per call (not per run), from a copy of the
//! packet. docs/commands.md says what to trust it for.

mod classes;
pub mod kernel;
mod machine;
pub mod measure;
mod neighbours;
mod output;
mod output_gates;
mod output_text;
#[doc(hidden)]
pub mod samples;
mod setup;

use crate::error::{check, usage};
use crate::host::{cpu, security, Host};
use crate::packets::Packet;
use anyhow::{Context, Result};
use kernel::RunMode;
use std::path::PathBuf;
use std::time::Duration;

pub use output::{ClassReport, TestRunReport};

/// The batches a class gets by default.
pub const DEFAULT_BATCHES: usize = 400;
/// The default time budget of the batches of all classes together.
pub const DEFAULT_BUDGET: Duration = Duration::from_secs(12);
/// Without `--rounds`, the batches go on past [`DEFAULT_BATCHES`] until this much time has
/// passed (within the budget). What one run costs on a VM moves with what its other CPUs do,
/// in phases of seconds (a memory-bound loop on the other CPU of a two-CPU VM doubled it):
/// 400 batches take well under a second, so a whole run could sit in one phase and read 30–40%
/// off the next run. Spread over a few seconds, the median of the batches is the machine's
/// usual state, as a reference measured around the same time sees it.
pub const DEFAULT_SPAN: Duration = Duration::from_secs(3);

/// Where the packets come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PacketSource {
    /// [`crate::packets::builtin`].
    Builtin,
    /// `--pcap FILE`: a pcap or pcapng capture of Ethernet frames.
    Capture(PathBuf),
}

/// The gates `--test-run` takes: exceeded when the lower end of a class's interval (of the
/// difference with `--compare`) is above the limit.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Gates {
    pub max_p50_ns: Option<f64>,
    /// Only with `--compare`: the difference in percent of the first object's p50.
    pub max_p50_pct: Option<f64>,
}

/// Everything `overhead --test-run` takes.
#[derive(Debug, Clone)]
pub struct TestRunOptions {
    pub object: PathBuf,
    /// `--compare B`: B timed on the same packets in the same batches.
    pub compare: Option<PathBuf>,
    pub packets: PacketSource,
    pub mode: RunMode,
    /// Batches per class (`--rounds`): the fewest, unless the budget ends them first.
    pub batches: usize,
    /// The batches go on past `batches` until this much time has passed ([`DEFAULT_SPAN`]
    /// without `--rounds`, zero with it).
    pub span: Duration,
    /// The time the batches may take (`--max-time`).
    pub budget: Duration,
    pub cpu: Option<u32>,
    /// SCHED_FIFO priority of the timing thread; `None`: the ordinary scheduler.
    pub priority: Option<u8>,
    pub confidence: f64,
    pub seed: u64,
    pub json: bool,
    pub gates: Gates,
}

/// What the options name, checked before waiting for another run's lock: the packets, each
/// object's packet program and their pairing; nothing is loaded.
pub fn check_inputs(o: &TestRunOptions) -> Result<()> {
    inputs(o).map(drop)
}

/// The packets with their notes, and the program of each object.
struct Inputs {
    packets: Vec<Packet>,
    notes: Vec<String>,
    target: setup::ProgramChoice,
    other: Option<setup::ProgramChoice>,
}

fn inputs(o: &TestRunOptions) -> Result<Inputs> {
    let (packets, notes) = setup::packets(&o.packets)?;
    let target = setup::packet_program(&o.object)?;
    let other = o
        .compare
        .as_deref()
        .map(setup::packet_program)
        .transpose()?;
    setup::check_pairing(&target, other.as_ref(), o.mode)?;
    if o.gates.max_p50_pct.is_some() && o.compare.is_none() {
        return Err(usage(
            "--max-p50-pct with --test-run needs --compare B.bpf.o: it is the difference in percent of the first object's p50",
        ));
    }
    Ok(Inputs {
        packets,
        notes,
        target,
        other,
    })
}

/// Run the test run; exit status 1 when a gate is exceeded.
pub fn run(o: &TestRunOptions) -> Result<()> {
    let Inputs {
        packets,
        notes: source_notes,
        target,
        other,
    } = inputs(o)?;
    if !security::is_root() {
        return Err(usage(
            "--test-run loads BPF programs and runs them in the kernel: run it with sudo",
        ));
    }
    let interrupts = crate::signals::Interrupts::install()?;
    let host = Host::live();
    let cpu = o.cpu.map_or_else(
        || cpu::default_cpu(&host).context("no online CPU found"),
        Ok,
    )?;
    cpu::validate(&host, cpu)?;
    let mut loaded = vec![setup::load(&o.object, &target)?];
    if let (Some(path), Some(program)) = (&o.compare, &other) {
        loaded.push(setup::load(path, program)?);
    }
    let quiet = setup::QuietStats::take(&host)?;
    let placement = machine::Placement {
        cpu,
        priority: o.priority,
    };
    let others_before = neighbours::others(&host, cpu);
    let mut report = measure_loaded(o, &loaded, &packets, (placement, &interrupts))?;
    let others_busy = others_before
        .zip(neighbours::others(&host, cpu))
        .and_then(|(before, after)| neighbours::busy_percent(before, after));
    report.notes.splice(0..0, source_notes);
    report.notes.extend(quiet.note());
    report.notes.extend(others_busy.and_then(neighbours::note));
    drop(quiet);
    drop(loaded);
    output_text::emit(&report, o.json)?;
    gate_exit(&report)
}

/// Classify, plan and time the loaded programs: the report, before its notes on the packets'
/// source and the run statistics.
fn measure_loaded(
    o: &TestRunOptions,
    loaded: &[setup::Loaded],
    packets: &[Packet],
    (placement, interrupts): (machine::Placement, &crate::signals::Interrupts),
) -> Result<TestRunReport> {
    let fds: Vec<_> = loaded.iter().map(setup::Loaded::fd).collect();
    let outcomes: Vec<_> = loaded
        .iter()
        .map(|one| setup::outcomes(one.fd(), one.program.kind, packets))
        .collect::<Result<_>>()?;
    let classes = classes::group(packets, &outcomes[0]);
    if classes.is_empty() {
        return Err(usage(
            "the kernel's test run refused every packet (each shorter than an Ethernet header, or longer than a page): give other packets",
        ));
    }
    if o.mode == RunMode::LiveFrames {
        setup::check_live_frames(fds[0], &packets[classes[0].packets[0]])?;
    }
    let plan = setup::plan(o, &classes, &outcomes, fds[0], packets)?;
    interrupts.check()?;
    let runner = machine::Machine {
        programs: fds.clone(),
        packets,
        mode: o.mode,
        interrupts,
    };
    let xdp = loaded[0].program.kind == kernel::PacketKind::Xdp;
    let (batches, ended, dispatcher) = machine::run(&plan, runner, placement, xdp)?;
    let (samples, timer) = measure::per_run_costs(&plan, &batches);
    let kernel_samples = measure::kernel_costs(&plan, &batches, &samples);
    let context = output::Context {
        options: o,
        program: &loaded[0].program,
        packets,
        outcomes: &outcomes,
        plan: &plan,
        ended,
        timer,
    };
    let mut report = output::build(&context, &classes, &samples, &kernel_samples);
    report.gates = output_gates::evaluate(&o.gates, &report.classes);
    if let machine::Dispatcher::NotHeld(errno) = dispatcher {
        report.notes.push(format!(
            "the XDP program could not be held in the dispatcher ({}): each call changed it, which made the batches slower, not the figures different",
            std::io::Error::from_raw_os_error(errno)
        ));
    }
    Ok(report)
}

/// Exit status 1 (a check) when a gate is exceeded.
fn gate_exit(report: &TestRunReport) -> Result<()> {
    let over: Vec<String> = report
        .gates
        .iter()
        .filter(|gate| gate.exceeded)
        .map(|gate| gate.message.clone())
        .collect();
    if over.is_empty() {
        return Ok(());
    }
    Err(check(over.join("; ")))
}
