//! Everything before the batches: the packets (built-in or a capture), the program of each
//! object the test run takes, loading it, one untimed run per packet, the run statistics
//! turned off, and the plan of the batches.

use super::classes::{Class, Rewrite};
use super::kernel::{self, Outcome, PacketKind, RunMode};
use super::measure::{self, ClassPlan, Plan, Timing};
use super::{PacketSource, TestRunOptions};
use crate::bpf::ObjectSource;
use crate::error::{check, usage};
use crate::host::sysctl::SysctlGuard;
use crate::host::Host;
use crate::input::Role;
use crate::packets::{builtin, capture, Packet};
use anyhow::{Context, Result};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, RawFd};
use std::path::Path;

/// The packets to run and the notes they come with (frames the capture cut short).
pub fn packets(source: &PacketSource) -> Result<(Vec<Packet>, Vec<String>)> {
    let path = match source {
        PacketSource::Builtin => return Ok((builtin::packets(), Vec::new())),
        PacketSource::Capture(path) => path,
    };
    let bytes = crate::input::read_whole(path, Role::Capture)?;
    let read = capture::parse(&bytes)
        .map_err(|error| usage(format!("--pcap {} {error}", path.display())))?;
    let mut notes = Vec::new();
    if read.cut_short > 0 {
        notes.push(format!(
            "{} of the capture's frames were cut short by its snapshot length: they ran as captured",
            read.cut_short
        ));
    }
    Ok((read.packets, notes))
}

/// The program of an object the test run takes: its name and kind.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProgramChoice {
    pub name: String,
    pub section: String,
    pub kind: PacketKind,
    /// The object's other programs (not run).
    pub others: usize,
}

/// The first program of `path` with a packet test run; refused (exit 2) when it has none,
/// before anything is loaded.
pub fn packet_program(path: &Path) -> Result<ProgramChoice> {
    crate::bpf::check_object(path)?;
    let programs = crate::bpf::object_programs(ObjectSource::Path(path))?;
    let found = programs
        .iter()
        .find_map(|(name, section)| Some((name, section, PacketKind::from_section(section)?)));
    let Some((name, section, kind)) = found else {
        let listed: Vec<String> = programs
            .iter()
            .map(|(name, section)| format!("{name} (SEC(\"{section}\"))"))
            .collect();
        return Err(usage(format!(
            "{}: {} has no packet test run in the kernel; --test-run takes xdp, tc/tcx, socket and cgroup_skb programs (without --test-run, overhead measures the others on the operation that fires them)",
            path.display(),
            listed.join(", ")
        )));
    };
    Ok(ProgramChoice {
        name: name.clone(),
        section: section.clone(),
        kind,
        others: programs.len() - 1,
    })
}

/// `--compare`'s program must be of the same kind; `--live-frames` only runs XDP.
pub fn check_pairing(
    target: &ProgramChoice,
    other: Option<&ProgramChoice>,
    mode: RunMode,
) -> Result<()> {
    if let Some(other) = other.filter(|other| other.kind != target.kind) {
        return Err(usage(format!(
            "--compare: {} is a {} program and {} a {} one: compare two versions of one kind of program",
            target.name, target.kind, other.name, other.kind
        )));
    }
    if mode == RunMode::LiveFrames && target.kind != PacketKind::Xdp {
        return Err(usage(format!(
            "--live-frames runs XDP programs only; {} is a {} program",
            target.name, target.kind
        )));
    }
    Ok(())
}

/// A loaded object and the program under test in it; dropping it unloads everything.
pub struct Loaded {
    /// Holds the program's fd open.
    _object: libbpf_rs::Object,
    /// The program's fd, owned by `_object`.
    raw_fd: RawFd,
    pub program: ProgramChoice,
}

impl Loaded {
    /// The program's fd, for as long as the object is loaded.
    pub fn fd(&self) -> BorrowedFd<'_> {
        // SAFETY: `_object` owns the fd and lives as long as `self`, which the borrow is tied to.
        unsafe { BorrowedFd::borrow_raw(self.raw_fd) }
    }
}

/// Load `path` (nothing attached).
pub fn load(path: &Path, program: &ProgramChoice) -> Result<Loaded> {
    let bytes = crate::input::read_whole(path, Role::BpfObject)?;
    let object = crate::bpf::load_only(&path.display().to_string(), &bytes)?;
    let raw_fd = object
        .progs()
        .find(|p| p.name().to_string_lossy() == program.name)
        .map(|p| p.as_fd().as_raw_fd())
        .with_context(|| format!("{} is not in the loaded {}", program.name, path.display()))?;
    Ok(Loaded {
        _object: object,
        raw_fd,
        program: program.clone(),
    })
}

/// One untimed run of each packet; `None` for a packet the kernel refused with EINVAL (its
/// length out of the test run's range). Any other failure ends the run.
pub fn outcomes(
    program: BorrowedFd<'_>,
    kind: kernel::PacketKind,
    packets: &[Packet],
) -> Result<Vec<Option<Outcome>>> {
    packets
        .iter()
        .enumerate()
        .map(
            |(index, packet)| match kernel::run_once(program, kind, &packet.bytes) {
                Ok(outcome) => Ok(Some(outcome)),
                Err(libc::EINVAL) => Ok(None),
                Err(errno) => Err(anyhow::Error::from(std::io::Error::from_raw_os_error(
                    errno,
                )))
                .with_context(|| {
                    format!(
                        "BPF_PROG_TEST_RUN of packet {} ({} bytes) failed",
                        index + 1,
                        packet.bytes.len()
                    )
                }),
            },
        )
        .collect()
}

/// `--live-frames` on a kernel without them (before 5.18) is a failed check.
pub fn check_live_frames(program: BorrowedFd<'_>, packet: &Packet) -> Result<()> {
    super::machine::live_frames_supported(program, packet).map_err(|errno| {
        check(format!(
            "--live-frames: this kernel refuses live-frame XDP test runs ({}); they need Linux 5.18 or later: leave --live-frames out",
            std::io::Error::from_raw_os_error(errno)
        ))
    })
}

/// Turns `kernel.bpf_stats_enabled` off for the timed runs when it is on (written back when
/// dropped, journalled against a SIGKILL), and says who else holds run statistics on.
pub struct QuietStats {
    _guard: SysctlGuard,
    switched_off: bool,
    holders: Vec<u32>,
}

impl QuietStats {
    pub fn take(host: &Host) -> Result<QuietStats> {
        let state = crate::bpf::run_stats_state(host);
        let mut guard = SysctlGuard::new(host.clone())
            .with_journal(crate::host::recovery::journal(host, "testrun"));
        if state.sysctl {
            guard.set(crate::bpf::STATS_SYSCTL, "0")?;
        }
        let me = std::process::id();
        Ok(QuietStats {
            _guard: guard,
            switched_off: state.sysctl,
            holders: state
                .fd_holders
                .into_iter()
                .filter(|pid| *pid != me)
                .collect(),
        })
    }

    /// What the report says about run statistics.
    pub fn note(&self) -> Vec<String> {
        let mut notes = Vec::new();
        if self.switched_off {
            notes.push(format!(
                "{} was 1: set to 0 for the timed runs and written back",
                crate::bpf::STATS_SYSCTL
            ));
        }
        if !self.holders.is_empty() {
            notes.push(format!(
                "run statistics stayed on through BPF_ENABLE_STATS held by pid {}: every run paid two clock readings more, included in the figures",
                self.holders.iter().map(u32::to_string).collect::<Vec<_>>().join(", ")
            ));
        }
        notes
    }
}

/// The batches: each class's repeat count from the kernel's mean over a thousand runs of its
/// first packet, timed on a fresh copy when either object rewrites the class's packets.
pub fn plan(
    o: &TestRunOptions,
    classes: &[Class],
    outcomes: &[Vec<Option<Outcome>>],
    program: BorrowedFd<'_>,
    packets: &[Packet],
) -> Result<Plan> {
    let mut plans = Vec::with_capacity(classes.len());
    for class in classes {
        let first = &packets[class.packets[0]];
        let mean = kernel::timed_call(
            program,
            &first.bytes,
            CALIBRATION_RUNS,
            kernel::RunMode::Plain,
        )
        .map_err(std::io::Error::from_raw_os_error)
        .context("BPF_PROG_TEST_RUN to calibrate the repeat count failed")?;
        let rewritten = class.rewrite == Rewrite::Rewrites
            || outcomes.iter().skip(1).any(|per_packet| {
                class.packets.iter().any(|index| {
                    per_packet[*index]
                        .as_ref()
                        .is_some_and(|outcome| outcome.output != packets[*index].bytes)
                })
            });
        plans.push(ClassPlan {
            packets: class.packets.clone(),
            repeat: measure::repeat_for(mean),
            timing: if rewritten {
                Timing::FreshCopy
            } else {
                Timing::Slope
            },
        });
    }
    Ok(Plan {
        classes: plans,
        objects: outcomes.len(),
        batches: o.batches,
        budget: o.budget,
        span: o.span,
        seed: o.seed,
    })
}

/// Runs of the call that chooses a class's repeat count.
const CALIBRATION_RUNS: u32 = 1000;
