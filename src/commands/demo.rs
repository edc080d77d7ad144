//! `sudo ebpf-prof demo`: the main job on the bundled sample hook. What the hook costs, from a
//! short `overhead` run (no perf: perf's own sampling costs time too); then a recording with
//! the hook loaded, its flame graph, and what the profile shows. Everything it loads is
//! detached at the end.

use crate::bench::choose::OpChoice;
use crate::bpf::ObjectBytes;
use crate::error::usage;
use crate::flame::{render, FlameOptions, LEGEND};
use crate::out::say;
use crate::perf::record::Scope;
use crate::perf::PerfChoice;
use crate::profile::Profile;
use crate::recording::{self, Load, RecordOptions, Recorded};
use crate::report::lines::HotLine;
use crate::runfiles::{Contents, Existing, OutputDir, Owner};
use crate::stats::Comparison;
use anyhow::{Context, Result};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The files demo writes into its directory itself (perf.data and its sidecars are rotated as
/// `record` rotates them).
const OWN_FILES: [&str; 2] = [SVG_NAME, OBJECT_NAME];
const SVG_NAME: &str = "flame.svg";
const OBJECT_NAME: &str = "hook.bpf.o";

/// What `demo` takes.
#[derive(Debug, Clone)]
pub struct DemoOptions {
    /// The user's object instead of the bundled sample hook.
    pub load: Option<PathBuf>,
    /// Which bundled sample hook, without `load`.
    pub sample: Sample,
    /// The bench's operation (until `--op auto` has chosen: openat).
    pub op: crate::bench::OpKind,
    /// Whether `op` was given, or is chosen from the object's attach points.
    pub op_choice: crate::bench::choose::OpChoice,
    pub dir: PathBuf,
    pub iterations: usize,
    pub freq: u32,
    /// SCHED_FIFO priority; `None` runs without chrt (`--no-fifo`).
    pub priority: Option<u8>,
    /// Time budget of the cost measurement.
    pub cost_time: Duration,
    pub perf: PerfChoice,
    /// Replace the flame graph and the object of an earlier demo in `dir` (`--force`).
    pub force: bool,
}

/// The bundled sample hooks `demo` can show.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sample {
    /// The openat hook (tracepoint, or LSM where the kernel runs LSM programs).
    Syscall,
    /// The XDP port filter, timed on UDP datagrams through a veth pair (`--net`).
    Packet,
}

/// The sample packet hook's program name, as the record filter.
pub const PACKET_HOOK_FILTER: &str = "xdp_port_filter";

/// The sample hook's program names, as the record filter.
pub const HOOK_FILTER: &str = "tail_call_security_check|enforce_access_policy|path_check_callback";

/// Run the demo.
pub fn run(opts: &DemoOptions) -> Result<()> {
    if !crate::host::security::is_root() {
        return Err(usage(
            "demo loads a BPF program and sets sysctls: run it with sudo",
        ));
    }
    let dir = OutputDir::open(&opts.dir, Owner::from_sudo_env(), Contents::Any)?;
    refuse_to_replace(&dir, opts)?;
    let cpu = crate::host::cpu::default_cpu(&crate::host::Host::live()).context("no online CPU")?;
    let (object, shown) = object(opts, &dir)?;
    crate::failpoint::hit("demo:object-written");
    let (op, chosen) = crate::bpf::choice::for_object(
        object.source(),
        &opts.op,
        opts.op_choice,
        Path::new("/etc/hostname"),
    )?;
    say(chosen.line());
    say(format!(
        "1/3 what the hook costs: {} with and without it, pinned to CPU {cpu}, no perf ({} s)",
        op.operation().plural(),
        opts.cost_time.as_secs()
    ));
    let cost = crate::overhead::hook_cost(&object, &op, cpu, opts.priority, opts.cost_time)?;
    say(format!("2/3 recording with {} loaded", hook_name(opts)));
    let recorded = recording::run(&RecordOptions {
        output: opts.dir.join("perf.data"),
        freq: opts.freq,
        cpu: Some(cpu),
        priority: opts.priority,
        iterations: opts.iterations,
        op: op.clone(),
        op_choice: OpChoice::Given,
        filter: opts.load.is_none().then(|| match opts.sample {
            Sample::Syscall => HOOK_FILTER.into(),
            Sample::Packet => PACKET_HOOK_FILTER.into(),
        }),
        load: Load::InMemory(object.clone()),
        perf: opts.perf.clone(),
        ..RecordOptions::defaults(Scope::Bench)
    })?;
    say("3/3 flame graph (the hook is detached, the sysctls restored)");
    // One pass folds the stacks and aggregates the hot lines, as `report` reads the file.
    let (profile, hot) =
        crate::report::lines::load_with_hot_lines(&recorded.files.data, None, &opts.perf)?;
    let svg = opts.dir.join(SVG_NAME);
    write_svg(&dir, &profile, &recorded, &hook_name(opts), opts.force)?;
    let measured = Cost {
        comparison: &cost,
        op: op.operation().name(),
        object: &shown,
    };
    summarise(&recorded, &measured, (&profile, hot.as_deref()), &svg, opts)
}

/// What the hook costs, per which operation, for which object.
struct Cost<'a> {
    comparison: &'a Comparison,
    op: &'a str,
    object: &'a Path,
}

/// Without `--force`, refuse before anything runs to replace what an earlier demo wrote. The
/// sample hook an earlier demo wrote, byte for byte the one this demo would write, is no
/// reason to refuse: a demo that failed or was killed after writing it must not block its rerun.
fn refuse_to_replace(dir: &OutputDir, opts: &DemoOptions) -> Result<()> {
    let blocking =
        |name: &&&str| dir.holds(name) && !(**name == OBJECT_NAME && own_object(dir, opts));
    match OWN_FILES.iter().find(blocking) {
        Some(name) if !opts.force => Err(usage(format!(
            "{} exists: pass --force to replace it, or pick another --dir",
            dir.shown().join(name).display()
        ))),
        _ => Ok(()),
    }
}

/// Whether `hook.bpf.o` in `dir` is the sample hook this demo writes (never with `--load`).
fn own_object(dir: &OutputDir, opts: &DemoOptions) -> bool {
    opts.load.is_none() && dir.holds_exactly(OBJECT_NAME, sample_object(opts).1)
}

/// The bundled sample the demo shows: the syscall hook this kernel runs, or the packet hook
/// (`demo --net`).
fn sample_object(opts: &DemoOptions) -> (&'static str, &'static [u8]) {
    match opts.sample {
        Sample::Syscall => crate::bpf::sample_hook_for_this_kernel(),
        Sample::Packet => ("packet_hook.bpf.o", crate::bpf::SAMPLE_PACKET_HOOK),
    }
}

/// The object the demo measures, read into memory once, and the path it is shown by: the
/// user's (`--load`), or the sample hook this kernel runs, also written into the demo's
/// directory for the user's own runs. Every load is from the bytes, never from a file again.
fn object(opts: &DemoOptions, dir: &OutputDir) -> Result<(ObjectBytes, PathBuf)> {
    if let Some(p) = &opts.load {
        // Read once through the opener every object path goes through (no FIFO, no device).
        let bytes = crate::input::read_whole(p, crate::input::Role::BpfObject)?;
        let object = ObjectBytes {
            name: hook_name(opts),
            bytes: bytes.into(),
        };
        return Ok((object, p.clone()));
    }
    let (name, bytes) = sample_object(opts);
    if !own_object(dir, opts) {
        dir.write(OBJECT_NAME, bytes, Existing::replace_if(opts.force))?;
    }
    let object = ObjectBytes {
        name: name.into(),
        bytes: bytes.into(),
    };
    Ok((object, opts.dir.join(OBJECT_NAME)))
}

/// "the sample hook", or the user's object by its file name.
fn hook_name(opts: &DemoOptions) -> String {
    match &opts.load {
        Some(p) => p.file_name().map_or_else(
            || p.display().to_string(),
            |f| f.to_string_lossy().into_owned(),
        ),
        None if opts.sample == Sample::Packet => "the sample packet hook".into(),
        None => "the sample hook".into(),
    }
}

fn write_svg(
    dir: &OutputDir,
    profile: &Profile,
    rec: &Recorded,
    hook: &str,
    force: bool,
) -> Result<()> {
    let opts = FlameOptions {
        title: rec.record.title(),
        subtitle: Some(format!("ebpf-prof demo: {hook}; {LEGEND}")),
        count_name: rec.record.count_unit().into(),
    };
    let mut svg = Vec::new();
    render(&profile.stacks, &opts, &mut svg)?;
    dir.write(SVG_NAME, &svg, Existing::replace_if(force))
}

fn summarise(
    rec: &Recorded,
    cost: &Cost<'_>,
    (profile, hot): (&Profile, Option<&[HotLine]>),
    svg: &Path,
    opts: &DemoOptions,
) -> Result<()> {
    let mut s = String::from("files:\n");
    for p in rec.files.all() {
        s.push_str(&format!("  {}\n", p.display()));
    }
    s.push_str(&format!(
        "  {}\nwhat it shows (`ebpf-prof report {}`):\n",
        svg.display(),
        rec.files.data.display()
    ));
    // What `report` prints: its reading, the own-code hint naming the hottest line, the hot lines.
    let own_line = hot.and_then(crate::report::lines::own_code_hint_line);
    let report = crate::report::report_on(profile, &rec.files.data, 5, own_line)?;
    let lines = hot.map(crate::report::lines::render);
    for line in (report.to_text() + &lines.unwrap_or_default()).lines() {
        s.push_str(&if line.is_empty() {
            "\n".into()
        } else {
            format!("  {line}\n")
        });
    }
    s.push_str(&cost_lines(cost, rec, opts.freq));
    s.push_str(&format!("open the flame graph: {}\n", svg.display()));
    crate::out::stdout(&s)
}

/// A confidence as a percentage that never rounds up to 100% (a sign-test interval's achieved
/// confidence is a little over the one asked for: 0.996 is "99.6%", not "100%").
fn percent_below_100(c: f64) -> String {
    let p = 100.0 * c;
    if (99.5..100.0).contains(&p) {
        format!("{:.1}%", (p * 10.0).floor() / 10.0)
    } else {
        format!("{p:.0}%")
    }
}

/// The hook's cost from the `overhead` run, and the recording's latencies labelled as what
/// they are: the bench under perf, whose own sampling costs time too.
fn cost_lines(cost: &Cost<'_>, rec: &Recorded, freq: u32) -> String {
    let mut s = String::new();
    let op = cost.op;
    if let Some(d) = cost.comparison.diff(50.0).filter(|d| d.lo.is_finite()) {
        s.push_str(&format!(
            "the hook costs {:+.0} ns per {op} at p50 [{:.0}, {:.0}] ({} interval, {} pairs of rounds without perf; `ebpf-prof overhead --load {}` for more)\n",
            d.delta,
            d.lo,
            d.hi,
            percent_below_100(d.confidence),
            cost.comparison.rounds,
            cost.object.display()
        ));
    }
    if let Some(r) = &rec.record.samples {
        s.push_str(&format!(
            "  under perf at {freq} Hz, with the hook: p50 {} ns, p99 {} ns per {op} (perf's own sampling included: not the hook's cost)\n",
            r.p50, r.p99
        ));
    }
    s
}

#[cfg(test)]
mod percent_tests {
    #[test]
    fn an_achieved_confidence_never_prints_as_100() {
        assert_eq!(super::percent_below_100(0.996), "99.6%");
        assert_eq!(super::percent_below_100(0.9999), "99.9%");
        assert_eq!(super::percent_below_100(0.99), "99%");
        assert_eq!(super::percent_below_100(0.95), "95%");
    }
}
