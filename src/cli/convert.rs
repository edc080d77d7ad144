//! From parsed arguments to the plain option structs the commands take (the core never sees
//! clap), and the dispatch.

use super::args::*;
use super::oparg::OpArg;
use super::{recover_stale, Cli, Command};
use crate::bench::choose::OpChoice;
use crate::bench::{OpKind, Operation};
use crate::commands;
use crate::error::usage;
use clap::CommandFactory;
use std::path::PathBuf;
use std::time::Duration;

impl From<&PerfArgs> for crate::perf::PerfChoice {
    fn from(a: &PerfArgs) -> Self {
        crate::perf::PerfChoice {
            explicit: a.perf.clone(),
            trust: a.trust_perf,
            via_perf: false,
        }
    }
}

/// Run the parsed command line.
pub fn run(cli: Cli) -> anyhow::Result<()> {
    crate::perf::trust::drop_relative_path_entries();
    // Options that name no measurement are refused before waiting for another run's lock.
    let test_run = match cli.command {
        Command::Overhead(ref args) if args.test_run => {
            let options = super::testrun::options((**args).clone())?;
            crate::testrun::check_inputs(&options)?;
            Some(options)
        }
        _ => None,
    };
    let overhead = match cli.command {
        Command::Overhead(ref args) if !args.test_run => Some(overhead_options((**args).clone())?),
        _ => None,
    };
    check_object_before_the_lock(&cli.command)?;
    let lock = root_run_lock(&cli.command)?;
    recover_stale(lock.is_some());
    if let Some(options) = overhead {
        return commands::overhead::run(&options);
    }
    if let Some(options) = test_run {
        return crate::testrun::run(&options);
    }
    match cli.command {
        Command::Bench(a) if a.serve => commands::bench::serve(&a.into()),
        Command::Bench(a) => commands::bench::run(&a.into()),
        Command::Doctor(a) => commands::doctor::run(&a.into()),
        Command::Record(a) => commands::record::run(&record_options(a)),
        Command::Flame(a) => commands::flame::run(&a.into()),
        Command::Hook(a) => commands::hook::run(&a.into(), lock),
        Command::Overhead(_) => unreachable!("overhead or its test run ran above"),
        Command::Demo(a) => commands::demo::run(&a.into()),
        Command::Report(a) => commands::report::run(&a.into()),
        Command::Diff(a) => commands::diff::run(&a.into()),
        Command::Annotate(a) => commands::annotate::run(&a.into()),
        Command::Completions(a) => {
            let mut buf = Vec::new();
            clap_complete::generate(a.shell, &mut Cli::command(), "ebpf-prof", &mut buf);
            crate::out::stdout_bytes(&buf)
        }
        Command::Man(a) => man_page(a.command.as_deref()),
    }
}

/// The main man page, or with a subcommand's name the page the main page lists for it,
/// `ebpf-prof-NAME(1)`.
fn man_page(name: Option<&str>) -> anyhow::Result<()> {
    let mut cli = Cli::command();
    // Built, the subcommands carry the names their pages go by, and `help` is among them.
    cli.build();
    let page = match name {
        None => cli,
        Some(name) => match cli.find_subcommand(name) {
            Some(sub) => sub.clone(),
            None => {
                let names: Vec<&str> = cli.get_subcommands().map(|c| c.get_name()).collect();
                return Err(crate::error::usage(format!(
                    "no man page ebpf-prof-{name}: give one of {}",
                    names.join(", ")
                )));
            }
        },
    };
    let mut buf = Vec::new();
    clap_mangen::Man::new(page).render(&mut buf)?;
    crate::out::stdout_bytes(&buf)
}

/// A `--load` that is no object file (a FIFO, a device) is refused before waiting for another
/// run's lock: no run should wait for what will be refused anyway.
fn check_object_before_the_lock(command: &Command) -> anyhow::Result<()> {
    let load = match command {
        Command::Record(a) => a.load.as_deref(),
        Command::Hook(a) => a.load.as_deref(),
        _ => None,
    };
    load.map_or(Ok(()), crate::bpf::check_object)
}

/// As root, the commands that change the machine run one at a time (see `host::lock`).
fn root_run_lock(command: &Command) -> anyhow::Result<Option<crate::host::lock::RunLock>> {
    let lock = match command {
        Command::Record(a) => a.lock,
        Command::Overhead(a) => a.lock,
        Command::Demo(a) => a.lock,
        // Writing the example objects changes nothing a run measures.
        Command::Hook(a) if a.write_objects.is_some() => return Ok(None),
        Command::Hook(a) => a.lock,
        _ => return Ok(None),
    };
    crate::host::lock::for_root_run(lock.wait())
}

/// The operation `--op` names (and the path it works on), and how it was chosen: absent, it is
/// chosen from the object's attach points, openat until then.
fn op_choice(op: Option<OpArg>, path: PathBuf) -> (OpKind, OpChoice) {
    match op {
        None => (OpKind::new(Operation::Openat, path), OpChoice::Default),
        Some(OpArg::Auto) => (OpKind::new(Operation::Openat, path), OpChoice::Auto),
        Some(OpArg::Named(o)) => (OpKind::new(o, path), OpChoice::Given),
    }
}

impl From<BenchArgs> for crate::bench::BenchOptions {
    fn from(a: BenchArgs) -> Self {
        let op = match a.op {
            OpArg::Named(o) => o,
            OpArg::Auto => Operation::Openat,
        };
        let op = OpKind::new(op, a.path);
        let op = match &a.netns {
            Some(netns) => op.in_netns(netns),
            None => op,
        };
        crate::bench::BenchOptions {
            op,
            iterations: a.iterations,
            warmup_fraction: a.warmup_fraction,
            paths: a.paths,
            dir: a.dir,
            workers: a.workers,
            untimed_only: a.untimed_only,
        }
    }
}

impl From<DoctorArgs> for crate::doctor::DoctorOptions {
    fn from(a: DoctorArgs) -> Self {
        crate::doctor::DoctorOptions {
            perf: (&a.perf).into(),
            filter: a.filter,
            json: a.json,
        }
    }
}

/// perf as `--perf`/`--trust-perf` choose it, read with it only under `--via-perf`.
fn reader(perf: &PerfArgs, r: &ReaderArgs) -> crate::perf::PerfChoice {
    crate::perf::PerfChoice {
        via_perf: r.via_perf,
        ..perf.into()
    }
}

impl From<FlameFormatArg> for crate::flame::export::Format {
    fn from(f: FlameFormatArg) -> Self {
        use crate::flame::export::Format;
        match f {
            FlameFormatArg::Svg => Format::Svg,
            FlameFormatArg::Folded => Format::Folded,
            FlameFormatArg::Pprof => Format::Pprof,
            FlameFormatArg::Speedscope => Format::Speedscope,
        }
    }
}

impl From<FlameArgs> for commands::flame::FlameOptionsCli {
    fn from(a: FlameArgs) -> Self {
        commands::flame::FlameOptionsCli {
            perf: reader(&a.perf, &a.reader),
            format: a.format.map(Into::into),
            input: a.input.path(),
            output: a.output,
            force: a.force,
            folded: a.folded,
            kallsyms: a.kallsyms,
            title: a.title,
            bpf_only: a.bpf_only,
            lines: a.lines,
        }
    }
}

impl From<HookArgs> for commands::hook::HookOptions {
    fn from(a: HookArgs) -> Self {
        commands::hook::HookOptions {
            load: a.load,
            seconds: a.seconds,
            write_objects: a.write_objects,
        }
    }
}

impl From<DemoArgs> for commands::demo::DemoOptions {
    fn from(a: DemoArgs) -> Self {
        let (op, op_choice) = op_choice(a.op, PathBuf::from("/etc/hostname"));
        commands::demo::DemoOptions {
            load: a.load,
            sample: match a.net {
                true => commands::demo::Sample::Packet,
                false => commands::demo::Sample::Syscall,
            },
            op,
            op_choice,
            perf: (&a.perf).into(),
            dir: a.dir,
            iterations: a.iterations,
            freq: a.freq,
            priority: (!a.no_fifo).then_some(a.priority),
            cost_time: Duration::from_secs_f64(a.cost_time),
            force: a.force,
        }
    }
}

impl From<ReportArgs> for commands::report::ReportOptions {
    fn from(a: ReportArgs) -> Self {
        commands::report::ReportOptions {
            perf: reader(&a.perf, &a.reader),
            input: a.input.path(),
            json: a.json,
            top: a.top,
            kallsyms: a.kallsyms,
        }
    }
}

impl From<AnnotateArgs> for commands::annotate::AnnotateOptions {
    fn from(a: AnnotateArgs) -> Self {
        commands::annotate::AnnotateOptions {
            perf: reader(&a.perf, &a.reader),
            input: a.input.path(),
            prog: a.prog,
            json: a.json,
            top: a.top,
            asm: a.asm,
            kallsyms: a.kallsyms,
        }
    }
}

impl From<DiffArgs> for commands::diff::DiffOptions {
    fn from(a: DiffArgs) -> Self {
        commands::diff::DiffOptions {
            perf: reader(&a.perf, &a.reader),
            base: a.base,
            hooked: a.hooked,
            output: a.output,
            force: a.force,
            text: a.text,
            json: a.json,
            top: a.top,
            title: a.title,
        }
    }
}

/// What `overhead`'s arms are, from the options that name them; a combination that names
/// no measurement is a usage error saying which to give.
fn overhead_subject(a: &mut OverheadArgs) -> anyhow::Result<crate::overhead::Subject> {
    use crate::overhead::Subject;
    let subject = match (a.load.take(), a.compare.take(), a.attach_cmd.take(), a.aa) {
        (Some(object), None, None, false) => Subject::Load(object),
        (Some(base), Some(treat), None, false) => Subject::Compare { base, treat },
        (None, None, Some(command_line), false) => Subject::AttachCmd(command_line),
        (None, None, None, true) => Subject::Aa,
        (Some(object), None, None, true) => Subject::AaLoad(object),
        (None, Some(_), None, false) => {
            return Err(usage("--compare B.bpf.o needs --load A.bpf.o: it measures A attached against B attached"))
        }
        (Some(_), _, Some(_), _) | (None, Some(_), Some(_), _) => {
            return Err(usage("give either --load or --attach-cmd, not both"))
        }
        (None, None, None, false) => {
            return Err(usage("nothing to measure: give --load OBJ.bpf.o, --attach-cmd 'CMD…', or --aa for the noise floor"))
        }
        // clap refuses --aa beside --compare or --attach-cmd.
        (_, Some(_), _, true) | (_, _, Some(_), true) => {
            return Err(usage("--aa takes no --compare and no --attach-cmd: give --aa --load X.bpf.o for two loads of one object"))
        }
    };
    Ok(subject)
}

fn overhead_options(mut a: OverheadArgs) -> anyhow::Result<commands::overhead::OverheadOptions> {
    let subject = overhead_subject(&mut a)?;
    let (op, op_choice) = op_choice(a.op, a.path.clone());
    // Until `--op auto` has chosen, the default is the one of the operation given or openat.
    let (iterations, iterations_from) = match a.iterations {
        Some(n) => (n, crate::overhead::IterationsFrom::Given),
        None => (
            crate::overhead::default_iterations(&subject, op.operation()),
            crate::overhead::IterationsFrom::Default,
        ),
    };
    let stop = overhead_stop(&a);
    Ok(commands::overhead::OverheadOptions {
        path: a.path,
        subject,
        loads: a.loads.map(|n| n as usize),
        budget_flag: crate::overhead::BudgetFlag::MaxTime,
        stop,
        iterations,
        iterations_from,
        op,
        op_choice,
        side_cost: if a.side_cost {
            crate::overhead::SideCost::Measure
        } else {
            crate::overhead::SideCost::Skip
        },
        trivial_arm: match a.trivial_arm {
            TrivialArmArg::Auto => crate::overhead::TrivialArm::Auto,
            TrivialArmArg::On => crate::overhead::TrivialArm::On,
            TrivialArmArg::Off => crate::overhead::TrivialArm::Off,
        },
        loader: loader_options(a.attach_timeout, a.attach_tracefs),
        cpu: a.cpu,
        priority: (!a.no_fifo).then_some(a.priority),
        stats_rounds: a.stats_rounds,
        json: a.json,
        plot: a.plot,
        keep: a.keep,
        opened: Default::default(),
        gates: commands::overhead::Gates {
            max_p50_ns: a.max_p50_ns,
            max_p99_ns: a.max_p99_ns,
            max_p50_pct: a.max_p50_pct,
            max_p99_pct: a.max_p99_pct,
        },
        bench: a.bench,
        seed: a.seed.unwrap_or_else(crate::stats::rng::fresh_seed),
        confidence: a.confidence,
        paths: a.paths,
        workers: a.workers,
        sweep: a.sweep,
        watch_ids: a.prog_ids,
        watch_names: a.prog_names,
        profile: a.profile,
        export_json: a.export_json,
        export_markdown: a.export_markdown,
    })
}

/// `--rounds`, or `--target-ns` within `--max-time`, as when the rounds stop.
fn overhead_stop(a: &OverheadArgs) -> crate::overhead::Stop {
    match a.rounds {
        Some(n) => crate::overhead::Stop::Pairs(n),
        None => crate::overhead::Stop::Adaptive {
            target_ns: a.target_ns,
            budget: a
                .max_time
                .map_or(crate::overhead::DEFAULT_MAX_TIME, Duration::from_secs_f64),
        },
    }
}

/// `--attach-timeout` and `--attach-tracefs` as the loader's options.
fn loader_options(timeout_s: f64, tracefs: bool) -> crate::overhead::LoaderOptions {
    crate::overhead::LoaderOptions {
        timeout: Duration::from_secs_f64(timeout_s),
        mounts: if tracefs {
            crate::overhead::LoaderMounts::PrivateTracefs
        } else {
            crate::overhead::LoaderMounts::Host
        },
    }
}

fn record_options(a: RecordArgs) -> crate::recording::RecordOptions {
    let (op, op_choice) = op_choice(a.op, a.path);
    crate::recording::RecordOptions {
        op,
        op_choice,
        perf: (&a.perf).into(),
        output: a.output,
        event: a.event,
        freq: a.freq,
        cpu: a.cpu,
        priority: (!a.no_fifo).then_some(a.priority),
        iterations: a.iterations,
        filter: a.filter,
        allow_no_bpf: a.allow_no_bpf,
        load: a.load.map_or(
            crate::recording::Load::Nothing,
            crate::recording::Load::Object,
        ),
        perf_args: a.perf_args,
        command: a.command,
        scope: match (a.all_cpus, a.pid) {
            (true, _) => crate::perf::record::Scope::AllCpus {
                duration: a.duration,
            },
            (false, Some(pid)) => crate::perf::record::Scope::Pid {
                pid,
                duration: a.duration,
            },
            (false, None) => crate::perf::record::Scope::Bench,
        },
        netns: None,
    }
}
