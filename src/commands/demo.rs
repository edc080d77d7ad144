//! `sudo ebpf-prof demo`: the main job on the bundled sample hook. Measures a detached baseline,
//! loads the hook, records the built-in bench, writes the flame graph, prints where each file is
//! and what the profile shows, and detaches the hook.

use super::flame::{load, Profile};
use super::record::{Load, RecordOptions};
use super::{say, PerfChoice};
use crate::bench;
use crate::error::{child, usage};
use crate::flame::{render, FlameOptions};
use crate::runfiles::{create_new, Owner};
use crate::stats::Summary;
use anyhow::{Context, Result};
use std::path::{Path, PathBuf};

/// What `demo` takes.
#[derive(Debug, Clone)]
pub struct DemoOptions {
    pub dir: PathBuf,
    pub iterations: usize,
    pub freq: u32,
    pub perf: PerfChoice,
}

/// The sample hook's program names, as the record filter.
pub const HOOK_FILTER: &str = "tail_call_security_check|enforce_access_policy|path_check_callback";

/// Run the demo.
pub fn run(opts: &DemoOptions) -> Result<()> {
    if !crate::host::security::is_root() {
        return Err(usage(
            "demo loads a BPF program and sets sysctls: run it with sudo",
        ));
    }
    let owner = Owner::from_sudo_env();
    prepare_dir(&opts.dir, owner)?;
    let cpu = crate::host::cpu::default_cpu(&crate::host::Host::live()).context("no online CPU")?;
    say(format!(
        "1/4 baseline: {} openats with no hook, pinned to CPU {cpu} at SCHED_FIFO 99",
        opts.iterations
    ));
    let baseline = pinned_bench(cpu, opts.iterations)?;
    say(format!("    {baseline}"));
    say("2/4 recording with the sample hook loaded");
    let rec_opts = RecordOptions {
        output: opts.dir.join("perf.data"),
        event: "cycles:k".into(),
        freq: opts.freq,
        cpu: Some(cpu),
        priority: Some(99),
        iterations: opts.iterations,
        filter: HOOK_FILTER.into(),
        allow_no_bpf: false,
        load: Load::SampleHook,
        perf_args: vec![],
        perf: opts.perf.clone(),
        command: vec![],
        scope: crate::perf::record::Scope::Bench,
    };
    let recorded = super::record::run(&rec_opts)?;
    say("3/4 sample hook detached, sysctls restored");
    say("4/4 flame graph");
    let profile = load(&recorded.files.data, None, &opts.perf)?;
    let svg = opts.dir.join("flame.svg");
    write_svg(&svg, &profile.folded, &recorded.record, owner)?;
    summarise(&recorded, &baseline, &profile, &svg);
    Ok(())
}

fn prepare_dir(dir: &Path, owner: Option<Owner>) -> Result<()> {
    if dir.exists() && !dir.is_dir() {
        return Err(usage(format!(
            "{} exists and is not a directory: pick another --dir",
            dir.display()
        )));
    }
    if !dir.exists() {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
        if let Some(o) = owner {
            o.give(dir)?;
        }
    }
    Ok(())
}

/// The built-in bench, pinned and SCHED_FIFO like the recording, as a child process.
fn pinned_bench(cpu: u32, n: usize) -> Result<Summary> {
    let me = std::env::current_exe()?;
    let out = duct::cmd!(
        "taskset",
        "-c",
        cpu.to_string(),
        "chrt",
        "-f",
        "99",
        me,
        "bench",
        "-n",
        n.to_string()
    )
    .stderr_capture()
    .stdout_capture()
    .unchecked()
    .run()?;
    if !out.status.success() {
        return Err(child(format!(
            "the baseline bench failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    let s = bench::parse_samples(&String::from_utf8_lossy(&out.stdout), "baseline bench")?;
    Summary::of(&s).context("baseline bench printed no samples")
}

fn write_svg(
    path: &Path,
    folded: &str,
    rec: &crate::runrecord::RunRecord,
    owner: Option<Owner>,
) -> Result<()> {
    if std::fs::symlink_metadata(path).is_ok() {
        let mut old = path.as_os_str().to_owned();
        old.push(".old");
        std::fs::rename(path, &old)?;
    }
    let f = create_new(path, 0o644)?;
    let opts = FlameOptions {
        title: rec.title(),
        subtitle: Some("ebpf-prof demo: the bundled sample hook".into()),
        count_name: rec.count_unit().into(),
    };
    render(folded, &opts, std::io::BufWriter::new(f))?;
    if let Some(o) = owner {
        o.give(path)?;
    }
    Ok(())
}

fn summarise(rec: &super::record::Recorded, baseline: &Summary, profile: &Profile, svg: &Path) {
    println!("files:");
    for p in rec.files.all() {
        println!("  {}", p.display());
    }
    println!("  {}", svg.display());
    println!(
        "what it shows (`ebpf-prof report {}`):",
        rec.files.data.display()
    );
    let report = super::report::report_on(profile, &rec.files.data, None, 5);
    for line in report.to_text().lines() {
        match line {
            "" => println!(),
            l => println!("  {l}"),
        }
    }
    if let Some(s) = &rec.record.samples {
        let d = s.p50 as i64 - baseline.p50 as i64;
        println!("  openat p50 {} ns without the hook, {} ns with it under perf ({d:+} ns); p99 {} → {} ns", baseline.p50, s.p50, baseline.p99, s.p99);
    }
    println!("open the flame graph: {}", svg.display());
}
