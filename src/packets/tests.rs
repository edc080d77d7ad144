//! Tests of the frame summary and the built-in packets.

use super::*;

/// Whether the IP header checksum and the UDP/TCP checksum of `frame` verify (sum to all ones).
fn checksums_verify(frame: &[u8]) -> bool {
    let ethertype = u16::from_be_bytes([frame[12], frame[13]]);
    let (pseudo, segment, header_ok) = match ethertype {
        ETHERTYPE_IPV4 => {
            let header = &frame[14..34];
            let segment = &frame[34..];
            let source = Ipv4Addr::new(header[12], header[13], header[14], header[15]);
            let destination = Ipv4Addr::new(header[16], header[17], header[18], header[19]);
            let pseudo = checksum::pseudo_v4(source, destination, header[9], segment.len() as u16);
            (pseudo, segment, checksum::sum(header, 0) == 0xffff)
        }
        _ => {
            let header = &frame[14..54];
            let source = Ipv6Addr::from(<[u8; 16]>::try_from(&header[8..24]).unwrap());
            let destination = Ipv6Addr::from(<[u8; 16]>::try_from(&header[24..40]).unwrap());
            let segment = &frame[54..];
            let pseudo = checksum::pseudo_v6(source, destination, header[6], segment.len() as u32);
            (pseudo, segment, true)
        }
    };
    header_ok && checksum::sum(segment, pseudo) == 0xffff
}

#[test]
fn every_builtin_packet_is_long_enough_and_its_checksums_verify() {
    let packets = builtin::packets();
    assert_eq!(packets.len(), 6 * usize::from(builtin::PER_KIND));
    for packet in &packets {
        assert!(packet.bytes.len() >= builtin::MIN_FRAME, "{packet:?}");
        assert!(
            checksums_verify(&packet.bytes),
            "{}",
            summarise(&packet.bytes)
        );
        let summary = summarise(&packet.bytes);
        assert!(
            matches!(summary.protocol, Protocol::Udp | Protocol::Tcp),
            "{summary}"
        );
    }
}

#[test]
fn builtin_packets_cover_dns_syns_and_ipv6() {
    let lines: Vec<String> = builtin::packets()
        .iter()
        .map(|p| summarise(&p.bytes).to_string())
        .collect();
    for expected in [
        "UDP 10.0.0.1:40000 > 10.0.0.2:53",
        "TCP 10.0.0.1:40000 > 10.0.0.2:80 SYN",
        "TCP 10.0.0.1:40001 > 10.0.0.2:443 SYN",
        "UDP 10.0.0.1:40003 > 10.0.0.2:9999",
        "UDP [fd00::1]:40000 > [fd00::2]:53",
        "TCP [fd00::1]:40002 > [fd00::2]:443 SYN",
    ] {
        assert!(
            lines.iter().any(|l| l == expected),
            "{expected} not in {lines:#?}"
        );
    }
}

#[test]
fn short_and_odd_frames_summarise_without_panicking() {
    assert_eq!(summarise(&[]).protocol, Protocol::Truncated);
    assert_eq!(summarise(&[0; 13]).protocol, Protocol::Truncated);
    let mut arp = vec![0u8; 60];
    arp[12..14].copy_from_slice(&0x0806u16.to_be_bytes());
    assert_eq!(summarise(&arp).to_string(), "ethertype 0x0806");
    // IPv4 with a header length below 20 bytes is not read as IP.
    let mut bad_ihl = builtin::packets()[0].bytes.clone();
    bad_ihl[14] = 0x41;
    assert_eq!(summarise(&bad_ihl).protocol, Protocol::Truncated);
    // A UDP header cut after its source port.
    let cut = &builtin::packets()[0].bytes[..36];
    assert_eq!(summarise(cut).protocol, Protocol::Truncated);
    // Every prefix of every built-in frame summarises.
    for packet in builtin::packets() {
        for end in 0..packet.bytes.len() {
            let _ = summarise(&packet.bytes[..end]).to_string();
        }
    }
}

#[test]
fn a_vlan_tag_is_skipped() {
    let plain = builtin::packets()[0].bytes.clone();
    let mut tagged = plain[..12].to_vec();
    tagged.extend_from_slice(&ETHERTYPE_VLAN.to_be_bytes());
    tagged.extend_from_slice(&[0x00, 0x05]);
    tagged.extend_from_slice(&plain[12..]);
    assert_eq!(summarise(&tagged), summarise(&plain));
}

#[test]
fn the_committed_captures_hold_valid_frames() {
    let bytes = include_bytes!("../../fixtures/pcap/classifier.pcap");
    let capture = capture::parse(bytes).expect("classifier.pcap");
    assert_eq!(capture.packets.len(), 40);
    let ip_frames: Vec<&Packet> = capture
        .packets
        .iter()
        .filter(|p| !matches!(summarise(&p.bytes).protocol, Protocol::NotIp(_)))
        .collect();
    assert_eq!(ip_frames.len(), 39);
    for packet in ip_frames {
        assert!(
            checksums_verify(&packet.bytes),
            "{}",
            summarise(&packet.bytes)
        );
    }
}
