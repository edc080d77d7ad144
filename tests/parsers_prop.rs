//! Property tests of every parser of outside text, seeded from the fixtures: arbitrary bytes,
//! fixture lines with bytes flipped, cut or spliced. None may panic, and the ones with an
//! inverse round-trip. Case count: PROPTEST_CASES (default here 2000 per property), so CI runs a
//! bounded number; `scripts/fuzz.sh` runs many more and prints executions and time.

use ebpf_prof::bench::{parse_samples, write_samples};
use ebpf_prof::host::{cpu, kallsyms, security};
use ebpf_prof::perf::version::{kernel_major_minor, parse_perf_version};
use ebpf_prof::profile::folded;
use ebpf_prof::profile::stacks::Stacks;
use ebpf_prof::runrecord::{samples_written, RunRecord};
use proptest::prelude::*;

const KALLSYMS: &str = include_str!("../fixtures/kallsyms/bpf-excerpt.txt");
const SCRIPT: &str = include_str!("../fixtures/perf-script/openat-hook.txt");
const VERSION: &str = include_str!("../fixtures/perf/versions/debian-12.txt");

fn config() -> ProptestConfig {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|c| c.parse().ok())
        .unwrap_or(2000);
    ProptestConfig {
        cases,
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

/// A fixture text with a few of its bytes replaced, removed or duplicated.
fn mutated(seed: &'static str) -> impl Strategy<Value = String> {
    let len = seed.len().max(1);
    proptest::collection::vec((0..len, any::<u8>(), 0u8..3), 0..12).prop_map(move |edits| {
        let mut b = seed.as_bytes().to_vec();
        for (pos, byte, kind) in edits {
            let p = pos.min(b.len().saturating_sub(1));
            match kind {
                0 if !b.is_empty() => b[p] = byte,
                1 if !b.is_empty() => {
                    b.remove(p);
                }
                _ => b.insert(p, byte),
            }
        }
        String::from_utf8_lossy(&b).into_owned()
    })
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn kallsyms_lines_never_panic(s in mutated(KALLSYMS)) {
        let syms = kallsyms::parse(&s);
        for p in kallsyms::bpf_programs(&syms) {
            prop_assert_eq!(p.tag.len(), 16);
        }
        let _ = kallsyms::addresses_hidden(&syms);
    }

    #[test]
    fn kallsyms_arbitrary_text(s in ".{0,200}") {
        let _ = kallsyms::parse(&s);
        let _ = kallsyms::split_bpf_symbol(&s);
    }

    #[test]
    fn perf_version_never_panics(s in mutated(VERSION), t in ".{0,80}") {
        let _ = parse_perf_version(&s);
        let _ = parse_perf_version(&t);
        let _ = kernel_major_minor(&t);
    }

    #[test]
    fn perf_script_text_collapses_or_errors(s in mutated(SCRIPT)) {
        if let Ok(out) = folded::collapse_perf_script(s.as_bytes()) {
            if let Ok(f) = Stacks::parse(&String::from_utf8_lossy(&out)) {
                prop_assert_eq!(f.skipped, 0, "the collapser's own output parses");
            }
        }
        let _ = folded::detect(s.as_bytes());
    }

    #[test]
    fn folded_round_trips(stacks in proptest::collection::vec((proptest::collection::vec("[a-z_\\[\\]0-9]{1,12}", 1..6), 1u64..1_000_000), 0..20)) {
        let text: String = stacks.iter().map(|(f, c)| format!("{} {c}\n", f.join(";"))).collect();
        let f = Stacks::parse(&text).unwrap();
        prop_assert_eq!(f.skipped, 0);
        prop_assert_eq!(f.to_text(), text);
        prop_assert_eq!(f.total(), stacks.iter().map(|s| s.1).sum::<u64>());
    }

    #[test]
    fn folded_arbitrary_text(s in "(.{0,40}\n){0,8}", bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
        if let Ok(f) = Stacks::parse(&s) {
            prop_assert!(f.stacks.len() + f.skipped <= s.lines().count());
        }
        let _ = folded::detect(&bytes);
        let _ = folded::sanitize(&String::from_utf8_lossy(&bytes));
    }

    #[test]
    fn samples_round_trip(v in proptest::collection::vec(any::<u64>(), 1..200)) {
        let mut buf = Vec::new();
        write_samples(&mut buf, &v).unwrap();
        prop_assert_eq!(parse_samples(&String::from_utf8(buf).unwrap(), "p").unwrap(), v);
    }

    #[test]
    fn samples_garbage_is_an_error_not_a_panic(s in ".{0,100}") {
        let _ = parse_samples(&s, "p");
    }

    #[test]
    fn run_json_never_panics(s in ".{0,200}") {
        let _ = serde_json::from_str::<RunRecord>(&s);
        let _ = samples_written(&s);
    }

    #[test]
    fn small_sysfs_parsers(s in ".{0,40}") {
        if let Some(v) = cpu::parse_cpulist(&s) {
            prop_assert!(v.len() < 1 << 20 || s.contains('-'));
        }
        let _ = security::parse_lockdown(&s);
        let _ = security::parse_cap_eff(&s);
    }

    #[test]
    fn cpulists_round_trip(cpus in proptest::collection::btree_set(0u32..512, 0..40)) {
        let text = cpus.iter().map(u32::to_string).collect::<Vec<_>>().join(",");
        prop_assert_eq!(cpu::parse_cpulist(&text).unwrap(), cpus.into_iter().collect::<Vec<_>>());
    }
}

/// inferno's collapse of `text` choosing the event itself, as `folded::collapse_perf_script`
/// called it before it chose the event: `None` where inferno panics.
fn inferno_alone(text: &str) -> Option<Vec<u8>> {
    use inferno::collapse::perf::{Folder, Options};
    use inferno::collapse::Collapse;
    let mut opts = Options::default();
    opts.annotate_kernel = true;
    opts.annotate_jit = true;
    let run = || {
        let mut out = Vec::new();
        Folder::from(opts)
            .collapse(text.as_bytes(), &mut out)
            .ok()?;
        Some(out)
    };
    std::panic::catch_unwind(run).ok().flatten()
}

/// One block of `perf script`-like text: a sample of one of three events, a header naming no
/// event, a line that is no header, a comment, or a blank line.
fn block() -> impl Strategy<Value = String> {
    let frame = "\tffffffff81000130 f+0x76 ([kernel.kallsyms])\n\tffffffff81000200 g+0x1 ([kernel.kallsyms])\n";
    prop_oneof![
        (0usize..3, 1u32..9).prop_map(move |(e, p)| {
            let event = ["cpu-clock:k", "task-clock", "cycles:k"][e];
            format!("bench 7 1.{p}: {p} {event}:\n{frame}\n")
        }),
        Just(format!("bench 7   1\n{frame}\n")),
        Just("bench 1.5:\n".to_string()),
        Just("# a comment\n".to_string()),
        Just("\n".to_string()),
        Just(format!("x 3 2.0: 4 cycles:k:\n{frame}")),
    ]
}

proptest! {
    #![proptest_config(config())]

    /// Where inferno picked the event itself without panicking, the event chosen for it now is
    /// the same: the same folded text.
    #[test]
    fn perf_script_event_choice_is_inferno_s(blocks in proptest::collection::vec(block(), 0..8)) {
        let text: String = blocks.concat();
        let ours = folded::collapse_perf_script(text.as_bytes());
        if let Some(theirs) = inferno_alone(&text) {
            prop_assert_eq!(ours.unwrap(), theirs, "{:?}", text);
        }
    }
}

/// Folded-looking text: frames of a few shapes (BPF, kernel, line frames, odd bytes), counts
/// that may be zero, huge or no number at all.
fn folded_text() -> impl Strategy<Value = String> {
    let frame = prop_oneof![
        Just("bpf_prog_0123456789abcdef_f".to_string()),
        Just("do_syscall_64_[k]".to_string()),
        Just("hook.bpf.c:42".to_string()),
        Just("[unknown]".to_string()),
        ".{0,12}",
    ];
    let count = prop_oneof![
        (0u64..1000).prop_map(|c| c.to_string()),
        Just("18446744073709551615".to_string()),
        Just("1.5".to_string()),
        Just(String::new()),
    ];
    proptest::collection::vec((proptest::collection::vec(frame, 0..6), count), 0..12).prop_map(
        |lines| {
            lines
                .into_iter()
                .map(|(f, c)| format!("{} {c}\n", f.join(";")))
                .collect()
        },
    )
}

proptest! {
    #![proptest_config(config())]

    /// The renderers and exporters take whatever folded text a user hands `flame` and `diff`
    /// without panicking (inferno's included): an output or an error.
    #[test]
    fn flame_and_diff_render_any_folded_text(a in folded_text(), b in folded_text()) {
        let opts = ebpf_prof::flame::FlameOptions {
            title: "t".into(),
            subtitle: None,
            count_name: "samples".into(),
        };
        // Past this point the loader's contract holds: every input's counts add up below 2^64
        // (checked as each profile is parsed; docs/bad-input.md rows 39-43).
        let (Ok(parsed), Ok(other)) = (Stacks::parse(&a), Stacks::parse(&b)) else {
            return Ok(());
        };
        let _ = ebpf_prof::flame::render(&parsed, &opts, Vec::new());
        let _ = ebpf_prof::flame::render_diff(&parsed, &other, "t", "samples", Vec::new());
        let _ = ebpf_prof::flame::export::pprof(&parsed, &ebpf_prof::flame::export::Weights::SAMPLES, "t");
        let _ = ebpf_prof::flame::export::speedscope(&parsed, "samples", "t");
        // report's reading and diff --text of the same.
        let d = ebpf_prof::report::delta::deltas(&parsed, &other);
        let _ = ebpf_prof::report::delta::table(&d, 5);
        let _ = ebpf_prof::report::delta::json(&d, 5);
        let p = ebpf_prof::profile::Profile {
            stacks: parsed,
            record: None,
            kind: folded::InputKind::Folded,
            samples: None,
            kernel_symbols: Default::default(),
            sampled: Default::default(),
            names: Default::default(),
        };
        let none = std::path::Path::new("/nonexistent/x.folded");
        if let Ok(r) = ebpf_prof::report::report_on(&p, none, 5, None) {
            let _ = r.to_text();
        }
    }
}
