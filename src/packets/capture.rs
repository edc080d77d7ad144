//! A bounds-checked reader of packet captures: classic pcap (microsecond and nanosecond
//! magic, either byte order) and pcapng (section header, interface description, enhanced and
//! simple packet blocks; other blocks skipped), Ethernet link type only.
//!
//! Written here rather than taken from a crate: the two formats need about two hundred lines
//! to read what the test run uses (the frames' bytes), every length in them is checked against
//! the bytes left before it is used, and the caps below are ours to set. The formats are
//! described in the pcap and pcapng IETF drafts (draft-ietf-opsawg-pcap,
//! draft-ietf-opsawg-pcapng); the link types in the tcpdump.org link-layer header list.

use super::Packet;
use std::fmt;

/// The largest capture read, in bytes (also `input::Role::Capture`'s cap).
pub const MAX_FILE: u64 = 256 << 20;
/// The most packets a capture may hold: each is measured, and a million is already hours.
pub const MAX_PACKETS: usize = 1_000_000;
/// The longest frame a record may hold (pcap's largest snapshot length, 256 KiB).
pub const MAX_FRAME: usize = 256 << 10;
/// `LINKTYPE_ETHERNET`, the only link type read.
pub const LINKTYPE_ETHERNET: u32 = 1;

/// The classic pcap magic with microsecond timestamps, as written in the file's byte order.
const PCAP_MAGIC_MICRO: u32 = 0xa1b2_c3d4;
/// The classic pcap magic with nanosecond timestamps.
const PCAP_MAGIC_NANO: u32 = 0xa1b2_3c4d;
/// The pcapng section header block's type (the same in both byte orders).
const PCAPNG_SECTION_HEADER: u32 = 0x0a0d_0d0a;
/// The pcapng byte-order magic inside a section header.
const PCAPNG_BYTE_ORDER_MAGIC: u32 = 0x1a2b_3c4d;
const PCAPNG_INTERFACE_DESCRIPTION: u32 = 0x0000_0001;
const PCAPNG_SIMPLE_PACKET: u32 = 0x0000_0003;
const PCAPNG_ENHANCED_PACKET: u32 = 0x0000_0006;
/// Bytes of the classic pcap file header and of a record header.
const PCAP_FILE_HEADER: usize = 24;
const PCAP_RECORD_HEADER: usize = 16;

/// Which of the two formats a capture was.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Pcap,
    PcapNg,
}

/// The frames of a capture, in its order.
#[derive(Debug, Clone)]
pub struct Capture {
    pub format: Format,
    pub packets: Vec<Packet>,
    /// Frames the capture holds shorter than they were on the wire (the snapshot length cut
    /// them): they are run as captured.
    pub cut_short: usize,
}

/// Why a capture cannot be read; each says what to do in its message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CaptureError {
    /// Neither pcap's nor pcapng's magic.
    NotACapture,
    /// A header, block or record runs past the end of the file.
    Truncated { what: &'static str, offset: usize },
    /// A block whose lengths contradict each other.
    Malformed { what: &'static str, offset: usize },
    /// Another link type than Ethernet.
    LinkType(u32),
    /// No packet at all.
    Empty,
    /// More than [`MAX_PACKETS`].
    TooManyPackets,
    /// A frame longer than [`MAX_FRAME`].
    FrameTooLong { index: usize, length: usize },
    /// A pcapng packet block naming an interface no description came before.
    UnknownInterface { id: u32, offset: usize },
}

impl fmt::Display for CaptureError {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CaptureError::NotACapture => formatter.write_str(
                "is not a pcap or pcapng capture (no magic number of either): give a file written by tcpdump -w or Wireshark",
            ),
            CaptureError::Truncated { what, offset } => write!(
                formatter,
                "is cut short: its {what} at byte {offset} runs past the end of the file; capture again, or cut it at a whole packet (editcap -r)"
            ),
            CaptureError::Malformed { what, offset } => write!(
                formatter,
                "is damaged: its {what} at byte {offset} has lengths that contradict each other; capture again"
            ),
            CaptureError::LinkType(link) => write!(
                formatter,
                "holds link type {link} ({}), not Ethernet (1): the test run is given Ethernet frames; capture on an Ethernet interface (tcpdump -i eth0 -w FILE)",
                link_type_name(*link)
            ),
            CaptureError::Empty => formatter.write_str("holds no packets: capture some (tcpdump -c 100 -w FILE), or leave --pcap out for the built-in packets"),
            CaptureError::TooManyPackets => write!(
                formatter,
                "holds more than {MAX_PACKETS} packets: cut it shorter (editcap -r FILE OUT 1-{MAX_PACKETS})"
            ),
            CaptureError::FrameTooLong { index, length } => write!(
                formatter,
                "holds a frame of {length} bytes (packet {index}), more than any capture's {MAX_FRAME}: the file is damaged; capture again"
            ),
            CaptureError::UnknownInterface { id, offset } => write!(
                formatter,
                "is damaged: the packet block at byte {offset} names interface {id}, which no interface description block declared; capture again"
            ),
        }
    }
}

impl std::error::Error for CaptureError {}

/// The common name of a link type (the ones a user most likely captured with).
fn link_type_name(link: u32) -> &'static str {
    match link {
        0 => "BSD loopback",
        101 => "raw IP",
        113 => "Linux cooked, tcpdump -i any",
        127 => "802.11 radiotap",
        228 => "raw IPv4",
        229 => "raw IPv6",
        276 => "Linux cooked v2, tcpdump -i any",
        _ => "see tcpdump.org's link-layer header types",
    }
}

/// Read a capture from its bytes, pcap or pcapng by its magic.
pub fn parse(bytes: &[u8]) -> Result<Capture, CaptureError> {
    let magic = bytes.get(0..4).ok_or(CaptureError::NotACapture)?;
    let magic = u32::from_le_bytes([magic[0], magic[1], magic[2], magic[3]]);
    let capture = match magic {
        PCAPNG_SECTION_HEADER => parse_pcapng(bytes)?,
        _ => parse_pcap(bytes)?,
    };
    if capture.packets.is_empty() {
        return Err(CaptureError::Empty);
    }
    Ok(capture)
}

/// The byte order of the numbers in a file (or a pcapng section).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Endianness {
    Little,
    Big,
}

impl Endianness {
    fn u32_at(self, bytes: &[u8], offset: usize) -> Option<u32> {
        let word: [u8; 4] = bytes.get(offset..offset.checked_add(4)?)?.try_into().ok()?;
        Some(match self {
            Endianness::Little => u32::from_le_bytes(word),
            Endianness::Big => u32::from_be_bytes(word),
        })
    }

    fn u16_at(self, bytes: &[u8], offset: usize) -> Option<u16> {
        let pair: [u8; 2] = bytes.get(offset..offset.checked_add(2)?)?.try_into().ok()?;
        Some(match self {
            Endianness::Little => u16::from_le_bytes(pair),
            Endianness::Big => u16::from_be_bytes(pair),
        })
    }
}

/// The frames collected so far, with the caps checked as each is added.
struct Collector {
    packets: Vec<Packet>,
    cut_short: usize,
}

impl Collector {
    fn new() -> Collector {
        Collector {
            packets: Vec::new(),
            cut_short: 0,
        }
    }

    fn add(&mut self, frame: &[u8], original_length: usize) -> Result<(), CaptureError> {
        if self.packets.len() >= MAX_PACKETS {
            return Err(CaptureError::TooManyPackets);
        }
        if frame.len() > MAX_FRAME {
            return Err(CaptureError::FrameTooLong {
                index: self.packets.len() + 1,
                length: frame.len(),
            });
        }
        if frame.len() < original_length {
            self.cut_short += 1;
        }
        self.packets.push(Packet {
            bytes: frame.to_vec(),
        });
        Ok(())
    }

    fn finish(self, format: Format) -> Capture {
        Capture {
            format,
            packets: self.packets,
            cut_short: self.cut_short,
        }
    }
}

fn parse_pcap(bytes: &[u8]) -> Result<Capture, CaptureError> {
    let endianness = match bytes.get(0..4) {
        Some(magic) => match u32::from_le_bytes([magic[0], magic[1], magic[2], magic[3]]) {
            PCAP_MAGIC_MICRO | PCAP_MAGIC_NANO => Endianness::Little,
            other if matches!(other.swap_bytes(), PCAP_MAGIC_MICRO | PCAP_MAGIC_NANO) => {
                Endianness::Big
            }
            _ => return Err(CaptureError::NotACapture),
        },
        None => return Err(CaptureError::NotACapture),
    };
    let truncated = |what, offset| CaptureError::Truncated { what, offset };
    if bytes.len() < PCAP_FILE_HEADER {
        return Err(truncated("file header", 0));
    }
    let link = endianness
        .u32_at(bytes, 20)
        .ok_or(truncated("file header", 0))?
        & 0x0fff_ffff;
    if link != LINKTYPE_ETHERNET {
        return Err(CaptureError::LinkType(link));
    }
    let mut collector = Collector::new();
    let mut offset = PCAP_FILE_HEADER;
    while offset < bytes.len() {
        let header = bytes
            .get(offset..offset + PCAP_RECORD_HEADER)
            .ok_or(truncated("record header", offset))?;
        let included = endianness.u32_at(header, 8).unwrap_or_default() as usize;
        let original = endianness.u32_at(header, 12).unwrap_or_default() as usize;
        if included > MAX_FRAME {
            let index = collector.packets.len() + 1;
            return Err(CaptureError::FrameTooLong {
                index,
                length: included,
            });
        }
        let start = offset + PCAP_RECORD_HEADER;
        let frame = bytes
            .get(start..start + included)
            .ok_or(truncated("packet record", offset))?;
        collector.add(frame, original)?;
        offset = start + included;
    }
    Ok(collector.finish(Format::Pcap))
}

/// What a pcapng section has said so far: its byte order and its interfaces' link types and
/// snapshot lengths.
struct Section {
    endianness: Endianness,
    interfaces: Vec<(u32, usize)>,
}

fn parse_pcapng(bytes: &[u8]) -> Result<Capture, CaptureError> {
    let mut collector = Collector::new();
    let mut section = Section {
        endianness: Endianness::Little,
        interfaces: Vec::new(),
    };
    let mut offset = 0;
    while offset < bytes.len() {
        let block = pcapng_block(bytes, offset, &mut section)?;
        read_block(&block, &mut section, &mut collector)?;
        offset += block.body.len() + 12;
    }
    Ok(collector.finish(Format::PcapNg))
}

/// One pcapng block: its type, where it starts and its body (without the lengths).
struct Block<'a> {
    kind: u32,
    offset: usize,
    body: &'a [u8],
}

/// The block at `offset`, its lengths checked; a section header sets the byte order first.
fn pcapng_block<'a>(
    bytes: &'a [u8],
    offset: usize,
    section: &mut Section,
) -> Result<Block<'a>, CaptureError> {
    let truncated = CaptureError::Truncated {
        what: "block",
        offset,
    };
    let malformed = CaptureError::Malformed {
        what: "block",
        offset,
    };
    let kind = Endianness::Little
        .u32_at(bytes, offset)
        .ok_or(truncated.clone())?;
    if kind == PCAPNG_SECTION_HEADER {
        let order = Endianness::Little
            .u32_at(bytes, offset + 8)
            .ok_or(truncated.clone())?;
        section.endianness = match order {
            PCAPNG_BYTE_ORDER_MAGIC => Endianness::Little,
            other if other.swap_bytes() == PCAPNG_BYTE_ORDER_MAGIC => Endianness::Big,
            _ => return Err(malformed),
        };
        section.interfaces.clear();
    }
    let endianness = section.endianness;
    let kind = endianness.u32_at(bytes, offset).ok_or(truncated.clone())?;
    let length = endianness
        .u32_at(bytes, offset + 4)
        .ok_or(truncated.clone())? as usize;
    if length < 12 || length % 4 != 0 {
        return Err(malformed);
    }
    let end = offset.checked_add(length).ok_or(malformed.clone())?;
    let whole = bytes.get(offset..end).ok_or(truncated)?;
    if endianness.u32_at(whole, length - 4) != Some(length as u32) {
        return Err(malformed);
    }
    Ok(Block {
        kind,
        offset,
        body: &whole[8..length - 4],
    })
}

fn read_block(
    block: &Block<'_>,
    section: &mut Section,
    collector: &mut Collector,
) -> Result<(), CaptureError> {
    let endianness = section.endianness;
    let malformed = CaptureError::Malformed {
        what: "block",
        offset: block.offset,
    };
    match block.kind {
        PCAPNG_INTERFACE_DESCRIPTION => {
            let link = endianness.u16_at(block.body, 0).ok_or(malformed.clone())?;
            let snapshot = endianness.u32_at(block.body, 4).ok_or(malformed)?;
            section
                .interfaces
                .push((u32::from(link), snapshot as usize));
            Ok(())
        }
        PCAPNG_ENHANCED_PACKET => enhanced_packet(block, section, collector),
        PCAPNG_SIMPLE_PACKET => simple_packet(block, section, collector),
        _ => Ok(()),
    }
}

/// The link type of interface `id`, which must be Ethernet.
fn ethernet_interface(section: &Section, id: u32, offset: usize) -> Result<usize, CaptureError> {
    let (link, snapshot) = *section
        .interfaces
        .get(id as usize)
        .ok_or(CaptureError::UnknownInterface { id, offset })?;
    if link != LINKTYPE_ETHERNET {
        return Err(CaptureError::LinkType(link));
    }
    Ok(snapshot)
}

fn enhanced_packet(
    block: &Block<'_>,
    section: &Section,
    collector: &mut Collector,
) -> Result<(), CaptureError> {
    let endianness = section.endianness;
    let malformed = CaptureError::Malformed {
        what: "enhanced packet block",
        offset: block.offset,
    };
    let interface = endianness.u32_at(block.body, 0).ok_or(malformed.clone())?;
    ethernet_interface(section, interface, block.offset)?;
    let captured = endianness.u32_at(block.body, 12).ok_or(malformed.clone())? as usize;
    let original = endianness.u32_at(block.body, 16).ok_or(malformed.clone())? as usize;
    if captured > MAX_FRAME {
        let index = collector.packets.len() + 1;
        return Err(CaptureError::FrameTooLong {
            index,
            length: captured,
        });
    }
    let frame = block.body.get(20..20 + captured).ok_or(malformed)?;
    collector.add(frame, original)
}

fn simple_packet(
    block: &Block<'_>,
    section: &Section,
    collector: &mut Collector,
) -> Result<(), CaptureError> {
    let malformed = CaptureError::Malformed {
        what: "simple packet block",
        offset: block.offset,
    };
    let snapshot = ethernet_interface(section, 0, block.offset)?;
    let original = section.endianness.u32_at(block.body, 0).ok_or(malformed)? as usize;
    let room = block.body.len() - 4;
    let mut captured = original.min(room);
    if snapshot > 0 {
        captured = captured.min(snapshot);
    }
    collector.add(&block.body[4..4 + captured], original)
}

#[cfg(test)]
#[path = "capture_tests.rs"]
mod tests;
