//! The trivial arm's plan, its budget split and the summary's wording.

use super::*;
use crate::bench::choose::OpChoice;
use crate::bench::Operation;
use crate::overhead::SideCost;
use std::path::Path;

fn options(mode: TrivialArm) -> OverheadOptions {
    let udp_veth = crate::bench::OpKind::new(Operation::UdpVeth, "/etc/hostname".into());
    OverheadOptions {
        trivial_arm: mode,
        ..OverheadOptions::for_load(Path::new("x.bpf.o"), 1, None, Duration::from_secs(12))
    }
    .with_op(udp_veth, OpChoice::Auto)
}

fn programs(sections: &[&str]) -> Vec<(String, String)> {
    sections
        .iter()
        .enumerate()
        .map(|(i, s)| (format!("p{i}"), s.to_string()))
        .collect()
}

#[test]
fn auto_measures_xdp_tc_and_cgroup_skb_apart_and_leaves_tcx_and_socket_two_armed() {
    let auto = options(TrivialArm::Auto);
    let plan_of = |sections: &[&str]| plan(&auto, &programs(sections)).expect("auto never refuses");
    assert_eq!(plan_of(&["xdp"]), Some(PacketKind::Xdp));
    assert_eq!(plan_of(&["xdp.frags"]), Some(PacketKind::XdpFrags));
    // Two XDP programs of one object share the trivial arm.
    assert_eq!(plan_of(&["xdp", "xdp"]), Some(PacketKind::Xdp));
    assert_eq!(plan_of(&["tc"]), Some(PacketKind::Tc));
    assert_eq!(plan_of(&["classifier"]), Some(PacketKind::Tc));
    assert_eq!(
        plan_of(&["cgroup_skb/egress"]),
        Some(PacketKind::CgroupSkbEgress)
    );
    for two_armed in [
        "tcx/ingress",
        "tcx/egress",
        "socket",
        "tracepoint/x/y",
        "cgroup/skb",
    ] {
        assert_eq!(plan_of(&[two_armed]), None, "{two_armed}");
    }
    // Several kinds: no trivial program stands for all of them.
    assert_eq!(plan_of(&["xdp", "tc"]), None);
}

#[test]
fn on_measures_every_packet_kind_and_refuses_what_it_cannot() {
    let on = options(TrivialArm::On);
    for (section, kind) in [
        ("tc", PacketKind::Tc),
        ("classifier", PacketKind::Tc),
        ("tcx/ingress", PacketKind::TcxIngress),
        ("tc/egress", PacketKind::TcxEgress),
        ("cgroup_skb/egress", PacketKind::CgroupSkbEgress),
        ("cgroup_skb/ingress", PacketKind::CgroupSkbIngress),
        ("socket", PacketKind::Socket),
    ] {
        let planned = plan(&on, &programs(&[section])).expect("a packet kind");
        assert_eq!(planned, Some(kind), "{section}");
    }
    for refused in [&["tracepoint/x/y"][..], &["xdp", "tc"], &["cgroup/skb"]] {
        let err = plan(&on, &programs(refused)).expect_err("nothing to measure");
        assert!(err.to_string().contains("--trivial-arm on needs"), "{err}");
        assert_eq!(crate::error::exit_code(&err), 2, "{err}");
    }
    let side = OverheadOptions {
        side_cost: SideCost::Measure,
        ..on.clone()
    };
    assert!(plan(&side, &programs(&["xdp"])).is_err());
    let openat = crate::bench::OpKind::new(Operation::Openat, "/etc/hostname".into());
    let no_packet = on.with_op(openat, OpChoice::Given);
    let err = plan(&no_packet, &programs(&["xdp"])).expect_err("openat sends no packet");
    assert!(err.to_string().contains("sends no packet"), "{err}");
    let compare = OverheadOptions {
        subject: Subject::Compare {
            base: "a.bpf.o".into(),
            treat: "b.bpf.o".into(),
        },
        ..on
    };
    assert!(plan(&compare, &programs(&["xdp"])).is_err());
}

#[test]
fn off_never_adds_the_arm() {
    let off = options(TrivialArm::Off);
    assert_eq!(plan(&off, &programs(&["xdp"])).expect("off"), None);
}

#[test]
fn every_kind_carries_its_trivial_object_with_its_own_section() {
    for section in [
        "xdp",
        "xdp.frags",
        "tc",
        "tcx/ingress",
        "tcx/egress",
        "cgroup_skb/egress",
        "cgroup_skb/ingress",
        "socket",
    ] {
        let kind = PacketKind::of_section(section).expect("a kind");
        let object = kind.trivial();
        let found = crate::bpf::object_programs(object.source()).expect("a readable object");
        assert_eq!(found.len(), 1, "{section}: one program");
        assert_eq!(found[0].1, section, "{section}");
        assert_eq!(PacketKind::of_section(&found[0].1), Some(kind));
    }
}

#[test]
fn the_budget_goes_a_third_to_the_switch_and_two_thirds_to_the_program() {
    let (first, second) = split(Stop::Adaptive {
        target_ns: None,
        budget: Duration::from_secs(12),
    });
    let budget = |s: Stop| match s {
        Stop::Adaptive { budget, .. } => budget,
        Stop::Pairs(_) => Duration::ZERO,
    };
    assert_eq!(budget(first), Duration::from_secs(4));
    assert_eq!(budget(second), Duration::from_secs(8));
    assert_eq!(split(Stop::Pairs(40)), (Stop::Pairs(40), Stop::Pairs(40)));
}

#[test]
fn the_summary_gives_both_figures_and_says_which_one_is_judged() {
    let s = summary(
        PacketKind::Xdp,
        Some((652.4, 601.0, 700.2)),
        Some((181.0, -12.0, 390.0)),
    );
    assert!(
        s.starts_with("attaching an XDP program at all costs +652 ns at p50 [+601, +700] here"),
        "{s}"
    );
    assert!(
        s.contains("this program costs +181 ns at p50 [-12, +390] (not told apart from 0) on top"),
        "{s}"
    );
    assert!(
        s.ends_with("the verdict and the gates are on this program's cost"),
        "{s}"
    );
    let unknown = summary(PacketKind::Socket, None, Some((20.0, 10.0, 30.0)));
    assert!(
        unknown.starts_with("attaching a socket filter at all costs an unknown amount"),
        "{unknown}"
    );
    assert!(!unknown.contains("not told apart"), "{unknown}");
}
