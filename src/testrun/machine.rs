//! The real [`Runner`]: the loaded programs run by the kernel, timed from a thread pinned to
//! one CPU (at SCHED_FIFO when asked), for XDP in a network namespace of its own. Only that
//! thread changes: its CPU, its priority and its namespace go with it.
//!
//! Why a namespace for XDP: a test run of more than one run puts the program into the XDP
//! dispatcher and takes it out again around its loop, and each change of the dispatcher waits
//! for an RCU grace period (milliseconds on a busy VM: a batch took ~30 ms a call here). A
//! program already in the dispatcher is only counted again, so the timing thread holds the
//! program under test in generic mode on the loopback device of a namespace of its own, which
//! is down and which no packet reaches; it is detached before the thread ends, and the
//! namespace goes with the thread. The kernel's timing of the runs does not include the
//! dispatcher's change either way: this only makes the batches many times faster.

use super::kernel::{self, RunMode};
use super::measure::{self, Batches, Ended, Plan, Runner};
use crate::packets::Packet;
use anyhow::{Context, Result};
use libbpf_rs::libbpf_sys;
use std::os::fd::BorrowedFd;

/// The programs and packets the batches run.
pub struct Machine<'a> {
    pub programs: Vec<BorrowedFd<'a>>,
    pub packets: &'a [Packet],
    pub mode: RunMode,
    /// A signal ends the batches at the next call; everything is put back on the way out.
    pub interrupts: &'a crate::signals::Interrupts,
}

impl Runner for Machine<'_> {
    fn call(&mut self, object: usize, packet: usize, repeat: u32) -> Result<measure::Call> {
        self.interrupts.check()?;
        let bytes = &self.packets[packet].bytes;
        let start = std::time::Instant::now();
        let timed = kernel::timed_call(self.programs[object], bytes, repeat, self.mode);
        let wall_ns = start.elapsed().as_nanos() as f64;
        timed
            .map(|mean| measure::Call {
                wall_ns,
                kernel_mean: f64::from(mean),
            })
            .map_err(|errno| {
                anyhow::Error::from(std::io::Error::from_raw_os_error(errno))
                    .context(format!("BPF_PROG_TEST_RUN of packet {} failed", packet + 1))
            })
    }
}

/// Where the timing thread runs.
#[derive(Debug, Clone, Copy)]
pub struct Placement {
    pub cpu: u32,
    /// SCHED_FIFO priority, or the ordinary scheduler.
    pub priority: Option<u8>,
}

/// Whether the XDP program was held in the dispatcher for the batches (see the module).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dispatcher {
    /// Not XDP: there is no dispatcher to hold.
    NotXdp,
    Held,
    /// Attaching to the private loopback failed (the errno): every call changed the
    /// dispatcher, which only made the batches slower.
    NotHeld(i32),
}

/// Run the batches of `plan` on `machine` from a thread pinned by `placement` (for live frames
/// in a network namespace of its own, so that frames passed up the stack or sent out stay in
/// it and vanish with the thread); for XDP each program is held in the dispatcher meanwhile.
pub fn run(
    plan: &Plan,
    machine: Machine<'_>,
    placement: Placement,
    xdp: bool,
) -> Result<(Batches, Ended, Dispatcher)> {
    std::thread::scope(|scope| {
        let (stop_holders, stopped) = std::sync::mpsc::channel::<()>();
        let stopped = std::sync::Arc::new(std::sync::Mutex::new(stopped));
        let mut held = Dispatcher::NotXdp;
        let mut holders = Vec::new();
        for program in machine.programs.iter().copied().filter(|_| xdp) {
            let (status, answer) = std::sync::mpsc::channel();
            let stopped = stopped.clone();
            holders.push(scope.spawn(move || hold_until_stopped(program, &status, &stopped)));
            let state = answer.recv().unwrap_or(Dispatcher::NotHeld(libc::EFAULT));
            held = match held {
                Dispatcher::NotHeld(errno) => Dispatcher::NotHeld(errno),
                _ => state,
            };
        }
        let worker = scope.spawn(move || -> Result<(Batches, Ended)> {
            let mut machine = machine;
            pin(placement)?;
            if machine.mode == RunMode::LiveFrames {
                private_network()?;
            }
            measure::run(plan, &mut machine)
        });
        let measured = worker.join();
        drop(stop_holders);
        for holder in holders {
            let _ = holder.join();
        }
        let (batches, ended) =
            measured.map_err(|_| anyhow::anyhow!("the timing thread panicked"))??;
        Ok((batches, ended, held))
    })
}

/// In a thread of its own: a private network namespace, `program` attached in generic mode to
/// its loopback (the answer says whether), held until `stopped` closes, then detached.
fn hold_until_stopped(
    program: BorrowedFd<'_>,
    status: &std::sync::mpsc::Sender<Dispatcher>,
    stopped: &std::sync::Mutex<std::sync::mpsc::Receiver<()>>,
) {
    if let Err(error) = private_network() {
        let errno = error
            .downcast_ref::<std::io::Error>()
            .and_then(std::io::Error::raw_os_error);
        let _ = status.send(Dispatcher::NotHeld(errno.unwrap_or(libc::EPERM)));
        return;
    }
    let held = hold_in_dispatcher(program);
    let _ = status.send(held);
    if held != Dispatcher::Held {
        return;
    }
    // Wait until the sender is dropped: the batches are over.
    if let Ok(receiver) = stopped.lock() {
        let _ = receiver.recv();
    }
    // SAFETY: detaches the generic-mode program of this thread's own private loopback.
    unsafe {
        libbpf_sys::bpf_xdp_detach(LOOPBACK, libbpf_sys::XDP_FLAGS_SKB_MODE, std::ptr::null())
    };
}

/// The loopback's ifindex in a new network namespace.
const LOOPBACK: i32 = 1;

/// Attach `program` in generic mode to this thread's private loopback.
fn hold_in_dispatcher(program: BorrowedFd<'_>) -> Dispatcher {
    use std::os::fd::AsRawFd;
    // SAFETY: a plain netlink request about a device of this thread's own namespace.
    let ret = unsafe {
        libbpf_sys::bpf_xdp_attach(
            LOOPBACK,
            program.as_raw_fd(),
            libbpf_sys::XDP_FLAGS_SKB_MODE,
            std::ptr::null(),
        )
    };
    match ret {
        0 => Dispatcher::Held,
        negative => Dispatcher::NotHeld(-negative),
    }
}

/// Pin this thread to `placement.cpu`, at SCHED_FIFO when a priority is given.
fn pin(placement: Placement) -> Result<()> {
    // SAFETY: a zeroed cpu_set_t is an empty set; CPU_SET writes within it.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: the index is below CPU_SETSIZE (the CPU was validated as online).
    unsafe { libc::CPU_SET(placement.cpu as usize, &mut set) };
    // SAFETY: pid 0 is this thread; the set is a valid cpu_set_t of the size given.
    let ret = unsafe { libc::sched_setaffinity(0, std::mem::size_of_val(&set), &set) };
    if ret != 0 {
        return Err(std::io::Error::last_os_error())
            .with_context(|| format!("cannot pin the timing thread to CPU {}", placement.cpu));
    }
    let Some(priority) = placement.priority else {
        return Ok(());
    };
    let param = libc::sched_param {
        sched_priority: i32::from(priority),
    };
    // SAFETY: pid 0 is this thread; param is a valid sched_param.
    let ret = unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &param) };
    if ret != 0 {
        return Err(std::io::Error::last_os_error()).with_context(|| {
            format!(
                "cannot run the timing thread at SCHED_FIFO {priority} (--no-fifo runs without)"
            )
        });
    }
    Ok(())
}

/// Move this thread into a new network namespace (its loopback down, nothing else in it).
fn private_network() -> Result<()> {
    // SAFETY: unshare affects this thread's namespaces only; CLONE_NEWNET needs no other flag.
    let ret = unsafe { libc::unshare(libc::CLONE_NEWNET) };
    if ret != 0 {
        return Err(std::io::Error::last_os_error())
            .context("cannot make a network namespace for the live frames");
    }
    Ok(())
}

/// Whether the kernel takes live-frame test runs of `program` (Linux 5.18+): one frame tried
/// in a thread of its own network namespace. `Err` with the errno when it does not.
pub fn live_frames_supported(program: BorrowedFd<'_>, packet: &Packet) -> Result<(), i32> {
    std::thread::scope(|scope| {
        scope
            .spawn(move || {
                // SAFETY: as in `private_network`.
                if unsafe { libc::unshare(libc::CLONE_NEWNET) } != 0 {
                    return Err(std::io::Error::last_os_error()
                        .raw_os_error()
                        .unwrap_or(libc::EPERM));
                }
                kernel::timed_call(program, &packet.bytes, 1, RunMode::LiveFrames).map(drop)
            })
            .join()
            .unwrap_or(Err(libc::EFAULT))
    })
}
