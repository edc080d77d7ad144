//! `annotate`, `report`'s hot lines and `flame --lines` on the perf.data fixture of the sample
//! hook (fixtures/perf-data/README.md), and on files without what they need: no BPF program
//! info in the header, an unknown `--prog`. The root tests (against bpftool's own line
//! mapping, as an ordinary user, programs loaded twice) are in tests/annotate/root.rs.

mod common;
#[path = "annotate/root.rs"]
mod root;

use std::path::{Path, PathBuf};

use common::{ebpf_prof, run};
use serde_json::Value;

const FIXTURE: &str = "fixtures/perf-data/hook-lines.data";

fn fixture() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(FIXTURE)
}

fn have_perf() -> bool {
    let ok = std::process::Command::new("perf")
        .arg("--version")
        .output()
        .is_ok();
    assert!(ok || !common::under_ci(), "perf is missing under CI");
    ok
}

fn annotate_json(input: &Path, extra: &[&str]) -> Value {
    let mut args = vec!["annotate", "--json", "-i", input.to_str().unwrap()];
    args.extend_from_slice(extra);
    let r = run(ebpf_prof(&args, Path::new(env!("CARGO_MANIFEST_DIR"))));
    assert_eq!(r.code(), Some(0), "{r:?}");
    serde_json::from_str(&r.stdout()).unwrap()
}

#[test]
fn fixture_lines_add_up_and_name_the_helper() {
    let a = annotate_json(&fixture(), &["--top", "1000"]);
    assert_eq!(a["schema"], 1);
    let progs = a["programs"].as_array().unwrap();
    let names: Vec<&str> = progs.iter().map(|p| p["name"].as_str().unwrap()).collect();
    assert!(names.contains(&"path_check_callback"), "{names:?}");
    let callback = progs
        .iter()
        .find(|p| p["name"] == "path_check_callback")
        .unwrap();
    assert_eq!(callback["subprogram_of"], "enforce_access_policy");
    assert_eq!(callback["id"], 821);
    // Every function's lines add up to the function, the functions to the BPF share.
    let mut sum_all = 0.0;
    for p in progs {
        let lines = p["lines"].as_array().unwrap();
        let incl: f64 = lines
            .iter()
            .map(|l| l["incl_percent"].as_f64().unwrap())
            .sum();
        assert!((incl - p["percent"].as_f64().unwrap()).abs() < 0.05 * lines.len() as f64);
        sum_all += incl;
        for l in lines {
            let helpers: f64 = l["helpers"]
                .as_array()
                .unwrap()
                .iter()
                .map(|h| h["percent"].as_f64().unwrap())
                .sum();
            let (i, s) = (
                l["incl_percent"].as_f64().unwrap(),
                l["self_percent"].as_f64().unwrap(),
            );
            assert!((helpers + s - i).abs() < 0.05, "{l}");
        }
    }
    assert!((sum_all - a["bpf_percent"].as_f64().unwrap()).abs() < 0.1);
    let hot = &callback["lines"][0];
    assert_eq!(
        (hot["file"].as_str(), hot["line"].as_u64()),
        (Some("openat_hook_common.h"), Some(99))
    );
    assert!(hot["source"]
        .as_str()
        .unwrap()
        .contains("bpf_map_lookup_elem(&policy"));
    assert_eq!(hot["helpers"][0]["name"], "__htab_map_lookup_elem");
    let read = callback["lines"]
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["line"] == 89)
        .unwrap();
    assert_eq!(read["helpers"][0]["name"], "bpf_probe_read_user_str");
}

/// perf 5.10 (Debian 11's, the 5.10 kernel's matched perf) packs the arrays of its BPF program
/// info back to back, not each at a multiple of 8 bytes: its recording of the sample hook gives
/// the hook's lines as perf 6.1's does, none of its BPF time left without program info.
#[test]
fn perf_5_10_program_info_packed_unaligned_gives_the_lines() {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures/perf-data/hook-lines-perf510.data");
    let a = annotate_json(&path, &["--top", "1000"]);
    assert_eq!(a["unmapped_bpf_percent"], 0.0, "{a}");
    assert!(a["bpf_percent"].as_f64().unwrap() > 20.0, "{a}");
    let programs = a["programs"].as_array().unwrap();
    let callback = programs
        .iter()
        .find(|p| p["name"] == "path_check_callback")
        .unwrap_or_else(|| panic!("{a}"));
    assert_eq!(callback["subprogram_of"], "enforce_access_policy");
    let hot = &callback["lines"][0];
    assert_eq!(
        (hot["file"].as_str(), hot["line"].as_u64()),
        (Some("openat_hook_common.h"), Some(99))
    );
    for name in ["enforce_access_policy", "tail_call_security_check"] {
        let program = programs.iter().find(|p| p["name"] == name);
        assert!(
            program.is_some_and(|p| p["lines"][0]["line"].as_u64() > Some(0)),
            "{name}: {a}"
        );
    }
}

#[test]
fn fixture_text_prog_top_and_asm() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let args = [
        "annotate",
        FIXTURE,
        "--prog",
        "path_check_callback",
        "--top",
        "2",
        "--asm",
    ];
    let r = run(ebpf_prof(&args, dir));
    assert_eq!(r.code(), Some(0), "{r:?}");
    let out = r.stdout();
    assert!(
        out.contains("path_check_callback (prog id 821, sub-program of enforce_access_policy)"),
        "{out}"
    );
    assert!(
        !out.contains("tail_call_security_check"),
        "--prog keeps one function: {out}"
    );
    assert!(out.contains("openat_hook_common.h:99"), "{out}");
    assert!(out.contains("in bpf_probe_read_user_str"), "{out}");
    assert!(
        out.contains("call 0FFFFFFFF"),
        "--asm shows the call: {out}"
    );
    assert!(out.contains("calls "), "{out}");
    let r = run(ebpf_prof(&["annotate", FIXTURE, "--prog", "nope"], dir));
    assert_eq!(r.code(), Some(2), "{r:?}");
    assert!(
        r.stderr()
            .contains("no sampled BPF function is named \"nope\""),
        "{r:?}"
    );
    assert!(
        r.stderr().contains("path_check_callback"),
        "lists the names: {r:?}"
    );
}

/// A copy of the fixture with the BPF_PROG_INFO and BPF_BTF feature bits cleared, as a perf
/// without BPF support writes it.
#[test]
fn a_perf_data_without_bpf_headers_is_explained() {
    let d = tempfile::tempdir().unwrap();
    let mut data = std::fs::read(fixture()).unwrap();
    data[72 + 3] &= !0b110; // bits 25 and 26 of the feature bitmap
    let p = d.path().join("old.data");
    std::fs::write(&p, &data).unwrap();
    let r = run(ebpf_prof(&["annotate", p.to_str().unwrap()], d.path()));
    assert_eq!(r.code(), Some(2), "{r:?}");
    let err = r.stderr();
    assert!(
        err.contains("has no BPF program info") && err.contains("--no-bpf-event"),
        "{err}"
    );
    assert_eq!(err.trim().lines().count(), 1, "one line: {err}");
    let text = d.path().join("x.txt");
    std::fs::write(&text, "a;b 1\n").unwrap();
    let r = run(ebpf_prof(&["annotate", text.to_str().unwrap()], d.path()));
    assert_eq!(r.code(), Some(2), "{r:?}");
    assert!(r.stderr().contains("not a perf.data file"), "{r:?}");
}

/// Where feature section `id` of a perf.data starts: the feature table follows the data
/// section, one `{u64 offset, u64 size}` per bit set in the header's bitmap, in bit order.
fn feature_offset(data: &[u8], id: usize) -> usize {
    let u64_at = |at: usize| u64::from_le_bytes(data[at..at + 8].try_into().unwrap()) as usize;
    let table = u64_at(40) + u64_at(48);
    let bit = |i: usize| data[72 + i / 8] >> (i % 8) & 1 == 1;
    assert!(bit(id), "feature {id} is present");
    let before = (0..id).filter(|&i| bit(i)).count();
    u64_at(table + 16 * before)
}

/// A header whose BPF_PROG_INFO lists no programs (as perf 6.1 writes it with
/// `--no-bpf-event`, or without CAP_SYS_ADMIN, or with nothing loaded): the fixture with its
/// program count set to 0. One line saying why and what to do, exit 2.
#[test]
fn a_header_listing_no_programs_is_explained() {
    let d = tempfile::tempdir().unwrap();
    let mut data = std::fs::read(fixture()).unwrap();
    let at = feature_offset(&data, 25);
    assert_eq!(
        &data[at..at + 4],
        &2u32.to_le_bytes()[..],
        "the fixture lists 2 programs"
    );
    data[at..at + 4].copy_from_slice(&0u32.to_le_bytes());
    let p = d.path().join("none.data");
    std::fs::write(&p, &data).unwrap();
    let r = run(ebpf_prof(&["annotate", p.to_str().unwrap()], d.path()));
    assert_eq!(r.code(), Some(2), "{r:?}");
    let err = r.stderr();
    assert!(
        err.contains("lists no BPF programs in its header") && err.contains("ebpf-prof record"),
        "{err}"
    );
    assert_eq!(err.trim().lines().count(), 1, "one line: {err}");
}

#[test]
fn report_lists_hot_lines_and_flame_draws_them() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let r = run(ebpf_prof(&["report", FIXTURE], dir));
    assert_eq!(r.code(), Some(0), "{r:?}");
    assert!(r.stdout().contains("hot lines"), "{r:?}");
    assert!(
        r.stdout().contains("line 99 of openat_hook_common.h"),
        "{r:?}"
    );
    let r = run(ebpf_prof(&["report", "--json", FIXTURE], dir));
    let v: Value = serde_json::from_str(&r.stdout()).unwrap();
    assert_eq!(v["hot_lines"][0]["line"], 99, "{v}");
    assert!(v["hot_lines"].as_array().unwrap().len() <= 5);
    let r = run(ebpf_prof(&["flame", "--lines", "--folded", FIXTURE], dir));
    assert_eq!(r.code(), Some(0), "{r:?}");
    let folded = r.stdout();
    assert!(
        folded.contains("bpf_prog_02d72532ae93c2b5_path_check_callback;openat_hook_common.h:99;__htab_map_lookup_elem_[k]"),
        "the line sits between the BPF frame and its helper: {folded}"
    );
    let plain = run(ebpf_prof(&["flame", "--folded", FIXTURE], dir)).stdout();
    let total = |t: &str| -> u64 {
        t.lines()
            .filter_map(|l| l.rsplit_once(' ')?.1.parse::<u64>().ok())
            .sum()
    };
    assert_eq!(total(&folded), total(&plain), "the same samples");
    if !have_perf() {
        return;
    }
    let via_perf = ["flame", "--lines", "--folded", "--via-perf", FIXTURE];
    let through_perf = run(ebpf_prof(&via_perf, dir));
    assert_eq!(through_perf.code(), Some(0), "{through_perf:?}");
    assert_eq!(
        folded,
        through_perf.stdout(),
        "the built-in reader's line frames are perf script's rewritten text's"
    );
}
