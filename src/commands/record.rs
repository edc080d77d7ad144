//! `sudo ebpf-prof record [-- CMD ARGS…]`: the recording step (the engine is
//! [`crate::recording`]).

use crate::recording::{self, RecordOptions};
use anyhow::Result;

/// Run `record`.
pub fn run(opts: &RecordOptions) -> Result<()> {
    recording::run(opts).map(|_| ())
}
