//! Event attributes (`struct perf_event_attr` as stored in the attrs section) and what they
//! say about record layouts: where a sample's id sits, how long the `sample_id` trailer of
//! other records is, and which attribute a record belongs to.
//!
//! Layout: `include/uapi/linux/perf_event.h` (`struct perf_event_attr`); id positions:
//! `tools/perf/util/evsel.c: __evsel__calc_id_pos()`, `__evsel__calc_is_pos()`; attribution:
//! `tools/perf/util/evlist.c: evlist__event2evsel()`.

use super::cursor::{u64_at, Endian};
use std::collections::HashMap;

/// `PERF_SAMPLE_*` bits of `attr.sample_type`.
pub mod sample {
    pub const IP: u64 = 1 << 0;
    pub const TID: u64 = 1 << 1;
    pub const TIME: u64 = 1 << 2;
    pub const ADDR: u64 = 1 << 3;
    pub const READ: u64 = 1 << 4;
    pub const CALLCHAIN: u64 = 1 << 5;
    pub const ID: u64 = 1 << 6;
    pub const CPU: u64 = 1 << 7;
    pub const PERIOD: u64 = 1 << 8;
    pub const STREAM_ID: u64 = 1 << 9;
    pub const IDENTIFIER: u64 = 1 << 16;
}

/// `PERF_FORMAT_*` bits of `attr.read_format`.
pub mod read_format {
    pub const TOTAL_TIME_ENABLED: u64 = 1 << 0;
    pub const TOTAL_TIME_RUNNING: u64 = 1 << 1;
    pub const ID: u64 = 1 << 2;
    pub const GROUP: u64 = 1 << 3;
    pub const LOST: u64 = 1 << 4;
}

/// One event attribute of the recording, with the ids of its kernel event instances.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventAttr {
    /// Position in the attrs section.
    pub index: usize,
    /// `attr.type` (0 hardware, 1 software, 2 tracepoint, …).
    pub kind: u32,
    /// `attr.config`.
    pub config: u64,
    /// `attr.sample_period` (or the frequency when [`EventAttr::freq`]).
    pub sample_period: u64,
    /// `attr.sample_type` (`PERF_SAMPLE_*`, see [`sample`]).
    pub sample_type: u64,
    /// `attr.read_format`.
    pub read_format: u64,
    /// The flag bitfield at offset 40, bit 0 = `disabled` whatever the file's byte order.
    pub flags: u64,
    /// Ids of this event's instances (one per CPU or thread), as found in samples.
    pub ids: Vec<u64>,
    /// The event's name from the EVENT_DESC feature (`cpu-clock:k`), when present.
    pub name: Option<String>,
}

impl EventAttr {
    /// Decode the first 48 bytes of an on-disk `perf_event_attr`.
    pub(crate) fn parse(raw: &[u8], index: usize, e: Endian) -> Option<EventAttr> {
        let raw_flags = u64_at(raw, 40, e)?;
        Some(EventAttr {
            index,
            kind: super::cursor::u32_at(raw, 0, e)?,
            config: u64_at(raw, 8, e)?,
            sample_period: u64_at(raw, 16, e)?,
            sample_type: u64_at(raw, 24, e)?,
            read_format: u64_at(raw, 32, e)?,
            // A C bitfield starts at the most significant bit on big-endian machines
            // (perf swaps it with `swap_bitfield` in `perf_event__attr_swap`).
            flags: match e {
                Endian::Little => raw_flags,
                Endian::Big => raw_flags.reverse_bits(),
            },
            ids: Vec::new(),
            name: None,
        })
    }

    /// `attr.sample_id_all`: non-sample records end with a `sample_id` trailer.
    pub fn sample_id_all(&self) -> bool {
        self.flags & (1 << 18) != 0
    }

    /// `attr.freq`: `sample_period` is a frequency.
    pub fn freq(&self) -> bool {
        self.flags & (1 << 10) != 0
    }

    /// Whether samples carry `bit` (one of [`sample`]).
    pub fn has(&self, bit: u64) -> bool {
        self.sample_type & bit != 0
    }

    /// Index (in u64 words from the body start) of a sample's id; `None` without ids.
    pub(crate) fn id_pos(&self) -> Option<usize> {
        if self.has(sample::IDENTIFIER) {
            return Some(0);
        }
        if !self.has(sample::ID) {
            return None;
        }
        let before = [sample::IP, sample::TID, sample::TIME, sample::ADDR];
        Some(before.iter().filter(|&&b| self.has(b)).count())
    }

    /// Index, counted from the end in u64 words, of a non-sample record's id.
    pub(crate) fn is_pos(&self) -> Option<usize> {
        if self.has(sample::IDENTIFIER) {
            return Some(1);
        }
        if !self.has(sample::ID) {
            return None;
        }
        Some(1 + usize::from(self.has(sample::CPU)) + usize::from(self.has(sample::STREAM_ID)))
    }

    /// Bytes of the `sample_id` trailer that ends non-sample records (0 without
    /// `sample_id_all`).
    pub(crate) fn trailer_len(&self) -> usize {
        if !self.sample_id_all() {
            return 0;
        }
        let bits = [
            sample::TID,
            sample::TIME,
            sample::ID,
            sample::STREAM_ID,
            sample::CPU,
            sample::IDENTIFIER,
        ];
        8 * bits.iter().filter(|&&b| self.has(b)).count()
    }

    /// The event name as inferno's collapser keys it: the text before the first `:`
    /// (`cpu-clock:k` → `cpu-clock`), since it splits perf's event line on colons.
    pub fn filter_key(&self) -> String {
        match &self.name {
            Some(n) => n.split(':').next().unwrap_or_default().to_string(),
            None => format!("attr{}", self.index),
        }
    }
}

/// Which attribute each record belongs to, the way perf decides it.
#[derive(Debug, Clone)]
pub(crate) struct Attribution {
    single: bool,
    first_sample_id_all: bool,
    id_pos: usize,
    is_pos: usize,
    by_id: HashMap<u64, usize>,
}

impl Attribution {
    /// Build it from the attrs; `Err` with the reason when perf would refuse the layout
    /// (`evlist__valid_sample_type`).
    pub(crate) fn new(attrs: &[EventAttr]) -> Result<Attribution, String> {
        let single = attrs.len() <= 1;
        let first = attrs.first();
        let (mut id_pos, mut is_pos) = (0, 0);
        if !single {
            let pos = |a: &EventAttr| a.id_pos().zip(a.is_pos());
            let Some(p) = first.and_then(pos) else {
                return Err("several events without sample ids".into());
            };
            if attrs.iter().any(|a| pos(a) != Some(p)) {
                return Err("events disagree on where the sample id is".into());
            }
            (id_pos, is_pos) = p;
        }
        let mut by_id = HashMap::new();
        for a in attrs {
            for &id in &a.ids {
                by_id.insert(id, a.index);
            }
        }
        Ok(Attribution {
            single,
            first_sample_id_all: first.is_some_and(EventAttr::sample_id_all),
            id_pos,
            is_pos,
            by_id,
        })
    }

    /// The attribute index of a record with this body (after the 8-byte header): a sample
    /// (`PERF_RECORD_SAMPLE`, its id at a fixed place) or another record (its id in the
    /// `sample_id` trailer); `None` when perf would drop it (an id it does not know).
    pub(crate) fn attr_of(&self, is_sample: bool, body: &[u8], e: Endian) -> Option<usize> {
        if self.single {
            return Some(0);
        }
        let words = body.len() / 8;
        let id = if is_sample {
            u64_at(body, self.id_pos.checked_mul(8)?, e)?
        } else {
            if !self.first_sample_id_all {
                return Some(0);
            }
            let idx = words.checked_sub(self.is_pos)?;
            u64_at(body, idx * 8, e)?
        };
        if id == 0 {
            // Synthesized records carry id 0: perf gives them to the first event.
            return Some(0);
        }
        self.by_id.get(&id).copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attr(sample_type: u64, ids: &[u64], index: usize) -> EventAttr {
        EventAttr {
            index,
            kind: 1,
            config: 0,
            sample_period: 997,
            sample_type,
            read_format: 0,
            flags: 1 << 18,
            ids: ids.to_vec(),
            name: Some("cpu-clock:k".into()),
        }
    }

    #[test]
    fn id_positions_match_perf_for_our_layouts() {
        use sample::*;
        // (sample_type, id_pos, is_pos, trailer bytes)
        let table = [
            (IP | TID | TIME | CALLCHAIN | PERIOD, None, None, 16),
            (
                IP | TID | TIME | CALLCHAIN | ID | CPU | PERIOD,
                Some(3),
                Some(2),
                32,
            ),
            (
                IP | TID | TIME | CALLCHAIN | CPU | PERIOD | IDENTIFIER,
                Some(0),
                Some(1),
                32,
            ),
            (
                IP | TID | TIME | ADDR | ID | STREAM_ID | CPU,
                Some(4),
                Some(3),
                40,
            ),
        ];
        for (st, id, is, trailer) in table {
            let a = attr(st, &[], 0);
            assert_eq!(a.id_pos(), id, "{st:#x}");
            assert_eq!(a.is_pos(), is, "{st:#x}");
            assert_eq!(a.trailer_len(), trailer, "{st:#x}");
        }
        assert_eq!(attr(0x127, &[], 0).filter_key(), "cpu-clock");
    }

    #[test]
    fn big_endian_flags_are_bit_reversed() {
        let mut raw = [0u8; 64];
        // sample_id_all is bitfield 18: on a big-endian machine it is bit 63-18 of the u64.
        raw[40..48].copy_from_slice(&(1u64 << (63 - 18)).to_be_bytes());
        let a = EventAttr::parse(&raw, 0, Endian::Big).unwrap();
        assert!(a.sample_id_all());
        raw[40..48].copy_from_slice(&(1u64 << 18).to_le_bytes());
        assert!(EventAttr::parse(&raw, 0, Endian::Little)
            .unwrap()
            .sample_id_all());
        assert!(EventAttr::parse(&raw[..47], 0, Endian::Little).is_none());
    }

    #[test]
    fn attribution_by_id_with_synthesized_zero_and_unknown_ids() {
        use sample::*;
        let st = IP | TID | TIME | CALLCHAIN | ID | CPU | PERIOD;
        let attrs = [attr(st, &[10, 11], 0), attr(st, &[20], 1)];
        let at = Attribution::new(&attrs).unwrap();
        let e = Endian::Little;
        let mut body = vec![0u8; 8 * 6];
        body[24..32].copy_from_slice(&20u64.to_le_bytes());
        assert_eq!(at.attr_of(true, &body, e), Some(1));
        body[24..32].copy_from_slice(&99u64.to_le_bytes());
        assert_eq!(at.attr_of(true, &body, e), None);
        // A COMM whose trailer's id (2nd word from the end) is 11, then 0 (synthesized).
        let mut comm = vec![0u8; 8 * 5];
        comm[24..32].copy_from_slice(&11u64.to_le_bytes());
        assert_eq!(at.attr_of(false, &comm, e), Some(0));
        comm[24..32].copy_from_slice(&0u64.to_le_bytes());
        assert_eq!(at.attr_of(false, &comm, e), Some(0));
        assert_eq!(at.attr_of(false, &[0u8; 4], e), None, "too short for an id");
    }

    #[test]
    fn regression_several_attrs_without_ids_are_refused() {
        let attrs = [attr(0x127, &[], 0), attr(0x127, &[], 1)];
        assert!(Attribution::new(&attrs).is_err());
        let mixed = [attr(0x1e7, &[], 0), attr(0x101a7, &[], 1)];
        assert!(Attribution::new(&mixed).is_err());
        assert!(Attribution::new(&[attr(0x127, &[], 0)]).is_ok());
        assert!(Attribution::new(&[]).is_ok());
    }
}
