//! Feature 26, `HEADER_BPF_BTF`: `u32 count`, then per blob `u32 id; u32 data_size;
//! u8 data[data_size]`, unaligned, as perf's `write_bpf_btf` and `process_bpf_btf` in
//! `tools/perf/util/header.c` write and read it. Each blob is parsed by [`Btf`], the one
//! reader of BTF, in `bpf::btf`; its unit tests are in `btf_tests.rs`, beside the builders of
//! BTF bytes.

use std::collections::BTreeMap;

use super::bytes::Bytes;
use super::BpfInfoError;
pub use crate::bpf::btf::{Btf, BtfError};

/// The BTF blobs of a perf.data file, by id.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BtfSet {
    blobs: BTreeMap<u32, Btf>,
    /// Blobs that could not be parsed (left out), and duplicate ids.
    pub problems: Vec<BpfInfoError>,
}

impl BtfSet {
    /// The blob with this id.
    pub fn get(&self, id: u32) -> Option<&Btf> {
        self.blobs.get(&id)
    }

    /// Adds a blob; a second blob with the same id is dropped with a problem noted.
    pub fn insert(&mut self, btf: Btf) {
        if self.blobs.contains_key(&btf.id) {
            self.problems.push(BpfInfoError::BadBtf {
                btf_id: btf.id,
                reason: "duplicate id".into(),
            });
            return;
        }
        self.blobs.insert(btf.id, btf);
    }

    /// Ids of the blobs, ascending.
    pub fn ids(&self) -> impl Iterator<Item = u32> + '_ {
        self.blobs.keys().copied()
    }

    /// Number of blobs.
    pub fn len(&self) -> usize {
        self.blobs.len()
    }

    /// Whether there is none.
    pub fn is_empty(&self) -> bool {
        self.blobs.is_empty()
    }
}

/// Parses the body of feature 26 (`HEADER_BPF_BTF`), one raw BTF blob per BTF id.
/// `little_endian` is the perf.data file's byte order (for the count, ids and sizes; each
/// blob says its own). `Err` when the section cannot be walked; a blob that is not valid BTF
/// is left out and noted in `problems`.
pub(crate) fn parse_btf_section(
    section: &[u8],
    little_endian: bool,
) -> Result<BtfSet, BpfInfoError> {
    let bytes = Bytes::new(section, little_endian);
    let mut set = BtfSet::default();
    if section.is_empty() {
        return Ok(set);
    }
    let trunc = |what, offset: usize, need: u64| BpfInfoError::Truncated {
        what,
        offset,
        need,
        have: section.len().saturating_sub(offset) as u64,
    };
    let count = bytes.u32(0).ok_or_else(|| trunc("BTF count", 0, 4))?;
    let max = (section.len() - 4) / 8;
    if count as usize > max {
        return Err(BpfInfoError::CountTooLarge {
            what: "BTF",
            count: count.into(),
            max: max as u64,
        });
    }
    let mut pos = 4;
    for _ in 0..count {
        let (id, size) = match (bytes.u32(pos), bytes.u32(pos + 4)) {
            (Some(id), Some(size)) => (id, size),
            _ => return Err(trunc("BTF entry header", pos, 8)),
        };
        let blob = bytes
            .slice(pos + 8, size as usize)
            .ok_or_else(|| trunc("BTF blob", pos + 8, size.into()))?;
        match Btf::parse(id, blob.to_vec()) {
            Ok(btf) => set.insert(btf),
            Err(err) => set.problems.push(err.into()),
        }
        pos += 8 + size as usize;
    }
    Ok(set)
}

#[cfg(test)]
#[path = "btf_tests.rs"]
mod tests;
