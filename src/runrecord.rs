//! `perf.data.json`: the conditions of a recording, written by `record` and read back by `flame`
//! (title) and later commands.

use crate::host::sysctl::Saved;
use crate::stats::Summary;
use serde::{Deserialize, Serialize};
use std::path::Path;

/// A BPF function (a program or one of its sub-functions) the recording is for.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct ProgramSeen {
    /// The kernel's program id; `None` for a sub-function.
    pub id: Option<u32>,
    pub name: String,
    pub tag: String,
    /// Address of its symbol in /proc/kallsyms, hex.
    pub addr: String,
}

/// Whether the recording's programs ran under its benchmark: a short run of the built-in
/// bench with run stats on, just before perf started.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ProgramsRan {
    /// The operation the bench timed (`openat`, `exec`, …).
    pub op: String,
    /// The programs' runs per timed operation inside the span, all of them together.
    pub runs_per_op: f64,
    /// Iterations of the short run.
    pub iterations: usize,
    /// The programs and their attach points, `name (point)`.
    pub programs: Vec<String>,
    /// How the operation was chosen, and what fires the programs: one sentence.
    pub why: String,
}

impl ProgramsRan {
    /// Whether the programs ran in at least half the timed operations.
    pub fn fired(&self) -> bool {
        self.runs_per_op >= 0.5
    }
}

/// The perf binary that recorded.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct PerfUsed {
    pub path: String,
    pub version: String,
    pub source: String,
    pub matches_kernel: bool,
}

/// Everything about one recording.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct RunRecord {
    /// The version of this document ([`crate::out::JSON_SCHEMA`]); 0 when read from a sidecar
    /// written before it had one (those still read).
    #[serde(default)]
    pub schema: u32,
    pub tool: String,
    /// Unix time (s) the recording started.
    pub started_at: u64,
    pub kernel: String,
    /// The running kernel's build id in hex, as perf records it for `[kernel.kallsyms]`: the
    /// kallsyms snapshot beside the recording is of this build. `None` in a record written
    /// before it had the field, or where the kernel shows no build id.
    #[serde(default)]
    pub kernel_build_id: Option<String>,
    pub perf: PerfUsed,
    /// The event asked for, and the one perf actually sampled (cpu-clock without a PMU).
    pub event_requested: String,
    pub event_sampled: String,
    pub event_note: String,
    pub freq: u32,
    pub cpu: u32,
    pub cpu_reason: String,
    /// SCHED_FIFO priority, none when run with --no-fifo.
    pub priority: Option<u8>,
    /// Sysctls as found, and what they were set to during the run.
    pub sysctls: Vec<Saved>,
    /// Sysctl values during the run (all of them, changed or not).
    pub sysctls_during: Vec<(String, String)>,
    pub bpf_programs: Vec<ProgramSeen>,
    /// Every BPF program loaded when the recording started (as `bpftool prog show`), with its
    /// attach point and, while run statistics were on, its run count and mean time.
    #[serde(default)]
    pub loaded_programs: Vec<crate::bpf::InventoryProgram>,
    /// The benchmark command.
    pub command: Vec<String>,
    /// The perf command line as printed, for rerunning by hand.
    pub command_line: String,
    pub perf_exit: Option<i32>,
    /// Samples perf reported writing.
    #[serde(default)]
    pub perf_samples: Option<u64>,
    pub interrupted: bool,
    /// Summary of the samples file, when it held latencies.
    pub samples: Option<Summary>,
    /// Whether the programs ran under the built-in bench (checked before perf started); `None`
    /// with a benchmark of one's own, a whole-box or per-process recording, or no program.
    #[serde(default)]
    pub programs_ran: Option<ProgramsRan>,
    /// Which programs `record` loaded from an object file; records written before this field
    /// read as holding none.
    #[serde(default)]
    pub programs_from: ProgramsFrom,
}

/// Whether `record` loaded programs from an object file, and which.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum ProgramsFrom {
    /// It loaded nothing: every program was loaded by something else (a user's loader,
    /// bpftrace, a tool), built in a way not known here.
    #[default]
    AlreadyLoaded,
    /// It loaded these programs (ids) from an object file (`--load`, or `demo`'s bundled
    /// hook); others present were loaded by something else.
    ObjectFile { ids: Vec<u32> },
}

/// Who loaded one program, as far as a recording says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Loader {
    /// `record`, from an object file: built by clang.
    ObjectFile,
    /// Something else, or not known.
    Other,
}

impl ProgramsFrom {
    /// Who loaded program `id`.
    pub fn loader_of(&self, id: u32) -> Loader {
        match self {
            ProgramsFrom::ObjectFile { ids } if ids.contains(&id) => Loader::ObjectFile,
            _ => Loader::Other,
        }
    }
}

impl RunRecord {
    /// Read a run record; `None` when absent or unreadable (a profile recorded elsewhere).
    pub fn load(path: &Path) -> Option<RunRecord> {
        let text = std::fs::read_to_string(path).ok()?;
        serde_json::from_str(&text).ok()
    }

    /// What the folded counts measure: perf script weights each sample by its period, which is
    /// ns for the clock events and cycles for `cycles`.
    pub fn count_unit(&self) -> &'static str {
        count_unit(&self.event_sampled)
    }

    /// A one-line title for graphs: event, kernel, command. The program is named by its file
    /// name; its arguments stay as given, so `--path /etc/hostname` reads as it was typed.
    pub fn title(&self) -> String {
        let mut words = self.command.iter();
        let program = words.next().map(|first| short(first));
        let cmd = program
            .into_iter()
            .chain(words.map(String::as_str))
            .collect::<Vec<_>>()
            .join(" ");
        format!("{} on Linux {} — {}", self.event_sampled, self.kernel, cmd)
    }
}

/// The file name of a program given by its path, the word itself otherwise.
fn short(arg: &str) -> &str {
    if arg.starts_with('/') {
        arg.rsplit('/').next().unwrap_or(arg)
    } else {
        arg
    }
}

/// The unit of a sample's period for an event name.
pub fn count_unit(event: &str) -> &'static str {
    if event.contains("clock") {
        "ns"
    } else if event.contains("cycles") {
        "cycles"
    } else {
        "events"
    }
}

/// The sample count in perf record's closing line: `[ perf record: Captured and wrote 0.079 MB
/// perf.data (584 samples) ]`.
pub fn samples_written(perf_stderr: &str) -> Option<u64> {
    let line = perf_stderr
        .lines()
        .rev()
        .find(|l| l.contains("Captured and wrote"))?;
    let open = line.rfind('(')?;
    line[open + 1..].split_whitespace().next()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn perf_closing_line() {
        let e = "[ perf record: Woken up 1 times to write data ]\n[ perf record: Captured and wrote 0.079 MB ebpf-prof-demo/perf.data (584 samples) ]\n";
        assert_eq!(samples_written(e), Some(584));
        assert_eq!(samples_written("nothing"), None);
        assert_eq!(count_unit("cpu-clock:k"), "ns");
        assert_eq!(count_unit("cycles:k"), "cycles");
    }

    #[test]
    fn title_shows_arguments_as_given() {
        let text = include_str!("../fixtures/folded/sample-hook.folded.json");
        let mut record: RunRecord = serde_json::from_str(text).unwrap();
        record.command = ["/usr/bin/ebpf-prof", "bench", "--path", "/etc/hostname"]
            .map(String::from)
            .to_vec();
        let title = record.title();
        assert!(
            title.ends_with(" — ebpf-prof bench --path /etc/hostname"),
            "{title}"
        );
    }

    #[test]
    fn schema_is_written_and_old_sidecars_without_it_still_read() {
        let dir = tempfile::tempdir().unwrap();
        let old = dir.path().join("old.json");
        std::fs::write(
            &old,
            include_str!("../fixtures/folded/sample-hook.folded.json"),
        )
        .unwrap();
        assert!(!std::fs::read_to_string(&old)
            .unwrap()
            .contains("\"schema\""));
        let mut r = RunRecord::load(&old).expect("a sidecar from before `schema` reads");
        assert_eq!(r.schema, 0);
        r.schema = crate::out::JSON_SCHEMA;
        let text = serde_json::to_string_pretty(&r).unwrap();
        assert!(text.starts_with("{\n  \"schema\": 1,"), "{text}");
        let new = dir.path().join("new.json");
        std::fs::write(&new, text).unwrap();
        assert_eq!(RunRecord::load(&new), Some(r));
    }
}
