//! Netfilter programs (`SEC("netfilter")`, `BPF_PROG_TYPE_NETFILTER`, kernel 6.4+): attached
//! with a BPF link to a netfilter hook of the network namespace the calling thread is in. The
//! packet path attaches them inside the run's private namespace, at IPv4 `NF_INET_LOCAL_IN`:
//! the packets the bench sends into that namespace (a `udp-veth` datagram, a `tcp-veth`
//! segment) pass it once each on their way to the receiving socket, and nothing of the
//! machine's own traffic does. `NF_INET_LOCAL_OUT` there would see only TCP's ACKs (the
//! namespace sends nothing else), and any hook of the tool's own namespace would filter the
//! machine's traffic.

use libbpf_rs::{libbpf_sys, AsRawLibbpf, Link, Program};
use std::ptr::NonNull;

/// The hook the packet path attaches netfilter programs to, as `nf_inet_hooks` numbers it.
pub const HOOK: u32 = libc::NF_INET_LOCAL_IN as u32;

/// How the hook is named in what the tool says.
pub const HOOK_NAME: &str = "NF_INET_LOCAL_IN";

/// The priority among the hook's functions: conntrack's defragmentation (-400) and connection
/// tracking (-200) run first, as they do before the filter table (0).
pub const PRIORITY: i32 = 0;

/// Attach `prog` to IPv4 [`HOOK`] of this thread's network namespace with a BPF link.
pub fn attach(prog: &Program<'_>) -> Result<Link, i32> {
    // SAFETY: zeroed options with their size set are what libbpf expects.
    let mut opts: libbpf_sys::bpf_netfilter_opts = unsafe { std::mem::zeroed() };
    opts.sz = size_of::<libbpf_sys::bpf_netfilter_opts>() as libbpf_sys::size_t;
    opts.pf = libc::NFPROTO_IPV4 as u32;
    opts.hooknum = HOOK;
    opts.priority = PRIORITY;
    let raw = prog.as_libbpf_object();
    // SAFETY: `raw` is a loaded program of a live object; the options live across the call.
    let link = unsafe { libbpf_sys::bpf_program__attach_netfilter(raw.as_ptr(), &opts) };
    // SAFETY: libbpf_get_error accepts any pointer libbpf returned, NULL included.
    let err = unsafe { libbpf_sys::libbpf_get_error(link.cast()) };
    match (NonNull::new(link), err) {
        // SAFETY: a non-NULL link without error is ours to own and destroy.
        (Some(link), 0) => Ok(unsafe { Link::from_ptr(link) }),
        (_, err) => Err(i32::try_from(-err).unwrap_or(libc::EINVAL)),
    }
}
