//! Parsing tests: every flag that matters, and clap's own consistency check.

use super::*;
use clap::CommandFactory;
use std::path::PathBuf;

#[test]
fn verify_cli() {
    Cli::command().debug_assert();
}

/// The product's usage line `record ./bench` has no `--`; the bench's own
/// flags must reach the bench, not ebpf-prof.
#[test]
fn regression_record_takes_the_command_with_or_without_dashes() {
    // (argv after `ebpf-prof`, expected command, expected cpu, expected -n)
    type Case<'a> = (&'a [&'a str], &'a [&'a str], Option<u32>, usize);
    let cases: &[Case] = &[
        (&["record", "./bench"], &["./bench"], None, 200_000),
        (
            &["record", "./bench", "-n", "5"],
            &["./bench", "-n", "5"],
            None,
            200_000,
        ),
        (
            &["record", "--cpu", "1", "./bench", "--cpu", "0"],
            &["./bench", "--cpu", "0"],
            Some(1),
            200_000,
        ),
        (
            &["record", "--", "./bench", "-n", "5"],
            &["./bench", "-n", "5"],
            None,
            200_000,
        ),
        (&["record", "-n", "7"], &[], None, 7),
    ];
    for (argv, cmd, cpu, n) in cases {
        let mut full = vec!["ebpf-prof"];
        full.extend_from_slice(argv);
        let c = Cli::try_parse_from(&full).unwrap_or_else(|e| panic!("{argv:?}: {e}"));
        let Command::Record(r) = c.command else {
            panic!()
        };
        assert_eq!(r.command, *cmd, "{argv:?}");
        assert_eq!((r.cpu, r.iterations), (*cpu, *n), "{argv:?}");
    }
    let c = Cli::try_parse_from(["ebpf-prof", "overhead", "--aa", "./b", "-x"]).unwrap();
    let Command::Overhead(o) = c.command else {
        panic!()
    };
    assert_eq!(o.bench, ["./b", "-x"]);
}

#[test]
fn input_positional_or_dash_i() {
    for (argv, want) in [
        (&["report"][..], "perf.data"),
        (&["report", "a.data"][..], "a.data"),
        (&["report", "-i", "b.data"][..], "b.data"),
        (&["flame", "--input", "c.data", "-o", "x.svg"][..], "c.data"),
        (&["annotate"][..], "perf.data"),
        (&["annotate", "d.data"][..], "d.data"),
        (&["annotate", "-i", "e.data"][..], "e.data"),
    ] {
        let mut full = vec!["ebpf-prof"];
        full.extend_from_slice(argv);
        let c = Cli::try_parse_from(&full).unwrap();
        let got = match c.command {
            Command::Report(r) => r.input.path(),
            Command::Flame(f) => f.input.path(),
            Command::Annotate(a) => a.input.path(),
            _ => panic!(),
        };
        assert_eq!(got, PathBuf::from(want), "{argv:?}");
    }
    assert!(Cli::try_parse_from(["ebpf-prof", "report", "a", "-i", "b"]).is_err());
    assert!(Cli::try_parse_from(["ebpf-prof", "annotate", "a", "-i", "b"]).is_err());
}

/// `annotate` reads only a perf.data: its INPUT help says so, not "perf script text, or
/// folded stacks" as the other readers' does.
#[test]
fn annotate_input_help_names_perf_data_only() {
    let mut cmd = Cli::command();
    let annotate = cmd.find_subcommand_mut("annotate").unwrap();
    let help = annotate.render_long_help().to_string();
    assert!(help.contains("A perf.data with BPF program info"), "{help}");
    assert!(!help.contains("folded stacks"), "{help}");
    let report = cmd.find_subcommand_mut("report").unwrap();
    assert!(report
        .render_long_help()
        .to_string()
        .contains("folded stacks"));
}

#[test]
fn completions_and_man_page_come_from_the_definition() {
    for shell in [
        clap_complete::Shell::Bash,
        clap_complete::Shell::Zsh,
        clap_complete::Shell::Fish,
    ] {
        let mut buf = Vec::new();
        clap_complete::generate(shell, &mut Cli::command(), "ebpf-prof", &mut buf);
        let text = String::from_utf8(buf).unwrap();
        assert!(
            text.contains("overhead") && text.contains("--max-time"),
            "{shell:?}"
        );
    }
    let mut man = Vec::new();
    clap_mangen::Man::new(Cli::command())
        .render(&mut man)
        .unwrap();
    let man = String::from_utf8(man).unwrap();
    assert!(
        man.contains(".TH ebpf-prof") && man.contains("overhead"),
        "{}",
        &man[..200]
    );
}

#[test]
fn record_takes_command_after_dashes() {
    let c =
        Cli::try_parse_from(["ebpf-prof", "record", "--cpu", "1", "--", "./bench", "-x"]).unwrap();
    let Command::Record(r) = c.command else {
        panic!()
    };
    assert_eq!(r.cpu, Some(1));
    assert_eq!(r.command, ["./bench", "-x"]);
    assert_eq!(r.priority, 99);
}

#[test]
fn durations() {
    assert_eq!(parse_duration("30s"), Ok(30.0));
    assert_eq!(parse_duration("2m"), Ok(120.0));
    assert_eq!(parse_duration("500ms"), Ok(0.5));
    assert_eq!(parse_duration("1.5"), Ok(1.5));
    assert!(parse_duration("0").is_err());
    assert!(parse_duration("soon").is_err());
    assert!(Cli::try_parse_from(["ebpf-prof", "record", "--all-cpus", "--pid", "1"]).is_err());
    assert!(Cli::try_parse_from(["ebpf-prof", "record", "--all-cpus", "--", "./b"]).is_err());
}

#[test]
fn priority_out_of_range_is_refused() {
    assert!(Cli::try_parse_from(["ebpf-prof", "record", "--priority", "0"]).is_err());
    assert!(Cli::try_parse_from(["ebpf-prof", "record", "--priority", "100"]).is_err());
    assert!(Cli::try_parse_from(["ebpf-prof", "record", "--cpu", "x"]).is_err());
}

#[test]
fn bench_defaults() {
    let c = Cli::try_parse_from(["ebpf-prof", "bench"]).unwrap();
    let Command::Bench(b) = c.command else {
        panic!()
    };
    assert_eq!(
        (b.iterations, b.path.to_str()),
        (100_000, Some("/etc/hostname"))
    );
}
