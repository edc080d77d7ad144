//! Tests of the capture reader: the committed fixtures, captures written here in both byte
//! orders, and every way a capture can be broken.

use super::*;

/// A classic pcap of `frames` with link type `link`, in `big_endian` order or little.
fn pcap(frames: &[&[u8]], link: u32, order: Endianness) -> Vec<u8> {
    let word = |value: u32| match order {
        Endianness::Little => value.to_le_bytes(),
        Endianness::Big => value.to_be_bytes(),
    };
    let half = |value: u16| match order {
        Endianness::Little => value.to_le_bytes(),
        Endianness::Big => value.to_be_bytes(),
    };
    let mut bytes = word(PCAP_MAGIC_NANO).to_vec();
    bytes.extend_from_slice(&half(2));
    bytes.extend_from_slice(&half(4));
    for value in [0, 0, 65535, link] {
        bytes.extend_from_slice(&word(value));
    }
    for frame in frames {
        let length = frame.len() as u32;
        for value in [1, 2, length, length + 4] {
            bytes.extend_from_slice(&word(value));
        }
        bytes.extend_from_slice(frame);
    }
    bytes
}

const FRAME: [u8; 60] = [0xab; 60];

#[test]
fn both_byte_orders_of_pcap_read_alike() {
    for order in [Endianness::Little, Endianness::Big] {
        let capture = parse(&pcap(&[&FRAME, &FRAME[..54]], 1, order)).expect("pcap");
        assert_eq!(capture.format, Format::Pcap);
        assert_eq!(capture.packets.len(), 2);
        assert_eq!(capture.packets[1].bytes.len(), 54);
        assert_eq!(
            capture.cut_short, 2,
            "each record's original length is 4 more"
        );
    }
}

#[test]
fn the_committed_pcap_and_pcapng_hold_the_same_frames() {
    let classic = parse(include_bytes!("../../fixtures/pcap/classifier.pcap")).expect("pcap");
    let next = parse(include_bytes!("../../fixtures/pcap/classifier.pcapng")).expect("pcapng");
    assert_eq!(next.format, Format::PcapNg);
    assert_eq!(classic.packets, next.packets);
    assert_eq!(classic.cut_short, 0);
}

#[test]
fn broken_fixtures_say_what_is_wrong() {
    let cases: [(&[u8], &str); 5] = [
        (
            include_bytes!("../../fixtures/pcap/truncated.pcap"),
            "cut short",
        ),
        (
            include_bytes!("../../fixtures/pcap/truncated.pcapng"),
            "cut short",
        ),
        (
            include_bytes!("../../fixtures/pcap/raw-ip.pcap"),
            "link type 101 (raw IP)",
        ),
        (
            include_bytes!("../../fixtures/pcap/empty.pcap"),
            "holds no packets",
        ),
        (
            include_bytes!("../../fixtures/pcap/not-a-capture.pcap"),
            "not a pcap or pcapng",
        ),
    ];
    for (bytes, expected) in cases {
        let error = parse(bytes).expect_err(expected).to_string();
        assert!(error.contains(expected), "{error}");
    }
}

#[test]
fn every_prefix_of_a_capture_reads_or_fails_cleanly() {
    let bytes = include_bytes!("../../fixtures/pcap/classifier.pcapng");
    for end in 0..bytes.len() {
        if let Ok(capture) = parse(&bytes[..end]) {
            assert!(capture.packets.len() < 40);
        }
    }
    let classic = include_bytes!("../../fixtures/pcap/classifier.pcap");
    for end in 0..classic.len() {
        let _ = parse(&classic[..end]);
    }
}

#[test]
fn a_record_longer_than_any_snapshot_is_refused_before_reading_it() {
    let mut bytes = pcap(&[&FRAME], 1, Endianness::Little);
    let huge = (MAX_FRAME as u32 + 1).to_le_bytes();
    bytes[PCAP_FILE_HEADER + 8..PCAP_FILE_HEADER + 12].copy_from_slice(&huge);
    let error = parse(&bytes).expect_err("huge record");
    assert_eq!(
        error,
        CaptureError::FrameTooLong {
            index: 1,
            length: MAX_FRAME + 1
        }
    );
}

#[test]
fn a_pcapng_block_whose_trailing_length_disagrees_is_damaged() {
    let mut bytes = include_bytes!("../../fixtures/pcap/classifier.pcapng").to_vec();
    // The section header block is 28 bytes: its trailing length sits at 24.
    bytes[24] ^= 0x04;
    let error = parse(&bytes).expect_err("damaged");
    assert!(
        matches!(error, CaptureError::Malformed { offset: 0, .. }),
        "{error}"
    );
}

#[test]
fn a_packet_block_before_any_interface_is_damaged() {
    let bytes = include_bytes!("../../fixtures/pcap/classifier.pcapng");
    // Drop the interface description block (bytes 28..48: 20 bytes, link, snaplen).
    let mut without = bytes[..28].to_vec();
    without.extend_from_slice(&bytes[48..]);
    let error = parse(&without).expect_err("no interface");
    assert!(
        matches!(error, CaptureError::UnknownInterface { id: 0, .. }),
        "{error}"
    );
}

#[test]
fn randomly_damaged_captures_read_or_fail_cleanly() {
    let mut rng = crate::stats::rng::Rng::new(2026);
    let originals: [&[u8]; 2] = [
        include_bytes!("../../fixtures/pcap/classifier.pcap"),
        include_bytes!("../../fixtures/pcap/classifier.pcapng"),
    ];
    for original in originals {
        for _ in 0..2000 {
            let mut bytes = original.to_vec();
            for _ in 0..1 + rng.below(8) {
                let at = rng.below(bytes.len());
                bytes[at] = rng.next_u64() as u8;
            }
            if let Ok(capture) = parse(&bytes) {
                let total: usize = capture.packets.iter().map(|p| p.bytes.len()).sum();
                assert!(total <= bytes.len(), "frames come from the bytes given");
            }
        }
    }
}
