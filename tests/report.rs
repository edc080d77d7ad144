//! `report`, `diff` and `flame --bpf-only` through the binary: on the folded fixtures (no root),
//! and end to end as root: record the sample hook, then check that `report --json` agrees with
//! what `perf report` computes from the same perf.data.

mod common;
use common::*;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures/folded")
        .join(name)
}

fn here() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn report_json(args: &[&str], cwd: &Path) -> Value {
    let mut a = vec!["report", "--json"];
    a.extend_from_slice(args);
    let r = run(ebpf_prof(&a, cwd));
    assert_eq!(r.code(), Some(0), "{r:?}");
    let v: Value = serde_json::from_str(&r.stdout()).unwrap_or_else(|e| panic!("{e}: {r:?}"));
    assert_eq!(v["schema"], 1, "{v}");
    v
}

#[test]
fn report_on_the_reference_call_graph() {
    let f = fixture("reference.folded");
    let r = run(ebpf_prof(&["report", f.to_str().unwrap()], &here()));
    assert_eq!(r.code(), Some(0), "{r:?}");
    let out = r.stdout();
    for want in [
        "89.3% of the samples are inside BPF programs",
        "bpf_lsm_file_open: 89.8% of all samples",
        "parent do_dentry_open (90.5% of all samples): bpf_lsm_file_open holds 99.2% of it",
        "29.9%    6.1%  bpf_probe_read_kernel [probe reads]",
        "4.9%    4.9%  htab_map_hash [map hashing]",
        "hint: probe reads take 36% of the time in BPF",
        "0xffffffffc0288c18 under bpf_lsm_file_open: above the programs",
    ] {
        assert!(out.contains(want), "missing {want:?} in {r:?}");
    }
}

#[test]
fn report_json_and_top() {
    let f = fixture("two-programs.folded");
    let v = report_json(&["--top", "3", f.to_str().unwrap()], &here());
    assert_eq!(v["kernel_functions"].as_array().unwrap().len(), 3);
    assert_eq!(
        v["samples_source"], "perf_record",
        "the .json sidecar is read"
    );
    assert_eq!(v["event"], "cpu-clock:k");
    let names: Vec<&str> = v["programs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    assert!(names.contains(&"count_opens") && names.contains(&"enforce_access_policy"));
}

#[test]
fn report_names_bare_addresses_with_the_snapshot_beside_the_input() {
    let f = fixture("unresolved-addrs.folded");
    let v = report_json(&[f.to_str().unwrap()], &here());
    assert!(v["bpf"]["percent"].as_f64().unwrap() > 30.0, "{v}");
    assert!(!v["resolved"].as_array().unwrap().is_empty());
}

#[test]
fn report_input_errors_exit_2() {
    let d = open_tempdir();
    let r = run(ebpf_prof(&["report", "missing.data"], d.path()));
    assert_eq!(r.code(), Some(2), "{r:?}");
    std::fs::write(d.path().join("junk"), "hello world\n").unwrap();
    let r = run(ebpf_prof(&["report", "junk"], d.path()));
    assert_eq!(r.code(), Some(2), "{r:?}");
}

#[test]
fn flame_bpf_only_starts_at_the_attach_point() {
    let f = fixture("sample-hook.folded");
    let r = run(ebpf_prof(
        &["flame", "--bpf-only", "--folded", f.to_str().unwrap()],
        &here(),
    ));
    assert_eq!(r.code(), Some(0), "{r:?}");
    let out = r.stdout();
    assert!(out.lines().count() > 5, "{r:?}");
    for l in out.lines() {
        assert!(
            l.starts_with("trace_call_bpf_[k];") || l.starts_with("bpf_prog_"),
            "{l}"
        );
    }
    let r = run(ebpf_prof(
        &["flame", "--bpf-only", f.to_str().unwrap()],
        &here(),
    ));
    assert_eq!(r.code(), Some(0), "{r:?}");
    assert!(r.stdout().contains("path_check_callback") && !r.stdout().contains("do_sys_openat2"));
    let none = fixture("no-bpf.folded");
    let r = run(ebpf_prof(
        &["flame", "--bpf-only", none.to_str().unwrap()],
        &here(),
    ));
    assert_eq!(r.code(), Some(2), "{r:?}");
    assert!(r.stderr().contains("passes through a BPF program"), "{r:?}");
}

#[test]
fn diff_text_and_svg() {
    let (base, hooked) = (fixture("no-bpf.folded"), fixture("sample-hook.folded"));
    let (b, h) = (base.to_str().unwrap(), hooked.to_str().unwrap());
    let r = run(ebpf_prof(&["diff", "--text", "--top", "5", b, h], &here()));
    assert_eq!(r.code(), Some(0), "{r:?}");
    let out = r.stdout();
    assert_eq!(out.lines().count(), 7, "{r:?}");
    assert!(out.contains("path_check_callback [bpf]"), "{r:?}");
    diff_json_matches_the_text(b, h, &out);
    let d = open_tempdir();
    let svg = d.path().join("d.svg");
    let r = run(ebpf_prof(
        &["diff", b, h, "-o", svg.to_str().unwrap()],
        &here(),
    ));
    assert_eq!(r.code(), Some(0), "{r:?}");
    let text = std::fs::read_to_string(&svg).unwrap();
    assert!(text.starts_with("<?xml") && text.contains("path_check_callback"));
    let r = run(ebpf_prof(
        &["diff", b, h, "-o", svg.to_str().unwrap()],
        &here(),
    ));
    assert_eq!(r.code(), Some(2), "refuses to overwrite: {r:?}");
}

/// The names of a folded file's frames, without `_[k]`.
fn folded_names(path: &Path) -> std::collections::HashSet<String> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .filter_map(|line| line.rsplit_once(' '))
        .flat_map(|(stack, _)| stack.split(';'))
        .map(|frame| frame.trim_end_matches("_[k]").to_string())
        .collect()
}

/// Each frame of an inferno SVG: its tooltip and its fill's `r,g,b`.
fn svg_frames(svg: &str) -> Vec<(&str, &str)> {
    svg.split("<g><title>")
        .skip(1)
        .map(|frame| {
            let title = frame.split("</title>").next().unwrap();
            let fill = frame.split("fill=\"rgb(").nth(1).unwrap();
            (title, fill.split(')').next().unwrap())
        })
        .collect()
}

/// The differential SVG of fixtures, a folded pair and a perf.data against a folded base: frames
/// are named as the flame graph names them, "(new)" only on frames the base has nowhere, and
/// every frame that moved is drawn in a colour far from white.
#[test]
fn diff_svg_names_frames_as_the_flame_and_colours_them_readably() {
    let base = fixture("no-bpf.folded");
    let base_names = folded_names(&base);
    let d = open_tempdir();
    let svg = d.path().join("d.svg");
    let perf_data = here().join("fixtures/perf-data/hook-lines.data");
    for hooked in [fixture("sample-hook.folded"), perf_data] {
        let (b, h, o) = (
            base.to_str().unwrap(),
            hooked.to_str().unwrap(),
            svg.to_str().unwrap(),
        );
        let r = run(ebpf_prof(&["diff", b, h, "-o", o, "--force"], &here()));
        assert_eq!(r.code(), Some(0), "{r:?}");
        let text = std::fs::read_to_string(&svg).unwrap();
        assert!(!text.contains("_[k]"), "kernel frames without _[k]");
        assert!(!text.contains("bpf_prog_"), "programs without their tags");
        assert!(text.contains("<title>path_check_callback (new) ("), "{h}");
        assert!(
            text.contains("<title>do_syscall_64 ("),
            "a frame of both is not new"
        );
        let frames = svg_frames(&text);
        let mut new = 0;
        for (title, fill) in frames
            .iter()
            .filter(|(title, _)| !title.starts_with("all ("))
        {
            let name = &title[..title.rfind(" (").unwrap()];
            match name.strip_suffix(" (new)") {
                Some(bare) => {
                    new += 1;
                    assert!(!base_names.contains(bare), "{bare} is in the base");
                }
                None => assert!(base_names.contains(name), "{name} is new"),
            }
            let rgb: Vec<u8> = fill.split(',').map(|c| c.parse().unwrap()).collect();
            let lowest = rgb.iter().copied().min().unwrap();
            assert!(lowest <= 214, "{title}: rgb({fill}) is near white");
        }
        assert!(new > 5, "{new} of {} frames new", frames.len());
    }
}

/// `diff --text --json` through the binary: the document (with its schema) holds
/// the rows of the `--text` table, in its order, with the same figures.
fn diff_json_matches_the_text(b: &str, h: &str, text: &str) {
    let r = run(ebpf_prof(
        &["diff", "--text", "--json", "--top", "5", b, h],
        &here(),
    ));
    assert_eq!(r.code(), Some(0), "{r:?}");
    let v: Value = serde_json::from_str(&r.stdout()).unwrap_or_else(|e| panic!("{e}: {r:?}"));
    assert_eq!(v["schema"], 1, "{v}");
    let functions = v["functions"].as_array().unwrap();
    let rows: Vec<&str> = text.lines().skip(2).collect();
    assert_eq!(functions.len(), rows.len(), "{v}\n{text}");
    for (f, row) in functions.iter().zip(rows) {
        let num = |k: &str| f[k].as_f64().unwrap();
        let name = f["name"].as_str().unwrap();
        let shown = match f["bpf"].as_bool().unwrap() {
            true => format!("{name} [bpf]"),
            false => name.to_string(),
        };
        assert!(row.ends_with(&shown), "{row} vs {f}");
        let delta = format!("{:+.2}%", num("delta_self"));
        assert!(row.contains(&delta), "{row} vs {f}");
        assert!((num("hooked_self") - num("base_self") - num("delta_self")).abs() < 0.011);
        assert!((num("hooked_incl") - num("base_incl") - num("delta_incl")).abs() < 0.011);
    }
    assert_eq!(functions[0]["name"], "path_check_callback", "{v}");
}

/// Program symbols of the sample hook now in /proc/kallsyms.
fn hook_loaded() -> bool {
    bpf_symbol_loaded("_path_check_callback")
}

/// `perf report` over the run: symbol → (children %, self %).
fn perf_report(dir: &Path) -> Vec<(String, f64, f64)> {
    let perf = std::env::var("PERF").unwrap_or_else(|_| "perf".into());
    let o = Command::new(perf)
        .args(["report", "-i", "perf.data", "--kallsyms=perf.data.kallsyms"])
        .args(["--stdio", "--children", "--sort", "sym", "-g", "none"])
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .filter_map(|l| {
            let mut w = l.split_whitespace();
            let children = w.next()?.strip_suffix('%')?.parse().ok()?;
            let own = w.next()?.strip_suffix('%')?.parse().ok()?;
            (w.next()? == "[k]").then_some(())?;
            Some((w.next()?.to_string(), children, own))
        })
        .collect()
}

/// perf's line for a function: BPF symbols matched by name, whatever their tag.
fn perf_line<'a>(perf: &'a [(String, f64, f64)], name: &str) -> &'a (String, f64, f64) {
    let bpf = format!("_{name}");
    perf.iter()
        .find(|(s, _, _)| s == name || (s.starts_with("bpf_prog_") && s.ends_with(&bpf)))
        .unwrap_or_else(|| panic!("{name} not in perf report: {perf:?}"))
}

fn close(what: &str, ours: &Value, theirs: f64) {
    let ours = ours.as_f64().unwrap();
    assert!(
        (ours - theirs).abs() <= 0.2,
        "{what}: report says {ours}%, perf report {theirs}%"
    );
    eprintln!("{what}: report {ours:.2}% perf report {theirs:.2}%");
}

/// `report --json` on `dir/perf.data` against `perf report` there: every BPF function, the
/// helpers only BPF code calls, and the attach point, inclusive and self.
fn agrees_with_perf_report(dir: &Path) {
    let v = report_json(&["perf.data"], dir);
    let perf = perf_report(dir);
    let mut checked = 0;
    for p in v["programs"].as_array().unwrap() {
        for f in p["functions"].as_array().unwrap() {
            let name = f["name"].as_str().unwrap();
            let (_, children, own) = perf_line(&perf, name);
            close(&format!("{name} (inclusive)"), &f["percent"], *children);
            close(&format!("{name} (self)"), &f["self_percent"], *own);
            checked += 1;
        }
    }
    assert!(checked >= 2, "{v}");
    // Helpers only BPF code calls here: their whole weight is under the programs.
    let functions = v["kernel_functions"].as_array().unwrap();
    // The hash-map key is hashed in htab_map_hash, or in jhash where the kernel's build inlined
    // htab_map_hash (Debian's 6.1).
    let hash = ["htab_map_hash", "jhash"]
        .into_iter()
        .find(|name| functions.iter().any(|k| k["name"] == *name));
    // Under emulation the time in BPF is a sliver of the run (a few dozen samples), so a small
    // helper may go unsampled: the helpers that were sampled are compared, at least one.
    let helpers: Vec<&str> = match hash {
        Some(hash) => vec![hash, "lookup_nulls_elem_raw", "bpf_probe_read_user_str"],
        None if emulated() => vec!["lookup_nulls_elem_raw", "bpf_probe_read_user_str"],
        None => panic!("no hash function (htab_map_hash, jhash): {v}"),
    };
    let mut compared = 0;
    for name in helpers {
        let Some(k) = functions.iter().find(|k| k["name"] == name) else {
            assert!(emulated(), "{name} missing: {v}");
            continue;
        };
        let (_, children, own) = perf_line(&perf, name);
        close(&format!("{name} (inclusive)"), &k["percent"], *children);
        close(&format!("{name} (self)"), &k["self_percent"], *own);
        compared += 1;
    }
    assert!(compared >= 1, "no helper of the hook sampled: {v}");
    // Syscall tracepoints became faultable in 6.10: from then on their programs run from
    // trace_call_bpf_faultable.
    let tp = &v["attach_points"][0];
    let runner = tp["name"].as_str().unwrap_or_default();
    assert!(
        ["trace_call_bpf", "trace_call_bpf_faultable"].contains(&runner),
        "{v}"
    );
    close(
        &format!("{runner} (inclusive)"),
        &tp["percent"],
        perf_line(&perf, runner).1,
    );
}

#[test]
#[ignore = "needs root: scripts/test.sh runs it (or as root: cargo test -- --include-ignored)"]
fn report_agrees_with_perf_report_on_a_recorded_sample_hook() {
    if !need_root("report_agrees_with_perf_report_on_a_recorded_sample_hook") {
        return;
    }
    assert!(
        !hook_loaded(),
        "the sample hook is already loaded by someone else"
    );
    let before = (
        sysctl("net.core.bpf_jit_enable"),
        sysctl("net.core.bpf_jit_kallsyms"),
    );
    let d = open_tempdir();
    std::fs::write(d.path().join("hook.bpf.o"), ebpf_prof::bpf::SAMPLE_HOOK).unwrap();
    let count = sampled_iterations(200_000);
    let args = ["record", "-o", "perf.data", "--load", "hook.bpf.o"];
    let r = run(ebpf_prof(
        &[&args[..], &["-n", &count, "-F", "4999"]].concat(),
        d.path(),
    ));
    assert_eq!(r.code(), Some(0), "{r:?}");
    assert!(!hook_loaded(), "record left the hook loaded");
    let after = (
        sysctl("net.core.bpf_jit_enable"),
        sysctl("net.core.bpf_jit_kallsyms"),
    );
    assert_eq!(after, before, "record restores the sysctls");

    agrees_with_perf_report(d.path());
}
