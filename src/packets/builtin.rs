//! The built-in packets of `overhead --test-run`: valid Ethernet frames with IPv4 or IPv6 and
//! UDP or TCP, checksums computed (a program that checks them accepts them), each at least
//! [`MIN_FRAME`] bytes, in a handful of kinds a packet program tells apart: a DNS query to port
//! 53, TCP SYNs to ports 80 and 443, the same over IPv6, and UDP to a port nothing serves.

use super::checksum;
use super::{Packet, ETHERTYPE_IPV4, ETHERTYPE_IPV6, IPPROTO_TCP, IPPROTO_UDP, TCP_SYN};
use std::net::{Ipv4Addr, Ipv6Addr};

/// The shortest built-in frame: Ethernet, IPv4 and TCP headers without options (14 + 20 + 20).
pub const MIN_FRAME: usize = 54;
/// Frames of each kind, from as many source ports: a class holds several packets.
pub const PER_KIND: u16 = 4;
/// The first source port; each frame of a kind takes the next.
const FIRST_SOURCE_PORT: u16 = 40000;
const SOURCE_MAC: [u8; 6] = [0x02, 0x00, 0x00, 0x00, 0x00, 0x01];
const DESTINATION_MAC: [u8; 6] = [0x02, 0x00, 0x00, 0x00, 0x00, 0x02];
const SOURCE_V4: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
const DESTINATION_V4: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);
const SOURCE_V6: Ipv6Addr = Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 1);
const DESTINATION_V6: Ipv6Addr = Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 2);
/// A DNS query for `example.com`, type A (RFC 1035 §4.1): id 0x1234, recursion desired.
const DNS_QUERY: &[u8] = b"\x12\x34\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00\
\x07example\x03com\x00\x00\x01\x00\x01";
/// TCP options of a SYN: MSS 1460, then the end of the list padded to a word.
const SYN_OPTIONS: [u8; 4] = [0x02, 0x04, 0x05, 0xb4];
/// The IPv4 identification field of every built-in frame (any value serves a single fragment).
const IPV4_IDENTIFICATION: u16 = 0x1c46;
/// Bytes of payload of the UDP frames to a port nothing serves.
const FILLER: usize = 32;

/// The addresses of a frame, by IP version.
#[derive(Debug, Clone, Copy)]
enum Hosts {
    V4(Ipv4Addr, Ipv4Addr),
    V6(Ipv6Addr, Ipv6Addr),
}

const HOSTS_V4: Hosts = Hosts::V4(SOURCE_V4, DESTINATION_V4);
const HOSTS_V6: Hosts = Hosts::V6(SOURCE_V6, DESTINATION_V6);

/// One kind of built-in frame.
#[derive(Debug, Clone, Copy)]
struct Kind {
    hosts: Hosts,
    protocol: u8,
    destination_port: u16,
}

const KINDS: [Kind; 6] = [
    Kind {
        hosts: HOSTS_V4,
        protocol: IPPROTO_UDP,
        destination_port: 53,
    },
    Kind {
        hosts: HOSTS_V4,
        protocol: IPPROTO_TCP,
        destination_port: 80,
    },
    Kind {
        hosts: HOSTS_V4,
        protocol: IPPROTO_TCP,
        destination_port: 443,
    },
    Kind {
        hosts: HOSTS_V4,
        protocol: IPPROTO_UDP,
        destination_port: 9999,
    },
    Kind {
        hosts: HOSTS_V6,
        protocol: IPPROTO_UDP,
        destination_port: 53,
    },
    Kind {
        hosts: HOSTS_V6,
        protocol: IPPROTO_TCP,
        destination_port: 443,
    },
];

/// Every built-in frame: [`PER_KIND`] of each kind, kinds in turn.
pub fn packets() -> Vec<Packet> {
    let mut all = Vec::new();
    for index in 0..PER_KIND {
        for kind in KINDS {
            all.push(frame(kind, FIRST_SOURCE_PORT + index));
        }
    }
    all
}

fn frame(kind: Kind, source_port: u16) -> Packet {
    let segment = match kind.protocol {
        IPPROTO_UDP => udp(source_port, kind.destination_port),
        _ => tcp_syn(source_port, kind.destination_port, source_port),
    };
    let bytes = match kind.hosts {
        Hosts::V4(source, destination) => ipv4_frame(source, destination, kind.protocol, segment),
        Hosts::V6(source, destination) => ipv6_frame(source, destination, kind.protocol, segment),
    };
    Packet { bytes }
}

/// A UDP segment, checksum zero for now: a DNS query to port 53, filler elsewhere.
fn udp(source_port: u16, destination_port: u16) -> Vec<u8> {
    let payload: Vec<u8> = match destination_port {
        53 => DNS_QUERY.to_vec(),
        _ => (0..FILLER).map(|byte| byte as u8).collect(),
    };
    let length = (8 + payload.len()) as u16;
    let mut segment = Vec::with_capacity(usize::from(length));
    segment.extend_from_slice(&source_port.to_be_bytes());
    segment.extend_from_slice(&destination_port.to_be_bytes());
    segment.extend_from_slice(&length.to_be_bytes());
    segment.extend_from_slice(&[0, 0]);
    segment.extend_from_slice(&payload);
    segment
}

/// A TCP SYN with the MSS option, checksum zero for now.
fn tcp_syn(source_port: u16, destination_port: u16, sequence: u16) -> Vec<u8> {
    let mut segment = Vec::with_capacity(24);
    segment.extend_from_slice(&source_port.to_be_bytes());
    segment.extend_from_slice(&destination_port.to_be_bytes());
    segment.extend_from_slice(&(u32::from(sequence) * 7919).to_be_bytes());
    segment.extend_from_slice(&0u32.to_be_bytes());
    let data_offset_words = (20 + SYN_OPTIONS.len()) / 4;
    segment.push((data_offset_words as u8) << 4);
    segment.push(TCP_SYN);
    segment.extend_from_slice(&64240u16.to_be_bytes());
    segment.extend_from_slice(&[0, 0, 0, 0]);
    segment.extend_from_slice(&SYN_OPTIONS);
    segment
}

/// Where the checksum sits in a segment of `protocol`.
fn checksum_offset(protocol: u8) -> usize {
    match protocol {
        IPPROTO_UDP => 6,
        _ => 16,
    }
}

fn ethernet(ethertype: u16) -> Vec<u8> {
    let mut header = Vec::with_capacity(64);
    header.extend_from_slice(&DESTINATION_MAC);
    header.extend_from_slice(&SOURCE_MAC);
    header.extend_from_slice(&ethertype.to_be_bytes());
    header
}

fn ipv4_frame(
    source: Ipv4Addr,
    destination: Ipv4Addr,
    protocol: u8,
    mut segment: Vec<u8>,
) -> Vec<u8> {
    let segment_length = segment.len() as u16;
    let pseudo = checksum::pseudo_v4(source, destination, protocol, segment_length);
    let sum = checksum::transport(pseudo, &segment, protocol);
    let at = checksum_offset(protocol);
    segment[at..at + 2].copy_from_slice(&sum.to_be_bytes());
    let mut header = [0u8; 20];
    header[0] = 0x45;
    header[2..4].copy_from_slice(&(20 + segment_length).to_be_bytes());
    header[4..6].copy_from_slice(&IPV4_IDENTIFICATION.to_be_bytes());
    header[6] = 0x40; // don't fragment
    header[8] = 64;
    header[9] = protocol;
    header[12..16].copy_from_slice(&source.octets());
    header[16..20].copy_from_slice(&destination.octets());
    let header_sum = checksum::ipv4_header(&header);
    header[10..12].copy_from_slice(&header_sum.to_be_bytes());
    let mut frame = ethernet(ETHERTYPE_IPV4);
    frame.extend_from_slice(&header);
    frame.extend_from_slice(&segment);
    frame
}

fn ipv6_frame(
    source: Ipv6Addr,
    destination: Ipv6Addr,
    protocol: u8,
    mut segment: Vec<u8>,
) -> Vec<u8> {
    let segment_length = segment.len() as u32;
    let pseudo = checksum::pseudo_v6(source, destination, protocol, segment_length);
    let sum = checksum::transport(pseudo, &segment, protocol);
    let at = checksum_offset(protocol);
    segment[at..at + 2].copy_from_slice(&sum.to_be_bytes());
    let mut header = [0u8; 40];
    header[0] = 0x60;
    header[4..6].copy_from_slice(&(segment_length as u16).to_be_bytes());
    header[6] = protocol;
    header[7] = 64;
    header[8..24].copy_from_slice(&source.octets());
    header[24..40].copy_from_slice(&destination.octets());
    let mut frame = ethernet(ETHERTYPE_IPV6);
    frame.extend_from_slice(&header);
    frame.extend_from_slice(&segment);
    frame
}
