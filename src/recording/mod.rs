//! The recording step of the reference (README.md, "The reference"), hardened (`sudo ebpf-prof
//! record`). Sets the two JIT sysctls (restored at the end, on error and on signals too), checks
//! the hook's program symbols are there, snapshots /proc/kallsyms, runs perf around the pinned
//! SCHED_FIFO benchmark, and leaves perf.data with its sidecars, all owned by the user who ran
//! sudo.

use crate::bench::pinned::PinTools;
use crate::bpf::{self, Attached, ObjectSource};
use crate::error::{check, child, usage};
use crate::host::recovery;
use crate::host::{cpu, kallsyms, security, sysctl, sysctl::SysctlGuard, Host};
use crate::out::say;
use crate::perf::record::{self as perf_record, RecordPlan, Scope};
use crate::perf::PerfChoice;
use crate::runfiles::{write_error, Owner, PrivateDir, RunFiles};
use crate::runrecord::{PerfUsed, ProgramSeen, ProgramsFrom, RunRecord};
use crate::signals::{Interrupted, Interrupts};
use anyhow::{Context, Result};
use std::ffi::{OsStr, OsString};
use std::io::Write;
use std::path::PathBuf;

pub mod fires;
pub mod gate;

/// Compile a user's --filter regex, with a clear error.
pub fn filter_regex(filter: &str) -> Result<regex::Regex> {
    regex::Regex::new(filter).map_err(|e| {
        let text = e.to_string();
        let why = text
            .lines()
            .rfind(|l| !l.trim().is_empty())
            .unwrap_or("invalid")
            .trim_start_matches("error: ");
        usage(format!("--filter {filter:?} is not a valid regex: {why}"))
    })
}

/// The sysctls the method needs, and the value it needs.
pub const JIT_SYSCTLS: [(&str, &str); 2] = [
    ("net.core.bpf_jit_enable", "1"),
    ("net.core.bpf_jit_kallsyms", "1"),
];

/// Everything `record` takes.
#[derive(Debug, Clone)]
pub struct RecordOptions {
    pub output: PathBuf,
    pub event: String,
    pub freq: u32,
    pub cpu: Option<u32>,
    /// SCHED_FIFO priority; `None` runs without chrt.
    pub priority: Option<u8>,
    pub iterations: usize,
    /// The built-in bench's operation (until `--op auto` has chosen: openat, holding `--path`).
    pub op: crate::bench::OpKind,
    /// Whether `op` was given, or is chosen from the `--load` object's attach points.
    pub op_choice: crate::bench::choose::OpChoice,
    /// Narrows the programs the recording is for ([`gate`]); `None` takes them all.
    pub filter: Option<String>,
    pub allow_no_bpf: bool,
    /// What to load and attach for the recording (after the JIT sysctls are set: harmless, and
    /// on kernels up to 5.4 the sysctl also gated the kernel's own lookups of BPF addresses; the
    /// /proc/kallsyms listing is gated when read, so the order does not matter for it).
    pub load: Load,
    pub perf_args: Vec<String>,
    pub perf: PerfChoice,
    /// The benchmark; empty runs `ebpf-prof bench`.
    pub command: Vec<OsString>,
    /// The bench (default), every CPU, or one process.
    pub scope: Scope,
    /// The private network namespace a packet operation of the built-in bench sends into, when
    /// the run's caller made it (`overhead --profile` runs its own bench; `None` otherwise:
    /// [`run`] makes one when the operation needs it).
    pub netns: Option<String>,
}

impl RecordOptions {
    /// The reference's recording of `scope`: `cycles:k` at 997 Hz, SCHED_FIFO 99, 200000
    /// iterations of the built-in bench, no filter, nothing loaded.
    pub fn defaults(scope: Scope) -> RecordOptions {
        RecordOptions {
            output: PathBuf::from("perf.data"),
            event: "cycles:k".into(),
            freq: 997,
            cpu: None,
            priority: Some(99),
            iterations: 200_000,
            op: crate::bench::OpKind::openat("/etc/hostname"),
            op_choice: crate::bench::choose::OpChoice::Default,
            filter: None,
            allow_no_bpf: false,
            load: Load::Nothing,
            perf_args: Vec::new(),
            perf: PerfChoice::default(),
            command: Vec::new(),
            scope,
            netns: None,
        }
    }
}

/// What a finished recording left.
#[derive(Debug, Clone)]
pub struct Recorded {
    pub files: RunFiles,
    pub record: RunRecord,
}

/// What `record` loads for the duration of the recording.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Load {
    /// Nothing: the user's programs are already loaded.
    Nothing,
    /// A libbpf-style object file (`--load`).
    Object(PathBuf),
    /// An object read into memory once (demo's).
    InMemory(bpf::ObjectBytes),
    /// The bundled sample hook this kernel can run (demo).
    SampleHook,
}

fn load(what: &Load) -> Result<Option<Attached>> {
    let a = match what {
        Load::Nothing => return Ok(None),
        Load::Object(p) => attach_object(Some(p))?,
        Load::InMemory(object) => bpf::attach(object.source())?,
        Load::SampleHook => attach_object(None)?,
    };
    describe(&a);
    Ok(Some(a))
}

/// Load and attach `load`, or the sample hook this kernel can run.
pub fn attach_object(load: Option<&std::path::Path>) -> Result<Attached> {
    match load {
        Some(p) => bpf::attach(ObjectSource::Path(p)),
        None => {
            let (name, bytes) = bpf::sample_hook_for_this_kernel();
            bpf::attach(ObjectSource::Bytes { name, bytes })
        }
    }
}

/// Say what an attached object holds, a line per program.
pub fn describe(a: &Attached) {
    say(format!("{} loaded:", a.name()));
    for p in a.programs() {
        let state = if p.attached {
            "attached"
        } else {
            "loaded (tail-call target or no attach point)"
        };
        say(format!(
            "  id {:<6} bpf_prog_{}_{} [{}] {state}",
            p.id, p.tag, p.name, p.section
        ));
    }
}

/// What `run` checks and finds before it changes anything.
struct Prepared {
    filter: Option<regex::Regex>,
    cpu: u32,
    files: RunFiles,
    /// The output's directory, opened by the walk that checked it: everything the run writes
    /// there goes through this descriptor.
    dir: std::os::fd::OwnedFd,
    command: Vec<OsString>,
    /// The checked taskset and chrt (`None` when not recording the bench).
    tools: Option<crate::bench::pinned::PinTools>,
    perf: crate::perf::locate::FoundPerf,
}

/// Record: set the sysctls, load what was asked, check the symbols, run perf, put back.
pub fn run(opts: &RecordOptions) -> Result<Recorded> {
    let ints = Interrupts::install()?;
    let host = Host::live();
    let network = packet_network(opts)?;
    let in_network;
    let opts = match &network {
        Some(net) => {
            in_network = RecordOptions {
                netns: Some(net.pair().names().netns.clone()),
                ..opts.clone()
            };
            &in_network
        }
        None => opts,
    };
    let prep = prepare(&host, opts)?;
    let mut guard = SysctlGuard::new(host.clone()).with_journal({
        let h = host.clone();
        move |pending| recovery::save(&h, pending)
    });
    let result = record_guarded(&host, opts, &prep, &mut guard, &ints);
    let restored = guard.restore();
    let rec = result?;
    restored.context("could not restore the JIT sysctls")?;
    if rec.interrupted {
        say(format!(
            "the profile was finished and kept in {}",
            prep.files.data.display()
        ));
        return Err(Interrupted(ints.last().unwrap_or(libc::SIGINT)).into());
    }
    Ok(Recorded {
        files: prep.files,
        record: rec,
    })
}

/// The private network for a recording of the built-in bench whose operation (given, or
/// chosen from the object's sections) sends packets; `None` for every other recording.
fn packet_network(opts: &RecordOptions) -> Result<Option<crate::netpath::PacketNetwork>> {
    use crate::bench::choose::OpChoice;
    if opts.scope != Scope::Bench || !opts.command.is_empty() || opts.netns.is_some() {
        return Ok(None);
    }
    let source = match &opts.load {
        Load::Object(p) => Some(ObjectSource::Path(p)),
        Load::InMemory(object) => Some(object.source()),
        Load::Nothing | Load::SampleHook => None,
    };
    let op = match (opts.op_choice, source) {
        (OpChoice::Given, _) | (_, None) => opts.op.clone(),
        (by, Some(src)) => {
            let path = opts
                .op
                .path()
                .unwrap_or(std::path::Path::new("/etc/hostname"));
            bpf::choice::for_object(src, &opts.op, by, path)?.0
        }
    };
    crate::netpath::PacketNetwork::for_op(&op, crate::netpath::Bench::BuiltIn)
}

/// Everything checked before anything changes: privileges, the filter, the CPU, the process,
/// the output directory, the benchmark, perf.
fn prepare(host: &Host, opts: &RecordOptions) -> Result<Prepared> {
    require_privileges(host)?;
    check_perf_options(opts)?;
    let filter = opts.filter.as_deref().map(filter_regex).transpose()?;
    let cpu = opts
        .cpu
        .map_or_else(|| cpu::default_cpu(host).context("no online CPU found"), Ok)?;
    let bench = opts.scope == Scope::Bench;
    if bench {
        cpu::validate(host, cpu)?;
    }
    if let Scope::Pid { pid, .. } = opts.scope {
        if !std::path::Path::new(&format!("/proc/{pid}")).exists() {
            return Err(usage(format!(
                "no process {pid}: give the pid of a running process"
            )));
        }
    }
    if let Load::Object(object) = &opts.load {
        bpf::check_object(object)?;
    }
    let files = RunFiles::new(&opts.output);
    let dir = files.check_writable()?;
    fires::refuse_op_with_own_bench(opts)?;
    let (command, tools) = if bench {
        let tools = crate::perf::trust::pinned_helpers(opts.priority.is_some())?;
        (bench_command(opts, &opts.op)?, Some(tools))
    } else {
        (Vec::new(), None)
    };
    let perf = opts.perf.find(false)?;
    Ok(Prepared {
        filter,
        cpu,
        files,
        dir,
        command,
        tools,
        perf,
    })
}

/// With the guard restoring the sysctls whatever happens: set them, load, check the symbols,
/// run perf.
fn record_guarded(
    host: &Host,
    opts: &RecordOptions,
    prep: &Prepared,
    guard: &mut SysctlGuard,
    ints: &Interrupts,
) -> Result<RunRecord> {
    for (name, value) in JIT_SYSCTLS {
        guard.set(name, value)?;
    }
    ints.check()?;
    let attached = load(&opts.load)?;
    crate::failpoint::hit("record:after-load");
    ints.check()?;
    let matched = matching_programs(
        host,
        prep.filter.as_ref(),
        opts.allow_no_bpf,
        attached.as_ref(),
    )?;
    let (command, programs_ran) = bench_for(opts, prep, attached.as_ref(), &matched)?;
    let plan = RecordPlan {
        perf: prep.perf.path.clone(),
        event: opts.event.clone(),
        freq: opts.freq,
        call_graph: "fp".into(),
        output: prep.files.data.clone(),
        extra: opts.perf_args.clone(),
        cpu: prep.cpu,
        priority: opts.priority,
        // Only a recording of the bench runs taskset and chrt; the others never use the names.
        tools: prep.tools.clone().unwrap_or_else(PinTools::by_name),
        command,
        scope: opts.scope.clone(),
        sleep: checked_sleep(&opts.scope)?,
    };
    let mut rec = base_record(host, opts, prep, &plan, matched.seen);
    rec.loaded_programs = matched.loaded;
    if let Some(object) = &attached {
        let ids = object.programs().iter().map(|p| p.id).collect();
        rec.programs_from = ProgramsFrom::ObjectFile { ids };
    }
    rec.programs_ran = programs_ran;
    rec.sysctls = guard.changed().to_vec();
    rec.sysctls_during = read_sysctls(host);
    run_perf(host, &plan, (&prep.files, &prep.dir), ints, &mut rec)?;
    drop(attached);
    Ok(rec)
}

/// The benchmark for the recording: the built-in bench on the operation that fires its
/// programs (`--op auto`), checked to fire them in a short run; a user's as it is.
fn bench_for(
    opts: &RecordOptions,
    prep: &Prepared,
    attached: Option<&Attached>,
    matched: &Matched,
) -> Result<(Vec<OsString>, Option<crate::runrecord::ProgramsRan>)> {
    let own_bench = opts.scope == Scope::Bench && opts.command.is_empty();
    let Some(tools) = prep.tools.as_ref().filter(|_| own_bench) else {
        return Ok((prep.command.clone(), None));
    };
    let shown: Vec<&bpf::InventoryProgram> = matched
        .loaded
        .iter()
        .filter(|p| matched.shown.contains(&p.id))
        .collect();
    let (op, chosen) = fires::operation(opts, attached, &shown);
    let command = bench_command(opts, &op)?;
    if shown.is_empty() {
        return Ok((command, None));
    }
    let pinning = fires::Pinning {
        tools,
        cpu: prep.cpu,
        priority: opts.priority,
    };
    let ran = fires::check(&matched.shown, &command, &pinning, &chosen)?;
    Ok((command, Some(ran)))
}

/// What perf would refuse only once it runs, or what would take the file away from the run's
/// private directory: refused before anything changes.
fn check_perf_options(opts: &RecordOptions) -> Result<()> {
    if opts.freq == 0 {
        return Err(usage(
            "-F 0: perf samples at a frequency of at least 1 Hz; give e.g. -F 997",
        ));
    }
    crate::perf::options::check_record_args(&opts.perf_args).map_err(usage)
}

fn require_privileges(host: &Host) -> Result<()> {
    let caps = security::effective_caps(host).unwrap_or(0);
    if security::is_root() || security::can_record(caps) {
        Ok(())
    } else {
        Err(usage(
            "record needs root (or CAP_BPF, CAP_PERFMON and CAP_SYS_ADMIN) to set the JIT sysctls and read program addresses: run it with sudo",
        ))
    }
}

/// The benchmark argv: the user's command (checked to exist), or `ebpf-prof bench -n N --op OP`.
fn bench_command(opts: &RecordOptions, op: &crate::bench::OpKind) -> Result<Vec<OsString>> {
    if opts.command.is_empty() {
        let me = std::env::current_exe().context("cannot find the ebpf-prof executable")?;
        let mut c: Vec<OsString> = vec![
            me.into(),
            "bench".into(),
            "-n".into(),
            opts.iterations.to_string().into(),
        ];
        let op = match (&opts.netns, op.needs_netns()) {
            (Some(netns), true) => op.in_netns(netns),
            _ => op.clone(),
        };
        c.extend(op.bench_args());
        return Ok(c);
    }
    let found = crate::perf::trust::program(&opts.command[0], "benchmark")?;
    let mut cmd = vec![found.into_os_string()];
    cmd.extend(opts.command[1..].iter().cloned());
    Ok(cmd)
}

/// The programs the recording is for ([`gate`]), each with the symbols of its functions, and
/// every loaded program; refuse when none would show up in the profile.
/// What the gate let through: the functions the recording is for, every loaded program, and
/// the ids of the programs the recording is for.
struct Matched {
    seen: Vec<ProgramSeen>,
    loaded: Vec<bpf::InventoryProgram>,
    shown: Vec<u32>,
}

fn matching_programs(
    host: &Host,
    filter: Option<&regex::Regex>,
    allow_none: bool,
    attached: Option<&Attached>,
) -> Result<Matched> {
    let syms = kallsyms::read(host)?;
    if kallsyms::addresses_hidden(&syms) {
        return Err(check("/proc/kallsyms shows only zero addresses even to us: set kernel.kptr_restrict=1 or 0 (sudo sysctl -w kernel.kptr_restrict=1)"));
    }
    let bpf_syms = kallsyms::bpf_programs(&syms);
    let stats_on = bpf::run_stats_state(host).enabled();
    let all = bpf::inventory(&bpf_syms, stats_on)?;
    let object = attached.map(Attached::program_ids);
    let shown = match gate::decide(&all, object.as_deref(), filter) {
        gate::Verdict::Programs(p) => p,
        gate::Verdict::Refused(why) if !allow_none => return Err(check(why)),
        gate::Verdict::Refused(why) => {
            say(format!("{why}; recording anyway (--allow-no-bpf)"));
            Vec::new()
        }
    };
    let mut seen = Vec::new();
    for p in &shown {
        say(format!("program {}", gate::describe(p)));
        if p.symbol.is_none() {
            say(format!("warning: {} (id {}) has no bpf_prog_ symbol in /proc/kallsyms (is net.core.bpf_jit_harden 0? is it JIT-ed?): its samples will show as bare addresses", p.name, p.id));
        }
        for (i, f) in p.functions.iter().enumerate() {
            let Some(s) = bpf_syms.iter().find(|s| &s.symbol == f) else {
                continue;
            };
            seen.push(ProgramSeen {
                id: (i == 0).then_some(p.id),
                name: s.name.clone(),
                tag: s.tag.clone(),
                addr: format!("{:x}", s.addr),
            });
        }
    }
    if let Some(why) = gate::unnamed(&shown).filter(|_| !allow_none) {
        return Err(check(why));
    }
    let shown = shown.iter().map(|p| p.id).collect();
    Ok(Matched {
        seen,
        loaded: all,
        shown,
    })
}

fn read_sysctls(host: &Host) -> Vec<(String, String)> {
    [
        "net.core.bpf_jit_enable",
        "net.core.bpf_jit_kallsyms",
        "net.core.bpf_jit_harden",
        "kernel.kptr_restrict",
        "kernel.perf_event_paranoid",
    ]
    .iter()
    .filter_map(|n| Some((n.to_string(), sysctl::read(host, n).ok()?)))
    .collect()
}

/// The `sleep` that times a recording of the whole box or of a process, found on PATH and, as
/// root, checked (perf would otherwise look it up by name when it starts it).
fn checked_sleep(scope: &Scope) -> Result<PathBuf> {
    match scope.duration() {
        Some(_) => crate::perf::trust::program(OsStr::new("sleep"), "sleep"),
        None => Ok(PathBuf::from("sleep")),
    }
}

/// The run record as it is known before perf starts; `finish_record` fills in the rest.
fn base_record(
    host: &Host,
    opts: &RecordOptions,
    prep: &Prepared,
    plan: &RecordPlan,
    programs: Vec<ProgramSeen>,
) -> RunRecord {
    let perf = &prep.perf;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    RunRecord {
        schema: crate::out::JSON_SCHEMA,
        tool: format!("ebpf-prof {}", env!("CARGO_PKG_VERSION")),
        started_at: now,
        kernel: host.kernel_release(),
        kernel_build_id: crate::host::notes::running_build_id(host)
            .map(|id| crate::profile::perfdata::hex(&id)),
        perf: PerfUsed {
            path: perf.path.display().to_string(),
            version: perf.version.raw.clone(),
            source: format!("{:?}", perf.source),
            matches_kernel: perf.matches_kernel,
        },
        event_requested: opts.event.clone(),
        event_sampled: opts.event.clone(),
        event_note: String::new(),
        freq: opts.freq,
        cpu: prep.cpu,
        cpu_reason: if opts.cpu.is_some() {
            "--cpu".into()
        } else {
            cpu::default_reason(host)
        },
        priority: opts.priority,
        sysctls: Vec::new(),
        sysctls_during: Vec::new(),
        bpf_programs: programs,
        loaded_programs: Vec::new(),
        command: plan
            .command
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect(),
        command_line: plan.display(&prep.files.samples()),
        perf_exit: None,
        perf_samples: None,
        interrupted: false,
        samples: None,
        programs_ran: None,
        programs_from: ProgramsFrom::AlreadyLoaded,
    }
}

/// In a private directory beside the target (see `runfiles::handover`): snapshot kallsyms,
/// run perf, write the run record; then, only once perf has finished its file, move the
/// previous recording aside to `.old`, hand every file to the invoking user and move it into
/// place, replacing nothing.
fn run_perf(
    host: &Host,
    plan: &RecordPlan,
    (files, dir): (&RunFiles, &std::os::fd::OwnedFd),
    ints: &Interrupts,
    rec: &mut RunRecord,
) -> Result<()> {
    let shown = crate::runfiles::parent_dir(&files.data);
    let mut private = PrivateDir::in_dir(dir, &shown)?;
    let names = family_names(files);
    // Should we be SIGKILLed, the next start moves perf's finished file into place.
    crate::runfiles::pending::save(host, private.shown(), &names, Owner::from_sudo_env())?;
    let result = perf_in_private(host, plan, files, &mut private, ints, rec)
        .and_then(|()| put_in_place(files, &mut private, &names));
    crate::runfiles::pending::clear(host);
    result
}

/// Snapshot kallsyms, run perf, write the run record, all in `private`.
fn perf_in_private(
    host: &Host,
    plan: &RecordPlan,
    files: &RunFiles,
    private: &mut PrivateDir,
    ints: &Interrupts,
    rec: &mut RunRecord,
) -> Result<()> {
    let names = family_names(files);
    let work = RunFiles::new(private.work_path(&names[0].0));
    write_in_private(private, &names[2], kallsyms::read_text(host)?.as_bytes())?;
    let bench = plan.scope == Scope::Bench;
    let samples = bench
        .then(|| private.create(&names[1].0, 0o644))
        .transpose()?;
    if !bench {
        say(match plan.scope.duration() {
            Some(d) => format!("profiling for {d} s"),
            None => "profiling until Ctrl-C".into(),
        });
    }
    say(format!("running: {}", rec.command_line));
    let work_plan = RecordPlan {
        output: work.data.clone(),
        ..plan.clone()
    };
    // A signal that came before perf could be told of it ends the run here, with nothing
    // recorded and nothing moved.
    crate::failpoint::hit("record:before-perf");
    ints.check()?;
    let out = perf_record::run(&work_plan, samples, ints)?;
    rec.perf_exit = out.status.code();
    // Ctrl-C is how an open-ended whole-box or per-process recording ends: not an interruption.
    let open_ended = !bench && plan.scope.duration().is_none();
    rec.interrupted = out.signals > 0 && !open_ended;
    if out.aborted {
        say(format!(
            "perf was stopped before it could finish {}; the incomplete file was removed",
            files.data.display()
        ));
        return Err(Interrupted(ints.last().unwrap_or(libc::SIGINT)).into());
    }
    let stopped_by_user = open_ended && out.signals > 0;
    // perf names the file it wrote by the path it was given (through the private directory's
    // fd); the user knows it by where it lands.
    let shown = out
        .stderr
        .replace(&*work.data.to_string_lossy(), &files.data.to_string_lossy());
    if !out.status.success() && !rec.interrupted && !stopped_by_user {
        return Err(perf_failure(plan, &files.data, &out, &shown));
    }
    crate::out::err_text(&shown);
    rec.perf_samples = crate::runrecord::samples_written(&out.stderr);
    finish_record(plan, &work, files, rec);
    write_in_private(
        private,
        &names[3],
        serde_json::to_string_pretty(rec)?.as_bytes(),
    )
}

/// Write one file of the family in the private directory; a full disk names the file the user
/// knows (`name.1`), not the private directory's copy.
fn write_in_private(
    private: &PrivateDir,
    name: &(OsString, PathBuf, u32),
    bytes: &[u8],
) -> Result<()> {
    let mut file = private.create(&name.0, 0o600)?;
    file.write_all(bytes).map_err(|e| write_error(&name.1, &e))
}

/// Once perf has finished its file: the previous recording aside, the new one in its place.
fn put_in_place(
    files: &RunFiles,
    private: &mut PrivateDir,
    names: &[(OsString, PathBuf, u32)],
) -> Result<()> {
    let unfinished = crate::profile::perfdata::unfinished;
    if private.replace_family(names, Owner::from_sudo_env(), unfinished)? {
        say(format!(
            "moved the previous {} and its sidecars to {}",
            files.data.display(),
            files.old().data.display()
        ));
    }
    Ok(())
}

/// Each file of the family: its name in the private directory, its target, its mode. Those
/// that hold kernel addresses (perf.data, the kallsyms snapshot, the run record's
/// `bpf_programs[].addr`) are 0600; perf.data first, so a conflict there moves nothing.
fn family_names(files: &RunFiles) -> Vec<(OsString, PathBuf, u32)> {
    let modes = [0o600, 0o644, 0o600, 0o600];
    let targets = [
        files.data.clone(),
        files.samples(),
        files.kallsyms(),
        files.json(),
    ];
    targets
        .into_iter()
        .zip(modes)
        .map(|(t, m)| (t.file_name().unwrap_or_default().to_os_string(), t, m))
        .collect()
}

/// Fill in what is known only after perf: the event actually sampled and the samples summary.
/// `files` are the files as written (in the private directory); messages name them as
/// `shown`, where they land.
fn finish_record(plan: &RecordPlan, files: &RunFiles, shown: &RunFiles, rec: &mut RunRecord) {
    if let Ok(out) = duct::cmd!(&plan.perf, "evlist", "-i", &files.data)
        .before_spawn(|cmd| {
            crate::perf::without_caller_config(cmd);
            Ok(())
        })
        .stderr_null()
        .read()
    {
        if let Some(ev) = out.lines().next().filter(|l| !l.trim().is_empty()) {
            rec.event_sampled = ev.trim().to_string();
        }
    }
    if rec.event_sampled != rec.event_requested {
        rec.event_note = format!(
            "perf sampled {} instead of {}: no hardware PMU here (a VM?); samples are time-based, still valid for where time goes",
            rec.event_sampled, rec.event_requested
        );
        say(&rec.event_note);
    }
    if plan.scope != Scope::Bench {
        return;
    }
    let text = std::fs::read_to_string(files.samples()).unwrap_or_default();
    match crate::bench::parse_samples(&text, &shown.samples().display().to_string()) {
        Ok(s) => rec.samples = crate::stats::Summary::of(&s),
        Err(e) => say(format!(
            "note: the samples file holds no latencies ({e:#}); perf.data is fine"
        )),
    }
}

/// A failed perf run (what it left half-done goes with the private directory): explain,
/// quoting perf's stderr (`stderr`, with the paths the user knows).
fn perf_failure(
    plan: &RecordPlan,
    target: &std::path::Path,
    out: &perf_record::RecordOutcome,
    stderr: &str,
) -> anyhow::Error {
    let stderr = stderr.trim();
    let code = out
        .status
        .code()
        .map_or_else(|| format!("{}", out.status), |c| format!("exit status {c}"));
    if let Some(e) = crate::bench::pinned::refused(stderr, &[plan.cpu], plan.priority) {
        return e;
    }
    // perf and the benchmark know their files only by the private directory's paths, or as
    // standard output: name the one the user asked for.
    let full = match stderr.contains("No space left on device") {
        true => format!(
            ": the disk holding {} is full; free some space or record elsewhere",
            plan.output.display()
        ),
        false => String::new(),
    };
    child(format!(
        "the recording failed ({code}){full}; nothing was moved into place, {} is as it was. Command: {}\nperf/benchmark stderr: {}",
        target.display(),
        plan.argv()
            .iter()
            .map(|a| a.to_string_lossy())
            .collect::<Vec<_>>()
            .join(" "),
        if stderr.is_empty() { "(empty)" } else { stderr }
    ))
}
