//! The file container: the 104-byte `perf_file_header`, the attrs section with each attr's
//! ids, the data section bounds, and the feature table that follows the data.
//!
//! Layouts and checks follow `tools/perf/util/header.c` (`perf_file_header__read`,
//! `check_magic_endian`, `read_attr`, `perf_session__read_header`,
//! `perf_header__process_sections`, `read_event_desc`) of perf 6.1. Every offset and size the
//! file claims is checked against the file's length before anything is read or allocated.
//!
//! The header is also checked on its own, before perf or the reader sees the file
//! ([`incomplete`]). A recording that did not finish, because perf was killed, the disk was
//! full or a copy was cut short, is then named as one in our words, instead of perf's "failed
//! to process type: 0 [Invalid argument]" or "incompatible file format". perf writes the
//! header with a data size of 0 when it starts and rewrites it when it stops, so a 0 there
//! means perf never got to the end.

use super::attr::EventAttr;
use super::cursor::{c_str, to_usize, u32_at, u64_at, Cursor, Endian};
use super::error::{malformed, truncated, unsupported, PerfDataError};
use std::ops::Range;

/// Size of `struct perf_file_header` with the feature bitmap.
const HEADER_SIZE: u64 = 104;
/// The header of files written before the feature bitmap existed.
const OLD_HEADER_SIZE: u64 = 72;
/// The header of a pipe-mode recording (`perf record -o -`): the magic and this size only.
const PIPE_HEADER_SIZE: u64 = 16;
/// `PERF_ATTR_SIZE_VER0`: the smallest on-disk `perf_event_attr`.
const ATTR_SIZE_VER0: usize = 64;
/// The magic of a file written in little-endian order.
const MAGIC: &[u8; 8] = b"PERFILE2";
/// The same magic as a big-endian machine writes it.
const MAGIC_SWAPPED: &[u8; 8] = b"2ELIFREP";
/// The magic of the version 1 format, before 2011.
const MAGIC_V1: &[u8; 8] = b"PERFFILE";
// Offsets of the fields of `struct perf_file_header`, in `tools/perf/util/header.h`.
const SIZE_AT: usize = 8;
const ATTR_SIZE_AT: usize = 16;
const ATTRS_AT: usize = 24;
const DATA_AT: usize = 40;
const FEATURES_AT: usize = 72;
/// The bytes of one `{offset, size}` pair.
const SECTION_LEN: usize = 16;

/// Feature ids (`enum` in `tools/perf/util/header.h`).
pub mod feature {
    pub const BUILD_ID: u32 = 2;
    pub const HOSTNAME: u32 = 3;
    pub const ARCH: u32 = 6;
    pub const EVENT_DESC: u32 = 12;
    pub const DIR_FORMAT: u32 = 24;
    pub const BPF_PROG_INFO: u32 = 25;
    pub const BPF_BTF: u32 = 26;
    pub const COMPRESSED: u32 = 27;
}

/// An `{offset, size}` pair of the header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Section {
    pub offset: u64,
    pub size: u64,
}

impl Section {
    fn read(cursor: &mut Cursor<'_>) -> Option<Section> {
        Some(Section {
            offset: cursor.u64()?,
            size: cursor.u64()?,
        })
    }

    /// The pair at byte `at` of `bytes`.
    fn at(bytes: &[u8], at: usize, endian: Endian) -> Option<Section> {
        Some(Section {
            offset: u64_at(bytes, at, endian)?,
            size: u64_at(bytes, at.checked_add(8)?, endian)?,
        })
    }

    /// Where the section ends, if that is within a file of `len` bytes.
    fn end_within(self, len: u64) -> Option<u64> {
        self.offset.checked_add(self.size).filter(|&end| end <= len)
    }

    /// The byte range, checked against the file's length.
    pub fn range(self, file_len: usize, what: &str) -> Result<Range<usize>, PerfDataError> {
        let end = self
            .offset
            .checked_add(self.size)
            .ok_or_else(|| malformed(format!("{what} offset + size overflows")))?;
        if end > file_len as u64 {
            return Err(truncated(format!(
                "the {what} ends at byte {end} but the file has {file_len} bytes"
            )));
        }
        // Both fit in the file, so both fit in usize.
        Ok(self.offset as usize..end as usize)
    }
}

/// The decoded `perf_file_header`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FileHeader {
    pub endian: Endian,
    pub size: u64,
    pub attr_size: u64,
    pub attrs: Section,
    pub data: Section,
    pub features: [u64; 4],
}

impl FileHeader {
    /// Whether feature bit `id` is set.
    pub fn has_feature(&self, id: u32) -> bool {
        id < 256 && self.features[(id / 64) as usize] & (1 << (id % 64)) != 0
    }
}

/// Whether `head`, a file's first bytes, starts like a perf.data in either byte order.
pub fn is_perf_data(head: &[u8]) -> bool {
    head.starts_with(MAGIC) || head.starts_with(MAGIC_SWAPPED)
}

/// The magic's byte order; errors for pipe, legacy and foreign files.
fn endian_of(bytes: &[u8]) -> Result<Endian, PerfDataError> {
    match bytes.get(..8) {
        Some(magic) if magic == MAGIC => Ok(Endian::Little),
        Some(magic) if magic == MAGIC_SWAPPED => Ok(Endian::Big),
        Some(magic) if magic == MAGIC_V1 => {
            Err(unsupported("the version 1 format of perf before 2011"))
        }
        Some(_) => Err(PerfDataError::NotPerfData("no PERFILE2 magic".into())),
        None if bytes.is_empty() => Err(truncated("the file is empty")),
        None if MAGIC.starts_with(bytes) || MAGIC_SWAPPED.starts_with(bytes) => {
            Err(truncated("the file ends inside its magic"))
        }
        None => Err(PerfDataError::NotPerfData("shorter than a header".into())),
    }
}

/// Decode and check the file header (`perf_file_header__read`).
pub(crate) fn parse_file_header(bytes: &[u8]) -> Result<FileHeader, PerfDataError> {
    let endian = endian_of(bytes)?;
    let cut = || truncated("the header is cut");
    let size = u64_at(bytes, SIZE_AT, endian).ok_or_else(cut)?;
    if size == PIPE_HEADER_SIZE {
        return Err(unsupported("a pipe-mode recording (perf record -o -)"));
    }
    if size != HEADER_SIZE && size != OLD_HEADER_SIZE {
        return Err(malformed(format!("header size {size}, expected 104")));
    }
    if (bytes.len() as u64) < size {
        return Err(cut());
    }
    // The event types section, between the data section and the features, is unused since
    // 2011.
    let attr_size = u64_at(bytes, ATTR_SIZE_AT, endian).ok_or_else(cut)?;
    let attrs = Section::at(bytes, ATTRS_AT, endian).ok_or_else(cut)?;
    let data = Section::at(bytes, DATA_AT, endian).ok_or_else(cut)?;
    let features = if size == HEADER_SIZE {
        feature_bits(bytes, endian)
    } else {
        [0; 4]
    };
    let header = FileHeader {
        endian,
        size,
        attr_size,
        attrs,
        data,
        features,
    };
    check_layout(&header, bytes.len())?;
    Ok(header)
}

/// Why the header says the recording did not finish, in words for the user: `None` when the
/// header is consistent, and when its layout is one this check does not know (perf judges
/// those). `head` is the file's first bytes, at least [`HEADER_SIZE`] of them when the file
/// has that many, and `len` the file's length. `read_on(offset, count)` reads `count` bytes
/// further on, for the feature table after the data.
pub fn incomplete(
    head: &[u8],
    len: u64,
    read_on: impl FnOnce(u64, usize) -> Option<Vec<u8>>,
) -> Option<String> {
    let endian = match head.starts_with(MAGIC_SWAPPED) {
        true => Endian::Big,
        false => Endian::Little,
    };
    let short = || {
        Some(format!(
            "{len} bytes, shorter than perf's {HEADER_SIZE}-byte header"
        ))
    };
    let Some(size) = u64_at(head, SIZE_AT, endian) else {
        return short();
    };
    match size {
        // A pipe-mode header is followed by records: there is nothing to check.
        PIPE_HEADER_SIZE => return None,
        HEADER_SIZE if head.len() < HEADER_SIZE as usize => return short(),
        HEADER_SIZE => {}
        _ => return None,
    }
    let attrs = Section::at(head, ATTRS_AT, endian)?;
    let data = Section::at(head, DATA_AT, endian)?;
    if attrs.end_within(len).is_none() {
        return Some(format!("its event descriptions end past its {len} bytes"));
    }
    if data.size == 0 {
        return Some("its data size is 0: perf never rewrote its header at the end".into());
    }
    let Some(data_end) = data.end_within(len) else {
        return Some(format!(
            "its data should end at byte {}, the file has {len}",
            data.offset.saturating_add(data.size)
        ));
    };
    let bits = &head[FEATURES_AT..HEADER_SIZE as usize];
    let features: u32 = bits.iter().map(|byte| byte.count_ones()).sum();
    if features == 0 {
        return None;
    }
    let table = Section {
        offset: data_end,
        size: u64::from(features) * SECTION_LEN as u64,
    };
    if table.end_within(len).is_none() {
        return Some("its feature sections are missing after the samples".into());
    }
    let bytes = read_on(table.offset, table.size as usize)?;
    feature_sections_fit(&bytes, endian, len)
}

/// [`incomplete`] for an open file: why the recording in it did not finish, or `None` when its
/// header agrees with its length. An empty or unreadable file did not finish either.
pub fn unfinished(file: &std::fs::File) -> Option<String> {
    let len = match file.metadata() {
        Ok(m) if m.len() > 0 => m.len(),
        Ok(_) => return Some("the file is empty".into()),
        Err(e) => return Some(format!("cannot read it: {e}")),
    };
    let head_len = len.min(HEADER_SIZE) as usize;
    let Some(head) = read_at(file, 0, head_len) else {
        return Some("cannot read its header".into());
    };
    incomplete(&head, len, |offset, count| read_at(file, offset, count))
}

/// Whether each `{offset, size}` of the feature table lies inside a file of `len` bytes.
fn feature_sections_fit(table: &[u8], endian: Endian, len: u64) -> Option<String> {
    let mut cursor = Cursor::new(table, endian);
    let mut number = 0;
    while let Some(section) = Section::read(&mut cursor) {
        number += 1;
        if section.end_within(len).is_none() {
            return Some(format!(
                "its feature section {number} ends past its {len} bytes"
            ));
        }
    }
    None
}

/// `count` bytes at `offset` of `file`, read without moving its position.
pub fn read_at(file: &std::fs::File, offset: u64, count: usize) -> Option<Vec<u8>> {
    use std::os::unix::fs::FileExt;
    let mut buf = vec![0; count];
    file.read_exact_at(&mut buf, offset).ok()?;
    Some(buf)
}

/// The feature bitmap, with perf's guess for byte-swapped files written by 32-bit hosts
/// (`perf_file_header__read`: try u64 words, then u32 words, keyed on HOSTNAME).
fn feature_bits(bytes: &[u8], endian: Endian) -> [u64; 4] {
    let mut words = [0u64; 4];
    for (index, word) in words.iter_mut().enumerate() {
        *word = u64_at(bytes, 72 + 8 * index, endian).unwrap_or(0);
    }
    let hostname = |words: &[u64; 4]| words[0] & (1 << feature::HOSTNAME) != 0;
    if endian == Endian::Little || hostname(&words) {
        return words;
    }
    let mut w32 = [0u64; 4];
    for (index, word) in w32.iter_mut().enumerate() {
        let lo = u32_at(bytes, 72 + 8 * index, endian).unwrap_or(0);
        let hi = u32_at(bytes, 76 + 8 * index, endian).unwrap_or(0);
        *word = u64::from(lo) | u64::from(hi) << 32;
    }
    if hostname(&w32) {
        w32
    } else {
        [1 << feature::BUILD_ID, 0, 0, 0]
    }
}

/// Whether two byte ranges share a byte.
pub(crate) fn overlaps(first: &Range<usize>, second: &Range<usize>) -> bool {
    !first.is_empty() && !second.is_empty() && first.start < second.end && second.start < first.end
}

/// perf's own checks on the sections, plus bounds against the file.
fn check_layout(header: &FileHeader, len: usize) -> Result<(), PerfDataError> {
    if header.attr_size == 0 {
        return Err(malformed("attr_size is 0"));
    }
    let attrs = header.attrs.range(len, "attrs section")?;
    let data = header.data.range(len, "data section")?;
    let head = 0..header.size as usize;
    if overlaps(&head, &attrs) || overlaps(&head, &data) {
        return Err(malformed("a section overlaps the file header"));
    }
    if overlaps(&attrs, &data) {
        return Err(malformed("the attrs and data sections overlap"));
    }
    if data.is_empty() {
        return Err(truncated("the header says the data section is empty"));
    }
    Ok(())
}

/// The feature sections present, in bit order, each checked against the file.
pub(crate) fn parse_feature_table(
    bytes: &[u8],
    header: &FileHeader,
) -> Result<Vec<(u32, Range<usize>)>, PerfDataError> {
    let ids: Vec<u32> = (0..256u32).filter(|&i| header.has_feature(i)).collect();
    let table = Section {
        offset: header.data.offset.saturating_add(header.data.size),
        size: 16 * ids.len() as u64,
    }
    .range(bytes.len(), "feature table")?;
    let data = header.data.range(bytes.len(), "data section")?;
    let attrs = header.attrs.range(bytes.len(), "attrs section")?;
    let mut cursor = Cursor::new(&bytes[table], header.endian);
    let mut out = Vec::with_capacity(ids.len());
    for id in ids {
        let entry =
            Section::read(&mut cursor).ok_or_else(|| truncated("the feature table is cut"))?;
        let range = entry.range(bytes.len(), &format!("feature {id}"))?;
        let head = 0..header.size as usize;
        if overlaps(&range, &data) || overlaps(&range, &attrs) || overlaps(&range, &head) {
            return Err(malformed(format!(
                "feature {id} overlaps the header, attrs or data"
            )));
        }
        out.push((id, range));
    }
    Ok(out)
}

/// The attrs with their ids (`perf_session__read_header` + `read_attr`): entries follow each
/// other every `attr.size + 16` bytes, and each must lie inside the attrs section.
pub(crate) fn parse_attrs(
    bytes: &[u8],
    header: &FileHeader,
) -> Result<Vec<EventAttr>, PerfDataError> {
    let section = header.attrs.range(bytes.len(), "attrs section")?;
    let nr = header.attrs.size / header.attr_size;
    let endian = header.endian;
    let mut out = Vec::new();
    let mut pos = section.start;
    for index in 0..nr {
        let what = || malformed(format!("attr {index} does not fit in the attrs section"));
        let attr_bytes = bytes.get(pos..section.end).ok_or_else(what)?;
        let size = match u32_at(attr_bytes, 4, endian).ok_or_else(what)? {
            0 => ATTR_SIZE_VER0,
            claimed => claimed as usize,
        };
        if size < ATTR_SIZE_VER0 {
            return Err(malformed(format!("attr {index} claims {size} bytes")));
        }
        let raw = attr_bytes.get(..size).ok_or_else(what)?;
        let ids_at = attr_bytes.get(size..size + 16).ok_or_else(what)?;
        let mut attr = EventAttr::parse(raw, index as usize, endian).ok_or_else(what)?;
        let mut cursor = Cursor::new(ids_at, endian);
        let ids = Section::read(&mut cursor).ok_or_else(what)?;
        attr.ids = read_ids(bytes, ids, endian, index)?;
        out.push(attr);
        pos += size + 16;
    }
    Ok(out)
}

fn read_ids(
    bytes: &[u8],
    array: Section,
    endian: Endian,
    index: u64,
) -> Result<Vec<u64>, PerfDataError> {
    let range = array.range(bytes.len(), &format!("id array of attr {index}"))?;
    Ok(bytes[range]
        .chunks_exact(8)
        .filter_map(|w| u64_at(w, 0, endian))
        .collect())
}

/// Event names from the EVENT_DESC feature, by attr index (`read_event_desc`):
/// `u32 nr; u32 attr_size; { attr; u32 nr_ids; u32 len; char name[len]; u64 ids[nr_ids] }[nr]`.
pub(crate) fn event_names(body: &[u8], endian: Endian) -> Vec<Option<String>> {
    let mut cursor = Cursor::new(body, endian);
    let (Some(nr), Some(attr_size)) = (cursor.u32(), cursor.u32()) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for _ in 0..nr {
        let Some(name) = event_desc_entry(&mut cursor, attr_size as usize) else {
            break;
        };
        out.push(Some(name));
    }
    out
}

fn event_desc_entry(cursor: &mut Cursor<'_>, attr_size: usize) -> Option<String> {
    cursor.skip(attr_size)?;
    let nr_ids = cursor.u32()?;
    let name = read_string(cursor)?;
    cursor.skip(to_usize(u64::from(nr_ids))?.checked_mul(8)?)?;
    Some(name)
}

/// A `perf_header_string`: `u32 len; char str[len]` (NUL-padded).
pub(crate) fn read_string(cursor: &mut Cursor<'_>) -> Option<String> {
    let len = cursor.u32()? as usize;
    let raw = cursor.bytes(len)?;
    Some(String::from_utf8_lossy(c_str(raw)).into_owned())
}

#[cfg(test)]
#[path = "header_tests.rs"]
mod tests;
