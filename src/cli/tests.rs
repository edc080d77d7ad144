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

const SECURITY: &str = include_str!("../../docs/security.md");

/// A row of the "Option ranges" table of docs/security.md.
#[derive(Debug)]
struct RangeRow {
    commands: Vec<String>,
    /// The long names of its options, without `--`.
    options: Vec<String>,
    range: String,
}

fn range_rows() -> Vec<RangeRow> {
    let section = SECURITY
        .split("## Option ranges")
        .nth(1)
        .expect("docs/security.md has an Option ranges section");
    section
        .lines()
        .skip_while(|l| !l.starts_with("| command |"))
        .skip(2)
        .take_while(|l| l.starts_with('|'))
        .map(|line| {
            let cells: Vec<&str> = line.trim_matches('|').split(" | ").map(str::trim).collect();
            assert_eq!(cells.len(), 4, "{line}");
            RangeRow {
                commands: cells[0].split(", ").map(String::from).collect(),
                options: cells[1]
                    .split(", ")
                    .filter_map(|o| o.trim_matches('`').strip_prefix("--"))
                    .map(String::from)
                    .collect(),
                range: cells[2].to_string(),
            }
        })
        .collect()
}

/// The table names every option of every subcommand, and nothing that is not one.
#[test]
fn every_option_has_a_range_row() {
    let rows = range_rows();
    let cmd = Cli::command();
    let mut missing = Vec::new();
    let mut listed = std::collections::HashSet::new();
    for sub in cmd.get_subcommands() {
        for arg in sub.get_arguments().filter(|a| !a.is_hide_set()) {
            let Some(long) = arg.get_long() else { continue };
            if ["help", "version"].contains(&long) {
                continue;
            }
            let name = sub.get_name();
            let row = rows.iter().any(|r| {
                r.commands.iter().any(|c| c == name) && r.options.iter().any(|o| o == long)
            });
            if !row {
                missing.push(format!("{name} --{long}"));
            }
            listed.insert((name.to_string(), long.to_string()));
        }
    }
    assert!(missing.is_empty(), "options without a row: {missing:?}");
    for r in &rows {
        for c in &r.commands {
            for o in &r.options {
                assert!(
                    listed.contains(&(c.clone(), o.clone())),
                    "the table names {c} --{o}, which is no option"
                );
            }
        }
    }
}

/// Values a numeric range takes and refuses, from how the table writes it.
fn values_of(range: &str) -> (Vec<String>, Vec<String>) {
    let mut refused: Vec<String> = ["NaN", "inf", "-inf", "x"].map(String::from).to_vec();
    if let Some((low, high)) = range.split_once(" to ") {
        let (low, high): (u64, u64) = (low.parse().unwrap(), high.parse().unwrap());
        refused.push(low.checked_sub(1).map_or("-1".into(), |n| n.to_string()));
        refused.extend(high.checked_add(1).map(|n| n.to_string()));
        return (vec![low.to_string(), high.to_string()], refused);
    }
    let (open, inner) = range.split_at(1);
    let (inner, close) = inner.split_at(inner.len() - 1);
    let (low, high) = inner.split_once(", ").unwrap();
    let seconds = |t: &str| parse_duration(t).unwrap_or(0.0);
    let (low_x, high_x): (f64, f64) = match high.parse::<f64>() {
        Ok(h) => (low.parse().unwrap(), h),
        Err(_) => (seconds(low), seconds(high)),
    };
    if low_x > 0.0 {
        // A duration's shortest: half of it is refused.
        refused.push((low_x / 2.0).to_string());
    }
    let (mut taken, mut below_above) = (Vec::new(), Vec::new());
    let mut end = |x: f64, included: bool| match included {
        true => taken.push(x.to_string()),
        false => below_above.push(x.to_string()),
    };
    end(low_x, open == "[");
    end(high_x, close == "]");
    refused.extend(below_above);
    refused.push((low_x - 1.0).to_string());
    refused.push((high_x * 2.0 + 1.0).to_string());
    (taken, refused)
}

/// Each numeric row's range is the parser's: its ends are taken or refused as written, and 0,
/// one past the top, NaN, the infinities and −1 are refused where outside.
#[test]
fn option_ranges_table_is_enforced() {
    let mut wrong = Vec::new();
    for row in range_rows().iter().filter(|r| r.range != "—") {
        let (taken, refused) = values_of(&row.range);
        for (command, option) in row
            .commands
            .iter()
            .flat_map(|c| row.options.iter().map(move |o| (c, o)))
        {
            let parses = |value: &str| {
                let mut argv = vec!["ebpf-prof".to_string(), command.clone()];
                if command == "diff" {
                    argv.extend(["a".into(), "b".into()]);
                }
                argv.push(format!("--{option}={value}"));
                Cli::try_parse_from(&argv).is_ok()
            };
            wrong.extend(
                taken
                    .iter()
                    .filter(|v| !parses(v))
                    .map(|v| format!("{command} --{option}={v} refused")),
            );
            wrong.extend(
                refused
                    .iter()
                    .filter(|v| parses(v))
                    .map(|v| format!("{command} --{option}={v} taken")),
            );
        }
    }
    assert!(wrong.is_empty(), "{wrong:#?}");
}
