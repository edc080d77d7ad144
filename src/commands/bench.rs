//! `ebpf-prof bench`: run the harness, print the kept samples, then the summary on stderr.

use crate::bench::{self, BenchOptions};
use anyhow::Result;

/// Run the bench and print its results (nothing is printed before the loop ends).
pub fn run(opts: &BenchOptions) -> Result<()> {
    let r = bench::run(opts)?;
    let stdout = std::io::stdout();
    match bench::write_samples(&mut stdout.lock(), &r.samples) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => {}
        other => other?,
    }
    if !r.locked {
        eprintln!("ebpf-prof bench: note: the sample buffer could not be mlocked (RLIMIT_MEMLOCK); it is pre-faulted all the same");
    }
    eprintln!("ebpf-prof bench: {}", bench::summary_line(&r));
    Ok(())
}
