//! Feature 25, `HEADER_BPF_PROG_INFO`, as perf writes it: `u32 count` and then `count`
//! `struct perf_bpil { u32 info_len; u32 data_len; u64 arrays; u8 info[info_len];
//! u8 data[data_len]; }` back to back, where each array pointer of the `bpf_prog_info` in
//! `info` holds an offset into `data` when its bit is set in `arrays`.
//!
//! The layouts are those of perf's `write_bpf_prog_info` and `process_bpf_prog_info` in
//! `tools/perf/util/header.c`, of `bpil_array_desc[]` and `bpil_addr_to_offs` in
//! `tools/perf/util/bpf-utils.c`, and of `struct bpf_prog_info` in the kernel's
//! `include/uapi/linux/bpf.h`. A unit test holds the offsets used here against libbpf-sys's
//! copy of that struct.
//!
//! The file may be damaged or hostile, so the reading is defensive. Counts are capped by the
//! bytes present, every array offset is checked against `data_len`, and a bad array is dropped
//! with a problem noted rather than trusted. Nothing is allocated from a claimed size that the
//! bytes do not back.

use super::bytes::Bytes;
use super::model::{ProgParts, RawFuncInfo, RawLineInfo};
use super::{BpfInfoError, ProgInfo};

/// `u32 info_len; u32 data_len; u64 arrays`.
const ENTRY_HEADER: usize = 16;
/// perf needs `bpf_prog_info` up to `prog_tags` (offset 184).
const MIN_INFO_LEN: u32 = 184;
/// A sanity cap: the struct is 232 bytes today.
const MAX_INFO_LEN: u32 = 4096;
/// `sizeof(struct bpf_prog_info)` as perf 6.1 and the kernel 6.18 know it.
const INFO_LEN: usize = 232;
/// Bytes of the smallest entry a writer can produce.
const MIN_ENTRY: usize = ENTRY_HEADER + MIN_INFO_LEN as usize;

/// Offsets of the scalar fields of `struct bpf_prog_info` we use.
mod off {
    pub const TYPE: usize = 0;
    pub const ID: usize = 4;
    pub const TAG: usize = 8;
    pub const LOAD_TIME: usize = 40;
    pub const NAME: usize = 64;
    pub const BTF_ID: usize = 128;
}

/// How big one element of an array is.
#[derive(Clone, Copy)]
enum RecSize {
    /// A constant.
    Fixed(u32),
    /// Read from the `u32` at this offset of the info, and at least this big.
    Field(usize, u32),
}

/// One entry of perf's `bpil_array_desc[]`: bit in `arrays`, pointer and count fields.
#[derive(Clone, Copy)]
struct ArrayDesc {
    bit: u32,
    name: &'static str,
    ptr: usize,
    count: usize,
    size: RecSize,
}

const JITED_INSNS: ArrayDesc = desc(0, "jited_prog_insns", 24, 16, RecSize::Fixed(1));
const JITED_KSYMS: ArrayDesc = desc(3, "jited_ksyms", 112, 104, RecSize::Fixed(8));
const JITED_FUNC_LENS: ArrayDesc = desc(4, "jited_func_lens", 120, 108, RecSize::Fixed(4));
const FUNC_INFO: ArrayDesc = desc(5, "func_info", 136, 144, RecSize::Field(132, 8));
const LINE_INFO: ArrayDesc = desc(6, "line_info", 152, 148, RecSize::Field(172, 16));
const JITED_LINE_INFO: ArrayDesc = desc(7, "jited_line_info", 160, 168, RecSize::Field(176, 8));
const PROG_TAGS: ArrayDesc = desc(8, "prog_tags", 184, 180, RecSize::Fixed(8));

const fn desc(bit: u32, name: &'static str, ptr: usize, count: usize, size: RecSize) -> ArrayDesc {
    ArrayDesc {
        bit,
        name,
        ptr,
        count,
        size,
    }
}

/// Parses the body of feature 25 (`HEADER_BPF_PROG_INFO`) into one [`ProgInfo`] per
/// program, in the order perf wrote them (ascending program id). `little_endian` is the byte
/// order of the perf.data file. An empty section means no programs.
///
/// Returns `Err` when the section itself cannot be walked (truncated, a count the bytes
/// cannot hold, an out-of-range `info_len`/`data_len`); problems inside one program are kept
/// in its `problems`. Names are perf's fallback names until `ProgInfo::resolve_names` is
/// given the BTF (or use `BpfInfo::from_sections`, which does both).
pub(crate) fn parse_prog_info(
    section: &[u8],
    little_endian: bool,
) -> Result<Vec<ProgInfo>, BpfInfoError> {
    let bytes = Bytes::new(section, little_endian);
    if section.is_empty() {
        return Ok(Vec::new());
    }
    let count = bytes
        .u32(0)
        .ok_or_else(|| truncated("program count", 0, 4, section.len()))?;
    let max = (section.len() - 4) / MIN_ENTRY;
    if count as usize > max {
        return Err(BpfInfoError::CountTooLarge {
            what: "bpf_prog_info",
            count: count.into(),
            max: max as u64,
        });
    }
    let mut progs = Vec::with_capacity(count as usize);
    let mut pos = 4;
    for entry in 0..count as usize {
        let (parts, next) = parse_entry(bytes, pos, entry)?;
        progs.push(ProgInfo::from_parts(parts));
        pos = next;
    }
    Ok(progs)
}

fn truncated(what: &'static str, offset: usize, need: u64, len: usize) -> BpfInfoError {
    BpfInfoError::Truncated {
        what,
        offset,
        need,
        have: len.saturating_sub(offset) as u64,
    }
}

/// The `perf_bpil` at `pos`, and where the next one starts.
fn parse_entry(
    bytes: Bytes<'_>,
    pos: usize,
    entry: usize,
) -> Result<(ProgParts, usize), BpfInfoError> {
    let header = bytes
        .sub(pos, ENTRY_HEADER)
        .ok_or_else(|| truncated("bpf_prog_info entry header", pos, 16, bytes.len()))?;
    let info_len = header.u32(0).unwrap_or(0);
    let data_len = header.u32(4).unwrap_or(0);
    let arrays = header.u64(8).unwrap_or(0);
    if !(MIN_INFO_LEN..=MAX_INFO_LEN).contains(&info_len) {
        return Err(BpfInfoError::BadInfoLen { entry, info_len });
    }
    if data_len % 8 != 0 {
        return Err(BpfInfoError::BadDataLen { entry, data_len });
    }
    let need = ENTRY_HEADER as u64 + u64::from(info_len) + u64::from(data_len);
    let body = bytes
        .slice(pos, need as usize)
        .ok_or_else(|| truncated("bpf_prog_info entry", pos, need, bytes.len()))?;
    let mut info = [0u8; INFO_LEN];
    let copied = (info_len as usize).min(INFO_LEN);
    info[..copied].copy_from_slice(&body[ENTRY_HEADER..ENTRY_HEADER + copied]);
    let data_start = ENTRY_HEADER + info_len as usize;
    let data = Bytes::new(&body[data_start..], bytes.little_endian());
    let parts = decode(Bytes::new(&info, bytes.little_endian()), data, arrays);
    Ok((parts, pos + need as usize))
}

/// The scalar fields and every array perf stores.
fn decode(info: Bytes<'_>, data: Bytes<'_>, arrays: u64) -> ProgParts {
    let mut parts = ProgParts {
        id: info.u32(off::ID).unwrap_or(0),
        prog_type: info.u32(off::TYPE).unwrap_or(0),
        btf_id: info.u32(off::BTF_ID).unwrap_or(0),
        load_time: info.u64(off::LOAD_TIME).unwrap_or(0),
        ..ProgParts::default()
    };
    if let Some(tag) = info.slice(off::TAG, 8) {
        parts.tag.copy_from_slice(tag);
    }
    parts.name = c_name(info.slice(off::NAME, 16).unwrap_or_default());
    let mut arr = Arrays {
        info,
        data,
        arrays,
        id: parts.id,
        problems: Vec::new(),
    };
    parts.jited_insns = arr
        .get(JITED_INSNS)
        .map(|a| a.bytes.to_vec())
        .unwrap_or_default();
    parts.jited_ksyms = arr.records(JITED_KSYMS, |record| record.u64(0));
    parts.jited_func_lens = arr.records(JITED_FUNC_LENS, |record| record.u32(0));
    parts.prog_tags = arr.records(PROG_TAGS, |record| record.slice(0, 8)?.try_into().ok());
    parts.func_info = arr.records(FUNC_INFO, |record| {
        Some(RawFuncInfo {
            insn_off: record.u32(0)?,
            type_id: record.u32(4)?,
        })
    });
    parts.line_info = arr.records(LINE_INFO, |record| {
        Some(RawLineInfo {
            insn_off: record.u32(0)?,
            file_name_off: record.u32(4)?,
            line_off: record.u32(8)?,
            line_col: record.u32(12)?,
        })
    });
    parts.jited_line_info = arr.records(JITED_LINE_INFO, |record| record.u64(0));
    parts.problems = arr.problems;
    parts
}

/// A NUL-terminated name in a fixed-size field.
fn c_name(raw: &[u8]) -> String {
    let end = raw.iter().position(|&b| b == 0).unwrap_or(raw.len());
    String::from_utf8_lossy(&raw[..end]).into_owned()
}

/// Reads the arrays of one entry, noting the invalid ones.
struct Arrays<'a> {
    info: Bytes<'a>,
    data: Bytes<'a>,
    arrays: u64,
    id: u32,
    problems: Vec<BpfInfoError>,
}

/// The validated bytes of one array.
struct Array<'a> {
    bytes: &'a [u8],
    count: usize,
    rec_size: usize,
    little_endian: bool,
}

impl<'a> Arrays<'a> {
    /// The array's bytes, if its bit is set and it fits in `data` (else a problem is noted).
    fn get(&mut self, desc: ArrayDesc) -> Option<Array<'a>> {
        if self.arrays & (1 << desc.bit) == 0 {
            return None;
        }
        let count = self.info.u32(desc.count).unwrap_or(0);
        let offset = self.info.u64(desc.ptr).unwrap_or(0);
        let (rec_size, min) = match desc.size {
            RecSize::Fixed(size) => (size, size),
            RecSize::Field(at, min) => (self.info.u32(at).unwrap_or(0), min),
        };
        if count == 0 {
            return None;
        }
        let len = u64::from(count) * u64::from(rec_size);
        // No alignment is asked of an offset: perf 5.10's libbpf packed the arrays back to back
        // (a `jited_ksyms` right after 644 bytes of code), newer ones round each to 8 bytes.
        let fits = rec_size >= min
            && offset
                .checked_add(len)
                .is_some_and(|end| end <= self.data.len() as u64);
        let bytes = if fits {
            self.data.slice(offset as usize, len as usize)
        } else {
            None
        };
        if bytes.is_none() {
            self.problems.push(BpfInfoError::BadArray {
                prog_id: self.id,
                array: desc.name,
                offset,
                count,
                rec_size,
                data_len: self.data.len() as u32,
            });
        }
        Some(Array {
            bytes: bytes?,
            count: count as usize,
            rec_size: rec_size as usize,
            little_endian: self.data.little_endian(),
        })
    }

    /// Each record of the array, decoded by `read` (which sees one record's bytes).
    fn records<T>(&mut self, desc: ArrayDesc, read: impl Fn(Bytes<'a>) -> Option<T>) -> Vec<T> {
        let Some(array) = self.get(desc) else {
            return Vec::new();
        };
        let rec = |index: usize| {
            Bytes::new(array.bytes, array.little_endian).sub(index * array.rec_size, array.rec_size)
        };
        (0..array.count)
            .filter_map(|index| read(rec(index)?))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use libbpf_rs::libbpf_sys::bpf_prog_info;
    use std::mem::{offset_of, size_of};

    /// The offsets written out above are those of the kernel's UAPI header, as libbpf-sys
    /// generates `struct bpf_prog_info` from it.
    #[test]
    fn offsets_are_those_of_the_uapi_struct() {
        assert_eq!(INFO_LEN, size_of::<bpf_prog_info>());
        assert_eq!(MIN_INFO_LEN as usize, offset_of!(bpf_prog_info, prog_tags));
        assert_eq!(off::TYPE, offset_of!(bpf_prog_info, type_));
        assert_eq!(off::ID, offset_of!(bpf_prog_info, id));
        assert_eq!(off::TAG, offset_of!(bpf_prog_info, tag));
        assert_eq!(off::LOAD_TIME, offset_of!(bpf_prog_info, load_time));
        assert_eq!(off::NAME, offset_of!(bpf_prog_info, name));
        assert_eq!(off::BTF_ID, offset_of!(bpf_prog_info, btf_id));
    }

    /// Each array's pointer, count and record size fields are the UAPI struct's too.
    #[test]
    fn array_offsets_are_those_of_the_uapi_struct() {
        let arrays = [
            (
                JITED_INSNS,
                offset_of!(bpf_prog_info, jited_prog_insns),
                offset_of!(bpf_prog_info, jited_prog_len),
                None,
            ),
            (
                JITED_KSYMS,
                offset_of!(bpf_prog_info, jited_ksyms),
                offset_of!(bpf_prog_info, nr_jited_ksyms),
                None,
            ),
            (
                JITED_FUNC_LENS,
                offset_of!(bpf_prog_info, jited_func_lens),
                offset_of!(bpf_prog_info, nr_jited_func_lens),
                None,
            ),
            (
                FUNC_INFO,
                offset_of!(bpf_prog_info, func_info),
                offset_of!(bpf_prog_info, nr_func_info),
                Some(offset_of!(bpf_prog_info, func_info_rec_size)),
            ),
            (
                LINE_INFO,
                offset_of!(bpf_prog_info, line_info),
                offset_of!(bpf_prog_info, nr_line_info),
                Some(offset_of!(bpf_prog_info, line_info_rec_size)),
            ),
            (
                JITED_LINE_INFO,
                offset_of!(bpf_prog_info, jited_line_info),
                offset_of!(bpf_prog_info, nr_jited_line_info),
                Some(offset_of!(bpf_prog_info, jited_line_info_rec_size)),
            ),
            (
                PROG_TAGS,
                offset_of!(bpf_prog_info, prog_tags),
                offset_of!(bpf_prog_info, nr_prog_tags),
                None,
            ),
        ];
        for (desc, ptr, count, rec_size_field) in arrays {
            assert_eq!((desc.ptr, desc.count), (ptr, count), "{}", desc.name);
            match (desc.size, rec_size_field) {
                (RecSize::Field(at, _), Some(field)) => assert_eq!(at, field, "{}", desc.name),
                (RecSize::Fixed(_), None) => {}
                _ => panic!("{}: a record size of the wrong kind", desc.name),
            }
        }
    }
}
