//! The kernel's test run of one loaded program (`BPF_PROG_TEST_RUN` through libbpf's
//! `bpf_prog_test_run_opts`): the program runs `repeat` times on a copy of the packet inside
//! the syscall, and the verdict of the last run comes back. Which program types have a packet
//! test run, and the names of their verdicts, are here too.

use std::os::fd::{AsRawFd, BorrowedFd};

use libbpf_rs::libbpf_sys;

/// `BPF_F_TEST_XDP_LIVE_FRAMES` (include/uapi/linux/bpf.h, Linux 5.18): XDP frames are built
/// in a page pool and their verdicts carried out (PASS up the stack, TX and REDIRECT out).
pub const BPF_F_TEST_XDP_LIVE_FRAMES: u32 = 1 << 1;
/// Room for what a program makes of a frame (a grown head included) when it is copied out.
const OUTPUT_ROOM: usize = 4096;

/// The packet program types the kernel has a test run for, as `--test-run` knows them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum PacketKind {
    Xdp,
    /// tc classifiers and actions, tcx included (`SEC("tc")`, `"classifier"`, `"tcx/…"`).
    Tc,
    SocketFilter,
    CgroupSkb,
}

impl PacketKind {
    /// The kind of a program from its `SEC()` name, as libbpf maps sections to types; `None`
    /// for a type with no packet test run.
    pub fn from_section(section: &str) -> Option<PacketKind> {
        let head = section.split('/').next().unwrap_or(section);
        match head {
            "xdp" | "xdp.frags" => Some(PacketKind::Xdp),
            "tc" | "classifier" | "action" | "tcx" | "netkit" => Some(PacketKind::Tc),
            "socket" => Some(PacketKind::SocketFilter),
            "cgroup_skb" => Some(PacketKind::CgroupSkb),
            _ => None,
        }
    }

    /// The name a verdict of this kind goes by.
    pub fn verdict_name(self, retval: u32) -> String {
        match self {
            PacketKind::Xdp => match retval {
                0 => "XDP_ABORTED".into(),
                1 => "XDP_DROP".into(),
                2 => "XDP_PASS".into(),
                3 => "XDP_TX".into(),
                4 => "XDP_REDIRECT".into(),
                other => format!("XDP verdict {other}"),
            },
            PacketKind::Tc => tc_verdict(retval as i32),
            PacketKind::SocketFilter => match retval {
                0 => "drop".into(),
                kept => format!("keep {kept} bytes"),
            },
            PacketKind::CgroupSkb => match retval & 1 {
                0 => "deny".into(),
                _ => "allow".into(),
            },
        }
    }
}

impl std::fmt::Display for PacketKind {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str(match self {
            PacketKind::Xdp => "xdp",
            PacketKind::Tc => "tc",
            PacketKind::SocketFilter => "socket filter",
            PacketKind::CgroupSkb => "cgroup_skb",
        })
    }
}

/// The `TC_ACT_*` name of a tc verdict (include/uapi/linux/pkt_cls.h).
fn tc_verdict(retval: i32) -> String {
    let name = match retval {
        -1 => "TC_ACT_UNSPEC",
        0 => "TC_ACT_OK",
        1 => "TC_ACT_RECLASSIFY",
        2 => "TC_ACT_SHOT",
        3 => "TC_ACT_PIPE",
        4 => "TC_ACT_STOLEN",
        5 => "TC_ACT_QUEUED",
        6 => "TC_ACT_REPEAT",
        7 => "TC_ACT_REDIRECT",
        8 => "TC_ACT_TRAP",
        other => return format!("tc verdict {other}"),
    };
    name.into()
}

/// What one untimed run of a packet gives: the verdict and the packet as the program left it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    pub retval: u32,
    pub output: Vec<u8>,
}

/// How the runs of a timed call are made.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunMode {
    /// The ordinary test run: one buffer, the verdict only returned.
    Plain,
    /// XDP live frames: verdicts carried out (see [`BPF_F_TEST_XDP_LIVE_FRAMES`]).
    LiveFrames,
}

/// One run of `packet`, its output copied back: the verdict and whether it rewrote the packet.
/// The errno on failure.
pub fn run_once(program: BorrowedFd<'_>, kind: PacketKind, packet: &[u8]) -> Result<Outcome, i32> {
    let mut output = vec![0u8; packet.len() + OUTPUT_ROOM];
    let mut opts = libbpf_sys::bpf_test_run_opts {
        sz: std::mem::size_of::<libbpf_sys::bpf_test_run_opts>() as _,
        data_in: packet.as_ptr().cast(),
        data_size_in: packet.len() as u32,
        data_out: output.as_mut_ptr().cast(),
        data_size_out: output.len() as u32,
        repeat: 1,
        ..Default::default()
    };
    // SAFETY: the buffers outlive the call and their sizes are the ones given.
    let ret = unsafe { libbpf_sys::bpf_prog_test_run_opts(program.as_raw_fd(), &mut opts) };
    if ret < 0 {
        return Err(errno_of(ret));
    }
    output.truncate(opts.data_size_out as usize);
    restore_link_header(kind, packet, &mut output);
    Ok(Outcome {
        retval: opts.retval,
        output,
    })
}

/// The length of an Ethernet header.
const ETHERNET_HEADER: usize = 14;

/// A socket filter or cgroup_skb program runs from the network header and cannot see the
/// Ethernet header, and the kernel hands its packet back with that header zeroed. Put the
/// input's header back, so that the output differs from the input only where the program
/// changed it (a program that changes nothing must not be timed as one that rewrites).
fn restore_link_header(kind: PacketKind, input: &[u8], output: &mut [u8]) {
    if !matches!(kind, PacketKind::SocketFilter | PacketKind::CgroupSkb) {
        return;
    }
    if input.len() < ETHERNET_HEADER || output.len() < ETHERNET_HEADER {
        return;
    }
    if output[..ETHERNET_HEADER].iter().all(|byte| *byte == 0) {
        output[..ETHERNET_HEADER].copy_from_slice(&input[..ETHERNET_HEADER]);
    }
}

/// The kernel's own mean per run of one test-run call of `repeat` runs on `packet`, in whole
/// ns (rounded down), nothing copied out. The kernel times only its loop of runs: not the
/// syscall, not copying the packet in, not building the skb or xdp_buff, and not the XDP
/// dispatcher's update around a repeated XDP run (two RCU grace periods, milliseconds, which
/// is why the time is not read around the syscall). The errno on failure.
pub fn timed_call(
    program: BorrowedFd<'_>,
    packet: &[u8],
    repeat: u32,
    mode: RunMode,
) -> Result<u32, i32> {
    let mut opts = libbpf_sys::bpf_test_run_opts {
        sz: std::mem::size_of::<libbpf_sys::bpf_test_run_opts>() as _,
        data_in: packet.as_ptr().cast(),
        data_size_in: packet.len() as u32,
        repeat: repeat as i32,
        ..Default::default()
    };
    if mode == RunMode::LiveFrames {
        opts.flags = BPF_F_TEST_XDP_LIVE_FRAMES;
    }
    // SAFETY: the input buffer outlives the call; nothing is copied out.
    let ret = unsafe { libbpf_sys::bpf_prog_test_run_opts(program.as_raw_fd(), &mut opts) };
    if ret < 0 {
        return Err(errno_of(ret));
    }
    Ok(opts.duration)
}

/// libbpf returns `-errno` (and sets errno); keep the positive number.
fn errno_of(ret: i32) -> i32 {
    match ret {
        -1 => std::io::Error::last_os_error()
            .raw_os_error()
            .unwrap_or(libc::EINVAL),
        negative => -negative,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sections_map_to_the_kinds_libbpf_gives_them() {
        assert_eq!(PacketKind::from_section("xdp"), Some(PacketKind::Xdp));
        assert_eq!(PacketKind::from_section("xdp.frags"), Some(PacketKind::Xdp));
        assert_eq!(PacketKind::from_section("tc"), Some(PacketKind::Tc));
        assert_eq!(
            PacketKind::from_section("tcx/ingress"),
            Some(PacketKind::Tc)
        );
        assert_eq!(PacketKind::from_section("classifier"), Some(PacketKind::Tc));
        assert_eq!(
            PacketKind::from_section("socket"),
            Some(PacketKind::SocketFilter)
        );
        assert_eq!(
            PacketKind::from_section("cgroup_skb/egress"),
            Some(PacketKind::CgroupSkb)
        );
        for none in [
            "sk_msg",
            "sockops",
            "tracepoint/syscalls/sys_enter_openat",
            "lsm/file_open",
        ] {
            assert_eq!(PacketKind::from_section(none), None, "{none}");
        }
    }

    #[test]
    fn the_zeroed_link_header_of_a_network_layer_program_is_put_back() {
        let input: Vec<u8> = (1..=60).collect();
        let mut zeroed = input.clone();
        zeroed[..ETHERNET_HEADER].fill(0);
        for kind in [PacketKind::SocketFilter, PacketKind::CgroupSkb] {
            let mut output = zeroed.clone();
            restore_link_header(kind, &input, &mut output);
            assert_eq!(output, input, "{kind}");
            // A change past the link header stays a change.
            let mut changed = zeroed.clone();
            changed[30] ^= 0xFF;
            restore_link_header(kind, &input, &mut changed);
            assert_ne!(changed, input, "{kind}");
        }
        // XDP and tc programs see the whole frame: a zeroed header there is the program's doing.
        for kind in [PacketKind::Xdp, PacketKind::Tc] {
            let mut output = zeroed.clone();
            restore_link_header(kind, &input, &mut output);
            assert_eq!(output, zeroed, "{kind}");
        }
    }

    #[test]
    fn verdicts_are_named_as_the_headers_name_them() {
        assert_eq!(PacketKind::Xdp.verdict_name(1), "XDP_DROP");
        assert_eq!(PacketKind::Xdp.verdict_name(9), "XDP verdict 9");
        assert_eq!(PacketKind::Tc.verdict_name(u32::MAX), "TC_ACT_UNSPEC");
        assert_eq!(PacketKind::Tc.verdict_name(2), "TC_ACT_SHOT");
        assert_eq!(PacketKind::SocketFilter.verdict_name(0), "drop");
        assert_eq!(PacketKind::SocketFilter.verdict_name(60), "keep 60 bytes");
        assert_eq!(PacketKind::CgroupSkb.verdict_name(3), "allow");
    }
}
