//! `sudo ebpf-prof overhead`: baseline vs attached latency with its uncertainty. The engine
//! (arms, rounds, statistics, outputs) is [`crate::overhead`].

pub use crate::overhead::{run, Gates, OverheadOptions, Sweep};
