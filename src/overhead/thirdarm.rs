//! `overhead --load X` of a packet program whose attach point changes the path as soon as any
//! program is attached there: three arms instead of two. Attaching any native XDP program to a
//! veth moves its receive side to NAPI and re-allocates each skb for XDP; against nothing
//! attached, that switch would be billed to the user's program. So the run measures twice:
//! nothing attached against a trivial program of the same kind and attach point (built in:
//! `fixtures/hooks/trivial/`, it returns "pass" and does nothing else), what attaching a
//! program of that kind at all costs here; then that trivial program against the user's, what
//! this program costs on top. The verdict and the gates are the second figure's.
//!
//! The budget is split: a third for the first measurement (the switch is large and its
//! interval narrows fast), two thirds for the second, so a run at the defaults takes about as
//! long as a two-arm one. `--rounds N` gives each measurement N pairs.

use super::arms::ArmSpec;
use super::output::{write_user_file, Report, EXPORT_JSON};
use super::{gate_exit, measure_and_report, Gates, Mode, OverheadOptions, Stop, Subject};
use crate::bench::choose::Chosen;
use crate::bpf::ObjectBytes;
use crate::error::usage;
use crate::host::Host;
use crate::out::say;
use crate::signals::Interrupts;
use anyhow::Result;
use serde::Serialize;
use std::time::Duration;

/// Whether `overhead --load` of a packet program runs the trivial arm (`--trivial-arm`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TrivialArm {
    /// For the kinds whose attach point changes the path when any program is there: XDP, tc
    /// (clsact) and cgroup_skb (measured; see [`PacketKind::changes_path`]).
    Auto,
    /// For every packet kind that has a trivial program.
    On,
    /// Never: nothing attached against the program, as for every other hook.
    Off,
}

/// The packet programs that have a trivial counterpart, by section.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum PacketKind {
    Xdp,
    XdpFrags,
    Tc,
    TcxIngress,
    TcxEgress,
    CgroupSkbEgress,
    CgroupSkbIngress,
    Socket,
}

/// The trivial objects, built from `fixtures/hooks/trivial/` and carried in the binary.
macro_rules! trivial_object {
    ($name:literal) => {
        (
            $name,
            include_bytes!(concat!(env!("OUT_DIR"), "/hooks/trivial/", $name)).as_slice(),
        )
    };
}

impl PacketKind {
    /// The kind of a program of section `section`; `None` for other programs and for sections
    /// without a trivial counterpart (`cgroup/skb`, which names no direction).
    pub fn of_section(section: &str) -> Option<PacketKind> {
        Some(match section {
            "xdp" => PacketKind::Xdp,
            "xdp.frags" => PacketKind::XdpFrags,
            "tc" | "classifier" => PacketKind::Tc,
            "tcx/ingress" | "tc/ingress" => PacketKind::TcxIngress,
            "tcx/egress" | "tc/egress" => PacketKind::TcxEgress,
            "cgroup_skb/egress" => PacketKind::CgroupSkbEgress,
            "cgroup_skb/ingress" => PacketKind::CgroupSkbIngress,
            "socket" => PacketKind::Socket,
            _ => return None,
        })
    }

    /// The trivial object's file name and bytes.
    fn object(self) -> (&'static str, &'static [u8]) {
        match self {
            PacketKind::Xdp => trivial_object!("pass_xdp.bpf.o"),
            PacketKind::XdpFrags => trivial_object!("pass_xdp_frags.bpf.o"),
            PacketKind::Tc => trivial_object!("pass_tc.bpf.o"),
            PacketKind::TcxIngress => trivial_object!("pass_tcx_ingress.bpf.o"),
            PacketKind::TcxEgress => trivial_object!("pass_tcx_egress.bpf.o"),
            PacketKind::CgroupSkbEgress => trivial_object!("pass_cgroup_skb_egress.bpf.o"),
            PacketKind::CgroupSkbIngress => trivial_object!("pass_cgroup_skb_ingress.bpf.o"),
            PacketKind::Socket => trivial_object!("pass_socket.bpf.o"),
        }
    }

    /// The trivial arm's object, named as tables show it.
    pub fn trivial(self) -> ObjectBytes {
        let (file, bytes) = self.object();
        ObjectBytes {
            name: format!("{file} (built in)"),
            bytes: bytes.into(),
        }
    }

    /// How sentences name a program of the kind.
    pub fn phrase(self) -> &'static str {
        match self {
            PacketKind::Xdp | PacketKind::XdpFrags => "an XDP program",
            PacketKind::Tc => "a tc program (clsact qdisc)",
            PacketKind::TcxIngress | PacketKind::TcxEgress => "a tcx program",
            PacketKind::CgroupSkbEgress | PacketKind::CgroupSkbIngress => "a cgroup_skb program",
            PacketKind::Socket => "a socket filter",
        }
    }

    /// Whether attaching any program of the kind changes the path the packets take beyond the
    /// program's own run, so that `--trivial-arm auto` measures it apart. From the measurements
    /// in docs/packet-path.md (the trivial program against nothing attached, and its own run
    /// time by run statistics): native XDP on veth switches the receive side to NAPI and
    /// re-allocates each skb, several hundred ns beyond the trivial program's run; a clsact
    /// qdisc (tc) and the cgroup BPF path (cgroup_skb) add tens of ns of their own machinery
    /// beyond it (the qdisc's classify, the cgroup's program array and socket look-up); a tcx
    /// link and a socket filter cost about the trivial program's own run, which is the
    /// program's to pay.
    pub fn changes_path(self) -> bool {
        match self {
            PacketKind::Xdp | PacketKind::XdpFrags | PacketKind::Tc => true,
            PacketKind::CgroupSkbEgress | PacketKind::CgroupSkbIngress => true,
            PacketKind::TcxIngress | PacketKind::TcxEgress | PacketKind::Socket => false,
        }
    }
}

/// Why a run gets no trivial arm, when `--trivial-arm on` asked for one.
const ON_NEEDS: &str = "--trivial-arm on needs --load of an object whose packet programs are all of one kind (xdp, tc, tcx, cgroup_skb, socket), timed by the built-in bench, without --side-cost or --sweep";

/// The kind to measure a trivial arm for, from the options and the loaded object's
/// `(program, section)` pairs; `None` for a two-arm run. A usage error when `--trivial-arm on`
/// cannot be done.
pub fn plan(o: &OverheadOptions, programs: &[(String, String)]) -> Result<Option<PacketKind>> {
    let mode = o.trivial_arm;
    if mode == TrivialArm::Off {
        return Ok(None);
    }
    let refuse = |why: &str| match mode {
        TrivialArm::On => Err(usage(format!("{ON_NEEDS}: {why}"))),
        _ => Ok(None),
    };
    if !matches!(o.subject, Subject::Load(_)) {
        return refuse("this run does not measure --load against nothing attached");
    }
    if !o.bench.is_empty() {
        return refuse("a benchmark of your own sends through no network of ours");
    }
    if !o.op.needs_netns() {
        return refuse("the operation timed sends no packet through the run's network");
    }
    if o.sweep.is_some() || o.side_cost == super::SideCost::Measure {
        return refuse("--side-cost and --sweep measure two arms");
    }
    let mut kinds: Vec<PacketKind> = programs
        .iter()
        .filter_map(|(_, section)| PacketKind::of_section(section))
        .collect();
    kinds.sort_unstable();
    kinds.dedup();
    match kinds.as_slice() {
        [] => refuse("the object has no packet program with a trivial counterpart"),
        [kind] if mode == TrivialArm::On || kind.changes_path() => Ok(Some(*kind)),
        [_] => Ok(None),
        several => {
            if several.iter().any(|k| k.changes_path()) && mode == TrivialArm::Auto {
                say("the object has packet programs of several kinds: no trivial program stands for all of them, so the delta includes what attaching any program there changes on the path (see docs/packet-path.md)");
            }
            refuse("the object has packet programs of several kinds")
        }
    }
}

/// The stop rules of the two measurements: a third and two thirds of a time budget, the same
/// count of pairs each.
pub fn split(stop: Stop) -> (Stop, Stop) {
    match stop {
        Stop::Pairs(n) => (Stop::Pairs(n), Stop::Pairs(n)),
        Stop::Adaptive { target_ns, budget } => {
            let first = budget.mul_f64(ATTACH_SHARE);
            let second = budget.saturating_sub(first).max(Duration::from_millis(1));
            (
                Stop::Adaptive {
                    target_ns,
                    budget: first,
                },
                Stop::Adaptive {
                    target_ns,
                    budget: second,
                },
            )
        }
    }
}

/// The share of the time budget the first measurement (nothing against the trivial program)
/// gets.
const ATTACH_SHARE: f64 = 1.0 / 3.0;

/// Everything a three-arm `--json` prints.
#[derive(Debug, Serialize)]
pub struct ThreeArmReport {
    /// The version of this document ([`crate::out::JSON_SCHEMA`]).
    pub schema: u32,
    /// The kind of the program, whose trivial counterpart is the middle arm.
    pub kind: PacketKind,
    /// Nothing attached against the trivial program: what attaching at all costs.
    pub attach: Report,
    /// The trivial program against the user's: what the program costs on top. Its verdict and
    /// gates are the run's.
    pub program: Report,
    /// One sentence with both figures.
    pub summary: String,
}

/// Measure nothing against the trivial program of `kind`, then it against `user`; print both,
/// the summary, and exit by the second's gates.
pub fn run(
    o: &OverheadOptions,
    (kind, user): (PacketKind, &ArmSpec),
    host_cpu: (&Host, u32),
    chosen: Option<&Chosen>,
    watch: &[u32],
    ints: &Interrupts,
) -> Result<()> {
    let trivial = ArmSpec::InMemory(kind.trivial());
    let (attach_stop, program_stop) = split(o.stop);
    let detached = ArmSpec::Detached;
    say(format!(
        "three arms, 1/2: nothing attached against {}: what attaching {} at all costs here",
        trivial.label(),
        kind.phrase()
    ));
    let attach_o = OverheadOptions {
        stop: attach_stop,
        gates: Gates::default(),
        ..o.clone()
    };
    let arms = (&detached, &trivial, Mode::Load);
    let mut attach = measure_and_report(&attach_o, arms, host_cpu, chosen.cloned(), watch, ints)?;
    if let Some(d) = attach.report.dispatch.as_mut() {
        d.sentence = attach_gap(kind, d);
    }
    say(format!(
        "three arms, 2/2: {} against {}: what this program costs on top",
        trivial.label(),
        user.label()
    ));
    let program_o = OverheadOptions {
        stop: program_stop,
        subject: Subject::Compare {
            base: trivial.label().into(),
            treat: user.label().into(),
        },
        ..o.clone()
    }
    .with_op(o.op.clone(), o.op_choice);
    let arms = (&trivial, user, Mode::Compare);
    let program = measure_and_report(&program_o, arms, host_cpu, chosen.cloned(), watch, ints)?;
    let doc = ThreeArmReport {
        schema: crate::out::JSON_SCHEMA,
        kind,
        summary: summary(kind, p50(&attach.report), p50(&program.report)),
        attach: attach.report,
        program: program.report,
    };
    emit(&program_o, &doc, &program.rounds)?;
    if let Some(dir) = &o.opened.profile {
        let arms = [("base", &trivial), ("treat", user)];
        super::profile::record_arms(dir, arms, &program.bench, &doc.program.comparison)?;
    }
    gate_exit(&doc.program.gates)
}

/// The first measurement's split of its delta: beyond the trivial program's own run, what the
/// attach point itself adds (not dispatch or trampoline glue, as for a tracing hook).
fn attach_gap(kind: PacketKind, d: &super::output::Dispatch) -> String {
    let (Some(own), Some(gap), Some(lo), Some(hi)) = (d.own_ns, d.gap_ns, d.gap_lo, d.gap_hi)
    else {
        return d.sentence.clone();
    };
    let what = match kind {
        PacketKind::Xdp | PacketKind::XdpFrags => {
            "veth's XDP receive path (NAPI, an skb re-allocated per packet) when in native mode"
        }
        PacketKind::Tc => "the clsact qdisc's classify path",
        PacketKind::CgroupSkbEgress | PacketKind::CgroupSkbIngress => "the cgroup BPF path",
        PacketKind::TcxIngress | PacketKind::TcxEgress => "the tcx hook",
        PacketKind::Socket => "the socket's filter hook",
    };
    format!("latency delta at p50 beyond the trivial program's own run inside the timed span ({own:.0} ns, with run stats on): {gap:+.0} ns [{lo:+.0}, {hi:+.0}]: what attaching {} adds to the path ({what})", kind.phrase())
}

/// A report's p50 difference and its interval.
fn p50(r: &Report) -> Option<(f64, f64, f64)> {
    r.comparison.diff(50.0).map(|d| (d.delta, d.lo, d.hi))
}

/// "attaching an XDP program at all costs +650 ns at p50 [+600, +700] here (…); this program
/// costs +180 ns [+150, +210] on top (…): the verdict and the gates are on this program's cost".
pub fn summary(
    kind: PacketKind,
    attach: Option<(f64, f64, f64)>,
    program: Option<(f64, f64, f64)>,
) -> String {
    let figure = |d: Option<(f64, f64, f64)>| {
        d.map_or_else(
            || "an unknown amount (no p50 difference)".to_string(),
            |(delta, lo, hi)| format!("{delta:+.0} ns at p50 [{lo:+.0}, {hi:+.0}]"),
        )
    };
    let told = |d: Option<(f64, f64, f64)>| match d {
        Some((_, lo, hi)) if lo <= 0.0 && hi >= 0.0 => " (not told apart from 0)",
        _ => "",
    };
    format!(
        "attaching {} at all costs {}{} here (the trivial program against nothing attached); this program costs {}{} on top (against the trivial program): the verdict and the gates are on this program's cost",
        kind.phrase(),
        figure(attach),
        told(attach),
        figure(program),
        told(program)
    )
}

/// Print both tables and the summary (or the JSON document); write the second measurement's
/// files (`--plot`, `--keep`, `--export-markdown`).
fn emit(o: &OverheadOptions, doc: &ThreeArmReport, rounds: &super::Rounds) -> Result<()> {
    let json = serde_json::to_string_pretty(doc)? + "\n";
    let text = format!(
        "{}\n{}\n{}\n",
        doc.attach.table(),
        doc.program.table(),
        doc.summary
    );
    crate::out::stdout(if o.json { &json } else { &text })?;
    if let Some(p) = &o.export_json {
        write_user_file(p, EXPORT_JSON, json.as_bytes())?;
    }
    doc.program.write_files(o, rounds)
}

#[cfg(test)]
#[path = "thirdarm_tests.rs"]
mod tests;
