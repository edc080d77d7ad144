//! Program names in every frame a person reads (`flame` SVG and folded, `report`, `annotate`,
//! `diff`), on recorded fixtures (fixtures/perf-data/README.md): a program's frames are named
//! from the recording's program list by the tag in their symbol; a name the kernel cut to 15
//! bytes is marked `…` when nothing gives the whole one.
//!
//! `bpftrace-cut.data` was recorded while bpftrace 0.17 ran a one-liner on
//! `sys_enter_openat`: its program has no BTF, so perf and the kernel name it
//! `bpf_prog_560e29b6a168615e_sys_enter_opena`. `hook-lines.data` holds the sample hook's
//! programs, whose BTF names are longer than 15 bytes.

mod common;

use common::{ebpf_prof, run, Run};
use serde_json::Value;
use std::path::{Path, PathBuf};

const CUT: &str = "fixtures/perf-data/bpftrace-cut.data";
const LONG: &str = "fixtures/perf-data/hook-lines.data";
/// The tag of the bpftrace program in `CUT`.
const TAG: &str = "560e29b6a168615e";

fn fixture(path: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(path)
}

/// `ebpf-prof ARGS` in the repository, asserted to succeed.
fn ok(args: &[&str]) -> Run {
    let r = run(ebpf_prof(args, Path::new(env!("CARGO_MANIFEST_DIR"))));
    assert_eq!(r.code(), Some(0), "{args:?}: {r:?}");
    r
}

/// The bpftrace fixture copied into `dir` with its kallsyms excerpt and, when given, its run
/// record changed by `edit`; `None` leaves the record out.
fn copy_cut(dir: &Path, edit: Option<&dyn Fn(&mut Value)>) -> PathBuf {
    let data = dir.join("bpftrace-cut.data");
    std::fs::copy(fixture(CUT), &data).unwrap();
    std::fs::copy(
        fixture(&format!("{CUT}.kallsyms")),
        dir.join("bpftrace-cut.data.kallsyms"),
    )
    .unwrap();
    if let Some(edit) = edit {
        let text = std::fs::read_to_string(fixture(&format!("{CUT}.json"))).unwrap();
        let mut record: Value = serde_json::from_str(&text).unwrap();
        edit(&mut record);
        std::fs::write(dir.join("bpftrace-cut.data.json"), record.to_string()).unwrap();
    }
    data
}

/// Every program name `flame` (folded and SVG), `report` (JSON and text) and `annotate` show
/// for `data`, each output's names in one list.
fn shown_names(data: &Path) -> Vec<(&'static str, String)> {
    let path = data.to_str().unwrap();
    let mut out = Vec::new();
    for line in ok(&["flame", "--folded", path]).stdout().lines() {
        for frame in line.split(';').filter(|f| f.starts_with("bpf_prog_")) {
            let frame = frame.split(' ').next().unwrap();
            out.push(("folded", frame[26..].to_string()));
        }
    }
    let report: Value = serde_json::from_str(&ok(&["report", "--json", path]).stdout()).unwrap();
    for program in report["programs"].as_array().unwrap() {
        out.push(("report", program["name"].as_str().unwrap().to_string()));
    }
    for hot in report["hot_lines"].as_array().into_iter().flatten() {
        out.push(("hot line", hot["program"].as_str().unwrap().to_string()));
    }
    let annotate: Value =
        serde_json::from_str(&ok(&["annotate", "--json", "-i", path]).stdout()).unwrap();
    for program in annotate["programs"].as_array().unwrap() {
        out.push(("annotate", program["name"].as_str().unwrap().to_string()));
    }
    out
}

#[test]
fn a_name_without_btf_is_marked_as_cut_everywhere() {
    let d = tempfile::tempdir().unwrap();
    for record in [true, false] {
        let keep = |_: &mut Value| {};
        let data = copy_cut(d.path(), record.then_some(&keep as &dyn Fn(&mut Value)));
        if !record {
            let _ = std::fs::remove_file(d.path().join("bpftrace-cut.data.json"));
        }
        let names = shown_names(&data);
        assert!(
            names.iter().any(|(from, _)| *from == "annotate"),
            "{names:?}"
        );
        for (from, name) in &names {
            assert_eq!(name, "sys_enter_opena…", "{from} (record: {record})");
        }
        let path = data.to_str().unwrap();
        let text = ok(&["report", path]).stdout();
        let line = match record {
            true => "sys_enter_opena… (id ",
            false => "sys_enter_opena…, entered from",
        };
        assert!(text.contains(line), "{text}");
        assert!(!text.contains("sys_enter_opena "), "{text}");
        let svg = ok(&["flame", path]).stdout();
        assert!(svg.contains("sys_enter_opena…"), "the SVG's label");
        assert!(!svg.contains("sys_enter_opena<") && !svg.contains("sys_enter_opena ("));
        let notes = ok(&["annotate", "-i", path]).stdout();
        assert!(notes.contains("sys_enter_opena… (prog id "), "{notes}");
        // bpftrace 0.17's program has no BTF: said so, and no advice about clang.
        assert!(
            notes.contains("sys_enter_opena… (id 17226) carries no BTF, so no line info"),
            "{notes}"
        );
        assert!(!notes.contains("clang"), "{notes}");
        // The kernel's 15 bytes, as a user types them, still pick the program.
        ok(&["annotate", "-i", path, "--prog", "sys_enter_opena"]);
    }
}

/// The recording's name for the program's tag is shown in place of the kernel's cut one: a
/// frame is named by its tag, and a program of the same 15 bytes under another tag is not it.
#[test]
fn frames_are_named_from_the_recording_by_tag() {
    let d = tempfile::tempdir().unwrap();
    let whole = "sys_enter_openat_by_comm";
    let rename = |record: &mut Value| {
        for program in record["loaded_programs"].as_array_mut().unwrap() {
            if program["tag"] == TAG {
                program["name"] = whole.into();
            }
        }
    };
    let data = copy_cut(d.path(), Some(&rename));
    for (from, name) in shown_names(&data) {
        assert_eq!(name, whole, "{from}");
    }
    let path = data.to_str().unwrap();
    let svg = ok(&["flame", path]).stdout();
    assert!(svg.contains(whole), "the SVG's label and subtitle");
    assert!(!svg.contains("sys_enter_opena…"));

    let other_tag = |record: &mut Value| {
        rename(record);
        for program in record["loaded_programs"].as_array_mut().unwrap() {
            if program["tag"] == TAG {
                program["tag"] = "0000000000000001".into();
                program["id"] = 1.into();
            }
        }
        record["bpf_programs"] = Value::Array(vec![]);
    };
    let data = copy_cut(d.path(), Some(&other_tag));
    for (from, name) in shown_names(&data) {
        assert_eq!(
            name, "sys_enter_opena…",
            "{from}: not matched by its cut name"
        );
    }
}

/// The sample hook's programs have BTF: their names are whole in every output, `diff`'s
/// included.
#[test]
fn btf_names_longer_than_fifteen_bytes_are_whole() {
    let long = fixture(LONG);
    let names = shown_names(&long);
    for want in ["enforce_access_policy", "tail_call_security_check"] {
        assert!(names.iter().any(|(_, name)| name == want), "{names:?}");
    }
    for (from, name) in &names {
        assert!(!name.ends_with('…'), "{from}: {name}");
    }
    let cut = fixture(CUT);
    let (base, hooked) = (long.to_str().unwrap(), cut.to_str().unwrap());
    // The differential graph draws the hooked profile's stacks: each fixture in turn.
    let svg = ok(&["diff", hooked, base]).stdout();
    assert!(svg.contains("enforce_access_policy"));
    let svg = ok(&["diff", base, hooked]).stdout();
    assert!(svg.contains("sys_enter_opena…"));
    let moves = ok(&["diff", "--text", "--top", "500", base, hooked]).stdout();
    assert!(moves.contains("sys_enter_opena…"), "{moves}");
    assert!(moves.contains("enforce_access_policy"), "{moves}");
}

/// The bundled sample hook recorded for real: its programs' whole BTF names (longer than 15
/// bytes) in `flame`, `report` and `annotate`, and `annotate --asm` naming what its calls go
/// to from the recording's kallsyms snapshot (helpers, map look-ups, its sub-program).
#[test]
#[ignore = "needs root: scripts/test.sh runs it (or as root: cargo test -- --include-ignored)"]
fn a_recorded_hook_is_named_whole_and_its_calls_named() {
    if !common::need_root("a_recorded_hook_is_named_whole_and_its_calls_named") {
        return;
    }
    let d = common::open_tempdir();
    std::fs::write(d.path().join("hook.bpf.o"), ebpf_prof::bpf::SAMPLE_HOOK).unwrap();
    let args = [
        "record",
        "-o",
        "perf.data",
        "--load",
        "hook.bpf.o",
        "-n",
        "200000",
        "-F",
        "4999",
    ];
    let r = run(ebpf_prof(&args, d.path()));
    assert_eq!(r.code(), Some(0), "{r:?}");
    let data = d.path().join("perf.data");
    let whole = [
        "enforce_access_policy",
        "path_check_callback",
        "tail_call_security_check",
    ];
    let names = shown_names(&data);
    assert!(
        names.iter().any(|(_, name)| name == "path_check_callback"),
        "{names:?}"
    );
    for (from, name) in &names {
        assert!(whole.contains(&name.as_str()), "{from}: {name}");
    }
    let path = data.to_str().unwrap();
    let asm: Value = serde_json::from_str(
        &ok(&["annotate", "--asm", "--json", "--top", "1000", "-i", path]).stdout(),
    )
    .unwrap();
    let targets: Vec<&str> = asm["programs"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|p| p["lines"].as_array().unwrap())
        .flat_map(|l| l["asm"].as_array().unwrap())
        .filter_map(|insn| insn["call_target"].as_str())
        .collect();
    assert!(!targets.is_empty(), "{asm}");
    for target in &targets {
        assert_ne!(*target, "(unknown target)", "{targets:?}");
    }
    // The hook looks up a hash map: the JIT calls the map's own look-up function.
    assert!(
        targets.iter().any(|t| t.contains("htab_map_lookup_elem")),
        "{targets:?}"
    );
}
