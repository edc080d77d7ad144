//! The names and addresses of one run's private network: a namespace `ebpf-prof-PID-N`, a veth
//! pair `epPIDhN` (this side) and `epPIDpN` (the peer, inside the namespace), and a /30 of
//! 10.211.0.0/16 picked from the pid and the counter, so that two runs at once never share a
//! route. Pure: everything here is computed, nothing is asked of the machine.

use std::net::Ipv4Addr;

/// The prefix of every namespace the tool makes; recovery acts on no other name.
pub const NETNS_PREFIX: &str = "ebpf-prof-";

/// The longest interface name the kernel takes (`IFNAMSIZ` less the NUL).
const IFNAME_MAX: usize = 15;

/// Where the namespaces named by `ip netns` are bind-mounted.
pub const NETNS_DIR: &str = "/run/netns";

/// One run's namespace and veth pair, by name, with the addresses of both ends.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct NetNames {
    /// The namespace, as `ip netns` names it.
    pub netns: String,
    /// The veth end left in the tool's own namespace (the sending side).
    pub host_if: String,
    /// The veth end moved into the namespace (the receiving side, where XDP attaches).
    pub peer_if: String,
}

impl NetNames {
    /// The names of pair number `counter` of process `pid`.
    pub fn new(pid: u32, counter: u32) -> NetNames {
        NetNames {
            netns: format!("{NETNS_PREFIX}{pid}-{counter}"),
            host_if: format!("ep{pid}h{counter}"),
            peer_if: format!("ep{pid}p{counter}"),
        }
    }

    /// Whether these are names the tool could have made: recovery reads them from a file and
    /// passes them to `ip`, so anything else is refused.
    pub fn are_ours(&self) -> bool {
        let Some(rest) = self.netns.strip_prefix(NETNS_PREFIX) else {
            return false;
        };
        let Some((pid, counter)) = rest.split_once('-') else {
            return false;
        };
        let numeric =
            |s: &str| !s.is_empty() && s.len() <= 10 && s.bytes().all(|b| b.is_ascii_digit());
        if !numeric(pid) || !numeric(counter) {
            return false;
        }
        let (Ok(pid), Ok(counter)) = (pid.parse(), counter.parse()) else {
            return false;
        };
        *self == NetNames::new(pid, counter) && self.host_if.len() <= IFNAME_MAX
    }
}

/// The two ends' addresses: a /30 of 10.211.0.0/16 chosen by pid and counter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Addresses {
    pub host: Ipv4Addr,
    pub peer: Ipv4Addr,
}

/// The prefix length of the link between the two ends.
pub const PREFIX_LEN: u8 = 30;

impl Addresses {
    /// The addresses of pair `counter` of process `pid`.
    pub fn new(pid: u32, counter: u32) -> Addresses {
        // 16384 blocks of four addresses fill 10.211.0.0/16.
        let block = pid.wrapping_mul(4).wrapping_add(counter) % 16384;
        let base = u32::from(Ipv4Addr::new(10, 211, 0, 0)) + block * 4;
        Addresses {
            host: Ipv4Addr::from(base + 1),
            peer: Ipv4Addr::from(base + 2),
        }
    }
}

/// A locally administered MAC address for one end, so that the neighbour entry can be set
/// before the link is up (`end` 1 for this side, 2 for the peer).
pub fn mac(pid: u32, counter: u32, end: u8) -> String {
    let [_, b, c, d] = pid.to_be_bytes();
    let tail = ((counter as u8) << 2) | end;
    format!("02:{b:02x}:{c:02x}:{d:02x}:e1:{tail:02x}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_fit_the_kernel_and_are_recognised() {
        let names = NetNames::new(4_194_304, 3);
        assert!(names.host_if.len() <= IFNAME_MAX, "{names:?}");
        assert!(names.peer_if.len() <= IFNAME_MAX, "{names:?}");
        assert!(names.are_ours());
        assert_eq!(names.netns, "ebpf-prof-4194304-3");
    }

    #[test]
    fn names_from_elsewhere_are_refused() {
        let mut names = NetNames::new(12, 0);
        names.netns = "ebpf-prof-12-0; reboot".into();
        assert!(!names.are_ours());
        let mut other = NetNames::new(12, 0);
        other.host_if = "eth0".into();
        assert!(!other.are_ours(), "an interface we did not name");
        let mut root = NetNames::new(12, 0);
        root.netns = "default".into();
        assert!(!root.are_ours());
    }

    #[test]
    fn addresses_share_a_slash_30_and_differ_between_runs() {
        let one = Addresses::new(1000, 0);
        assert_eq!(u32::from(one.peer) - u32::from(one.host), 1);
        assert_eq!(
            u32::from(one.host) & 3,
            1,
            "the first usable address of its /30"
        );
        assert_ne!(Addresses::new(1000, 1), one);
        assert_ne!(Addresses::new(1001, 0), one);
        let last = Addresses::new(u32::MAX, u32::MAX);
        assert_eq!(last.peer.octets()[..2], [10, 211]);
    }

    #[test]
    fn macs_are_locally_administered_and_distinct() {
        let host = mac(77, 0, 1);
        assert!(host.starts_with("02:"));
        assert_ne!(host, mac(77, 0, 2));
        assert_eq!(host.len(), 17);
    }
}
