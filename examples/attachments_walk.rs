//! Time one walk of every attachment (links, perf events of every process, cgroups, the
//! interfaces of every network namespace reached, struct_ops maps), as `doctor`, `--op auto`
//! and each statistics round of `overhead` do it, and print what it found:
//!
//! ```sh
//! sudo cargo run --release --example attachments_walk -- [ROUNDS]
//! ```

use ebpf_prof::bpf::attachments::seen;
use ebpf_prof::host::Host;
use std::time::Instant;

fn main() {
    let rounds: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(20);
    let host = Host::live();
    let mut times_ms = Vec::with_capacity(rounds);
    let mut last = None;
    for _ in 0..rounds.max(1) {
        let start = Instant::now();
        let found = seen(&host);
        times_ms.push(start.elapsed().as_secs_f64() * 1000.0);
        last = Some(found);
    }
    times_ms.sort_by(f64::total_cmp);
    let found = last.unwrap_or_default();
    for attachment in &found.attachments {
        println!("prog {:>6}  {}", attachment.prog_id, attachment.point);
    }
    for note in &found.notes {
        println!("note: {note}");
    }
    let median = times_ms[times_ms.len() / 2];
    let worst = times_ms[times_ms.len() - 1];
    println!(
        "{} attachments; one walk: median {median:.1} ms, slowest {worst:.1} ms of {} walks",
        found.attachments.len(),
        times_ms.len()
    );
}
