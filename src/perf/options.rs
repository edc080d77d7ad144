//! `perf record`'s options as its own parser reads them (tools/lib/subcmd/parse-options.c in
//! the kernel tree), so that `record --perf-arg` passes on only options perf 6.1 knows and none
//! that would move, rotate or multiply its output, open paths of its own as root, run a compiler
//! or copy kallsyms where others can read it. perf reads short options in clusters (`-qo FILE`
//! is `-q -o FILE`; `-ao/path` is `-a -o /path`), takes a value from the rest of the word or the
//! next word, accepts any unambiguous prefix of a long name (`--out` is `--output`), a value
//! after `=` or in the next word, and a `no-` before a name to undo it. An option this list does
//! not hold is refused (an allow list): a newer perf's option cannot slip through unread.

/// Whether an option takes a value, and where perf looks for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Value {
    /// A switch.
    None,
    /// Always: the rest of the short cluster, the text after `=`, or the next word.
    Required,
    /// Only when attached: the rest of the short cluster or the text after `=`.
    Optional,
}

/// What `--perf-arg` may do with an option.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Policy {
    /// Passed on, set or undone.
    Passed,
    /// Never passed on; why.
    Refused(&'static str),
    /// Passed on as given; undoing it (`--no-NAME`, or `--NAME` for a `no-` option) is refused.
    KeptOn(&'static str),
}

/// One option of `perf record`.
struct PerfOption {
    short: Option<char>,
    long: Option<&'static str>,
    value: Value,
    policy: Policy,
}

const OUTPUT: &str =
    "perf's output file is the recording's own (record -o), written in the run's private directory";
const ROTATION: &str =
    "perf would rotate or rename its output, outside the files the run moves into place";
const DIRECTORY: &str =
    "perf would write a directory of files, not the one recording the run moves into place";
const CONTROL: &str = "perf would open the named FIFOs itself, as root, following links";
const COMPILER: &str = "perf would run a compiler of your choosing as root";
const BUILDID_CACHE: &str = "perf would copy /proc/kallsyms, real addresses and all, into $HOME/.debug, where others may read it";

const fn opt(short: Option<char>, long: &'static str, value: Value, policy: Policy) -> PerfOption {
    PerfOption {
        short,
        long: Some(long),
        value,
        policy,
    }
}

/// `perf record`'s options in perf 6.1 (`perf record -h`).
const OPTIONS: &[PerfOption] = &{
    use Policy::*;
    use Value::{None as Switch, Optional, Required};
    [
        opt(Some('a'), "all-cpus", Switch, Passed),
        opt(Some('b'), "branch-any", Switch, Passed),
        opt(Some('B'), "no-buildid", Switch, Passed),
        opt(Some('c'), "count", Required, Passed),
        opt(Some('C'), "cpu", Required, Passed),
        opt(Some('d'), "data", Switch, Passed),
        opt(Some('D'), "delay", Required, Passed),
        opt(Some('e'), "event", Required, Passed),
        opt(Some('F'), "freq", Required, Passed),
        PerfOption {
            short: Some('g'),
            long: None,
            value: Switch,
            policy: Passed,
        },
        opt(Some('G'), "cgroup", Required, Passed),
        opt(Some('I'), "intr-regs", Optional, Passed),
        opt(Some('i'), "no-inherit", Switch, Passed),
        opt(Some('j'), "branch-filter", Required, Passed),
        opt(Some('k'), "clockid", Required, Passed),
        opt(Some('m'), "mmap-pages", Required, Passed),
        opt(Some('N'), "no-buildid-cache", Switch, KeptOn(BUILDID_CACHE)),
        opt(Some('n'), "no-samples", Switch, Passed),
        opt(Some('o'), "output", Required, Refused(OUTPUT)),
        opt(Some('P'), "period", Switch, Passed),
        opt(Some('p'), "pid", Required, Passed),
        opt(Some('q'), "quiet", Switch, Passed),
        opt(Some('R'), "raw-samples", Switch, Passed),
        opt(Some('r'), "realtime", Required, Passed),
        opt(Some('S'), "snapshot", Optional, Passed),
        opt(Some('s'), "stat", Switch, Passed),
        opt(Some('t'), "tid", Required, Passed),
        opt(Some('T'), "timestamp", Switch, Passed),
        opt(Some('u'), "uid", Required, Passed),
        opt(Some('v'), "verbose", Switch, Passed),
        opt(Some('W'), "weight", Switch, Passed),
        opt(Some('z'), "compression-level", Optional, Passed),
        opt(None, "affinity", Required, Passed),
        opt(None, "aio", Optional, Passed),
        opt(None, "all-cgroups", Switch, Passed),
        opt(None, "all-kernel", Switch, Passed),
        opt(None, "all-user", Switch, Passed),
        opt(None, "aux-sample", Optional, Passed),
        opt(None, "buildid-all", Switch, Passed),
        opt(None, "buildid-mmap", Switch, Passed),
        opt(None, "call-graph", Required, Passed),
        opt(None, "clang-opt", Required, Refused(COMPILER)),
        opt(None, "clang-path", Required, Refused(COMPILER)),
        opt(None, "code-page-size", Switch, Passed),
        opt(None, "control", Required, Refused(CONTROL)),
        opt(None, "data-page-size", Switch, Passed),
        opt(None, "debuginfod", Optional, Passed),
        opt(None, "dry-run", Switch, Passed),
        opt(None, "exclude-perf", Switch, Passed),
        opt(None, "filter", Required, Passed),
        opt(None, "group", Switch, Passed),
        opt(None, "kcore", Switch, Refused(DIRECTORY)),
        opt(None, "kernel-callchains", Switch, Passed),
        opt(None, "max-size", Required, Passed),
        opt(None, "mmap-flush", Required, Passed),
        opt(None, "namespaces", Switch, Passed),
        opt(None, "no-bpf-event", Switch, Passed),
        opt(None, "no-buffering", Switch, Passed),
        opt(None, "num-thread-synthesize", Required, Passed),
        opt(None, "off-cpu", Switch, Passed),
        opt(None, "overwrite", Switch, Passed),
        opt(None, "per-thread", Switch, Passed),
        opt(None, "phys-data", Switch, Passed),
        opt(None, "proc-map-timeout", Required, Passed),
        opt(None, "running-time", Switch, Passed),
        opt(None, "sample-cpu", Switch, Passed),
        opt(None, "sample-identifier", Switch, Passed),
        opt(None, "strict-freq", Switch, Passed),
        opt(None, "switch-events", Switch, Passed),
        opt(None, "switch-max-files", Required, Refused(ROTATION)),
        opt(None, "switch-output", Optional, Refused(ROTATION)),
        opt(None, "switch-output-event", Required, Refused(ROTATION)),
        opt(None, "synth", Required, Passed),
        opt(None, "tail-synthesize", Switch, Passed),
        opt(None, "threads", Optional, Refused(DIRECTORY)),
        opt(None, "timestamp-boundary", Switch, Passed),
        opt(None, "timestamp-filename", Switch, Refused(ROTATION)),
        opt(None, "transaction", Switch, Passed),
        opt(None, "user-callchains", Switch, Passed),
        opt(None, "user-regs", Optional, Passed),
        opt(None, "vmlinux", Required, Passed),
    ]
};

/// Why the words given with `--perf-arg` (in order, each one argv word for perf) cannot be
/// passed on, in one line naming the word; `Ok` when every word is an option perf 6.1 knows and
/// may be given, or a value one of them takes.
pub fn check_record_args(words: &[String]) -> Result<(), String> {
    let mut at = 0;
    while at < words.len() {
        let word = &words[at];
        let took_next = if let Some(long) = word.strip_prefix("--") {
            long_option(long, words.get(at + 1).is_some())
        } else if let Some(cluster) = word.strip_prefix('-').filter(|c| !c.is_empty()) {
            short_cluster(cluster, words.get(at + 1).is_some())
        } else {
            Err("not an option of perf record: perf would take it, and what follows, as the command to run instead of the benchmark".to_string())
        }
        .map_err(|why| format!("--perf-arg {word}: {why}"))?;
        at += 1 + usize::from(took_next);
    }
    Ok(())
}

/// `-abc…`: each letter an option; the first that takes a value takes the rest of the word, or
/// (a required value) the next word. Whether the next word was taken.
fn short_cluster(cluster: &str, next: bool) -> Result<bool, String> {
    for (at, letter) in cluster.char_indices() {
        let Some(option) = OPTIONS.iter().find(|o| o.short == Some(letter)) else {
            return Err(format!(
                "perf record has no option -{letter} that ebpf-prof passes on"
            ));
        };
        if let Policy::Refused(why) = option.policy {
            return Err(format!("-{letter}{}: {why}", long_shown(option)));
        }
        let rest = &cluster[at + letter.len_utf8()..];
        match option.value {
            Value::None => continue,
            Value::Optional => return Ok(false),
            Value::Required if !rest.is_empty() => return Ok(false),
            Value::Required if next => return Ok(true),
            Value::Required => return Err(format!("-{letter} takes a value")),
        }
    }
    Ok(false)
}

/// ` (--name)` for an option that has a long name.
fn long_shown(option: &PerfOption) -> String {
    option
        .long
        .map_or_else(String::new, |long| format!(" (--{long})"))
}

/// `--name`, `--name=value`, a prefix of a name, or either undone with `no-`: every option the
/// name could mean is looked at, and one that may not be given refuses the word, however perf
/// would settle it. Whether the next word was taken as the value.
fn long_option(text: &str, next: bool) -> Result<bool, String> {
    if text.is_empty() {
        return Err(
            "ends perf's options: what follows would be run instead of the benchmark".into(),
        );
    }
    let (name, attached) = match text.split_once('=') {
        Some((name, value)) => (name, Some(value)),
        None => (text, None),
    };
    let readings = readings(name);
    for reading in &readings {
        refused(reading)?;
    }
    let chosen = match readings.iter().find(|r| r.exact) {
        Some(exact) => exact,
        None => match readings.as_slice() {
            [only] => only,
            [] => {
                return Err(format!(
                    "perf record has no option --{name} that ebpf-prof passes on"
                ))
            }
            _ => {
                return Err(format!(
                    "--{name} is ambiguous in perf record: give the whole name"
                ))
            }
        },
    };
    let takes_next = !chosen.undone && attached.is_none() && chosen.option.value == Value::Required;
    if takes_next && !next {
        return Err(format!("--{name} takes a value"));
    }
    Ok(takes_next)
}

/// One option a long name could mean, and whether it would set it or undo it.
struct Reading {
    option: &'static PerfOption,
    undone: bool,
    exact: bool,
}

/// Every option `name` could mean in perf's parser: its whole name or a prefix of it, either
/// after `no-` (undone), or, for an option whose name starts with `no-`, without it (undone).
fn readings(name: &str) -> Vec<Reading> {
    let mut found = Vec::new();
    for option in OPTIONS {
        let Some(long) = option.long else { continue };
        let mut forms = vec![(long, false)];
        if let Some(positive) = long.strip_prefix("no-") {
            forms.push((positive, true));
        }
        let negated = format!("no-{long}");
        for (form, undone) in forms {
            if form.starts_with(name) {
                let exact = form == name;
                found.push(Reading {
                    option,
                    undone,
                    exact,
                });
            } else if !undone && negated.starts_with(name) {
                let exact = negated == name;
                found.push(Reading {
                    option,
                    undone: true,
                    exact,
                });
            }
        }
    }
    found
}

/// The reason a reading may not be passed on.
fn refused(reading: &Reading) -> Result<(), String> {
    let long = reading.option.long.unwrap_or_default();
    match reading.option.policy {
        Policy::Refused(why) => Err(format!("--{long}: {why}")),
        Policy::KeptOn(why) if reading.undone => Err(format!("undoes --{long}: {why}")),
        Policy::Passed | Policy::KeptOn(_) => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(line: &str) -> Result<(), String> {
        let words: Vec<String> = line.split(' ').map(String::from).collect();
        check_record_args(&words)
    }

    #[test]
    fn every_spelling_of_an_output_option_is_refused() {
        for line in [
            "-o FILE",
            "-oFILE",
            "-o=FILE",
            "-qo FILE",
            "-ao/path",
            "-aqvo /path",
            "--output FILE",
            "--output=FILE",
            "--out FILE",
            "--out=FILE",
            "--o FILE",
            "--outp=/x",
            "--no-output",
            "--no-out",
            "-e cycles --out FILE",
        ] {
            let refused = check(line).expect_err(line);
            assert!(refused.contains("output"), "{line}: {refused}");
        }
    }

    #[test]
    fn rotation_and_other_files_are_refused() {
        for line in [
            "--switch-output",
            "--switch-output=1s",
            "--switch-out=signal",
            "--switch-max-files 3",
            "--switch-output-event cycles",
            "--timestamp-filename",
            "--timestamp-f",
            "--threads",
            "--threads=cpu",
            "--kcore",
            "--control fifo:/tmp/a,/tmp/b",
            "--control=fd:3",
            "--clang-path /tmp/cc",
            "--clang-opt=-x",
            "--clang /tmp/cc",
            "--buildid-cache",
            "--no-no-buildid-cache",
        ] {
            assert!(check(line).is_err(), "{line} was passed on");
        }
    }

    #[test]
    fn values_are_taken_as_perf_takes_them() {
        // A value word is not read as an option: `-e -o` is the event "-o".
        for line in [
            "-e -o",
            "-e=-o",
            "--event -o",
            "--event=-o",
            "-c 1000",
            "-c1000",
            "-qc 1000",
            "-F99",
            "-g",
            "-qg",
            "-z",
            "-z3",
            "--compression-level",
            "--compression-level=3",
            "--call-graph dwarf",
            "--call-graph=dwarf,4096",
            "--call dwarf",
            "-N",
            "--no-buildid-cache",
            "--no-buildid",
            "--buildid-all",
            "--no-inherit",
            "--inherit",
            "--no-samples",
            "-m 64 -q --all-kernel",
            "--mmap-flush 64",
            "--user-regs=?",
        ] {
            assert_eq!(check(line), Ok(()), "{line}");
        }
    }

    #[test]
    fn words_that_are_no_option_of_perfs_are_refused() {
        for line in [
            "sleep 1",
            "--",
            "-",
            "-Y",
            "-qY",
            "--made-up",
            "--sw",
            "--al",
            "--n",
            "-c",
            "--event",
            "--no-made-up",
        ] {
            assert!(check(line).is_err(), "{line} was passed on");
        }
        let why = check("--al").unwrap_err();
        assert!(why.contains("ambiguous"), "{why}");
        let why = check("-qo FILE").unwrap_err();
        assert!(why.starts_with("--perf-arg -qo: -o (--output): "), "{why}");
    }
}
