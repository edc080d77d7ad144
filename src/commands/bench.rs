//! `ebpf-prof bench`: run the harness, print the kept samples, then the summary on stderr.

use crate::bench::{self, BenchOptions};
use anyhow::Result;

/// Run the bench and print its results (nothing is printed before the loop ends).
pub fn run(opts: &BenchOptions) -> Result<()> {
    // A temp working set or a private network must not outlive a Ctrl-C: catch the signal,
    // let the loop finish (it is seconds long), clean up, then stop.
    let made_files = opts.paths > 1 && opts.dir.is_none();
    let makes_network = opts.op.needs_netns() && opts.op.netns().is_none();
    let ints = if made_files || makes_network {
        Some(crate::signals::Interrupts::install()?)
    } else {
        None
    };
    if makes_network && !crate::host::security::is_root() {
        return Err(crate::error::usage(format!(
            "--op {} makes a network namespace and a veth pair: run it with sudo",
            opts.op.operation()
        )));
    }
    let network = match makes_network {
        true => Some(crate::netpath::VethPair::create(&crate::host::Host::live())?),
        false => None,
    };
    let opts = &match &network {
        Some(pair) => BenchOptions {
            op: opts.op.in_netns(&pair.names().netns),
            ..opts.clone()
        },
        None => opts.clone(),
    };
    crate::failpoint::hit("bench-netns-ready");
    let rs = bench::run(opts)?;
    drop(network);
    if let Some(i) = &ints {
        i.check()?;
    }
    let all: Vec<u64> = rs.iter().flat_map(|r| r.samples.iter().copied()).collect();
    let stdout = std::io::stdout();
    match bench::write_samples(&mut stdout.lock(), &all) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => {}
        Err(e) => return Err(crate::out::stdout_error(&e)),
        Ok(()) => {}
    }
    if rs.iter().any(|r| !r.locked) {
        crate::out::err_text("ebpf-prof bench: note: the sample buffer could not be mlocked (RLIMIT_MEMLOCK); it is pre-faulted all the same\n");
    }
    for line in bench::summary_lines(&rs) {
        crate::out::err_text(&format!("ebpf-prof bench: {line}\n"));
    }
    Ok(())
}

/// `bench --serve`: rounds on demand for `overhead` (bench/serve.rs).
pub fn serve(opts: &BenchOptions) -> Result<()> {
    let (stdin, stdout) = (std::io::stdin(), std::io::stdout());
    bench::serve::serve(opts, &mut stdin.lock(), &mut stdout.lock())
}
