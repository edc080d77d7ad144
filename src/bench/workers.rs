//! Several loops at once (`--workers K`): each its own thread, pinned to its own CPU of the
//! allowed set (so `taskset -c 0,1` with two workers puts one on each), its own locked buffer
//! and samples; all start together behind a barrier. SCHED_FIFO set by chrt is inherited.

use super::Prepared;
use super::{one_loop, BenchOptions, BenchResult};
use crate::error::usage;
use anyhow::{anyhow, Result};
use std::sync::Barrier;

/// CPUs this process may run on.
pub fn allowed_cpus() -> Vec<usize> {
    // SAFETY: a zeroed cpu_set_t is valid; sched_getaffinity fills it for this process.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
            return Vec::new();
        }
        (0..libc::CPU_SETSIZE as usize)
            .filter(|&c| libc::CPU_ISSET(c, &set))
            .collect()
    }
}

fn pin_current_thread(cpu: usize) -> Result<()> {
    // SAFETY: building a cpu_set_t with one CPU and applying it to this thread (tid 0).
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
            return Err(anyhow!(
                "cannot pin a worker to CPU {cpu}: {}",
                std::io::Error::last_os_error()
            ));
        }
    }
    Ok(())
}

/// Run `opts.workers` loops; one worker runs on the calling thread, unpinned (taskset did it).
pub fn run(opts: &BenchOptions, prepared: &Prepared) -> Result<Vec<BenchResult>> {
    if opts.workers == 1 {
        return Ok(vec![one_loop(opts, prepared, 0, &|| {})?]);
    }
    let cpus = allowed_cpus();
    if cpus.len() < opts.workers {
        return Err(usage(format!(
            "--workers {} needs as many CPUs, and this process may run on {} ({:?}): widen taskset -c, or use fewer workers",
            opts.workers,
            cpus.len(),
            cpus
        )));
    }
    let barrier = Barrier::new(opts.workers);
    let n = prepared.spread();
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..opts.workers)
            .map(|w| {
                let (barrier, cpu) = (&barrier, cpus[w]);
                s.spawn(move || {
                    let pinned = pin_current_thread(cpu);
                    let r = one_loop(opts, prepared, w * n / opts.workers, &|| {
                        barrier.wait();
                    });
                    pinned.and(r)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().map_err(|_| anyhow!("a worker panicked"))?)
            .collect()
    })
}
