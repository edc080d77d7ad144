//! ebpf-prof: what an eBPF hook costs and where that time goes.
//!
//! The library holds every piece; `main.rs` only parses arguments and maps errors to exit codes.

pub mod bench;
pub mod bpf;
pub mod bpfinfo;
pub mod cli;
pub mod commands;
pub mod doctor;
pub mod error;
pub mod failpoint;
pub mod flame;
pub mod host;
pub mod input;
pub mod netpath;
pub mod out;
pub mod overhead;
pub mod packets;
pub mod perf;
pub mod plot;
pub mod profile;
pub mod recording;
pub mod report;
pub mod runfiles;
pub mod runrecord;
pub mod signals;
pub mod stats;
pub mod testrun;
