//! The native perf.data reader against the real perf, as root: profiles recorded here (the
//! bench with the sample hook, and `--all-cpus` while the bench runs) read natively and with
//! `--via-perf` give the same folded stacks for at least 99.5% of the sample weight (over an
//! all-CPUs recording: our processes' stacks whole, the others' kernel and BPF frames); flame,
//! report and diff work with no perf on PATH; the exports carry the BPF frames; a pipe-mode
//! recording falls back to perf script and says why.
//!
//! Differences that remain between the two readers, when there are any, are in user space
//! only (kernel and BPF frames come from the same kallsyms snapshot and KSYMBOL records):
//! - perf sometimes prints `[unknown]` for a user address it names elsewhere in the same file
//!   (its map lookup depends on the order the process's MMAP2 records and samples meet in its
//!   queue; seen with librustc_driver while other builds ran);
//! - a binary rebuilt or deleted between the two reads (each reader opens it when it reads);
//! - C++ names: perf 6.1 demangles with libiberty, this reader with `cpp_demangle`; both are
//!   cut at the argument list by inferno's rules, rare templates may still print differently.
//!
//! The test prints the differing stacks with their weights when the share falls short.

mod common;
use common::*;
use std::collections::BTreeMap;
use std::collections::HashMap;
use std::path::Path;
use std::sync::Mutex;

/// One recording at a time: they share sysctls and the hook.
static SERIAL: Mutex<()> = Mutex::new(());

/// Folded text as stack → weight.
fn weights(text: &str) -> HashMap<String, u64> {
    let mut m = HashMap::new();
    for l in text.lines() {
        if let Some((s, c)) = l.rsplit_once(' ') {
            *m.entry(s.to_string()).or_default() += c.parse::<u64>().unwrap_or(0);
        }
    }
    m
}

/// `flame --folded` of `data`, natively or through perf, and `extra` arguments.
fn folded_with(dir: &Path, data: &str, via_perf: bool, extra: &[&str]) -> String {
    let mut args = vec!["flame", "--folded", data];
    args.extend_from_slice(extra);
    if via_perf {
        args.push("--via-perf");
    }
    let r = run(ebpf_prof(&args, dir));
    assert_eq!(r.code(), Some(0), "{r:?}");
    r.stdout()
}

/// The share of the perf path's weight whose stacks the native reader gives identically,
/// and the differing stacks (weight native, weight perf, stack), heaviest first.
fn equivalence(native: &str, perf: &str) -> (f64, Vec<(u64, u64, String)>) {
    let (n, p) = (weights(native), weights(perf));
    let total: u64 = p.values().sum();
    let same: u64 = p
        .iter()
        .map(|(k, v)| (*v).min(n.get(k).copied().unwrap_or(0)))
        .sum();
    let mut diff: Vec<(u64, u64, String)> = n
        .keys()
        .chain(p.keys())
        .filter(|k| n.get(*k) != p.get(*k))
        .map(|k| {
            (
                n.get(k).copied().unwrap_or(0),
                p.get(k).copied().unwrap_or(0),
                k.clone(),
            )
        })
        .collect();
    diff.sort_by_key(|d| std::cmp::Reverse(d.0.max(d.1)));
    diff.dedup();
    (same as f64 / total.max(1) as f64, diff)
}

fn folded(dir: &Path, data: &str, via_perf: bool) -> String {
    folded_with(dir, data, via_perf, &[])
}

fn assert_equivalent(dir: &Path, data: &str) {
    assert_equivalent_with(dir, data, &[]);
}

/// The native reader and perf give the same stacks for ≥ 99.5% of the weight.
fn assert_equivalent_with(dir: &Path, data: &str, extra: &[&str]) {
    let native = folded_with(dir, data, false, extra);
    let perf = folded_with(dir, data, true, extra);
    assert!(native.contains("path_check_callback"), "{native}");
    let (share, diff) = equivalence(&native, &perf);
    let listed: Vec<String> = diff
        .iter()
        .take(20)
        .map(|(n, p, s)| format!("native {n} perf {p}: {s}"))
        .collect();
    assert!(
        share >= 0.995,
        "{data}: only {:.3}% of the weight identical; differences:\n{}",
        share * 100.0,
        listed.join("\n")
    );
    eprintln!(
        "{data}: {:.3}% identical, {} differing stacks",
        share * 100.0,
        diff.len()
    );
}

/// A stack with its user-space frames left out: the comm, then its kernel and BPF frames.
fn kernel_view(stack: &str) -> String {
    let mut frames = stack.split(';');
    let comm = frames.next().unwrap_or_default();
    let kept = frames.filter(|f| f.ends_with("_[k]") || f.starts_with("bpf_"));
    std::iter::once(comm)
        .chain(kept)
        .collect::<Vec<_>>()
        .join(";")
}

/// Folded text with every stack seen as [`kernel_view`] does.
fn kernel_views(text: &str) -> String {
    text.lines()
        .filter_map(|l| l.rsplit_once(' '))
        .map(|(stack, count)| format!("{} {count}\n", kernel_view(stack)))
        .collect()
}

/// An all-CPUs recording holds whatever else the machine ran, and other programs' user frames
/// may hold C++ names the two readers demangle differently (see the module): the stacks of our
/// own processes are compared whole, every stack by its kernel and BPF frames.
fn assert_equivalent_across_the_system(dir: &Path, data: &str) {
    let native = folded(dir, data, false);
    let perf = folded(dir, data, true);
    let ours = |text: &str| -> String {
        text.lines()
            .filter(|l| l.starts_with("ebpf-prof;"))
            .map(|l| format!("{l}\n"))
            .collect()
    };
    for (what, native, perf) in [
        ("our processes' stacks", ours(&native), ours(&perf)),
        (
            "every stack's kernel and BPF frames",
            kernel_views(&native),
            kernel_views(&perf),
        ),
    ] {
        let (share, diff) = equivalence(&native, &perf);
        let listed: Vec<String> = diff
            .iter()
            .take(20)
            .map(|(n, p, s)| format!("native {n} perf {p}: {s}"))
            .collect();
        assert!(
            share >= 0.995,
            "{data}, {what}: only {:.3}% of the weight identical; differences:\n{}",
            share * 100.0,
            listed.join("\n")
        );
    }
    assert!(
        kernel_views(&native).contains("path_check_callback"),
        "{native}"
    );
}

fn record(dir: &Path, extra: &[&str], out: &str) {
    std::fs::write(dir.join("hook.bpf.o"), ebpf_prof::bpf::SAMPLE_HOOK).unwrap();
    let mut args = vec!["record", "-o", out, "--load", "hook.bpf.o", "-F", "4999"];
    args.extend_from_slice(extra);
    let r = run(ebpf_prof(&args, dir));
    assert_eq!(r.code(), Some(0), "{r:?}");
}

#[test]
#[ignore = "needs root: scripts/test.sh runs it (or as root: cargo test -- --include-ignored)"]
fn bench_profile_reads_natively_as_perf_reads_it_and_exports() {
    if !need_root("bench_profile_reads_natively_as_perf_reads_it_and_exports") {
        return;
    }
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let d = open_tempdir();
    record(d.path(), &["-n", "100000"], "perf.data");
    assert_equivalent(d.path(), "perf.data");
    // `--lines`: the built-in reader adds the source-line frames as perf's rewritten text has them.
    assert_equivalent_with(d.path(), "perf.data", &["--lines"]);
    assert!(folded_with(d.path(), "perf.data", false, &["--lines"])
        .contains("path_check_callback;openat_hook_common.h:"));

    // No perf anywhere on PATH: flame, report and diff still read it.
    for args in [
        &["flame", "perf.data", "-o", "f.svg"][..],
        &["flame", "--lines", "perf.data", "-o", "l.svg"],
        &["report", "perf.data"],
        &["diff", "perf.data", "perf.data", "--text"],
    ] {
        let mut c = ebpf_prof(args, d.path());
        c.env("PATH", "/nonexistent");
        let r = run(c);
        assert_eq!(r.code(), Some(0), "{r:?}");
        assert!(!r.stderr().contains("perf script"), "{r:?}");
    }
    assert!(std::fs::read_to_string(d.path().join("f.svg"))
        .unwrap()
        .contains("path_check_callback"));

    exports_mark_bpf_frames(d.path());
    raw_samples_add_up(d.path());
}

/// `--format pprof` decodes, BPF locations in the `[bpf]` mapping and labelled; speedscope
/// names the program with its file `[bpf]`.
fn exports_mark_bpf_frames(dir: &Path) {
    use ebpf_prof::flame::export::proto::Profile;
    use prost::Message;
    use std::io::Read;
    let r = run(ebpf_prof(
        &[
            "flame",
            "perf.data",
            "--format",
            "pprof",
            "-o",
            "prof.pb.gz",
        ],
        dir,
    ));
    assert_eq!(r.code(), Some(0), "{r:?}");
    let gz = std::fs::read(dir.join("prof.pb.gz")).unwrap();
    let mut raw = Vec::new();
    flate2::read::GzDecoder::new(&gz[..])
        .read_to_end(&mut raw)
        .unwrap();
    let p = Profile::decode(&raw[..]).unwrap();
    let st = |i: i64| p.string_table[i as usize].clone();
    let bpf_fn = p
        .function
        .iter()
        .find(|f| st(f.name).contains("path_check_callback"))
        .expect("the program is a function");
    let loc = p
        .location
        .iter()
        .find(|l| l.line[0].function_id == bpf_fn.id)
        .unwrap();
    assert_eq!(st(p.mapping[loc.mapping_id as usize - 1].filename), "[bpf]");
    assert!(p
        .sample
        .iter()
        .any(|s| s.label.iter().any(|l| st(l.key) == "bpf")));
    let r = run(ebpf_prof(
        &[
            "flame",
            "perf.data",
            "--format",
            "speedscope",
            "-o",
            "p.json",
        ],
        dir,
    ));
    assert_eq!(r.code(), Some(0), "{r:?}");
    let v: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("p.json")).unwrap()).unwrap();
    assert!(v["shared"]["frames"].as_array().unwrap().iter().any(
        |f| f["file"] == "[bpf]" && f["name"].as_str().unwrap().contains("path_check_callback")
    ));
}

/// The raw-sample interface (for annotate) sees every sample's weight, and the BPF program
/// info perf stored in the header.
fn raw_samples_add_up(dir: &Path) {
    use ebpf_prof::profile::perfdata::{feature, for_each_sample};
    let (mut n, mut weight, mut kernel_ips) = (0u64, 0u64, 0u64);
    let data = for_each_sample(&dir.join("perf.data"), |s| {
        n += 1;
        weight += s.weight;
        kernel_ips += s
            .ips
            .iter()
            .filter(|&&ip| ip >= 0xffff_8000_0000_0000)
            .count() as u64;
    })
    .unwrap();
    let folded_total: u64 = weights(&folded(dir, "perf.data", false)).values().sum();
    assert!(
        n > 1000 && weight >= folded_total,
        "{n} {weight} {folded_total}"
    );
    assert!(kernel_ips > n, "kernel call chains");
    let info = data.feature_section(feature::BPF_PROG_INFO).unwrap();
    assert!(info.len() >= 4, "BPF_PROG_INFO holds at least its count");
}

#[test]
#[ignore = "needs root: scripts/test.sh runs it (or as root: cargo test -- --include-ignored)"]
fn all_cpus_profile_reads_natively_as_perf_reads_it() {
    if !need_root("all_cpus_profile_reads_natively_as_perf_reads_it") {
        return;
    }
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let d = open_tempdir();
    let mut bench = std::process::Command::new(bin());
    bench
        .args(["bench", "-n", "4000000"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    let mut child = bench.spawn().unwrap();
    record(d.path(), &["--all-cpus", "--duration", "2s"], "all.data");
    let _ = child.kill();
    let _ = child.wait();
    assert_equivalent_across_the_system(d.path(), "all.data");
    // `annotate` reads it too (the BPF frames named with their program ids from the
    // recording's BPF_EVENTs), as it reads it through perf script.
    let annotate = |extra: &[&str]| {
        let mut args = vec!["annotate", "--json", "--top", "1000", "all.data"];
        args.extend_from_slice(extra);
        let r = run(ebpf_prof(&args, d.path()));
        assert_eq!(r.code(), Some(0), "{r:?}");
        serde_json::from_str::<serde_json::Value>(&r.stdout()).unwrap()
    };
    let native = annotate(&[]);
    let names: Vec<&str> = native["programs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    assert!(names.contains(&"path_check_callback"), "{native}");
    assert_lines_agree(&native, &annotate(&["--via-perf"]));
}

/// The same programs and lines in both annotations, each share within what the folded
/// comparison allows a live recording of the whole system (a few samples that the two
/// readers place differently, of thousands).
fn assert_lines_agree(native: &serde_json::Value, via_perf: &serde_json::Value) {
    let shares = |v: &serde_json::Value| -> BTreeMap<String, (f64, f64)> {
        let mut lines = BTreeMap::new();
        for program in v["programs"].as_array().unwrap() {
            let key = format!("{} {}", program["id"], program["symbol"]);
            lines.insert(key.clone(), (program["percent"].as_f64().unwrap(), 0.0));
            for line in program["lines"].as_array().unwrap() {
                let at = format!("{key} line {} offset {}", line["line"], line["offset"]);
                let incl = line["incl_percent"].as_f64().unwrap();
                lines.insert(at, (incl, line["self_percent"].as_f64().unwrap()));
            }
        }
        lines
    };
    let (ours, perfs) = (shares(native), shares(via_perf));
    assert_eq!(
        ours.keys().collect::<Vec<_>>(),
        perfs.keys().collect::<Vec<_>>(),
        "the same programs and lines"
    );
    let close = |a: f64, b: f64| (a - b).abs() <= 0.05 + 0.005 * a.max(b);
    for (key, (incl, own)) in &ours {
        let (perf_incl, perf_own) = perfs[key];
        assert!(
            close(*incl, perf_incl) && close(*own, perf_own),
            "{key}: native {incl}/{own}, via perf {perf_incl}/{perf_own}"
        );
    }
}

#[test]
#[ignore = "needs root: scripts/test.sh runs it (or as root: cargo test -- --include-ignored)"]
fn pipe_mode_falls_back_to_perf_script_saying_why() {
    if !need_root("pipe_mode_falls_back_to_perf_script_saying_why") {
        return;
    }
    let d = open_tempdir();
    let out = std::fs::File::create(d.path().join("pipe.data")).unwrap();
    let status = std::process::Command::new("perf")
        .args([
            "record",
            "-o",
            "-",
            "-e",
            "cpu-clock",
            "-g",
            "--",
            "ls",
            "-R",
            "/usr/lib",
        ])
        .stdout(out)
        .stderr(std::process::Stdio::null())
        .status()
        .unwrap();
    assert!(status.success());
    let r = run(ebpf_prof(&["flame", "--folded", "pipe.data"], d.path()));
    assert_eq!(r.code(), Some(0), "{r:?}");
    assert!(
        r.stderr().contains("with perf script") && r.stderr().contains("pipe-mode"),
        "{r:?}"
    );
    assert!(r.stdout().contains("ls;"), "{r:?}");
}
