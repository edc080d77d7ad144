//! The command line (clap derive). Each subcommand's arguments convert into the plain option
//! struct its command takes; nothing past this module sees clap.

use crate::commands;
use clap::{Args, CommandFactory, Parser, Subcommand};
use std::path::PathBuf;
use std::time::Duration;

/// What an eBPF hook costs and where that time goes.
#[derive(Debug, Parser)]
#[command(name = "ebpf-prof", version, about, propagate_version = true)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// The pinned openat harness: one latency (ns) per line on stdout, a summary on stderr.
    Bench(BenchArgs),
    /// Check every precondition of `record`, with the command that fixes each problem.
    Doctor(DoctorArgs),
    /// perf record around a pinned SCHED_FIFO benchmark, BPF symbols on (needs root).
    Record(RecordArgs),
    /// Render a profile (perf.data, perf script text or folded stacks) as a flame graph (no root).
    Flame(FlameArgs),
    /// Load a BPF object (the bundled sample hook by default) and hold it attached until Ctrl-C.
    Hook(HookArgs),
    /// The whole method on the bundled sample hook: load, record, flame graph, detach.
    Demo(DemoArgs),
    /// Baseline vs attached latency, interleaved rounds, p50/p99 deltas with 99% intervals.
    Overhead(Box<OverheadArgs>),
    /// What a profile says about its BPF programs: shares, attach points, helpers, hints (no root).
    Report(ReportArgs),
    /// Differential flame graph of a base and a hooked profile, or with --text a table (no root).
    Diff(DiffArgs),
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell) to stdout.
    Completions(CompletionsArgs),
    /// Print the man page (roff) to stdout: `ebpf-prof man | man -l -`.
    Man,
}

#[derive(Debug, Args)]
pub struct CompletionsArgs {
    /// The shell to complete for.
    #[arg(value_enum)]
    pub shell: clap_complete::Shell,
}

/// A profile to read: positional (`report perf.data`) or `-i/--input` as in `perf report -i`.
#[derive(Debug, Args, Clone)]
pub struct InputArgs {
    /// perf.data, `perf script` text, or folded stacks (told apart by content) [default: perf.data]
    #[arg(value_name = "INPUT")]
    pub positional: Option<PathBuf>,
    /// The same, as an option (`perf report -i` style).
    #[arg(
        short = 'i',
        long = "input",
        value_name = "INPUT",
        conflicts_with = "positional"
    )]
    pub input: Option<PathBuf>,
}

impl InputArgs {
    /// The input given either way, else `perf.data`.
    pub fn path(&self) -> PathBuf {
        self.input
            .clone()
            .or_else(|| self.positional.clone())
            .unwrap_or_else(|| PathBuf::from("perf.data"))
    }
}

impl OpName {
    /// The bench operation, `path` for openat.
    pub fn kind(self, path: PathBuf) -> crate::bench::OpKind {
        match self {
            OpName::Openat => crate::bench::OpKind::Openat(path),
            OpName::Connect => crate::bench::OpKind::Connect,
        }
    }
}

/// The operation the bench times.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum OpName {
    /// openat(2) of --path (file hooks: LSM file_open, tracepoints on openat).
    Openat,
    /// TCP connect(2) to a loopback listener the bench opens (socket hooks).
    Connect,
}

#[derive(Debug, Args)]
pub struct BenchArgs {
    /// The operation to time.
    #[arg(long, value_enum, default_value = "openat")]
    pub op: OpName,
    /// File to open in the loop.
    #[arg(long, default_value = "/etc/hostname")]
    pub path: PathBuf,
    /// Iterations, warm-up included.
    #[arg(short = 'n', long = "iterations", default_value_t = 100_000)]
    pub iterations: usize,
    /// Leading fraction of samples dropped as warm-up.
    #[arg(long, default_value_t = 0.1)]
    pub warmup_fraction: f64,
    /// Cycle over N distinct files (made in a private temp dir, removed after).
    #[arg(long, default_value_t = 1, value_name = "N")]
    pub paths: usize,
    /// Take the N files from this directory instead (never modified).
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
    /// Run K loops at once, each pinned to its own CPU of the allowed set.
    #[arg(long, default_value_t = 1, value_name = "K")]
    pub workers: usize,
    /// Leave the timed operation out, keep what the loop does outside the span (for counting
    /// how often a hook runs outside it).
    #[arg(long)]
    pub untimed_only: bool,
}

#[derive(Debug, Args)]
pub struct DoctorArgs {
    /// Which BPF program symbols count as the hook under test (regex on the symbol name).
    #[arg(long, default_value = crate::recording::DEFAULT_FILTER)]
    pub filter: String,
    /// Machine-readable output.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub perf: PerfArgs,
}

#[derive(Debug, Args, Clone)]
pub struct PerfArgs {
    /// The perf binary (else $PERF, the kernel-matched linux-tools perf, perf_<ver>, PATH).
    #[arg(long, value_name = "PATH")]
    pub perf: Option<PathBuf>,
    /// Run a perf from --perf/$PERF even if other users can write to it (as root).
    #[arg(long)]
    pub trust_perf: bool,
}

#[derive(Debug, Args)]
pub struct RecordArgs {
    /// Where perf writes; the sidecar files go beside it.
    #[arg(short, long, default_value = "perf.data")]
    pub output: PathBuf,
    /// perf event (perf falls back to cpu-clock without a hardware PMU).
    #[arg(short, long, default_value = "cycles:k")]
    pub event: String,
    /// Sampling frequency (Hz).
    #[arg(short = 'F', long, default_value_t = 997)]
    pub freq: u32,
    /// CPU to pin the benchmark to (default: an isolated CPU, else the highest online one).
    #[arg(long)]
    pub cpu: Option<u32>,
    /// SCHED_FIFO priority for the benchmark (1..99).
    #[arg(long, default_value_t = 99, value_parser = clap::value_parser!(u8).range(1..=99))]
    pub priority: u8,
    /// Run the benchmark without chrt (where SCHED_FIFO is refused: containers, RT limits).
    #[arg(long)]
    pub no_fifo: bool,
    /// Iterations of the built-in bench (when no command is given).
    #[arg(short = 'n', long = "iterations", default_value_t = 200_000)]
    pub iterations: usize,
    /// Regex naming the program symbols that must be present.
    #[arg(long, default_value = crate::recording::DEFAULT_FILTER)]
    pub filter: String,
    /// Record even when no BPF program symbol matches the filter.
    #[arg(long)]
    pub allow_no_bpf: bool,
    /// Load and attach this BPF object for the recording (detached after).
    #[arg(long, value_name = "OBJ.bpf.o")]
    pub load: Option<PathBuf>,
    /// Profile every CPU (no bench) while your workload runs: for --duration, or until Ctrl-C.
    #[arg(long, conflicts_with_all = ["pid", "command"])]
    pub all_cpus: bool,
    /// Profile this running process (no bench): for --duration, or until Ctrl-C.
    #[arg(long, value_name = "PID", conflicts_with = "command")]
    pub pid: Option<u32>,
    /// How long --all-cpus or --pid records: 30s, 2m, 500ms, or seconds.
    #[arg(long, value_name = "TIME", value_parser = parse_duration)]
    pub duration: Option<f64>,
    /// Extra argument for perf record (repeatable), placed before `--`.
    #[arg(long = "perf-arg", value_name = "ARG", allow_hyphen_values = true)]
    pub perf_args: Vec<String>,
    #[command(flatten)]
    pub perf: PerfArgs,
    /// The benchmark and its arguments, with or without `--` before them (default: ebpf-prof
    /// bench); everything from the command on is its own, flags included.
    #[arg(
        value_name = "CMD",
        trailing_var_arg = true,
        allow_hyphen_values = true,
        num_args = 0..
    )]
    pub command: Vec<std::ffi::OsString>,
}

#[derive(Debug, Args)]
pub struct FlameArgs {
    #[command(flatten)]
    pub input: InputArgs,
    /// Write here instead of stdout (refuses to overwrite unless --force); with stdout on a
    /// terminal the SVG goes to flame.svg.
    #[arg(short, long)]
    pub output: Option<PathBuf>,
    /// Overwrite the -o file if it exists.
    #[arg(long)]
    pub force: bool,
    /// Write folded stacks instead of an SVG.
    #[arg(long)]
    pub folded: bool,
    /// The kallsyms snapshot to resolve kernel frames (default: INPUT.kallsyms if present).
    #[arg(long)]
    pub kallsyms: Option<PathBuf>,
    /// Title of the graph (default: event, kernel and command of the run).
    #[arg(long)]
    pub title: Option<String>,
    /// Only the stacks that pass through a BPF program, each starting at its attach point.
    #[arg(long)]
    pub bpf_only: bool,
    #[command(flatten)]
    pub perf: PerfArgs,
}

#[derive(Debug, Args)]
pub struct ReportArgs {
    #[command(flatten)]
    pub input: InputArgs,
    /// Machine-readable output, the same content as the text.
    #[arg(long)]
    pub json: bool,
    /// How many kernel functions and unresolved frames to list.
    #[arg(long, default_value_t = 10)]
    pub top: usize,
    /// The kallsyms snapshot to name kernel frames and bare addresses (default: INPUT.kallsyms).
    #[arg(long)]
    pub kallsyms: Option<PathBuf>,
    #[command(flatten)]
    pub perf: PerfArgs,
}

#[derive(Debug, Args)]
pub struct DiffArgs {
    /// The profile without the hook (perf.data, `perf script` text or folded stacks).
    pub base: PathBuf,
    /// The profile with the hook attached.
    pub hooked: PathBuf,
    /// Write here instead of stdout (refuses to overwrite unless --force).
    #[arg(short, long)]
    pub output: Option<PathBuf>,
    /// Overwrite the -o file if it exists.
    #[arg(long)]
    pub force: bool,
    /// Print the biggest per-function moves (share of each profile) as a table, not an SVG.
    #[arg(long)]
    pub text: bool,
    /// The per-function moves as JSON (implies --text's content).
    #[arg(long)]
    pub json: bool,
    /// Rows of the --text table.
    #[arg(long, default_value_t = 20)]
    pub top: usize,
    /// Title of the graph.
    #[arg(long)]
    pub title: Option<String>,
    #[command(flatten)]
    pub perf: PerfArgs,
}

#[derive(Debug, Args)]
pub struct HookArgs {
    /// BPF object to load (default: the bundled sample hook for this kernel).
    #[arg(long, value_name = "OBJ.bpf.o")]
    pub load: Option<PathBuf>,
    /// Detach after this many seconds instead of waiting for Ctrl-C.
    #[arg(long)]
    pub seconds: Option<u64>,
}

#[derive(Debug, Args)]
pub struct OverheadArgs {
    /// Attach every program of this libbpf-style object in the attached arm.
    #[arg(long, value_name = "OBJ.bpf.o")]
    pub load: Option<PathBuf>,
    /// Start this loader (your agent) for the attached arm; stopped by its pid after each round.
    #[arg(long, value_name = "CMD")]
    pub attach_cmd: Option<String>,
    /// Compare two versions of a hook: --load A attached against this B attached.
    #[arg(long, value_name = "B.bpf.o")]
    pub compare: Option<PathBuf>,
    /// Both arms detached: the noise floor of this box.
    #[arg(long)]
    pub aa: bool,
    /// Run exactly N pairs of rounds (default: as many as --max-time holds).
    #[arg(long, value_name = "N", conflicts_with_all = ["target_ns", "max_time"])]
    pub rounds: Option<usize>,
    /// Stop early once the p50 interval is at most N ns wide (looked at after 30, 45, 67… pairs).
    #[arg(long, value_name = "N")]
    pub target_ns: Option<f64>,
    /// Time budget of the rounds: 12s, 1m, 500ms (no pair starts that would end past it).
    #[arg(long, value_name = "TIME", value_parser = parse_duration)]
    pub max_time: Option<f64>,
    /// Iterations per round of the built-in bench.
    #[arg(short = 'n', long = "iterations", default_value_t = crate::overhead::DEFAULT_ITERATIONS)]
    pub iterations: usize,
    /// Operation of the built-in bench.
    #[arg(long, value_enum, default_value = "openat")]
    pub op: OpName,
    /// File the built-in bench opens.
    #[arg(long, default_value = "/etc/hostname")]
    pub path: PathBuf,
    /// CPU to pin to (default: an isolated CPU, else the highest online one).
    #[arg(long)]
    pub cpu: Option<u32>,
    /// SCHED_FIFO priority (1..99).
    #[arg(long, default_value_t = 99, value_parser = clap::value_parser!(u8).range(1..=99))]
    pub priority: u8,
    /// Run without chrt.
    #[arg(long)]
    pub no_fifo: bool,
    /// Extra attached rounds with BPF run stats on (0 to skip).
    #[arg(long, default_value_t = 1)]
    pub stats_rounds: usize,
    /// Print every figure as JSON.
    #[arg(long)]
    pub json: bool,
    /// Write the two latency CDFs as an SVG.
    #[arg(long, value_name = "OUT.svg")]
    pub plot: Option<PathBuf>,
    /// Keep every round's samples in this (new or empty) directory.
    #[arg(long, value_name = "DIR")]
    pub keep: Option<PathBuf>,
    /// Exit 1 when the p50 delta is confidently above N ns.
    #[arg(long, value_name = "N")]
    pub max_p50_ns: Option<f64>,
    /// Exit 1 when the p99 delta is confidently above N ns.
    #[arg(long, value_name = "N")]
    pub max_p99_ns: Option<f64>,
    /// Exit 1 when the p50 delta is confidently above P percent.
    #[arg(long, value_name = "P")]
    pub max_p50_pct: Option<f64>,
    /// Exit 1 when the p99 delta is confidently above P percent.
    #[arg(long, value_name = "P")]
    pub max_p99_pct: Option<f64>,
    /// Distinct files the built-in openat bench cycles over (a working set).
    #[arg(long, default_value_t = 1, value_name = "N")]
    pub paths: usize,
    /// Loops of the built-in bench at once, each on its own CPU.
    #[arg(long, default_value_t = 1, value_name = "K")]
    pub workers: usize,
    /// Measure at each value: paths=1,10,100,1000,10000 or workers=1,2.
    #[arg(long, value_name = "PARAM=V,V,…")]
    pub sweep: Option<commands::overhead::Sweep>,
    /// After measuring, record one profile per arm here (base.data, treat.data) for `diff`.
    #[arg(long, value_name = "DIR")]
    pub profile: Option<PathBuf>,
    /// Also write every figure as JSON (what --json prints) to this new file.
    #[arg(long, value_name = "FILE")]
    pub export_json: Option<PathBuf>,
    /// Also write the table as Markdown to this new file.
    #[arg(long, value_name = "FILE")]
    pub export_markdown: Option<PathBuf>,
    /// Also watch the maps of this loaded program (repeatable).
    #[arg(long = "prog-id", value_name = "ID")]
    pub prog_ids: Vec<u32>,
    /// Also watch the maps of the loaded programs of this name (repeatable).
    #[arg(long = "prog-name", value_name = "NAME")]
    pub prog_names: Vec<String>,
    /// Seed of the coin that orders the two arms within each pair of rounds.
    #[arg(long, default_value_t = 0x5eed)]
    pub seed: u64,
    /// Two-sided confidence of the intervals (0.95 for the conventional 95%).
    #[arg(long, value_name = "C", default_value_t = crate::overhead::DEFAULT_CONFIDENCE)]
    pub confidence: f64,
    /// Your benchmark and its arguments, with or without `--` before them (prints one latency
    /// in ns per line); everything from the command on is its own, flags included.
    #[arg(
        value_name = "BENCH",
        trailing_var_arg = true,
        allow_hyphen_values = true,
        num_args = 0..
    )]
    pub bench: Vec<std::ffi::OsString>,
}

#[derive(Debug, Args)]
pub struct DemoArgs {
    /// Directory for perf.data, its sidecars and the SVG.
    #[arg(long, default_value = "ebpf-prof-demo")]
    pub dir: PathBuf,
    /// Iterations of the built-in bench.
    #[arg(short = 'n', long = "iterations", default_value_t = 200_000)]
    pub iterations: usize,
    /// Sampling frequency (Hz); higher than record's 997 so a short demo has enough BPF samples.
    #[arg(short = 'F', long, default_value_t = 4999)]
    pub freq: u32,
    /// SCHED_FIFO priority for the benchmark (1..99).
    #[arg(long, default_value_t = 99, value_parser = clap::value_parser!(u8).range(1..=99))]
    pub priority: u8,
    /// Run the benchmark without chrt (where SCHED_FIFO is refused: containers, RT limits).
    #[arg(long)]
    pub no_fifo: bool,
    /// How long to measure what the hook costs (without perf): 6s, 1m.
    #[arg(long, value_name = "TIME", default_value = "6s", value_parser = parse_duration)]
    pub cost_time: f64,
    #[command(flatten)]
    pub perf: PerfArgs,
}

impl From<&PerfArgs> for crate::perf::PerfChoice {
    fn from(a: &PerfArgs) -> Self {
        crate::perf::PerfChoice {
            explicit: a.perf.clone(),
            trust: a.trust_perf,
        }
    }
}

/// Run the parsed command line.
pub fn run(cli: Cli) -> anyhow::Result<()> {
    recover_stale();
    match cli.command {
        Command::Bench(a) => commands::bench::run(&crate::bench::BenchOptions {
            op: a.op.kind(a.path),
            iterations: a.iterations,
            warmup_fraction: a.warmup_fraction,
            paths: a.paths,
            dir: a.dir,
            workers: a.workers,
            untimed_only: a.untimed_only,
        }),
        Command::Doctor(a) => commands::doctor::run(&crate::doctor::DoctorOptions {
            perf: (&a.perf).into(),
            filter: a.filter,
            json: a.json,
        }),
        Command::Record(a) => commands::record::run(&record_options(a)).map(|_| ()),
        Command::Flame(a) => commands::flame::run(&commands::flame::FlameOptionsCli {
            perf: (&a.perf).into(),
            input: a.input.path(),
            output: a.output,
            force: a.force,
            folded: a.folded,
            kallsyms: a.kallsyms,
            title: a.title,
            bpf_only: a.bpf_only,
        }),
        Command::Hook(a) => commands::hook::run(&commands::hook::HookOptions {
            load: a.load,
            seconds: a.seconds,
        }),
        Command::Overhead(a) => commands::overhead::run(&overhead_options(*a)),
        Command::Demo(a) => commands::demo::run(&commands::demo::DemoOptions {
            perf: (&a.perf).into(),
            dir: a.dir,
            iterations: a.iterations,
            freq: a.freq,
            priority: (!a.no_fifo).then_some(a.priority),
            cost_time: Duration::from_secs_f64(a.cost_time),
        }),
        Command::Report(a) => commands::report::run(&commands::report::ReportOptions {
            perf: (&a.perf).into(),
            input: a.input.path(),
            json: a.json,
            top: a.top,
            kallsyms: a.kallsyms,
        }),
        Command::Diff(a) => commands::diff::run(&commands::diff::DiffOptions {
            perf: (&a.perf).into(),
            base: a.base,
            hooked: a.hooked,
            output: a.output,
            force: a.force,
            text: a.text,
            json: a.json,
            top: a.top,
            title: a.title,
        }),
        Command::Completions(a) => {
            let mut buf = Vec::new();
            clap_complete::generate(a.shell, &mut Cli::command(), "ebpf-prof", &mut buf);
            crate::out::stdout_bytes(&buf)
        }
        Command::Man => {
            let mut buf = Vec::new();
            clap_mangen::Man::new(Cli::command()).render(&mut buf)?;
            crate::out::stdout_bytes(&buf)
        }
    }
}

fn overhead_options(a: OverheadArgs) -> commands::overhead::OverheadOptions {
    commands::overhead::OverheadOptions {
        load: a.load,
        attach_cmd: a.attach_cmd,
        compare: a.compare,
        aa: a.aa,
        stop: match a.rounds {
            Some(n) => crate::overhead::Stop::Pairs(n),
            None => crate::overhead::Stop::Adaptive {
                target_ns: a.target_ns,
                budget: a
                    .max_time
                    .map_or(crate::overhead::DEFAULT_MAX_TIME, Duration::from_secs_f64),
            },
        },
        iterations: a.iterations,
        op: a.op.kind(a.path),
        cpu: a.cpu,
        priority: (!a.no_fifo).then_some(a.priority),
        stats_rounds: a.stats_rounds,
        json: a.json,
        plot: a.plot,
        keep: a.keep,
        gates: commands::overhead::Gates {
            max_p50_ns: a.max_p50_ns,
            max_p99_ns: a.max_p99_ns,
            max_p50_pct: a.max_p50_pct,
            max_p99_pct: a.max_p99_pct,
        },
        bench: a.bench,
        seed: a.seed,
        confidence: a.confidence,
        paths: a.paths,
        workers: a.workers,
        sweep: a.sweep,
        watch_ids: a.prog_ids,
        watch_names: a.prog_names,
        profile: a.profile,
        export_json: a.export_json,
        export_markdown: a.export_markdown,
    }
}

fn record_options(a: RecordArgs) -> crate::recording::RecordOptions {
    crate::recording::RecordOptions {
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
    }
}

/// A duration: `30s`, `2m`, `500ms`, or plain seconds (`1.5`).
pub fn parse_duration(s: &str) -> Result<f64, String> {
    let t = s.trim();
    let (num, scale) = if let Some(n) = t.strip_suffix("ms") {
        (n, 0.001)
    } else if let Some(n) = t.strip_suffix('s') {
        (n, 1.0)
    } else if let Some(n) = t.strip_suffix('m') {
        (n, 60.0)
    } else if let Some(n) = t.strip_suffix('h') {
        (n, 3600.0)
    } else {
        (t, 1.0)
    };
    match num.trim().parse::<f64>() {
        Ok(v) if v > 0.0 && v.is_finite() => Ok(v * scale),
        Ok(v) if v.is_finite() => Err(format!(
            "{s:?}: a duration must be more than 0 (e.g. 30s, 2m, 500ms)"
        )),
        _ => Err(format!("{s:?} is not a duration: give e.g. 30s, 2m, 500ms")),
    }
}

/// As root, put back what a killed earlier run left changed, and say so.
fn recover_stale() {
    if crate::host::security::is_root() {
        for line in crate::recovery::recover(&crate::host::Host::live()) {
            eprintln!("ebpf-prof: {line}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verify_cli() {
        Cli::command().debug_assert();
    }

    /// Issue 13, item 1: the product's usage line `record ./bench` has no `--`; the bench's own
    /// flags must reach the bench, not ebpf-prof.
    #[test]
    fn regression_record_takes_the_command_with_or_without_dashes() {
        // (argv after `ebpf-prof`, expected command, expected cpu, expected -n)
        type Case<'a> = (&'a [&'a str], &'a [&'a str], Option<u32>, usize);
        let cases: &[Case] = &[
            (&["record", "./bench"], &["./bench"], None, 200_000),
            (
                &["record", "./bench", "-n", "5"],
                &["./bench", "-n", "5"],
                None,
                200_000,
            ),
            (
                &["record", "--cpu", "1", "./bench", "--cpu", "0"],
                &["./bench", "--cpu", "0"],
                Some(1),
                200_000,
            ),
            (
                &["record", "--", "./bench", "-n", "5"],
                &["./bench", "-n", "5"],
                None,
                200_000,
            ),
            (&["record", "-n", "7"], &[], None, 7),
        ];
        for (argv, cmd, cpu, n) in cases {
            let mut full = vec!["ebpf-prof"];
            full.extend_from_slice(argv);
            let c = Cli::try_parse_from(&full).unwrap_or_else(|e| panic!("{argv:?}: {e}"));
            let Command::Record(r) = c.command else {
                panic!()
            };
            assert_eq!(r.command, *cmd, "{argv:?}");
            assert_eq!((r.cpu, r.iterations), (*cpu, *n), "{argv:?}");
        }
        let c = Cli::try_parse_from(["ebpf-prof", "overhead", "--aa", "./b", "-x"]).unwrap();
        let Command::Overhead(o) = c.command else {
            panic!()
        };
        assert_eq!(o.bench, ["./b", "-x"]);
    }

    #[test]
    fn input_positional_or_dash_i() {
        for (argv, want) in [
            (&["report"][..], "perf.data"),
            (&["report", "a.data"][..], "a.data"),
            (&["report", "-i", "b.data"][..], "b.data"),
            (&["flame", "--input", "c.data", "-o", "x.svg"][..], "c.data"),
        ] {
            let mut full = vec!["ebpf-prof"];
            full.extend_from_slice(argv);
            let c = Cli::try_parse_from(&full).unwrap();
            let got = match c.command {
                Command::Report(r) => r.input.path(),
                Command::Flame(f) => f.input.path(),
                _ => panic!(),
            };
            assert_eq!(got, PathBuf::from(want), "{argv:?}");
        }
        assert!(Cli::try_parse_from(["ebpf-prof", "report", "a", "-i", "b"]).is_err());
    }

    #[test]
    fn completions_and_man_page_come_from_the_definition() {
        for shell in [
            clap_complete::Shell::Bash,
            clap_complete::Shell::Zsh,
            clap_complete::Shell::Fish,
        ] {
            let mut buf = Vec::new();
            clap_complete::generate(shell, &mut Cli::command(), "ebpf-prof", &mut buf);
            let text = String::from_utf8(buf).unwrap();
            assert!(
                text.contains("overhead") && text.contains("--max-time"),
                "{shell:?}"
            );
        }
        let mut man = Vec::new();
        clap_mangen::Man::new(Cli::command())
            .render(&mut man)
            .unwrap();
        let man = String::from_utf8(man).unwrap();
        assert!(
            man.contains(".TH ebpf-prof") && man.contains("overhead"),
            "{}",
            &man[..200]
        );
    }

    #[test]
    fn record_takes_command_after_dashes() {
        let c = Cli::try_parse_from(["ebpf-prof", "record", "--cpu", "1", "--", "./bench", "-x"])
            .unwrap();
        let Command::Record(r) = c.command else {
            panic!()
        };
        assert_eq!(r.cpu, Some(1));
        assert_eq!(r.command, ["./bench", "-x"]);
        assert_eq!(r.priority, 99);
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("30s"), Ok(30.0));
        assert_eq!(parse_duration("2m"), Ok(120.0));
        assert_eq!(parse_duration("500ms"), Ok(0.5));
        assert_eq!(parse_duration("1.5"), Ok(1.5));
        assert!(parse_duration("0").is_err());
        assert!(parse_duration("soon").is_err());
        assert!(Cli::try_parse_from(["ebpf-prof", "record", "--all-cpus", "--pid", "1"]).is_err());
        assert!(Cli::try_parse_from(["ebpf-prof", "record", "--all-cpus", "--", "./b"]).is_err());
    }

    #[test]
    fn priority_out_of_range_is_refused() {
        assert!(Cli::try_parse_from(["ebpf-prof", "record", "--priority", "0"]).is_err());
        assert!(Cli::try_parse_from(["ebpf-prof", "record", "--priority", "100"]).is_err());
        assert!(Cli::try_parse_from(["ebpf-prof", "record", "--cpu", "x"]).is_err());
    }

    #[test]
    fn bench_defaults() {
        let c = Cli::try_parse_from(["ebpf-prof", "bench"]).unwrap();
        let Command::Bench(b) = c.command else {
            panic!()
        };
        assert_eq!(
            (b.iterations, b.path.to_str()),
            (100_000, Some("/etc/hostname"))
        );
    }
}
