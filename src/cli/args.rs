//! The arguments of each subcommand (clap derive), with their help text.

use super::oparg::{OpArg, OpParser};
use super::ranges::{Real, Time, Whole};
use crate::bench::{MAX_ITERATIONS, MAX_PATHS, MAX_WORKERS};
use clap::Args;
use std::path::PathBuf;

/// `-n` of the built-in bench (bench, record, overhead, demo).
const ITERATIONS: Whole<usize> = Whole::new(1, MAX_ITERATIONS as u64, "iterations of the loop");
/// `--paths`: the files of the openat working set.
const PATHS: Whole<usize> = Whole::new(1, MAX_PATHS as u64, "files of the working set");
/// `--workers`: loops at once, one per CPU.
const WORKERS: Whole<usize> = Whole::new(1, MAX_WORKERS as u64, "loops at once, one per CPU");
/// `-F`: perf's sampling frequency; perf lowers it to kernel.perf_event_max_sample_rate.
const FREQ: Whole<u32> = Whole::new(1, 1_000_000, "samples a second");
/// `--cpu`: a CPU number below the kernel's largest CPU count; whether it is online is
/// checked when the run starts.
const CPU: Whole<u32> = Whole::new(0, MAX_WORKERS as u64 - 1, "a CPU number, as lscpu lists");
/// `--priority`: the SCHED_FIFO priorities.
const PRIORITY: Whole<u8> = Whole::new(1, 99, "a SCHED_FIFO priority");
/// `--pid`: a process id (the kernel's PID_MAX_LIMIT on 64-bit).
const PID: Whole<u32> = Whole::new(1, 4_194_304, "a process id");
/// `--top`: rows to list.
const TOP: Whole<usize> = Whole::new(1, 1_000_000, "rows to list");
/// `--max-p50-ns`, `--max-p99-ns`: a limit on the delta, up to a second.
const GATE_NS: Real = Real::closed(0.0, 1e9, "ns the hook may add");
/// `--max-p50-pct`, `--max-p99-pct`: a limit on the delta, up to 100 times the baseline.
const GATE_PCT: Real = Real::closed(0.0, 10_000.0, "percent the hook may add");
/// A week, in seconds (`hook --seconds`).
const WEEK_S: u64 = 7 * 24 * 3600;

#[derive(Debug, Args)]
pub struct CompletionsArgs {
    /// The shell to complete for.
    #[arg(value_enum)]
    pub shell: clap_complete::Shell,
}

#[derive(Debug, Args)]
pub struct ManArgs {
    /// The subcommand whose page to print (its page is ebpf-prof-COMMAND(1), as the main page
    /// lists it); none: the main page.
    #[arg(value_name = "COMMAND")]
    pub command: Option<String>,
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

#[derive(Debug, Args)]
pub struct BenchArgs {
    /// The operation to time (docs/commands.md lists what each reaches).
    #[arg(long, value_parser = OpParser::NAMED, default_value = "openat")]
    pub op: OpArg,
    /// File the openat, stat and read loops work on.
    #[arg(long, default_value = "/etc/hostname")]
    pub path: PathBuf,
    /// Iterations, warm-up included.
    #[arg(short = 'n', long = "iterations", default_value_t = 100_000, value_parser = ITERATIONS)]
    pub iterations: usize,
    /// Leading fraction of samples dropped as warm-up.
    #[arg(long, default_value_t = 0.1, value_parser = Real::to_below(0.0, 1.0, "0.1 drops the first 10%"))]
    pub warmup_fraction: f64,
    /// Cycle over N distinct files (made in a private temp dir, removed after).
    #[arg(long, default_value_t = 1, value_name = "N", value_parser = PATHS)]
    pub paths: usize,
    /// Take the N files from this directory instead (never modified).
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
    /// Run K loops at once, each pinned to its own CPU of the allowed set.
    #[arg(long, default_value_t = 1, value_name = "K", value_parser = WORKERS)]
    pub workers: usize,
    /// Leave the timed operation out, keep what the loop does outside the span (for counting
    /// how often a hook runs outside it).
    #[arg(long)]
    pub untimed_only: bool,
    /// Run a round per byte read from stdin, answering on stdout in binary (`overhead`'s
    /// worker; see bench/serve.rs).
    #[arg(long, hide = true)]
    pub serve: bool,
    /// The private network namespace (`ebpf-prof-PID-N`) a packet operation sends into, made
    /// by the ebpf-prof run that starts this bench (`overhead`'s worker); without it,
    /// `bench --op udp-veth` makes its own.
    #[arg(long, hide = true, value_name = "NAME")]
    pub netns: Option<String>,
}

#[derive(Debug, Args)]
pub struct DoctorArgs {
    /// Narrow the programs record would take (regex on a program's name or its
    /// bpf_prog_<tag>_<name> symbol); without it, every loaded tracing, LSM or socket program.
    #[arg(long, value_name = "REGEX")]
    pub filter: Option<String>,
    /// Machine-readable output.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub perf: PerfArgs,
}

/// How a root run that changes the machine meets another one: one at a time.
#[derive(Debug, Args, Clone, Copy)]
pub struct LockArgs {
    /// As root, refuse at once when another ebpf-prof run holds /run/ebpf-prof.lock, instead of waiting for it.
    #[arg(long)]
    pub no_wait: bool,
}

impl LockArgs {
    /// The plain setting the lock takes.
    pub fn wait(self) -> crate::host::lock::Wait {
        if self.no_wait {
            crate::host::lock::Wait::NoWait
        } else {
            crate::host::lock::Wait::Wait
        }
    }
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
    #[command(flatten)]
    pub lock: LockArgs,
    /// Where perf writes; the sidecar files go beside it.
    #[arg(short, long, default_value = "perf.data")]
    pub output: PathBuf,
    /// perf event (perf falls back to cpu-clock without a hardware PMU).
    #[arg(short, long, default_value = "cycles:k")]
    pub event: String,
    /// Sampling frequency (Hz).
    #[arg(short = 'F', long, default_value_t = 997, value_parser = FREQ)]
    pub freq: u32,
    /// CPU to pin the benchmark to (default: an isolated CPU, else the highest online one).
    #[arg(long, value_parser = CPU)]
    pub cpu: Option<u32>,
    /// SCHED_FIFO priority for the benchmark (1..99).
    #[arg(long, default_value_t = 99, value_parser = PRIORITY)]
    pub priority: u8,
    /// Run the benchmark without chrt (where SCHED_FIFO is refused: containers, RT limits).
    #[arg(long)]
    pub no_fifo: bool,
    /// Iterations of the built-in bench (when no command is given).
    #[arg(short = 'n', long = "iterations", default_value_t = 200_000, value_parser = ITERATIONS)]
    pub iterations: usize,
    /// Operation of the built-in bench [default: auto, the one that fires the --load object's
    /// programs; openat without --load].
    #[arg(long, value_parser = OpParser::WITH_AUTO)]
    pub op: Option<OpArg>,
    /// File the built-in bench's openat, stat and read work on.
    #[arg(long, default_value = "/etc/hostname")]
    pub path: PathBuf,
    /// Narrow the programs the recording is for (regex on a program's name or its
    /// bpf_prog_<tag>_<name> symbol). Without it: the --load object's programs, or every loaded
    /// tracing, LSM or socket program. Refused when none is left.
    #[arg(long, value_name = "REGEX")]
    pub filter: Option<String>,
    /// Record even when no BPF program would show up in the profile.
    #[arg(long)]
    pub allow_no_bpf: bool,
    /// Load and attach this BPF object for the recording (detached after).
    #[arg(long, value_name = "OBJ.bpf.o")]
    pub load: Option<PathBuf>,
    /// Profile every CPU (no bench) while your workload runs: for --duration, or until Ctrl-C.
    #[arg(long, conflicts_with_all = ["pid", "command"])]
    pub all_cpus: bool,
    /// Profile this running process (no bench): for --duration, or until Ctrl-C.
    #[arg(long, value_name = "PID", conflicts_with = "command", value_parser = PID)]
    pub pid: Option<u32>,
    /// How long --all-cpus or --pid records: 30s, 2m, 500ms, or seconds.
    #[arg(long, value_name = "TIME", value_parser = Time::DAY)]
    pub duration: Option<f64>,
    /// Extra argument for perf record (repeatable), placed before `--`: one of perf 6.1's record
    /// options or its value; none that moves or rotates perf's output.
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

/// How perf.data is read by flame, report and diff.
#[derive(Debug, Args, Clone)]
pub struct ReaderArgs {
    /// Read perf.data with `perf script` instead of the built-in reader (taken anyway, with a
    /// note, for what the reader does not handle: pipe-mode, `-z` or other-arch recordings).
    #[arg(long)]
    pub via_perf: bool,
}

/// `overhead --trivial-arm`: when a packet program is measured against a trivial one too.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum TrivialArmArg {
    /// For the kinds whose attach point changes the path as soon as any program is there (XDP,
    /// tc on a clsact qdisc, cgroup_skb).
    Auto,
    /// For every packet kind (xdp, tc, tcx, cgroup_skb, socket).
    On,
    /// Never: nothing attached against the program only.
    Off,
}

/// What `flame` writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum FlameFormatArg {
    /// An SVG flame graph.
    Svg,
    /// Folded stacks (as --folded).
    Folded,
    /// A gzipped pprof profile.proto (go tool pprof, Parca, Pyroscope, Grafana).
    Pprof,
    /// A speedscope JSON profile (speedscope.app, Firefox profiler).
    Speedscope,
}

#[derive(Debug, Args)]
pub struct FlameArgs {
    #[command(flatten)]
    pub input: InputArgs,
    /// Write here instead of stdout (refuses to overwrite unless --force); with stdout on a
    /// terminal the SVG goes to flame.svg.
    #[arg(short, long)]
    pub output: Option<PathBuf>,
    /// Overwrite the output file (-o, or flame.svg on a terminal) if it exists.
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
    /// A frame per BPF source line (`hook.bpf.c:42`) under each BPF frame (perf.data only).
    #[arg(long)]
    pub lines: bool,
    /// Output format [default: svg]; pprof and speedscope are for other profilers' viewers.
    #[arg(long, value_enum, conflicts_with = "folded")]
    pub format: Option<FlameFormatArg>,
    #[command(flatten)]
    pub reader: ReaderArgs,
    #[command(flatten)]
    pub perf: PerfArgs,
}

/// `annotate` reads only a perf.data: the shared INPUT, with its own help.
#[derive(Debug, Args)]
#[command(mut_arg("positional", |a| a.help(
    "A perf.data with BPF program info in its header (`ebpf-prof record`, `overhead --profile`, \
     `perf record` of perf ≥ 5.1 as root) [default: perf.data]"
)))]
pub struct AnnotateArgs {
    #[command(flatten)]
    pub input: InputArgs,
    /// Only this BPF function (name without `bpf_prog_<tag>_`, full symbol, or program id).
    #[arg(long, value_name = "NAME")]
    pub prog: Option<String>,
    /// Machine-readable output, the same content as the text.
    #[arg(long)]
    pub json: bool,
    /// How many lines to show per function, hottest first.
    #[arg(long, default_value_t = 10, value_parser = TOP)]
    pub top: usize,
    /// Show the JIT-ed instructions of each line with their shares (x86-64).
    #[arg(long)]
    pub asm: bool,
    #[command(flatten)]
    pub reader: ReaderArgs,
    /// The kallsyms snapshot to name helpers with (default: INPUT.kallsyms).
    #[arg(long)]
    pub kallsyms: Option<PathBuf>,
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
    #[arg(long, default_value_t = 10, value_parser = TOP)]
    pub top: usize,
    /// The kallsyms snapshot to name kernel frames and bare addresses (default: INPUT.kallsyms).
    #[arg(long)]
    pub kallsyms: Option<PathBuf>,
    #[command(flatten)]
    pub reader: ReaderArgs,
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
    #[arg(long, default_value_t = 20, value_parser = TOP)]
    pub top: usize,
    /// Title of the graph.
    #[arg(long)]
    pub title: Option<String>,
    #[command(flatten)]
    pub reader: ReaderArgs,
    #[command(flatten)]
    pub perf: PerfArgs,
}

#[derive(Debug, Args)]
pub struct HookArgs {
    #[command(flatten)]
    pub lock: LockArgs,
    /// BPF object to load (default: the bundled sample hook for this kernel).
    #[arg(long, value_name = "OBJ.bpf.o")]
    pub load: Option<PathBuf>,
    /// Detach after this many seconds instead of waiting for Ctrl-C (0: at once, to check
    /// that the object loads and attaches).
    #[arg(long, value_parser = Whole::<u64>::new(0, WEEK_S, "a week at the most; without --seconds the hook stays attached until Ctrl-C"))]
    pub seconds: Option<u64>,
    /// Load nothing: write the example objects the documentation loads (on_execve.bpf.o,
    /// verdict_cache.bpf.o, …) into DIR, made when missing, and exit.
    #[arg(long, value_name = "DIR", conflicts_with_all = ["load", "seconds"])]
    pub write_objects: Option<PathBuf>,
}

/// What `overhead --test-run` cannot take: it attaches nothing and runs no bench.
const TEST_RUN_CONFLICTS: [&str; 25] = [
    "attach_cmd",
    "trivial_arm",
    "aa",
    "side_cost",
    "sweep",
    "profile",
    "plot",
    "keep",
    "op",
    "bench",
    "target_ns",
    "loads",
    "iterations",
    "export_json",
    "export_markdown",
    "max_p99_ns",
    "max_p99_pct",
    "prog_ids",
    "prog_names",
    "attach_tracefs",
    "attach_timeout",
    "stats_rounds",
    "path",
    "paths",
    "workers",
];

#[derive(Debug, Clone, Args)]
pub struct OverheadArgs {
    #[command(flatten)]
    pub lock: LockArgs,
    /// Attach every program of this libbpf-style object in the attached arm.
    #[arg(long, value_name = "OBJ.bpf.o")]
    pub load: Option<PathBuf>,
    /// Start this loader (your agent) for the attached arm; stopped by its pid after each round.
    #[arg(long, value_name = "CMD")]
    pub attach_cmd: Option<String>,
    /// Compare two versions of a hook: --load A attached against this B attached.
    #[arg(long, value_name = "B.bpf.o")]
    pub compare: Option<PathBuf>,
    /// The same on both arms: nothing attached (the noise floor of this box), or with --load
    /// the object loaded twice, once per arm (the noise floor of a comparison).
    #[arg(long, conflicts_with_all = ["compare", "attach_cmd"])]
    pub aa: bool,
    /// Loads of the objects to spread the rounds over: each is loaded afresh, two objects in
    /// both orders, and the intervals are taken across loads [default: 12; with --attach-cmd,
    /// as many starts of the loader as the budget holds with blocks of about 20 rounds].
    #[arg(long, value_name = "N", value_parser = Whole::<u32>::new(1, 1000, "loads of the objects"))]
    pub loads: Option<u32>,
    /// Run exactly N pairs of rounds (default: as many as --max-time holds).
    #[arg(long, value_name = "N", conflicts_with_all = ["target_ns", "max_time"],
          value_parser = Whole::<usize>::new(2, crate::overhead::MAX_PAIRS as u64, "pairs of rounds; the interval needs two; --max-time measures longer"))]
    pub rounds: Option<usize>,
    /// Stop early once the p50 interval is at most N ns wide (looked at after each load from the fourth; with one load, once every quantile's interval can reach the level, then every half as many pairs again).
    #[arg(long, value_name = "N", value_parser = Real::above_to(0.0, 1e9, "the width in ns of the p50 interval that ends the run"))]
    pub target_ns: Option<f64>,
    /// Time budget of the rounds: 12s, 1m, 500ms (no pair starts that would end past it).
    #[arg(long, value_name = "TIME", value_parser = Time::DAY)]
    pub max_time: Option<f64>,
    /// Iterations per round of the built-in bench [default: 250 with --compare, --aa or
    /// --attach-cmd, 2000 with --load against nothing attached, 250 there too for exec, fork,
    /// connect and unlink].
    #[arg(short = 'n', long = "iterations", value_parser = ITERATIONS)]
    pub iterations: Option<usize>,
    /// Operation of the built-in bench [default: auto, the one that fires the object's programs].
    #[arg(long, value_parser = OpParser::WITH_AUTO)]
    pub op: Option<OpArg>,
    /// File the built-in bench's openat, stat and read work on.
    #[arg(long, default_value = "/etc/hostname")]
    pub path: PathBuf,
    /// Measure the side cost too: a second measurement on an operation that fires none of the
    /// programs (what attaching costs every other operation).
    #[arg(long)]
    pub side_cost: bool,
    /// With --load of a packet program: also measure a trivial program of the same kind and
    /// attach point (built in), giving what attaching at all costs and what the program costs
    /// on top [default: auto: XDP, tc and cgroup_skb, whose attach changes the path].
    #[arg(long, value_enum, value_name = "MODE", default_value = "auto")]
    pub trivial_arm: TrivialArmArg,
    /// Time a packet program with the kernel's test run (BPF_PROG_TEST_RUN) per packet class
    /// (verdict, protocol, destination port) instead of on an operation: nothing attached;
    /// --rounds is the batches per class [default: 400], --max-time their budget.
    #[arg(long, conflicts_with_all = TEST_RUN_CONFLICTS)]
    pub test_run: bool,
    /// With --test-run: the packets of this pcap or pcapng capture (Ethernet frames, at most
    /// 256 MB and a million packets) instead of the built-in ones.
    #[arg(long, value_name = "FILE", requires = "test_run")]
    pub pcap: Option<PathBuf>,
    /// With --test-run of an XDP program: live frames (Linux 5.18+), each verdict carried out
    /// (PASS up the stack, TX and REDIRECT out) in a private network namespace.
    #[arg(long, requires = "test_run")]
    pub live_frames: bool,
    /// How long to wait for the --attach-cmd loader to load its programs: 30s, 2m.
    #[arg(long, value_name = "TIME", value_parser = Time::HOUR, default_value = "30s")]
    pub attach_timeout: f64,
    /// Start the --attach-cmd loader in a mount namespace of its own with tracefs (and debugfs)
    /// mounted there, as libbpf-based tools need where the system has not mounted them.
    #[arg(long)]
    pub attach_tracefs: bool,
    /// CPU to pin to (default: an isolated CPU, else the highest online one).
    #[arg(long, value_parser = CPU)]
    pub cpu: Option<u32>,
    /// SCHED_FIFO priority (1..99).
    #[arg(long, default_value_t = 99, value_parser = PRIORITY)]
    pub priority: u8,
    /// Run without chrt.
    #[arg(long)]
    pub no_fifo: bool,
    /// Extra attached rounds with BPF run stats on (0 to skip).
    #[arg(long, default_value_t = 1, value_parser = Whole::<usize>::new(0, 1000, "extra rounds; 0 skips them"))]
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
    #[arg(long, value_name = "N", value_parser = GATE_NS)]
    pub max_p50_ns: Option<f64>,
    /// Exit 1 when the p99 delta is confidently above N ns.
    #[arg(long, value_name = "N", value_parser = GATE_NS)]
    pub max_p99_ns: Option<f64>,
    /// Exit 1 when the p50 delta is confidently above P percent.
    #[arg(long, value_name = "P", value_parser = GATE_PCT)]
    pub max_p50_pct: Option<f64>,
    /// Exit 1 when the p99 delta is confidently above P percent.
    #[arg(long, value_name = "P", value_parser = GATE_PCT)]
    pub max_p99_pct: Option<f64>,
    /// Distinct files the built-in openat bench cycles over (a working set).
    #[arg(long, default_value_t = 1, value_name = "N", value_parser = PATHS)]
    pub paths: usize,
    /// Loops of the built-in bench at once, each on its own CPU.
    #[arg(long, default_value_t = 1, value_name = "K", value_parser = WORKERS)]
    pub workers: usize,
    /// Measure at each value: paths=1,10,100,1000,10000 or workers=1,2.
    #[arg(long, value_name = "PARAM=V,V,…")]
    pub sweep: Option<crate::overhead::Sweep>,
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
    #[arg(long = "prog-id", value_name = "ID", value_parser = Whole::<u32>::new(1, u32::MAX as u64, "a program id, as bpftool prog show lists"))]
    pub prog_ids: Vec<u32>,
    /// Also watch the maps of the loaded programs of this name (repeatable).
    #[arg(long = "prog-name", value_name = "NAME")]
    pub prog_names: Vec<String>,
    /// Seed of the coin that orders the two arms within each pair of rounds [default: a fresh
    /// one each run, printed with the results, to repeat a run's coin].
    #[arg(long)]
    pub seed: Option<u64>,
    /// Two-sided confidence of the intervals (0.95 for the conventional 95%).
    #[arg(long, value_name = "C", default_value_t = crate::overhead::DEFAULT_CONFIDENCE,
          value_parser = Real::to_below(0.5, 1.0, "0.99 for 99% intervals"))]
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
    #[command(flatten)]
    pub lock: LockArgs,
    /// Directory for perf.data, its sidecars and the SVG.
    #[arg(long, default_value = "ebpf-prof-demo")]
    pub dir: PathBuf,
    /// Iterations of the built-in bench.
    #[arg(short = 'n', long = "iterations", default_value_t = 200_000, value_parser = ITERATIONS)]
    pub iterations: usize,
    /// Sampling frequency (Hz); higher than record's 997 so a short demo has enough BPF samples.
    #[arg(short = 'F', long, default_value_t = 4999, value_parser = FREQ)]
    pub freq: u32,
    /// SCHED_FIFO priority for the benchmark (1..99).
    #[arg(long, default_value_t = 99, value_parser = PRIORITY)]
    pub priority: u8,
    /// Run the benchmark without chrt (where SCHED_FIFO is refused: containers, RT limits).
    #[arg(long)]
    pub no_fifo: bool,
    /// How long to measure what the hook costs (without perf): 6s, 1m.
    #[arg(long, value_name = "TIME", default_value = "6s", value_parser = Time::HOUR)]
    pub cost_time: f64,
    /// Your BPF object instead of the bundled sample hook.
    #[arg(long, value_name = "OBJ.bpf.o")]
    pub load: Option<PathBuf>,
    /// Show the bundled sample packet hook (an XDP port filter, one map look-up per packet)
    /// on UDP datagrams through a veth pair the run makes, instead of the openat hook.
    #[arg(long, conflicts_with = "load")]
    pub net: bool,
    /// Operation of the built-in bench [default: auto, the one that fires the object's programs].
    #[arg(long, value_parser = OpParser::WITH_AUTO)]
    pub op: Option<OpArg>,
    /// Replace flame.svg and hook.bpf.o of an earlier demo in --dir.
    #[arg(long)]
    pub force: bool,
    #[command(flatten)]
    pub perf: PerfArgs,
}
