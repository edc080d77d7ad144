//! The private network a packet operation sends through: a network namespace and a veth pair
//! made by the tool for one run, and removed on every way out of it. The namespace is named
//! `ebpf-prof-PID-N` (`ip netns` shows it), one end of the pair stays in the tool's namespace
//! and sends, the other (the peer) is moved into the private namespace and receives: that is
//! where an XDP or tc ingress program attaches.
//!
//! Everything is made with `ip` from iproute2, found on `PATH` and, as root, checked like every
//! program root runs (`perf::trust::program`), then run by that absolute path. Before anything
//! is made, a note under /run/ebpf-prof says what will have to go ([`journal`]); dropping the
//! [`VethPair`] removes it all (on an error, a caught signal, or a panic, which unwinds), and
//! the next start of any command removes what a killed run (SIGKILL, abort) left.
//!
//! A [`PacketNetwork`] adds a cgroup of the same name that this process (and so the bench it
//! starts) moves into, for cgroup_skb programs ([`cgroup`]).
//!
//! The link is set up so that only the bench's packets cross it: no IPv6 link-local address
//! (no router solicitations or duplicate address detection) and a permanent neighbour entry
//! for the peer (no ARP), so a program on the peer runs once per datagram.

pub mod cgroup;
pub mod journal;
pub mod names;

use crate::bench::OpKind;
use crate::error::child;
use crate::host::Host;
use anyhow::Result;
use names::{mac, Addresses, NetNames, NETNS_DIR, PREFIX_LEN};
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};

/// Pairs made by this process so far: the next one's number.
static COUNTER: AtomicU32 = AtomicU32::new(0);

/// A namespace and veth pair of this run's, removed when dropped.
#[derive(Debug)]
pub struct VethPair {
    names: NetNames,
    addresses: Addresses,
    ip: PathBuf,
    host: Host,
}

impl VethPair {
    /// Make the namespace and the pair, noted first so that a SIGKILL at any point leaves
    /// nothing the next start does not remove.
    pub fn create(host: &Host) -> Result<VethPair> {
        let ip = crate::perf::trust::program(std::ffi::OsStr::new("ip"), "ip (iproute2)")?;
        let pid = std::process::id();
        let counter = COUNTER.fetch_add(1, Ordering::Relaxed);
        let pair = VethPair {
            names: NetNames::new(pid, counter),
            addresses: Addresses::new(pid, counter),
            ip,
            host: host.clone(),
        };
        journal::add(host, &pair.names)?;
        crate::failpoint::hit("netns-noted");
        for argv in setup_argvs(&pair.names, &pair.addresses, pid, counter) {
            run_ip(&pair.ip, &argv)?;
        }
        crate::failpoint::hit("netns-made");
        Ok(pair)
    }

    /// The names of the namespace and both ends.
    pub fn names(&self) -> &NetNames {
        &self.names
    }

    /// The addresses of both ends.
    pub fn addresses(&self) -> Addresses {
        self.addresses
    }

    /// The namespace's file, which `setns` takes.
    pub fn netns_path(&self) -> PathBuf {
        Path::new(NETNS_DIR).join(&self.names.netns)
    }
}

impl Drop for VethPair {
    fn drop(&mut self) {
        let problems = remove(&self.ip, &self.names);
        if problems.is_empty() {
            journal::remove(&self.host, &self.names);
        }
        for line in problems {
            crate::out::say(format!("warning: {line}; the next start tries again"));
        }
    }
}

/// The private network of a run timing a packet operation, with the packet programs' attach
/// place set to it (`bpf::packet`) for as long as it lives.
#[derive(Debug)]
pub struct PacketNetwork {
    // Fields drop in order: the attach place is unset before the cgroup and the pair go.
    _target: crate::bpf::packet::TargetGuard,
    cgroup: cgroup::BenchCgroup,
    pair: VethPair,
}

impl PacketNetwork {
    /// A network for `op` when it is a packet operation, or one firing cgroup programs, run by
    /// the built-in bench (`builtin`); `None` for every other operation.
    pub fn for_op(op: &OpKind, builtin: Bench) -> Result<Option<PacketNetwork>> {
        if !op.needs_network() || builtin == Bench::Own {
            return Ok(None);
        }
        let pair = VethPair::create(&Host::live())?;
        let bench_cgroup = cgroup::BenchCgroup::create(&pair.names.netns)?;
        crate::failpoint::hit("packet-network-ready");
        let target = crate::bpf::packet::PacketTarget {
            netns: pair.netns_path(),
            peer_if: pair.names.peer_if.clone(),
            host_if: pair.names.host_if.clone(),
            cgroup: bench_cgroup.path().to_path_buf(),
            socket_handover: crate::bench::socket_filter_handover(&pair.names.netns),
        };
        Ok(Some(PacketNetwork {
            _target: crate::bpf::packet::TargetGuard::install(target),
            cgroup: bench_cgroup,
            pair,
        }))
    }

    /// A network for the object `src` when `--op auto` would time a packet operation for its
    /// programs (the choice `overhead`, `record` and `demo` make from its sections); `None` for
    /// every other object. For `hook`, which holds the programs and times nothing.
    pub fn for_object(src: crate::bpf::ObjectSource<'_>) -> Result<Option<PacketNetwork>> {
        use crate::bench::choose::OpChoice;
        let path = Path::new(crate::bench::DEFAULT_PATH);
        let default = OpKind::openat(path);
        let (op, _) = crate::bpf::choice::for_object(src, &default, OpChoice::Auto, path)?;
        PacketNetwork::for_op(&op, Bench::BuiltIn)
    }

    /// Where packets for the programs attached here go, in one line: what to send, from where,
    /// to reach them.
    pub fn reach_line(&self) -> String {
        let names = self.pair.names();
        let addresses = self.pair.addresses();
        format!(
            "packets to {peer} sent from here (`ping -c 3 {peer}`) leave through {host_if} and arrive on {peer_if} in the network namespace {netns}: XDP, tc and tcx ingress programs there see them; a cgroup_skb program sees the sockets of processes in the cgroup {cgroup}; a socket filter's program id is in {handover}, for SO_ATTACH_BPF on a socket of yours (`bpftool prog pin id ID /sys/fs/bpf/NAME` gives a pin)",
            peer = addresses.peer,
            host_if = names.host_if,
            peer_if = names.peer_if,
            netns = names.netns,
            cgroup = self.cgroup.path().display(),
            handover = crate::bench::socket_filter_handover(&names.netns).display(),
        )
    }

    /// `op` sending into this network.
    pub fn op(&self, op: &OpKind) -> OpKind {
        op.in_netns(&self.pair.names.netns)
    }

    /// The pair.
    pub fn pair(&self) -> &VethPair {
        &self.pair
    }
}

/// Whose benchmark a run times.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Bench {
    /// The built-in bench, which sends through the network.
    BuiltIn,
    /// A benchmark command of the user's, which makes its own operation.
    Own,
}

/// The `ip` argument lists that make the namespace and the pair, in order.
pub fn setup_argvs(
    names: &NetNames,
    addresses: &Addresses,
    pid: u32,
    counter: u32,
) -> Vec<Vec<String>> {
    let (ns, host_if, peer_if) = (&names.netns, &names.host_if, &names.peer_if);
    let host_cidr = format!("{}/{PREFIX_LEN}", addresses.host);
    let peer_cidr = format!("{}/{PREFIX_LEN}", addresses.peer);
    let peer_mac = mac(pid, counter, 2);
    let text = [
        format!("netns add {ns}"),
        format!(
            "link add {host_if} address {} type veth peer name {peer_if} address {peer_mac} netns {ns}",
            mac(pid, counter, 1)
        ),
        format!("link set {host_if} addrgenmode none"),
        format!("-n {ns} link set {peer_if} addrgenmode none"),
        format!("addr add {host_cidr} dev {host_if}"),
        format!("-n {ns} addr add {peer_cidr} dev {peer_if}"),
        format!(
            "neigh replace {} lladdr {peer_mac} dev {host_if} nud permanent",
            addresses.peer
        ),
        format!("-n {ns} link set lo up"),
        format!("-n {ns} link set {peer_if} up"),
        format!("link set {host_if} up"),
    ];
    text.iter()
        .map(|line| line.split(' ').map(str::to_string).collect())
        .collect()
}

/// The `ip` argument lists that remove them: the pair (deleting one end deletes both), then the
/// namespace.
pub fn teardown_argvs(names: &NetNames) -> [Vec<String>; 2] {
    [
        vec!["link".into(), "del".into(), names.host_if.clone()],
        vec!["netns".into(), "del".into(), names.netns.clone()],
    ]
}

/// Remove what `names` name; one line per part that could not be removed. A part that is
/// already gone is not a problem.
pub fn remove(ip: &Path, names: &NetNames) -> Vec<String> {
    let [link, netns] = teardown_argvs(names);
    let mut problems = Vec::new();
    // A socket filter handed over to the bench, and the cgroup of the same name it sent from.
    let _ = std::fs::remove_file(crate::bench::socket_filter_handover(&names.netns));
    if let Some(root) = cgroup::cgroup2_root() {
        problems.extend(cgroup::remove(&root.join(&names.netns)));
    }
    if let Err(e) = run_ip(ip, &link) {
        if interface_exists(&names.host_if) {
            problems.push(format!("could not remove veth {}: {e:#}", names.host_if));
        }
    }
    if let Err(e) = run_ip(ip, &netns) {
        if Path::new(NETNS_DIR).join(&names.netns).exists() {
            problems.push(format!(
                "could not remove network namespace {}: {e:#}",
                names.netns
            ));
        }
    }
    problems
}

/// Whether an interface of that name exists in the tool's namespace.
fn interface_exists(name: &str) -> bool {
    Path::new("/sys/class/net").join(name).exists()
}

/// Run `ip ARGS…`; an error carries the command line and what `ip` said.
fn run_ip(ip: &Path, argv: &[String]) -> Result<()> {
    let out = std::process::Command::new(ip)
        .args(argv.iter().map(OsString::from))
        .stdin(std::process::Stdio::null())
        .output()
        .map_err(|e| {
            child(format!(
                "cannot run {}: {}",
                ip.display(),
                crate::out::plain(&e)
            ))
        })?;
    if out.status.success() {
        return Ok(());
    }
    Err(child(format!(
        "{} {} failed ({}): {}",
        ip.display(),
        argv.join(" "),
        out.status,
        String::from_utf8_lossy(&out.stderr).trim()
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn setup_makes_the_namespace_first_and_brings_the_links_up_last() {
        let names = NetNames::new(42, 0);
        let argvs = setup_argvs(&names, &Addresses::new(42, 0), 42, 0);
        assert_eq!(argvs[0], ["netns", "add", "ebpf-prof-42-0"]);
        let veth = argvs[1].join(" ");
        assert!(veth.contains("type veth peer name ep42p0"), "{veth}");
        assert!(veth.ends_with("netns ebpf-prof-42-0"), "{veth}");
        assert!(argvs.last().unwrap().ends_with(&["up".to_string()]));
        let neigh = argvs.iter().find(|a| a[0] == "neigh").unwrap().join(" ");
        assert!(
            neigh.contains("10.211.") && neigh.ends_with("nud permanent"),
            "{neigh}"
        );
        assert!(argvs.iter().all(|a| a.iter().all(|w| !w.is_empty())));
    }

    #[test]
    fn teardown_removes_the_pair_then_the_namespace() {
        let names = NetNames::new(42, 1);
        let [link, netns] = teardown_argvs(&names);
        assert_eq!(link, ["link", "del", "ep42h1"]);
        assert_eq!(netns, ["netns", "del", "ebpf-prof-42-1"]);
    }
}
