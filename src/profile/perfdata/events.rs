//! The records that change what a sample resolves to (MMAP, COMM, FORK, EXIT, KSYMBOL,
//! BPF_EVENT) and the samples, indexed and put in time order as `perf script` delivers them
//! (its `ordered_events` queue, flushed per FINISHED_ROUND; records perf synthesized at the
//! start carry time 0 and come first). A stable sort by time gives the same order for every record
//! that arrived before its round was flushed, which is all of them in a sound file.

use super::attr::sample;
use super::error::{malformed, PerfDataError};
use super::file::PerfData;
use super::record::{self, RawRecord};

/// A record kept for the second pass.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Entry {
    pub time: u64,
    pub offset: u64,
    pub attr: u32,
}

fn wanted(kind: u32) -> bool {
    matches!(
        kind,
        record::SAMPLE
            | record::MMAP
            | record::MMAP2
            | record::COMM
            | record::FORK
            | record::EXIT
            | record::KSYMBOL
            | record::BPF_EVENT
    )
}

/// The record's timestamp (sample field or `sample_id` trailer), if it has one.
fn time_of(data: &PerfData, raw: &RawRecord<'_>, attr: usize) -> Option<u64> {
    let attr_info = data.attrs().get(attr)?;
    if !attr_info.has(sample::TIME) {
        return None;
    }
    if raw.kind == record::SAMPLE {
        return record::parse_sample(raw.body, attr_info, data.endian())?.time;
    }
    record::sample_id(raw.body, attr_info, data.endian())?.time
}

/// Every wanted record, sorted by time (stable). Records without a time keep their place
/// after the record before them; records perf could not attribute are left out.
pub(crate) fn index(data: &PerfData) -> Result<Vec<Entry>, PerfDataError> {
    let mut out = Vec::new();
    let mut last = 0u64;
    for raw in data.records() {
        let raw = raw?;
        if !wanted(raw.kind) {
            continue;
        }
        let is_sample = raw.kind == record::SAMPLE;
        let Some(attr) = data
            .attribution()
            .attr_of(is_sample, raw.body, data.endian())
        else {
            continue;
        };
        let time = time_of(data, &raw, attr).unwrap_or(last);
        last = time;
        let attr = u32::try_from(attr).map_err(|_| malformed("too many attrs"))?;
        out.push(Entry {
            time,
            offset: raw.offset,
            attr,
        });
    }
    if !out.windows(2).all(|w| w[0].time <= w[1].time) {
        out.sort_by_key(|e| e.time);
    }
    Ok(out)
}
