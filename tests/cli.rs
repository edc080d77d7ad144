//! The binary's behaviour on bad input and on the inputs `flame` accepts: one clear line, the
//! documented exit code, no panic, nothing overwritten.

mod common;
use common::*;
use std::path::Path;

fn no_panic(r: &Run) {
    let e = r.stderr();
    assert!(
        !e.contains("panicked") && !e.contains("RUST_BACKTRACE"),
        "{r:?}"
    );
}

/// Exit 2 and one `error:` line mentioning `needle`.
fn usage_error(r: &Run, needle: &str) {
    no_panic(r);
    assert_eq!(r.code(), Some(2), "{r:?}");
    let errors: Vec<_> = r
        .stderr()
        .lines()
        .filter(|l| l.contains("error"))
        .map(str::to_string)
        .collect();
    assert_eq!(errors.len(), 1, "{r:?}");
    assert!(errors[0].contains(needle), "wanted {needle:?} in {r:?}");
}

/// A skipped root test must not look passed, and under CI=true the root tests must
/// have run: scripts/test.sh runs them (`--include-ignored`, as root) and says so.
#[test]
fn root_tests_run_under_ci() {
    if under_ci() {
        assert_eq!(
            std::env::var("EBPF_PROF_ROOT_TESTS").as_deref(),
            Ok("1"),
            "CI=true but the root tests were not run: use scripts/test.sh (as root: cargo test -- --include-ignored)"
        );
    }
}

#[test]
fn flame_rejects_bad_inputs_with_one_line() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path();
    std::fs::write(p.join("empty.data"), "").unwrap();
    std::fs::write(
        p.join("random.data"),
        [0x13u8, 0x37, 0, 0xff, 0xfe, 1, 2, 3, 0, 0, 9],
    )
    .unwrap();
    std::fs::write(p.join("words.txt"), "hello there\nnothing to see\n").unwrap();
    std::fs::create_dir(p.join("dir.data")).unwrap();
    let cases = [
        ("missing.data", "cannot read"),
        ("dir.data", "is a directory"),
        ("empty.data", "is empty"),
        ("random.data", "neither a perf.data"),
        ("words.txt", "neither a perf.data"),
    ];
    for (file, needle) in cases {
        usage_error(&run(ebpf_prof(&["flame", file], p)), needle);
    }
}

#[test]
fn flame_truncated_perf_data_is_an_error_not_a_panic() {
    let d = tempfile::tempdir().unwrap();
    let mut bytes = b"PERFILE2".to_vec();
    bytes.extend_from_slice(&[0u8; 100]);
    std::fs::write(d.path().join("t.data"), bytes).unwrap();
    let r = run(ebpf_prof(&["flame", "t.data"], d.path()));
    no_panic(&r);
    assert_ne!(r.code(), Some(0), "{r:?}");
    assert!(
        r.stderr().contains("perf"),
        "the failing perf command is named: {r:?}"
    );
}

#[test]
fn flame_renders_folded_and_script_text() {
    let d = tempfile::tempdir().unwrap();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/perf-script/openat-hook.txt");
    std::fs::copy(&script, d.path().join("s.txt")).unwrap();
    let r = run(ebpf_prof(&["flame", "--folded", "s.txt"], d.path()));
    assert_eq!(r.code(), Some(0), "{r:?}");
    assert!(
        r.stdout()
            .contains("bpf_prog_01d3040eaf485f66_path_check_callback"),
        "{r:?}"
    );
    std::fs::write(d.path().join("f.folded"), r.stdout()).unwrap();
    let svg = run(ebpf_prof(&["flame", "f.folded", "--title", "T"], d.path()));
    assert_eq!(svg.code(), Some(0), "{svg:?}");
    let s = svg.stdout();
    assert!(s.starts_with("<?xml") && s.contains("</svg>"), "{svg:?}");
    assert!(s.contains("path_check_callback") && s.contains("do_syscall_64"));
}

/// The fill of the first frame named `name` in an SVG: (r, g, b).
fn fill_of(svg: &str, name: &str) -> (u8, u8, u8) {
    let at = svg.find(&format!("<title>{name} (")).expect(name);
    let rgb = &svg[at..][svg[at..].find("fill=\"rgb(").expect("fill") + 10..];
    let v: Vec<u8> = rgb[..rgb.find(')').unwrap()]
        .split(',')
        .map(|c| c.parse().unwrap())
        .collect();
    (v[0], v[1], v[2])
}

/// The subtitle of a rendered flame graph (the captured fixture) carries the colour
/// legend, and the frames have the colours it names.
#[test]
fn flame_subtitle_holds_the_legend_that_the_colours_follow() {
    let d = tempfile::tempdir().unwrap();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/perf-script/openat-hook.txt");
    let r = run(ebpf_prof(&["flame", script.to_str().unwrap()], d.path()));
    assert_eq!(r.code(), Some(0), "{r:?}");
    let svg = r.stdout();
    let sub = &svg[svg.find("<text id=\"subtitle\"").expect("a subtitle")..];
    let sub = &sub[sub.find('>').unwrap() + 1..sub.find("</text>").unwrap()];
    let legend = "blue-violet: BPF, warm: kernel, green: user space";
    assert!(sub.contains(legend), "{sub}");
    let (r, g, b) = fill_of(&svg, "path_check_callback");
    assert!(
        b > r && b > g,
        "a BPF program is blue-violet: {:?}",
        (r, g, b)
    );
    let (r, g, b) = fill_of(&svg, "do_syscall_64");
    assert!(r > g && r > b, "the kernel is warm: {:?}", (r, g, b));
    let (r, g, b) = fill_of(&svg, "syscall");
    assert!(g > r && g > b, "user space is green: {:?}", (r, g, b));
}

#[test]
fn flame_output_file_is_not_overwritten_without_force() {
    let d = tempfile::tempdir().unwrap();
    std::fs::write(d.path().join("f.folded"), "a;b 1\n").unwrap();
    std::fs::write(d.path().join("out.svg"), "precious").unwrap();
    let r = run(ebpf_prof(&["flame", "f.folded", "-o", "out.svg"], d.path()));
    usage_error(&r, "--force");
    assert_eq!(
        std::fs::read_to_string(d.path().join("out.svg")).unwrap(),
        "precious"
    );
    let r = run(ebpf_prof(
        &["flame", "f.folded", "-o", "out.svg", "--force"],
        d.path(),
    ));
    assert_eq!(r.code(), Some(0), "{r:?}");
    assert!(std::fs::read_to_string(d.path().join("out.svg"))
        .unwrap()
        .contains("</svg>"));
    usage_error(
        &run(ebpf_prof(
            &["flame", "f.folded", "-o", "no/such/dir/x.svg"],
            d.path(),
        )),
        "does not exist",
    );
}

/// `completions SHELL` and `man` through the binary: exit 0, nothing on stderr, and
/// each the format its reader expects, holding the subcommands and their flags.
#[test]
fn completions_and_man_through_the_binary() {
    let d = tempfile::tempdir().unwrap();
    // (arguments, the marker of the format, a flag of a subcommand)
    let cases = [
        (
            &["completions", "bash"][..],
            "complete -F _ebpf__prof",
            "--max-time",
        ),
        (
            &["completions", "zsh"][..],
            "#compdef ebpf-prof",
            "--max-time",
        ),
        (
            &["completions", "fish"][..],
            "complete -c ebpf-prof",
            "max-time",
        ),
        (&["man"][..], ".TH ebpf-prof 1", "overhead"),
    ];
    for (args, marker, flag) in cases {
        let r = run(ebpf_prof(args, d.path()));
        assert_eq!(r.code(), Some(0), "{r:?}");
        assert!(r.stderr().is_empty(), "{r:?}");
        let out = r.stdout();
        assert!(out.contains(marker) && out.contains(flag), "{r:?}");
    }
    usage_error(&run(ebpf_prof(&["completions", "tcsh"], d.path())), "tcsh");
}

#[test]
fn regression_every_page_the_man_page_lists_is_one_man_prints() {
    let d = tempfile::tempdir().unwrap();
    let main = run(ebpf_prof(&["man"], d.path()));
    assert_eq!(main.code(), Some(0), "{main:?}");
    // clap_mangen escapes the dashes of the names it lists: `ebpf\-prof\-bench(1)`.
    let listed: Vec<String> = main
        .stdout()
        .lines()
        .filter_map(|l| l.strip_prefix("ebpf\\-prof\\-")?.strip_suffix("(1)"))
        .map(|name| name.replace("\\-", "-"))
        .collect();
    assert!(listed.len() >= 12, "{main:?}");
    for name in &listed {
        let page = run(ebpf_prof(&["man", name], d.path()));
        assert_eq!(page.code(), Some(0), "{page:?}");
        let title = format!(".TH ebpf-prof-{name} 1");
        assert!(page.stdout().contains(&title), "{name}: {page:?}");
    }
    usage_error(
        &run(ebpf_prof(&["man", "nope"], d.path())),
        "no man page ebpf-prof-nope: give one of bench",
    );
}

/// The subcommand lines of `ebpf-prof --help`, each joined back from its wrapped lines.
fn help_lines(dir: &Path) -> Vec<String> {
    let help = run(ebpf_prof(&["--help"], dir)).stdout();
    let mut lines: Vec<String> = Vec::new();
    let commands = help.split("Commands:\n").nth(1).unwrap_or_default();
    for line in commands.lines().take_while(|l| !l.is_empty()) {
        match line.strip_prefix("               ") {
            Some(more) if !lines.is_empty() => {
                let last = lines.len() - 1;
                lines[last] = format!("{} {}", lines[last], more.trim());
            }
            _ => lines.push(line.trim().to_string()),
        }
    }
    lines
}

#[test]
fn regression_the_bench_help_line_says_what_bench_is() {
    let d = tempfile::tempdir().unwrap();
    let lines = help_lines(d.path());
    let bench = lines.iter().find(|l| l.starts_with("bench ")).unwrap();
    assert!(
        !bench.contains("pinned"),
        "bench does not pin itself: {bench}"
    );
    let long = run(ebpf_prof(&["bench", "--help"], d.path())).stdout();
    let values = long.split("Possible values:").nth(1).unwrap_or_default();
    let operations = values
        .lines()
        .take_while(|l| !l.contains("[default:"))
        .filter(|l| l.trim_start().starts_with("- "))
        .count();
    assert!(
        bench.contains(&format!(": {operations} operations (openat by default)")),
        "--op takes {operations}: {bench}"
    );
    assert!(long.contains("It does not pin itself"), "{long}");
    let hook = lines.iter().find(|l| l.starts_with("hook ")).unwrap();
    assert!(hook.contains("--seconds"), "{hook}");
    let overhead = lines.iter().find(|l| l.starts_with("overhead ")).unwrap();
    assert!(overhead.contains("p50 to p99.9"), "{overhead}");
}

/// The objects the documents' commands load (`--load X.bpf.o`, `--compare X.bpf.o`), less
/// the ones a document makes otherwise (`hook.bpf.o` is demo's, `badbtf.bpf.o` a bad input).
fn objects_the_docs_load() -> std::collections::BTreeSet<String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut docs = vec![root.join("README.md")];
    for entry in std::fs::read_dir(root.join("docs")).unwrap() {
        docs.push(entry.unwrap().path());
    }
    // The bad inputs' objects are made by their own tests, not written for a user.
    docs.retain(|doc| !doc.ends_with("bad-input.md"));
    let mut names = std::collections::BTreeSet::new();
    for doc in docs {
        let text = std::fs::read_to_string(&doc).unwrap_or_default();
        for word in text.split(|c: char| c.is_whitespace() || c == '`') {
            if word.ends_with(".bpf.o") && !word.contains('/') {
                names.insert(word.to_string());
            }
        }
    }
    names.remove("hook.bpf.o");
    names.remove("badbtf.bpf.o");
    names.remove("OBJ.bpf.o");
    names.remove("A.bpf.o");
    names.remove("B.bpf.o");
    names.remove("X.bpf.o");
    names
}

#[test]
fn regression_the_objects_the_docs_load_are_written_by_hook() {
    let d = tempfile::tempdir().unwrap();
    let r = run(ebpf_prof(&["hook", "--write-objects", "objs"], d.path()));
    assert_eq!(r.code(), Some(0), "{r:?}");
    assert!(r.stderr().contains("example objects to objs: "), "{r:?}");
    let wanted = objects_the_docs_load();
    assert!(wanted.contains("on_execve.bpf.o"), "{wanted:?}");
    for name in &wanted {
        let bytes = std::fs::read(d.path().join("objs").join(name))
            .unwrap_or_else(|e| panic!("{name}, loaded by the docs, not written: {e}"));
        assert_eq!(&bytes[..4], b"\x7fELF", "{name}");
    }
    let again = run(ebpf_prof(&["hook", "--write-objects", "objs"], d.path()));
    assert_eq!(again.code(), Some(0), "the same objects again: {again:?}");
    std::fs::write(d.path().join("objs/on_execve.bpf.o"), "mine").unwrap();
    usage_error(
        &run(ebpf_prof(&["hook", "--write-objects", "objs"], d.path())),
        "objs/on_execve.bpf.o exists and is not the object this ebpf-prof bundles",
    );
    assert_eq!(
        std::fs::read(d.path().join("objs/on_execve.bpf.o")).unwrap(),
        b"mine"
    );
}

/// With stdout on a terminal (a pty from `script`, util-linux) `flame` writes
/// `flame.svg` instead of printing SVG, says where, and refuses to overwrite it; a pipe still
/// gets the SVG.
#[test]
fn flame_on_a_terminal_writes_flame_svg_once() {
    let d = tempfile::tempdir().unwrap();
    std::fs::write(d.path().join("f.folded"), "a;b 1\n").unwrap();
    let on_tty = || {
        let mut c = std::process::Command::new("script");
        let line = format!("{} flame f.folded", bin().display());
        c.args(["-qec", &line, "/dev/null"]).current_dir(d.path());
        run(c)
    };
    let r = on_tty();
    assert_eq!(r.code(), Some(0), "{r:?}");
    assert!(
        r.stdout().contains("wrote flame.svg (stdout is a terminal"),
        "{r:?}"
    );
    assert!(!r.stdout().contains("<svg"), "{r:?}");
    let svg = d.path().join("flame.svg");
    assert!(std::fs::read_to_string(&svg).unwrap().contains("</svg>"));
    std::fs::write(&svg, "precious").unwrap();
    let r = on_tty();
    assert_eq!(r.code(), Some(2), "{r:?}");
    assert!(
        r.stdout().contains("flame.svg exists: pass --force"),
        "{r:?}"
    );
    assert_eq!(std::fs::read_to_string(&svg).unwrap(), "precious");
    let piped = run(ebpf_prof(&["flame", "f.folded"], d.path()));
    assert!(piped.stdout().contains("</svg>"), "{piped:?}");
}

#[test]
fn bench_prints_samples_and_summary() {
    let d = tempfile::tempdir().unwrap();
    let r = run(ebpf_prof(&["bench", "-n", "2000"], d.path()));
    assert_eq!(r.code(), Some(0), "{r:?}");
    assert_eq!(r.stdout().lines().count(), 1800, "10% warm-up dropped");
    assert!(r.stdout().lines().all(|l| l.parse::<u64>().is_ok()));
    assert!(
        r.stderr().contains("p50=") && r.stderr().contains("p99.9="),
        "{r:?}"
    );
}

#[test]
fn bench_bad_input() {
    let d = tempfile::tempdir().unwrap();
    usage_error(
        &run(ebpf_prof(&["bench", "--path", "/no/such/file"], d.path())),
        "/no/such/file",
    );
    usage_error(
        &run(ebpf_prof(&["bench", "--warmup-fraction", "1.5"], d.path())),
        "warmup",
    );
    usage_error(
        &run(ebpf_prof(&["bench", "-n", "0"], d.path())),
        "--iterations 0",
    );
    let r = run(ebpf_prof(&["bench", "-n", "lots"], d.path()));
    assert_eq!(r.code(), Some(2), "{r:?}");
}

#[test]
#[ignore = "needs root: scripts/test.sh runs it (or as root: cargo test -- --include-ignored)"]
fn record_bad_input_is_refused_before_anything_runs() {
    if !need_root("record_bad_input_is_refused_before_anything_runs") {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let perf = fake_perf();
    let perf = perf.to_str().unwrap();
    let base = ["record", "--perf", perf, "--allow-no-bpf", "-n", "1000"];
    let with = |extra: &[&str]| {
        let mut a = base.to_vec();
        a.extend_from_slice(extra);
        run(ebpf_prof(&a, d.path()))
    };
    usage_error(&with(&["--cpu", "4096"]), "does not exist");
    usage_error(&with(&["-o", "missing/perf.data"]), "does not exist");
    usage_error(&with(&["--", "./no-such-bench"]), "not found");
    usage_error(&with(&["--filter", "("]), "not a valid regex");
    let r = with(&["--priority", "0"]);
    assert_eq!(r.code(), Some(2), "{r:?}");
    assert!(!d.path().join("perf.data").exists());
    assert!(!d.path().join("perf.data.kallsyms").exists());
}

#[test]
#[ignore = "needs root: scripts/test.sh runs it (or as root: cargo test -- --include-ignored)"]
fn record_failing_perf_restores_and_removes() {
    if !need_root("record_failing_perf_restores_and_removes") {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let perf = fake_perf();
    let before = sysctl("net.core.bpf_jit_kallsyms");
    let mut c = ebpf_prof(
        &[
            "record",
            "--perf",
            perf.to_str().unwrap(),
            "--allow-no-bpf",
            "-n",
            "1000",
        ],
        d.path(),
    );
    c.env("FAKE_PERF_MODE", "fail");
    let r = run(c);
    no_panic(&r);
    assert_eq!(r.code(), Some(3), "{r:?}");
    assert!(
        r.stderr().contains("something went badly wrong"),
        "perf's stderr is quoted: {r:?}"
    );
    assert_eq!(sysctl("net.core.bpf_jit_kallsyms"), before);

    let mut c = ebpf_prof(
        &[
            "record",
            "--perf",
            perf.to_str().unwrap(),
            "--allow-no-bpf",
            "-n",
            "1000",
        ],
        d.path(),
    );
    c.env("FAKE_PERF_MODE", "chrt-eperm");
    usage_error(&run(c), "--no-fifo");

    let mut c = ebpf_prof(
        &["record", "--perf", perf.to_str().unwrap(), "--allow-no-bpf"],
        d.path(),
    );
    c.env("FAKE_PERF_MODE", "wrapper");
    let r = run(c);
    no_panic(&r);
    assert_ne!(r.code(), Some(0), "{r:?}");
}

#[test]
#[ignore = "needs root: scripts/test.sh runs it (or as root: cargo test -- --include-ignored)"]
fn record_runs_perf_without_the_callers_config_or_exec_path() {
    if !need_root("record_runs_perf_without_the_callers_config_or_exec_path") {
        return;
    }
    // The fake perf prints the two variables and fails, and record quotes its stderr.
    let d = tempfile::tempdir().unwrap();
    let perf = fake_perf();
    let mut c = ebpf_prof(
        &["record", "--perf", perf.to_str().unwrap(), "--allow-no-bpf"],
        d.path(),
    );
    c.env("FAKE_PERF_MODE", "env")
        .env("PERF_CONFIG", d.path().join("perfconfig"))
        .env("PERF_EXEC_PATH", d.path());
    let r = run(c);
    assert!(
        r.stderr()
            .contains("PERF_CONFIG=/dev/null PERF_EXEC_PATH=unset"),
        "{r:?}"
    );
}

#[test]
#[ignore = "needs root: scripts/test.sh runs it (or as root: cargo test -- --include-ignored)"]
fn perf_script_as_root_looks_in_roots_home_not_the_callers() {
    if !need_root("perf_script_as_root_looks_in_roots_home_not_the_callers") {
        return;
    }
    // A HOME that sudo -E passed on holds the build-id cache perf script would read.
    let d = tempfile::tempdir().unwrap();
    let perf = fake_perf();
    let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/perf-data/hook-lines.data");
    let args = [
        "flame",
        "--via-perf",
        "--folded",
        "--perf",
        perf.to_str().unwrap(),
        data.to_str().unwrap(),
    ];
    let mut c = ebpf_prof(&args, d.path());
    c.env("FAKE_PERF_MODE", "env").env("HOME", d.path());
    let r = run(c);
    assert_ne!(r.code(), Some(0), "{r:?}");
    assert!(r.stderr().contains("PERF_CONFIG=/dev/null"), "{r:?}");
    assert!(
        !r.stderr().contains(&format!("HOME={}", d.path().display())),
        "{r:?}"
    );
    assert!(r.stderr().contains("HOME=/"), "{r:?}");
}

#[test]
#[ignore = "needs root: scripts/test.sh runs it (or as root: cargo test -- --include-ignored)"]
fn record_refuses_without_matching_programs() {
    if !need_root("record_refuses_without_matching_programs") {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let perf = fake_perf();
    let r = run(ebpf_prof(
        &[
            "record",
            "--perf",
            perf.to_str().unwrap(),
            "--filter",
            "^no_such_program_xyz$",
        ],
        d.path(),
    ));
    no_panic(&r);
    assert_eq!(r.code(), Some(1), "{r:?}");
    assert!(r.stderr().contains("--allow-no-bpf"), "{r:?}");
}

#[test]
fn doctor_json_parses_and_names_every_check() {
    let d = tempfile::tempdir().unwrap();
    let r = run(ebpf_prof(&["doctor", "--json"], d.path()));
    no_panic(&r);
    let v: serde_json::Value =
        serde_json::from_str(&r.stdout()).unwrap_or_else(|e| panic!("{e}: {r:?}"));
    assert_eq!(v["schema"], 1, "{v}");
    let names: Vec<&str> = v["checks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    for want in [
        "privileges",
        "net.core.bpf_jit_enable",
        "net.core.bpf_jit_kallsyms",
        "net.core.bpf_jit_harden",
        "kallsyms",
        "bpf programs",
        "perf",
        "pmu",
        "lockdown",
        "lsm list",
        "taskset",
        "chrt",
        "cpu",
        "kernel.sched_rt_runtime_us",
    ] {
        assert!(names.contains(&want), "missing {want}: {names:?}");
    }
    perf_choice_and_annotate_checks(&v, &names);
    let can = v["can_record"].as_bool().unwrap();
    assert_eq!(r.code(), Some(if can { 0 } else { 1 }), "{r:?}");
    for c in v["checks"].as_array().unwrap() {
        if c["status"] != "ok" {
            assert!(
                c["fix"].as_str().is_some_and(|f| !f.is_empty()),
                "warn/fail carries a fix: {c}"
            );
        }
    }
}

/// Doctor says which perf and why, and whether it can annotate, whenever one
/// is found.
fn perf_choice_and_annotate_checks(v: &serde_json::Value, names: &[&str]) {
    let check = |name: &str| {
        v["checks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["name"] == name)
            .cloned()
    };
    let perf_found = check("perf").is_some_and(|c| c["status"] != "fail");
    assert!(perf_found || !under_ci(), "perf is missing under CI: {v}");
    if perf_found {
        let choice = check("perf choice").unwrap_or_else(|| panic!("no perf choice: {names:?}"));
        assert!(
            choice["detail"].as_str().is_some_and(|d| !d.is_empty()),
            "{choice}"
        );
        let annotate = check("perf annotate").unwrap_or_else(|| panic!("{names:?}"));
        let detail = annotate["detail"].as_str().unwrap_or_default();
        assert!(detail.contains("disassembl"), "{annotate}");
    }
}

/// `record` with the real perf and `--allow-no-bpf`, around the given benchmark.
fn record_real(dir: &Path, extra: &[&str]) -> Run {
    let mut a = vec!["record", "--allow-no-bpf", "-F", "99"];
    a.extend_from_slice(extra);
    run(ebpf_prof(&a, dir))
}

#[test]
#[ignore = "needs root: scripts/test.sh runs it (or as root: cargo test -- --include-ignored)"]
fn record_bench_failures_are_reported_and_leave_no_half_file() {
    if !need_root("record_bench_failures_are_reported_and_leave_no_half_file") {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let before = sysctl("net.core.bpf_jit_kallsyms");
    for bench in [&["--", "false"][..], &["--", "sh", "-c", "kill -9 $$"][..]] {
        let r = record_real(d.path(), bench);
        no_panic(&r);
        assert_eq!(r.code(), Some(3), "{r:?}");
        assert!(r.stderr().contains("the recording failed"), "{r:?}");
        assert!(
            !d.path().join("perf.data").exists(),
            "no half-written perf.data: {r:?}"
        );
        assert_eq!(sysctl("net.core.bpf_jit_kallsyms"), before);
    }
    // A benchmark printing garbage: the profile is fine, the samples are not latencies.
    let r = record_real(d.path(), &["--", "echo", "hello"]);
    assert_eq!(r.code(), Some(0), "{r:?}");
    assert!(r.stderr().contains("holds no latencies"), "{r:?}");
    // Not executable.
    std::fs::write(d.path().join("bench.sh"), "#!/bin/sh\necho 1\n").unwrap();
    usage_error(
        &record_real(d.path(), &["--", "./bench.sh"]),
        "not found or not executable",
    );
}

#[test]
#[ignore = "needs root: scripts/test.sh runs it (or as root: cargo test -- --include-ignored)"]
fn record_rotates_an_existing_perf_data_like_perf() {
    if !need_root("record_rotates_an_existing_perf_data_like_perf") {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    assert_eq!(record_real(d.path(), &["--", "echo", "1"]).code(), Some(0));
    let first = std::fs::read(d.path().join("perf.data.json")).unwrap();
    let r = record_real(d.path(), &["--", "echo", "2"]);
    assert_eq!(r.code(), Some(0), "{r:?}");
    assert!(r.stderr().contains("perf.data.old"), "{r:?}");
    assert_eq!(
        std::fs::read(d.path().join("perf.data.old.json")).unwrap(),
        first
    );
    assert_eq!(
        std::fs::read_to_string(d.path().join("perf.data.samples"))
            .unwrap()
            .trim(),
        "2"
    );
    assert_eq!(
        std::fs::read_to_string(d.path().join("perf.data.old.samples"))
            .unwrap()
            .trim(),
        "1"
    );
}

#[test]
#[ignore = "needs root: scripts/test.sh runs it (or as root: cargo test -- --include-ignored)"]
fn record_bad_objects_and_perf() {
    if !need_root("record_bad_objects_and_perf") {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    std::fs::write(d.path().join("notelf.o"), "hello").unwrap();
    std::fs::write(
        d.path().join("noprogs.o"),
        ebpf_prof::bpf::SAMPLE_NO_PROGRAMS,
    )
    .unwrap();
    std::fs::write(
        d.path().join("rejected.o"),
        ebpf_prof::bpf::SAMPLE_HOOK_REJECTED,
    )
    .unwrap();
    usage_error(
        &record_real(d.path(), &["--load", "notelf.o"]),
        "not a BPF object",
    );
    usage_error(
        &record_real(d.path(), &["--load", "missing.o"]),
        "missing.o",
    );
    usage_error(
        &record_real(d.path(), &["--load", "noprogs.o"]),
        "no BPF programs",
    );
    let r = record_real(d.path(), &["--load", "rejected.o"]);
    no_panic(&r);
    assert_eq!(r.code(), Some(2), "{r:?}");
    assert!(r.stderr().contains("verifier"), "{r:?}");
    // No working perf is exit 1, as documented (it was 2).
    let r = record_real(d.path(), &["--perf", "/nonexistent/perf"]);
    no_panic(&r);
    assert_eq!(r.code(), Some(1), "{r:?}");
    assert!(
        r.stderr()
            .contains("no working perf: --perf /nonexistent/perf"),
        "{r:?}"
    );
    assert!(!d.path().join("perf.data").exists());
}

#[test]
#[ignore = "needs root: scripts/test.sh runs it (or as root: cargo test -- --include-ignored)"]
fn flame_unreadable_input_for_an_ordinary_user() {
    if !need_root("flame_unreadable_input_for_an_ordinary_user") {
        return;
    }
    let d = open_tempdir();
    let f = d.path().join("secret.data");
    std::fs::write(&f, b"PERFILE2........").unwrap();
    let mut c = std::process::Command::new("runuser");
    let copy = d.path().join("ebpf-prof");
    std::fs::copy(bin(), &copy).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&copy, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o600)).unwrap();
    c.args(["-u", "nobody", "--"])
        .arg(&copy)
        .args(["flame", "secret.data"])
        .current_dir(d.path());
    usage_error(&run(c), "Permission denied");
}

/// `record SCOPE… --load hook.bpf.o -F 4999 -o OUT` in `dir`.
fn record_the_hook(dir: &Path, scope: &[&str], out: &str) -> Run {
    let mut args = vec!["record"];
    args.extend_from_slice(scope);
    args.extend_from_slice(&["--load", "hook.bpf.o", "-F", "4999", "-o", out]);
    run(ebpf_prof(&args, dir))
}

/// `report` and `flame` on a recording of the workload show the hook.
fn assert_the_workload_ran_the_hook(dir: &Path, data: &str) {
    let r = run(ebpf_prof(&["report", data, "--json"], dir));
    assert_eq!(r.code(), Some(0), "{r:?}");
    let v: serde_json::Value = serde_json::from_str(&r.stdout()).unwrap();
    assert!(
        v["bpf"]["percent"].as_f64().unwrap() > 1.0,
        "{data}: the workload's openats ran the hook: {v}"
    );
    let svg = run(ebpf_prof(&["flame", data], dir));
    assert!(
        svg.stdout().contains("path_check_callback"),
        "{data}: {svg:?}"
    );
}

#[test]
#[ignore = "needs root: scripts/test.sh runs it (or as root: cargo test -- --include-ignored)"]
fn record_all_cpus_and_pid_profile_a_real_workload() {
    if !need_root("record_all_cpus_and_pid_profile_a_real_workload") {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    std::fs::write(d.path().join("hook.bpf.o"), ebpf_prof::bpf::SAMPLE_HOOK).unwrap();
    // The workload: a process opening a file in a loop until it is killed (a bench of a fixed
    // count can end before a recording that waited for another root run's lock).
    let mut work = std::process::Command::new("sh")
        .args(["-c", "while :; do read -r line < /etc/hostname; done"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let pid = work.id().to_string();
    let r = record_the_hook(d.path(), &["--all-cpus", "--duration", "1s"], "all.data");
    assert_eq!(r.code(), Some(0), "{r:?}");
    // The sleep perf runs is the one found on PATH and checked, named by its absolute path.
    let sleep = which::which("sleep").unwrap();
    let timed = format!(" -a -- {} 1", sleep.display());
    assert!(r.stderr().contains(&timed), "{r:?}");
    assert!(
        !d.path().join("all.data.samples").exists(),
        "no bench, no samples file"
    );
    let r = record_the_hook(
        d.path(),
        &["--pid", &pid, "--duration", "500ms"],
        "pid.data",
    );
    assert_eq!(r.code(), Some(0), "{r:?}");
    let _ = work.kill();
    let _ = work.wait();
    for data in ["all.data", "pid.data"] {
        assert_the_workload_ran_the_hook(d.path(), data);
    }
    // The kernel's PID_MAX_LIMIT: in --pid's range, and never a process (pids stay below
    // pid_max, which is at most that).
    let r = run(ebpf_prof(
        &["record", "--pid", "4194304", "--allow-no-bpf"],
        d.path(),
    ));
    usage_error(&r, "no process 4194304");
    let r = run(ebpf_prof(&["record", "--pid", "999999999"], d.path()));
    usage_error(&r, "--pid 999999999 is out of range: give 1 to 4194304");
}

/// `--folded` of a folded file writes the stacks that were read, as every other output is made
/// from them: comments, blank and malformed lines left out, a fractional count read as
/// inferno reads it; `report` counts the same weight.
#[test]
fn folded_output_of_a_folded_input_is_the_stacks_read() {
    let d = tempfile::tempdir().unwrap();
    let text = "# a comment\na;b 3\n\nnot a stack\na;c 2.9\n";
    std::fs::write(d.path().join("f.folded"), text).unwrap();
    let r = run(ebpf_prof(&["flame", "--folded", "f.folded"], d.path()));
    assert_eq!(r.code(), Some(0), "{r:?}");
    assert_eq!(r.stdout(), "a;b 3\na;c 2\n");
    assert!(
        r.stderr().contains("2 line(s) are not folded stacks"),
        "{r:?}"
    );
    let r = run(ebpf_prof(&["report", "--json", "f.folded"], d.path()));
    assert_eq!(r.code(), Some(0), "{r:?}");
    let report: serde_json::Value = serde_json::from_str(&r.stdout()).unwrap();
    assert_eq!(report["total_weight"], 5, "{report}");
}
