//! `overhead --test-run`'s arguments as [`crate::testrun::TestRunOptions`]: the options it
//! shares with `overhead` (`--load`, `--compare`, `--rounds`, `--max-time`, `--cpu`, the
//! priority, `--confidence`, `--seed`, `--json`, the p50 gates) mean the same there.

use super::args::OverheadArgs;
use crate::error::usage;
use crate::testrun::kernel::RunMode;
use crate::testrun::{
    Gates, PacketSource, TestRunOptions, DEFAULT_BATCHES, DEFAULT_BUDGET, DEFAULT_SPAN,
};
use std::time::Duration;

/// The test run's options, or a usage error naming what it needs.
pub fn options(a: OverheadArgs) -> anyhow::Result<TestRunOptions> {
    let Some(object) = a.load else {
        return Err(usage(
            "--test-run needs --load OBJ.bpf.o: the packet program to run",
        ));
    };
    let budget = a.max_time.map_or(DEFAULT_BUDGET, Duration::from_secs_f64);
    Ok(TestRunOptions {
        object,
        compare: a.compare,
        packets: a.pcap.map_or(PacketSource::Builtin, PacketSource::Capture),
        mode: if a.live_frames {
            RunMode::LiveFrames
        } else {
            RunMode::Plain
        },
        batches: a.rounds.unwrap_or(DEFAULT_BATCHES),
        span: if a.rounds.is_some() {
            Duration::ZERO
        } else {
            DEFAULT_SPAN.min(budget)
        },
        budget,
        cpu: a.cpu,
        priority: (!a.no_fifo).then_some(a.priority),
        confidence: a.confidence,
        seed: a.seed.unwrap_or_else(crate::stats::rng::fresh_seed),
        json: a.json,
        gates: Gates {
            max_p50_ns: a.max_p50_ns,
            max_p50_pct: a.max_p50_pct,
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::{Cli, Command};
    use clap::Parser;

    fn parse(args: &[&str]) -> Result<TestRunOptions, String> {
        let mut argv = vec!["ebpf-prof", "overhead"];
        argv.extend_from_slice(args);
        let cli = Cli::try_parse_from(argv).map_err(|e| e.kind().to_string())?;
        match cli.command {
            Command::Overhead(a) => options(*a).map_err(|e| e.to_string()),
            _ => Err("not overhead".into()),
        }
    }

    #[test]
    fn test_run_takes_the_shared_options() {
        let o = parse(&[
            "--test-run",
            "--load",
            "a.bpf.o",
            "--compare",
            "b.bpf.o",
            "--pcap",
            "x.pcap",
            "--rounds",
            "50",
            "--seed",
            "9",
            "--no-fifo",
            "--max-p50-ns",
            "40",
        ])
        .expect("parses");
        assert_eq!(o.compare.as_deref(), Some(std::path::Path::new("b.bpf.o")));
        assert_eq!(o.packets, PacketSource::Capture("x.pcap".into()));
        assert_eq!((o.batches, o.budget, o.seed), (50, DEFAULT_BUDGET, 9));
        assert_eq!(o.span, Duration::ZERO, "--rounds N: N batches");
        assert_eq!(o.priority, None);
        assert_eq!(o.mode, RunMode::Plain);
        assert_eq!(o.gates.max_p50_ns, Some(40.0));
    }

    #[test]
    fn test_run_defaults_to_the_builtin_packets() {
        let o = parse(&[
            "--test-run",
            "--load",
            "a.bpf.o",
            "--live-frames",
            "--max-time",
            "3s",
        ])
        .expect("parses");
        assert_eq!(o.budget, Duration::from_secs(3));
        assert_eq!(o.packets, PacketSource::Builtin);
        assert_eq!(o.mode, RunMode::LiveFrames);
        assert_eq!(o.batches, DEFAULT_BATCHES);
        assert_eq!(o.span, DEFAULT_SPAN, "spread over the default span");
        assert_eq!(o.priority, Some(99));
    }

    #[test]
    fn what_the_test_run_cannot_take_is_refused() {
        for extra in [
            &["--attach-cmd", "x"][..],
            &["--aa"],
            &["--op", "openat"],
            &["--max-p99-ns", "5"],
            &["--sweep", "paths=1,10"],
            &["--paths", "4"],
            &["--workers", "2"],
            &["--path", "/etc/passwd"],
            &["--stats-rounds", "3"],
            &["--attach-timeout", "5s"],
        ] {
            let mut args = vec!["--test-run", "--load", "a.bpf.o"];
            args.extend_from_slice(extra);
            assert!(parse(&args).is_err(), "{extra:?}");
        }
        assert!(
            parse(&["--pcap", "x.pcap", "--load", "a.bpf.o"]).is_err(),
            "--pcap needs --test-run"
        );
        let missing = parse(&["--test-run"]).expect_err("no --load");
        assert!(missing.contains("--test-run needs --load"), "{missing}");
    }
}
