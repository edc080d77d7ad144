//! Packets for the kernel's test run: the built-in set ([`builtin`]), a user's capture
//! ([`capture`], pcap and pcapng of Ethernet frames), and what a frame is ([`summarise`]): its
//! protocol, addresses and ports, read bounds-checked from the bytes, for the classes of
//! `overhead --test-run` and the one-line example each class shows.

pub mod builtin;
pub mod capture;
pub mod checksum;

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// EtherType of IPv4 (IEEE 802 numbers).
pub const ETHERTYPE_IPV4: u16 = 0x0800;
/// EtherType of IPv6.
pub const ETHERTYPE_IPV6: u16 = 0x86dd;
/// EtherType of an 802.1Q VLAN tag.
pub const ETHERTYPE_VLAN: u16 = 0x8100;
/// IP protocol number of TCP (IANA).
pub const IPPROTO_TCP: u8 = 6;
/// IP protocol number of UDP.
pub const IPPROTO_UDP: u8 = 17;
/// IP protocol number of ICMP.
pub const IPPROTO_ICMP: u8 = 1;
/// IP protocol number of ICMPv6.
pub const IPPROTO_ICMPV6: u8 = 58;
/// Bytes of an Ethernet header without a VLAN tag.
pub const ETH_HEADER: usize = 14;
/// The TCP SYN flag bit.
pub const TCP_SYN: u8 = 0x02;
/// The TCP ACK flag bit.
pub const TCP_ACK: u8 = 0x10;

/// One frame as the test run is given it: Ethernet header first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Packet {
    pub bytes: Vec<u8>,
}

/// What a frame carries, as far as classing it goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Protocol {
    Udp,
    Tcp,
    Icmp,
    /// Another IP protocol, by number.
    OtherIp(u8),
    /// Not IP: the EtherType.
    NotIp(u16),
    /// Cut short before its headers end.
    Truncated,
}

impl std::fmt::Display for Protocol {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Protocol::Udp => formatter.write_str("UDP"),
            Protocol::Tcp => formatter.write_str("TCP"),
            Protocol::Icmp => formatter.write_str("ICMP"),
            Protocol::OtherIp(number) => write!(formatter, "IP proto {number}"),
            Protocol::NotIp(ethertype) => write!(formatter, "ethertype 0x{ethertype:04x}"),
            Protocol::Truncated => formatter.write_str("truncated"),
        }
    }
}

/// A frame's protocol, addresses and ports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Summary {
    pub protocol: Protocol,
    /// Source and destination address, when the frame is IP.
    pub addresses: Option<(IpAddr, IpAddr)>,
    /// Source and destination port of UDP and TCP.
    pub ports: Option<(u16, u16)>,
    /// TCP's flag byte.
    pub tcp_flags: Option<u8>,
}

impl Summary {
    fn bare(protocol: Protocol) -> Summary {
        Summary {
            protocol,
            addresses: None,
            ports: None,
            tcp_flags: None,
        }
    }

    /// The destination port, for UDP and TCP.
    pub fn destination_port(&self) -> Option<u16> {
        self.ports.map(|(_, destination)| destination)
    }

    /// Whether the frame is IPv6.
    pub fn is_ipv6(&self) -> bool {
        matches!(self.addresses, Some((IpAddr::V6(_), _)))
    }
}

/// The frame in one line, as tcpdump would begin it: `UDP 10.0.0.1:40000 > 10.0.0.2:53`,
/// `TCP [fd00::1]:40000 > [fd00::2]:443 SYN`, `ICMP 10.0.0.1 > 10.0.0.2`, `ethertype 0x0806`.
impl std::fmt::Display for Summary {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(formatter, "{}", self.protocol)?;
        let Some((source, destination)) = self.addresses else {
            return Ok(());
        };
        match self.ports {
            Some((source_port, destination_port)) => write!(
                formatter,
                " {} > {}",
                std::net::SocketAddr::new(source, source_port),
                std::net::SocketAddr::new(destination, destination_port)
            )?,
            None => write!(formatter, " {source} > {destination}")?,
        }
        match self.tcp_flags {
            Some(flags) if flags & (TCP_SYN | TCP_ACK) == TCP_SYN => formatter.write_str(" SYN"),
            Some(flags) if flags & (TCP_SYN | TCP_ACK) == TCP_SYN | TCP_ACK => {
                formatter.write_str(" SYN-ACK")
            }
            _ => Ok(()),
        }
    }
}

/// Read what `frame` carries: Ethernet (one VLAN tag skipped), IPv4 or IPv6 (no extension
/// headers followed), then the UDP or TCP ports. Every read is bounds-checked: a short frame
/// is [`Protocol::Truncated`], never a panic.
pub fn summarise(frame: &[u8]) -> Summary {
    let Some(mut ethertype) = be16(frame, 12) else {
        return Summary::bare(Protocol::Truncated);
    };
    let mut offset = ETH_HEADER;
    if ethertype == ETHERTYPE_VLAN {
        let Some(inner) = be16(frame, 16) else {
            return Summary::bare(Protocol::Truncated);
        };
        ethertype = inner;
        offset += 4;
    }
    let network = frame.get(offset..).unwrap_or_default();
    let parsed = match ethertype {
        ETHERTYPE_IPV4 => ipv4(network),
        ETHERTYPE_IPV6 => ipv6(network),
        other => return Summary::bare(Protocol::NotIp(other)),
    };
    let Some((protocol_number, addresses, transport)) = parsed else {
        return Summary::bare(Protocol::Truncated);
    };
    transport_summary(protocol_number, addresses, transport)
}

fn transport_summary(number: u8, addresses: (IpAddr, IpAddr), segment: &[u8]) -> Summary {
    let protocol = match number {
        IPPROTO_UDP => Protocol::Udp,
        IPPROTO_TCP => Protocol::Tcp,
        IPPROTO_ICMP | IPPROTO_ICMPV6 => Protocol::Icmp,
        other => Protocol::OtherIp(other),
    };
    let mut summary = Summary {
        protocol,
        addresses: Some(addresses),
        ports: None,
        tcp_flags: None,
    };
    if matches!(protocol, Protocol::Udp | Protocol::Tcp) {
        match (be16(segment, 0), be16(segment, 2)) {
            (Some(source), Some(destination)) => summary.ports = Some((source, destination)),
            _ => summary.protocol = Protocol::Truncated,
        }
    }
    if protocol == Protocol::Tcp {
        summary.tcp_flags = segment.get(13).copied();
    }
    summary
}

/// The protocol number, the addresses and the transport segment of an IPv4 packet.
fn ipv4(packet: &[u8]) -> Option<(u8, (IpAddr, IpAddr), &[u8])> {
    let header_length = usize::from(packet.first()? & 0x0f) * 4;
    if header_length < 20 {
        return None;
    }
    let source: [u8; 4] = packet.get(12..16)?.try_into().ok()?;
    let destination: [u8; 4] = packet.get(16..20)?.try_into().ok()?;
    let addresses = (
        IpAddr::V4(Ipv4Addr::from(source)),
        IpAddr::V4(Ipv4Addr::from(destination)),
    );
    Some((*packet.get(9)?, addresses, packet.get(header_length..)?))
}

/// The next-header number, the addresses and the payload of an IPv6 packet.
fn ipv6(packet: &[u8]) -> Option<(u8, (IpAddr, IpAddr), &[u8])> {
    let source: [u8; 16] = packet.get(8..24)?.try_into().ok()?;
    let destination: [u8; 16] = packet.get(24..40)?.try_into().ok()?;
    let addresses = (
        IpAddr::V6(Ipv6Addr::from(source)),
        IpAddr::V6(Ipv6Addr::from(destination)),
    );
    Some((*packet.get(6)?, addresses, packet.get(40..)?))
}

/// A big-endian u16 at `offset`, if the bytes are there.
fn be16(bytes: &[u8], offset: usize) -> Option<u16> {
    let pair = bytes.get(offset..offset.checked_add(2)?)?;
    Some(u16::from_be_bytes([pair[0], pair[1]]))
}

#[cfg(test)]
mod tests;
