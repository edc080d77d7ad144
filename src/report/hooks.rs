//! Which packet hook a stack's programs were entered from, read from the kernel frames above
//! its BPF part. The nearest non-BPF frame (the attach point) does not always name the hook: a
//! tc program sits under `cls_bpf_classify` (or `__tcf_classify` when a sample in the
//! program's prologue lost that frame), a cgroup_skb program under `__bpf_prog_run_save_cb`, a
//! tcx program right under `__netif_receive_skb_core` (into which `sch_handle_ingress` and
//! `tcx_run` are inlined), an XDP program under the driver's receive function through the
//! `bpf_dispatcher_xdp` trampoline. So the callers are read up to [`CALLERS_READ`] frames, and
//! the hook is named by the first function that only it runs, with its direction from the path
//! around it.

use serde::Serialize;

/// How many frames above the attach point are read for the hook.
pub const CALLERS_READ: usize = 24;

/// A packet hook as the stacks show it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum PacketHook {
    /// XDP in native (driver) mode: run by the driver's receive path (veth's NAPI poll here).
    XdpNative,
    /// XDP in generic (skb) mode: `do_xdp_generic`, on the skb after the driver.
    XdpGeneric,
    /// A tc classifier on a clsact qdisc's ingress (`sch_handle_ingress` → `tcf_classify`).
    TcIngress,
    /// The same on egress (`sch_handle_egress`).
    TcEgress,
    /// A tcx link on ingress (`tcx_run`, inlined into `__netif_receive_skb_core`).
    TcxIngress,
    /// A tcx link on egress (`tcx_run`, inlined into `__dev_queue_xmit`).
    TcxEgress,
    /// A cgroup_skb program on the way out (`__cgroup_bpf_run_filter_skb` from `ip_finish_output`).
    CgroupSkbEgress,
    /// A cgroup_skb program on the way in (`__cgroup_bpf_run_filter_skb` from `sk_filter_trim_cap`).
    CgroupSkbIngress,
    /// A cgroup_skb program whose direction the callers do not show.
    CgroupSkb,
    /// A socket filter (`sk_filter_trim_cap`, on delivery to the socket).
    SocketFilter,
}

impl PacketHook {
    /// How the report names it.
    pub fn describe(self) -> &'static str {
        match self {
            PacketHook::XdpNative => "XDP, native (driver) mode: run from the driver's receive path through bpf_dispatcher_xdp",
            PacketHook::XdpGeneric => "XDP, generic (skb) mode: do_xdp_generic, after the driver made the skb",
            PacketHook::TcIngress => "tc ingress: a clsact qdisc's classifier (sch_handle_ingress → tcf_classify → cls_bpf_classify)",
            PacketHook::TcEgress => "tc egress: a clsact qdisc's classifier (sch_handle_egress → tcf_classify → cls_bpf_classify)",
            PacketHook::TcxIngress => "tcx ingress: tcx_run, inlined with sch_handle_ingress into __netif_receive_skb_core",
            PacketHook::TcxEgress => "tcx egress: tcx_run, inlined with sch_handle_egress into __dev_queue_xmit",
            PacketHook::CgroupSkbEgress => "cgroup_skb egress: __cgroup_bpf_run_filter_skb on the way out (ip_finish_output)",
            PacketHook::CgroupSkbIngress => "cgroup_skb ingress: __cgroup_bpf_run_filter_skb on delivery (sk_filter_trim_cap)",
            PacketHook::CgroupSkb => "cgroup_skb: __cgroup_bpf_run_filter_skb (direction not in the call chain)",
            PacketHook::SocketFilter => "socket filter: sk_filter_trim_cap, on delivery to the socket",
        }
    }
}

/// A kernel function's name without the compiler's suffix (`__tcf_classify.constprop.0`).
fn plain(name: &str) -> &str {
    name.split('.').next().unwrap_or(name)
}

/// Whether the nearest of the transmit path's functions is nearer than the receive path's.
/// The receive runs inside the sender's transmit on veth (softirq on the sending CPU), so both
/// paths can be in one chain: the nearer one is the hook's.
fn egress_nearer(chain: &[&str]) -> bool {
    let nearest = |names: &[&str]| chain.iter().position(|c| names.contains(c));
    let ingress = nearest(&["sch_handle_ingress", "__netif_receive_skb_core"]);
    let egress = nearest(&["sch_handle_egress", "__dev_queue_xmit"]);
    match (ingress, egress) {
        (Some(i), Some(e)) => e < i,
        (None, Some(_)) => true,
        _ => false,
    }
}

/// The hook of a stack whose attach point and callers are `callers` (bare names, the attach
/// point first, then upward), entered through the glue frames `via`; `None` when it is no
/// packet hook this knows.
pub fn classify<'a>(
    callers: impl IntoIterator<Item = &'a str>,
    via: &[String],
) -> Option<PacketHook> {
    let chain: Vec<&str> = callers.into_iter().take(CALLERS_READ).map(plain).collect();
    let has = |names: &[&str]| chain.iter().any(|c| names.contains(c));
    let first_is = |names: &[&str]| chain.first().is_some_and(|c| names.contains(c));
    let egress_first = egress_nearer(&chain);
    if has(&["__cgroup_bpf_run_filter_skb"]) {
        return Some(
            match (
                has(&[
                    "ip_finish_output",
                    "__ip_finish_output",
                    "ip6_finish_output",
                ]),
                has(&["sk_filter_trim_cap"]),
            ) {
                (true, _) => PacketHook::CgroupSkbEgress,
                (false, true) => PacketHook::CgroupSkbIngress,
                (false, false) => PacketHook::CgroupSkb,
            },
        );
    }
    if has(&["cls_bpf_classify", "tcf_classify", "__tcf_classify"]) {
        return Some(match egress_first {
            true => PacketHook::TcEgress,
            false => PacketHook::TcIngress,
        });
    }
    if has(&[
        "do_xdp_generic",
        "netif_receive_generic_xdp",
        "bpf_prog_run_generic_xdp",
    ]) {
        return Some(PacketHook::XdpGeneric);
    }
    if via.iter().any(|v| v.starts_with("bpf_dispatcher_xdp"))
        || has(&["veth_xdp_rcv_skb", "veth_xdp_rcv_one", "veth_xdp_rcv"])
    {
        return Some(PacketHook::XdpNative);
    }
    if first_is(&["tcx_run", "sch_handle_ingress", "__netif_receive_skb_core"]) {
        return Some(PacketHook::TcxIngress);
    }
    if first_is(&["tcx_run", "sch_handle_egress", "__dev_queue_xmit"]) {
        return Some(PacketHook::TcxEgress);
    }
    if first_is(&["sk_filter_trim_cap", "bpf_prog_run_save_cb"]) && has(&["sk_filter_trim_cap"]) {
        return Some(PacketHook::SocketFilter);
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The callers above each kind's programs in recordings of `record --load KIND_8.bpf.o`
    /// over udp-veth on kernel 6.18 (the attach point first).
    #[test]
    fn each_kind_is_read_from_its_callers() {
        let xdp = [
            "veth_xdp_rcv_skb",
            "veth_xdp_rcv",
            "veth_poll",
            "__napi_poll",
        ];
        let dispatcher = vec!["bpf_dispatcher_xdp_func".to_string()];
        assert_eq!(classify(xdp, &dispatcher), Some(PacketHook::XdpNative));
        let generic = [
            "bpf_prog_run_generic_xdp",
            "do_xdp_generic",
            "__netif_receive_skb_core.constprop.0",
        ];
        assert_eq!(classify(generic, &[]), Some(PacketHook::XdpGeneric));
        // On veth the receive runs inside the sender's __dev_queue_xmit: the nearer is read.
        let tc = [
            "cls_bpf_classify",
            "__tcf_classify.constprop.0",
            "tcf_classify",
            "tc_run",
            "__netif_receive_skb_core.constprop.0",
            "process_backlog",
            "__dev_queue_xmit",
        ];
        assert_eq!(classify(tc, &[]), Some(PacketHook::TcIngress));
        // A sample in the program's prologue loses cls_bpf_classify: still tc.
        assert_eq!(
            classify(tc[1..].iter().copied(), &[]),
            Some(PacketHook::TcIngress)
        );
    }

    #[test]
    fn the_direction_and_the_wrappers_are_read_too() {
        let tc_out = [
            "cls_bpf_classify",
            "tcf_classify",
            "tc_run",
            "__dev_queue_xmit",
            "ip_finish_output2",
        ];
        assert_eq!(classify(tc_out, &[]), Some(PacketHook::TcEgress));
        let tcx = [
            "__netif_receive_skb_core.constprop.0",
            "__netif_receive_skb_one_core",
            "process_backlog",
        ];
        assert_eq!(classify(tcx, &[]), Some(PacketHook::TcxIngress));
        let tcx_out = ["__dev_queue_xmit", "ip_finish_output2", "ip_output"];
        assert_eq!(classify(tcx_out, &[]), Some(PacketHook::TcxEgress));
        let cgroup = [
            "__bpf_prog_run_save_cb",
            "__cgroup_bpf_run_filter_skb",
            "ip_finish_output",
            "ip_output",
        ];
        assert_eq!(classify(cgroup, &[]), Some(PacketHook::CgroupSkbEgress));
        let cgroup_in = [
            "__bpf_prog_run_save_cb",
            "__cgroup_bpf_run_filter_skb",
            "sk_filter_trim_cap",
            "udp_queue_rcv_one_skb",
        ];
        assert_eq!(classify(cgroup_in, &[]), Some(PacketHook::CgroupSkbIngress));
        let socket = [
            "sk_filter_trim_cap",
            "udp_queue_rcv_one_skb",
            "udp_unicast_rcv_skb",
        ];
        assert_eq!(classify(socket, &[]), Some(PacketHook::SocketFilter));
    }

    #[test]
    fn other_hooks_are_no_packet_hook() {
        let lsm = ["bpf_lsm_file_open", "security_file_open", "do_dentry_open"];
        let trampoline = vec!["bpf_trampoline_6442491220".to_string()];
        assert_eq!(classify(lsm, &trampoline), None);
        let tracepoint = [
            "trace_call_bpf",
            "perf_syscall_enter",
            "syscall_trace_enter",
        ];
        assert_eq!(classify(tracepoint, &[]), None);
        // A hook far above the programs is not read: only the nearest frames are.
        let far = std::iter::repeat_n("f", CALLERS_READ).chain(["sk_filter_trim_cap"]);
        assert_eq!(classify(far, &[]), None);
    }
}
