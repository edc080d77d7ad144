//! The test run's fixture programs, compiled by build.rs from `fixtures/hooks/testrun/` and
//! `fixtures/hooks/bad/`, for the tests and the targets script (each with its file name).

/// The XDP classifier whose cost depends on the packet (`xdp_classify.bpf.c`).
pub const XDP_CLASSIFY: (&str, &[u8]) = (
    "xdp_classify.bpf.o",
    include_bytes!(concat!(
        env!("OUT_DIR"),
        "/hooks/testrun/xdp_classify.bpf.o"
    )),
);
/// The same without the look-ups of TCP to port 443.
pub const XDP_CLASSIFY_LEAN: (&str, &[u8]) = (
    "xdp_classify_lean.bpf.o",
    include_bytes!(concat!(
        env!("OUT_DIR"),
        "/hooks/testrun/xdp_classify_lean.bpf.o"
    )),
);
/// The tc classifier (`tc_classify.bpf.c`).
pub const TC_CLASSIFY: (&str, &[u8]) = (
    "tc_classify.bpf.o",
    include_bytes!(concat!(env!("OUT_DIR"), "/hooks/testrun/tc_classify.bpf.o")),
);
/// The XDP program that rewrites IPv4 UDP frames (`xdp_reflect.bpf.c`).
pub const XDP_REFLECT: (&str, &[u8]) = (
    "xdp_reflect.bpf.o",
    include_bytes!(concat!(env!("OUT_DIR"), "/hooks/testrun/xdp_reflect.bpf.o")),
);
/// An sk_msg program: no test run.
pub const SK_MSG: (&str, &[u8]) = (
    "sk_msg.bpf.o",
    include_bytes!(concat!(env!("OUT_DIR"), "/hooks/bad/sk_msg.bpf.o")),
);
/// A sock_ops program: no test run.
pub const SOCK_OPS: (&str, &[u8]) = (
    "sock_ops.bpf.o",
    include_bytes!(concat!(env!("OUT_DIR"), "/hooks/bad/sock_ops.bpf.o")),
);

/// Every fixture program, for writing them all into a directory.
pub const ALL: [(&str, &[u8]); 6] = [
    XDP_CLASSIFY,
    XDP_CLASSIFY_LEAN,
    TC_CLASSIFY,
    XDP_REFLECT,
    SK_MSG,
    SOCK_OPS,
];
