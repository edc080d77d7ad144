//! Folded stacks in the formats other profilers read, so BPF profiles go into the tools a
//! team already runs:
//!
//! - **pprof**: a gzipped `profile.proto` (`go tool pprof`, Parca, Pyroscope, Grafana),
//!   encoded with prost from the message definitions below (field numbers of
//!   `github.com/google/pprof/proto/profile.proto`). One function and location per distinct
//!   frame; each location sits in a mapping named for its kind (`[bpf]`, `[kernel.kallsyms]`,
//!   `[user]`, `[unknown]`), so BPF frames can be told apart and keep their program names;
//!   each sample carries a `comm` label (the command, the folded stack's root) and, when it
//!   passes through a BPF program, a `bpf` label naming the innermost one.
//! - **speedscope**: the sampled-profile JSON of speedscope.app (the Firefox profiler imports
//!   it too); the command stays the root frame; BPF and kernel frames name their `file` as
//!   `[bpf]` / `[kernel.kallsyms]`.
//!
//! Both keep the sample weights of the folded stacks (ns for cpu-clock, cycles, or counts).

use crate::profile::frames::Kind;
use crate::profile::stacks::{Frame, FrameId, Stacks};
use anyhow::{Context, Result};
use std::collections::HashMap;
use std::io::Write;

/// What `flame` writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Svg,
    Folded,
    Pprof,
    Speedscope,
}

impl Format {
    /// Whether the output is binary (refused on a terminal).
    pub fn is_binary(self) -> bool {
        self == Format::Pprof
    }
}

/// The mapping a frame's location belongs to, by the frame's kind. The command's own frames
/// come first: pprof takes the first mapping for the profiled program's.
fn mapping_of(kind: Kind) -> (u64, &'static str) {
    match kind {
        Kind::Other => (1, "[user]"),
        Kind::Kernel => (2, "[kernel.kallsyms]"),
        Kind::Program | Kind::Glue => (3, "[bpf]"),
        Kind::Unresolved => (4, "[unknown]"),
    }
}

/// The sample type pprof and speedscope name for a count unit (`ns`, `cycles`, `events`,
/// `samples`), as Go's CPU profiles do (`cpu`/`nanoseconds`).
fn unit_names(count_unit: &str) -> (&'static str, &'static str) {
    match count_unit {
        "ns" => ("cpu", "nanoseconds"),
        "cycles" => ("cycles", "count"),
        "samples" => ("samples", "count"),
        _ => ("events", "count"),
    }
}

/// What the counts of the stacks weigh, for the exporters.
#[derive(Debug, Clone, Copy)]
pub struct Weights<'a> {
    /// The unit of each stack's count: `ns`, `cycles` or `events` (sample periods), or
    /// `samples` (each count is a number of samples).
    pub unit: &'a str,
    /// Samples behind each stack, in their order, when the reader counted them.
    pub per_stack: Option<&'a [u64]>,
}

impl Weights<'_> {
    /// Counts that are numbers of samples.
    pub const SAMPLES: Weights<'static> = Weights {
        unit: "samples",
        per_stack: None,
    };
}

/// The messages of `profile.proto` this exporter fills.
pub mod proto {
    /// `perftools.profiles.Profile`.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Profile {
        #[prost(int64, tag = "12")]
        pub period: i64,
        #[prost(message, repeated, tag = "1")]
        pub sample_type: Vec<ValueType>,
        #[prost(message, repeated, tag = "2")]
        pub sample: Vec<Sample>,
        #[prost(message, repeated, tag = "3")]
        pub mapping: Vec<Mapping>,
        #[prost(message, repeated, tag = "4")]
        pub location: Vec<Location>,
        #[prost(message, repeated, tag = "5")]
        pub function: Vec<Function>,
        #[prost(string, repeated, tag = "6")]
        pub string_table: Vec<String>,
        #[prost(message, optional, tag = "11")]
        pub period_type: Option<ValueType>,
        #[prost(int64, repeated, tag = "13")]
        pub comment: Vec<i64>,
    }
    /// `ValueType`.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct ValueType {
        #[prost(int64, tag = "1")]
        pub r#type: i64,
        #[prost(int64, tag = "2")]
        pub unit: i64,
    }
    /// `Sample`: location ids leaf first.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Sample {
        #[prost(uint64, repeated, tag = "1")]
        pub location_id: Vec<u64>,
        #[prost(int64, repeated, tag = "2")]
        pub value: Vec<i64>,
        #[prost(message, repeated, tag = "3")]
        pub label: Vec<Label>,
    }
    /// `Label`.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Label {
        #[prost(int64, tag = "1")]
        pub key: i64,
        #[prost(int64, tag = "2")]
        pub str: i64,
    }
    /// `Mapping`.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Mapping {
        #[prost(uint64, tag = "1")]
        pub id: u64,
        #[prost(int64, tag = "5")]
        pub filename: i64,
        #[prost(bool, tag = "7")]
        pub has_functions: bool,
    }
    /// `Location`.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Location {
        #[prost(uint64, tag = "1")]
        pub id: u64,
        #[prost(uint64, tag = "2")]
        pub mapping_id: u64,
        #[prost(message, repeated, tag = "4")]
        pub line: Vec<Line>,
    }
    /// `Line`.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Line {
        #[prost(uint64, tag = "1")]
        pub function_id: u64,
    }
    /// `Function`.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Function {
        #[prost(uint64, tag = "1")]
        pub id: u64,
        #[prost(int64, tag = "2")]
        pub name: i64,
        #[prost(int64, tag = "3")]
        pub system_name: i64,
    }
}

/// pprof's string table: index 0 is "".
#[derive(Default)]
struct Strings {
    table: Vec<String>,
    index: HashMap<String, i64>,
}

impl Strings {
    fn id(&mut self, s: &str) -> i64 {
        if self.table.is_empty() {
            self.table.push(String::new());
            self.index.insert(String::new(), 0);
        }
        if let Some(&i) = self.index.get(s) {
            return i;
        }
        let i = self.table.len() as i64;
        self.table.push(s.to_string());
        self.index.insert(s.to_string(), i);
        i
    }
}

/// The samples behind each stack, when they were counted for every one of them.
fn per_stack<'w>(folded: &Stacks, weights: &Weights<'w>) -> Option<&'w [u64]> {
    weights
        .per_stack
        .filter(|n| weights.unit != "samples" && n.len() == folded.stacks.len())
}

/// Go's CPU-profile convention: `samples/count` and the weight (`cpu/nanoseconds` for a
/// clock event) when both are known, the weight as the period type, and the mean period.
fn sample_types(p: &mut proto::Profile, s: &mut Strings, folded: &Stacks, weights: &Weights) {
    let (ty, unit) = unit_names(weights.unit);
    let weight = proto::ValueType {
        r#type: s.id(ty),
        unit: s.id(unit),
    };
    if let Some(counts) = per_stack(folded, weights) {
        let samples: u64 = counts.iter().sum();
        p.sample_type.push(proto::ValueType {
            r#type: s.id("samples"),
            unit: s.id("count"),
        });
        p.period = i64::try_from(folded.total().checked_div(samples).unwrap_or(0)).unwrap_or(0);
    } else if weights.unit == "samples" {
        p.period = 1;
    }
    p.sample_type.push(weight.clone());
    p.period_type = Some(weight);
}

/// The name of the command most of the weight is in: the stacks' heaviest root.
fn main_command(folded: &Stacks) -> &str {
    let mut by_root: HashMap<&str, u64> = HashMap::new();
    for st in &folded.stacks {
        if let Some(&root) = st.frames.first() {
            *by_root.entry(&folded.frame(root).name).or_default() += st.count;
        }
    }
    by_root
        .into_iter()
        .max_by_key(|&(root, weight)| (weight, std::cmp::Reverse(root)))
        .map_or("[user]", |(root, _)| root)
}

/// The four mappings, in the order of [`mapping_of`]'s ids.
fn add_mappings(p: &mut proto::Profile, s: &mut Strings, folded: &Stacks) {
    let names_of_mappings = [
        main_command(folded),
        "[kernel.kallsyms]",
        "[bpf]",
        "[unknown]",
    ];
    for (id, name) in (1..).zip(names_of_mappings) {
        p.mapping.push(proto::Mapping {
            id,
            filename: s.id(name),
            has_functions: true,
        });
    }
}

/// Build the pprof profile of the stacks, weighed as `weights` says.
pub fn pprof_profile(folded: &Stacks, weights: &Weights, comment: &str) -> proto::Profile {
    let mut s = Strings::default();
    let mut p = proto::Profile::default();
    sample_types(&mut p, &mut s, folded, weights);
    add_mappings(&mut p, &mut s, folded);
    let (comm_key, bpf_key) = (s.id("comm"), s.id("bpf"));
    let mut locations: HashMap<FrameId, u64> = HashMap::new();
    let counts = per_stack(folded, weights);
    for (i, st) in folded.stacks.iter().enumerate() {
        let Some((&comm, frames)) = st.frames.split_first() else {
            continue;
        };
        let weight = i64::try_from(st.count).unwrap_or(i64::MAX);
        let value = match counts {
            Some(n) => vec![i64::try_from(n[i]).unwrap_or(i64::MAX), weight],
            None => vec![weight],
        };
        let mut sample = proto::Sample {
            value,
            label: vec![proto::Label {
                key: comm_key,
                str: s.id(&folded.frame(comm).name),
            }],
            ..Default::default()
        };
        for &frame in frames.iter().rev() {
            let id = match locations.get(&frame) {
                Some(&id) => id,
                None => new_location(&mut p, &mut s, folded.frame(frame)),
            };
            locations.insert(frame, id);
            sample.location_id.push(id);
        }
        let innermost_program = frames
            .iter()
            .rev()
            .map(|&id| folded.frame(id))
            .find(|frame| frame.kind == Kind::Program);
        if let Some(program) = innermost_program {
            sample.label.push(proto::Label {
                key: bpf_key,
                str: s.id(&program.display()),
            });
        }
        p.sample.push(sample);
    }
    if !comment.is_empty() {
        p.comment.push(s.id(comment));
    }
    p.string_table = s.table;
    p
}

/// A new function and location for `frame`; returns the location's id.
fn new_location(p: &mut proto::Profile, s: &mut Strings, frame: &Frame) -> u64 {
    let id = p.location.len() as u64 + 1;
    p.function.push(proto::Function {
        id,
        name: s.id(frame.bare()),
        system_name: s.id(&frame.name),
    });
    p.location.push(proto::Location {
        id,
        mapping_id: mapping_of(frame.kind).0,
        line: vec![proto::Line { function_id: id }],
    });
    id
}

/// The gzipped pprof bytes of folded stacks.
pub fn pprof(folded: &Stacks, weights: &Weights, comment: &str) -> Result<Vec<u8>> {
    use prost::Message;
    let raw = pprof_profile(folded, weights, comment).encode_to_vec();
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gz.write_all(&raw)
        .context("cannot compress the pprof profile")?;
    gz.finish().context("cannot compress the pprof profile")
}

/// The speedscope JSON of folded stacks.
pub fn speedscope(folded: &Stacks, count_unit: &str, name: &str) -> Result<Vec<u8>> {
    let mut frames: Vec<serde_json::Value> = Vec::new();
    let mut index: HashMap<FrameId, usize> = HashMap::new();
    let mut samples = Vec::new();
    let mut weights = Vec::new();
    for st in &folded.stacks {
        let ids: Vec<usize> = st
            .frames
            .iter()
            .map(|&id| {
                *index.entry(id).or_insert_with(|| {
                    frames.push(speedscope_frame(folded.frame(id)));
                    frames.len() - 1
                })
            })
            .collect();
        samples.push(ids);
        weights.push(st.count);
    }
    let total = weights
        .iter()
        .try_fold(0u64, |a, &w| a.checked_add(w))
        .ok_or_else(|| anyhow::anyhow!("the counts add up past 2^64: this is not a profile"))?;
    let unit = match unit_names(count_unit).1 {
        "nanoseconds" => "nanoseconds",
        _ => "none",
    };
    let doc = serde_json::json!({
        "$schema": "https://www.speedscope.app/file-format-schema.json",
        "exporter": concat!("ebpf-prof ", env!("CARGO_PKG_VERSION")),
        "name": name,
        "activeProfileIndex": 0,
        "shared": { "frames": frames },
        "profiles": [{
            "type": "sampled",
            "name": name,
            "unit": unit,
            "startValue": 0,
            "endValue": total,
            "samples": samples,
            "weights": weights,
        }],
    });
    let mut out = serde_json::to_vec(&doc)?;
    out.push(b'\n');
    Ok(out)
}

/// A speedscope frame: BPF and kernel frames name their mapping as their file.
fn speedscope_frame(frame: &Frame) -> serde_json::Value {
    match frame.kind {
        Kind::Program | Kind::Glue | Kind::Kernel => {
            serde_json::json!({ "name": frame.bare(), "file": mapping_of(frame.kind).1 })
        }
        _ => serde_json::json!({ "name": frame.bare() }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use prost::Message;
    use std::io::Read;

    const FOLDED: &str = "bench;entry_SYSCALL_64_[k];trace_call_bpf_[k];bpf_prog_0123456789abcdef_hook;htab_map_hash_[k] 30\n\
                          bench;entry_SYSCALL_64_[k];do_sys_openat2_[k] 50\n\
                          bench;main;[unknown] 20\n";

    #[test]
    fn pprof_round_trips_with_bpf_frames_marked() {
        let f = Stacks::parse(FOLDED).unwrap();
        let per_stack = [3, 5, 2];
        let weights = Weights {
            unit: "ns",
            per_stack: Some(&per_stack),
        };
        let gz = pprof(&f, &weights, "test").unwrap();
        let mut raw = Vec::new();
        flate2::read::GzDecoder::new(&gz[..])
            .read_to_end(&mut raw)
            .unwrap();
        let p = proto::Profile::decode(&raw[..]).unwrap();
        let st = |i: i64| p.string_table[i as usize].as_str();
        assert_eq!(st(0), "");
        // Go's CPU-profile convention: samples/count, then the weight, which is the period's
        // type; the period is the mean.
        let types: Vec<(&str, &str)> = p
            .sample_type
            .iter()
            .map(|t| (st(t.r#type), st(t.unit)))
            .collect();
        assert_eq!(types, [("samples", "count"), ("cpu", "nanoseconds")]);
        let period_type = p.period_type.as_ref().unwrap();
        assert_eq!((st(period_type.r#type), p.period), ("cpu", 10));
        assert_eq!(p.sample.len(), 3);
        let total = |i: usize| p.sample.iter().map(|s| s.value[i]).sum::<i64>();
        assert_eq!((total(0), total(1)), (10, 100));
        assert_eq!(
            st(p.mapping[0].filename),
            "bench",
            "the command's mapping first"
        );
        // The first sample: leaf first, the BPF program in the [bpf] mapping, labelled.
        let s0 = &p.sample[0];
        let loc = |id: u64| &p.location[id as usize - 1];
        let func = |id: u64| &p.function[loc(id).line[0].function_id as usize - 1];
        assert_eq!(st(func(s0.location_id[0]).name), "htab_map_hash");
        let prog = s0.location_id[1];
        assert_eq!(st(func(prog).name), "bpf_prog_0123456789abcdef_hook");
        let m = &p.mapping[loc(prog).mapping_id as usize - 1];
        assert_eq!(st(m.filename), "[bpf]");
        let labels: Vec<(&str, &str)> = s0.label.iter().map(|l| (st(l.key), st(l.str))).collect();
        assert_eq!(labels, [("comm", "bench"), ("bpf", "hook")]);
        assert!(
            p.sample[1].label.iter().all(|l| st(l.key) != "bpf"),
            "no BPF on that stack"
        );
        assert_eq!(p.location.len(), 7, "one location per distinct frame");
    }

    /// Folded stacks count samples: one sample type, period 1; a weight whose samples were
    /// not counted is the only type, named for its unit.
    #[test]
    fn pprof_of_sample_counts_or_uncounted_weights_has_one_type() {
        let f = Stacks::parse(FOLDED).unwrap();
        let p = pprof_profile(&f, &Weights::SAMPLES, "");
        let st = |i: i64| p.string_table[i as usize].as_str();
        assert_eq!(p.sample_type.len(), 1);
        assert_eq!((st(p.sample_type[0].r#type), p.period), ("samples", 1));
        let cycles = Weights {
            unit: "cycles",
            per_stack: None,
        };
        let p = pprof_profile(&f, &cycles, "");
        let st = |i: i64| p.string_table[i as usize].as_str();
        let types: Vec<(&str, &str)> = p
            .sample_type
            .iter()
            .map(|t| (st(t.r#type), st(t.unit)))
            .collect();
        assert_eq!(types, [("cycles", "count")]);
    }

    #[test]
    fn speedscope_is_the_sampled_schema() {
        let f = Stacks::parse(FOLDED).unwrap();
        let v: serde_json::Value =
            serde_json::from_slice(&speedscope(&f, "ns", "t").unwrap()).unwrap();
        let prof = &v["profiles"][0];
        assert_eq!(prof["type"], "sampled");
        assert_eq!(prof["unit"], "nanoseconds");
        assert_eq!(prof["endValue"], 100);
        let frames = v["shared"]["frames"].as_array().unwrap();
        let s0: Vec<&str> = prof["samples"][0]
            .as_array()
            .unwrap()
            .iter()
            .map(|i| {
                frames[i.as_u64().unwrap() as usize]["name"]
                    .as_str()
                    .unwrap()
            })
            .collect();
        assert_eq!(s0[0], "bench");
        assert_eq!(s0[3], "bpf_prog_0123456789abcdef_hook");
        let bpf = frames
            .iter()
            .find(|fr| fr["name"] == "bpf_prog_0123456789abcdef_hook")
            .unwrap();
        assert_eq!(bpf["file"], "[bpf]");
        assert_eq!(prof["weights"].as_array().unwrap().len(), 3);
    }
}
