//! The Internet checksum (RFC 1071) and the pseudo-headers UDP and TCP add to it (RFC 768,
//! RFC 793 for IPv4; RFC 8200 §8.1 for IPv6), so the built-in packets carry checksums a
//! program that checks them accepts.

use std::net::{Ipv4Addr, Ipv6Addr};

/// The ones' complement sum of `bytes` as 16-bit big-endian words, a trailing odd byte padded
/// with zero, folded to 16 bits but not yet complemented.
pub fn sum(bytes: &[u8], start: u32) -> u32 {
    let mut total = start;
    let mut words = bytes.chunks_exact(2);
    for word in &mut words {
        total += u32::from(u16::from_be_bytes([word[0], word[1]]));
    }
    if let [last] = words.remainder() {
        total += u32::from(u16::from_be_bytes([*last, 0]));
    }
    fold(total)
}

/// Fold the carries back in until the sum fits 16 bits.
fn fold(mut total: u32) -> u32 {
    while total > 0xffff {
        total = (total & 0xffff) + (total >> 16);
    }
    total
}

/// The checksum field's value: the complement of the folded sum.
pub fn finish(total: u32) -> u16 {
    !(fold(total) as u16)
}

/// The checksum of an IPv4 header (its checksum field zero while summing).
pub fn ipv4_header(header: &[u8]) -> u16 {
    finish(sum(header, 0))
}

/// The sum of the IPv4 pseudo-header for a transport segment of `length` bytes.
pub fn pseudo_v4(source: Ipv4Addr, destination: Ipv4Addr, protocol: u8, length: u16) -> u32 {
    let mut total = sum(&source.octets(), 0);
    total = sum(&destination.octets(), total);
    fold(total + u32::from(protocol) + u32::from(length))
}

/// The sum of the IPv6 pseudo-header for a transport segment of `length` bytes.
pub fn pseudo_v6(source: Ipv6Addr, destination: Ipv6Addr, protocol: u8, length: u32) -> u32 {
    let mut total = sum(&source.octets(), 0);
    total = sum(&destination.octets(), total);
    fold(total + (length >> 16) + (length & 0xffff) + u32::from(protocol))
}

/// The UDP or TCP checksum of `segment` (its checksum field zero) over `pseudo`. UDP sends a
/// computed zero as all ones (RFC 768), since zero there means "no checksum".
pub fn transport(pseudo: u32, segment: &[u8], protocol: u8) -> u16 {
    let value = finish(sum(segment, pseudo));
    if value == 0 && protocol == super::IPPROTO_UDP {
        0xffff
    } else {
        value
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc1071_example_sums_as_the_rfc_says() {
        // RFC 1071 §3: the words 0001 f203 f4f5 f6f7 sum to ddf2 (folded).
        let bytes = [0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7];
        assert_eq!(sum(&bytes, 0), 0xddf2);
        assert_eq!(finish(0xddf2), 0x220d);
    }

    #[test]
    fn a_header_with_its_checksum_in_place_sums_to_all_ones() {
        // A well-known IPv4 header (Wikipedia's example), checksum b861 in place.
        let header = [
            0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11, 0xb8, 0x61, 0xc0, 0xa8,
            0x00, 0x01, 0xc0, 0xa8, 0x00, 0xc7,
        ];
        assert_eq!(sum(&header, 0), 0xffff);
        let mut zeroed = header;
        zeroed[10] = 0;
        zeroed[11] = 0;
        assert_eq!(ipv4_header(&zeroed), 0xb861);
    }

    #[test]
    fn odd_lengths_pad_with_a_zero_byte() {
        assert_eq!(sum(&[0x12], 0), 0x1200);
        assert_eq!(sum(&[0x12, 0x34, 0x56], 0), 0x1234 + 0x5600);
    }
}
