//! Time the native perf.data reader on a recording, to compare with `perf script`:
//!
//! ```sh
//! cargo run --release --example read_perfdata -- perf.data [--kallsyms FILE] [--folded OUT]
//! time perf script -i perf.data --kallsyms perf.data.kallsyms > /dev/null
//! ```

use ebpf_prof::profile::perfdata::{fold, FoldOptions};
use std::path::PathBuf;
use std::time::Instant;

fn main() {
    let mut args = std::env::args().skip(1);
    let mut input = None;
    let mut opts = FoldOptions::default();
    let mut out = None;
    while let Some(a) = args.next() {
        match a.as_str() {
            "--kallsyms" => opts.kallsyms = args.next().map(PathBuf::from),
            "--folded" => out = args.next().map(PathBuf::from),
            "--no-user-symbols" => opts.user_symbols = false,
            _ => input = Some(PathBuf::from(a)),
        }
    }
    let Some(input) = input else {
        eprintln!(
            "usage: read_perfdata PERF.DATA [--kallsyms FILE] [--folded OUT] [--no-user-symbols]"
        );
        std::process::exit(2);
    };
    let t = Instant::now();
    let p = match fold(&input, &opts) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(1);
        }
    };
    let wall = t.elapsed().as_secs_f64();
    for w in &p.warnings {
        eprintln!("warning: {w}");
    }
    println!(
        "{}: {} samples ({} skipped), {} stacks, event {}, total period {}",
        input.display(),
        p.samples,
        p.skipped_samples,
        p.folded.stacks.len(),
        p.event.as_deref().unwrap_or("?"),
        p.total_period
    );
    println!(
        "fold: {wall:.3} s wall, {:.0} samples/s",
        (p.samples + p.skipped_samples) as f64 / wall.max(1e-9)
    );
    if let Some(o) = out {
        if let Err(e) = std::fs::write(&o, p.folded.to_text()) {
            eprintln!("error: cannot write {}: {e}", o.display());
            std::process::exit(1);
        }
    }
}
