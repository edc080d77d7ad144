//! Records of the data section: the 8-byte `perf_event_header`, walking the stream, and
//! decoding the record types the reader needs. Everything else is skipped by `header.size`.
//!
//! Layouts: `include/uapi/linux/perf_event.h` (`enum perf_event_type`, the `sample_id`
//! trailer), `tools/lib/perf/include/perf/event.h` (user records ≥ 64), and
//! `tools/perf/util/evsel.c: evsel__parse_sample()` for the sample field order.

use super::attr::{read_format, sample, EventAttr};
use super::cursor::{c_str, to_usize, u32_at, u64_at, Cursor, Endian};
use super::error::{malformed, truncated, unsupported, PerfDataError};

pub const MMAP: u32 = 1;
pub const COMM: u32 = 3;
pub const EXIT: u32 = 4;
pub const FORK: u32 = 7;
pub const SAMPLE: u32 = 9;
pub const MMAP2: u32 = 10;
pub const KSYMBOL: u32 = 17;
pub const BPF_EVENT: u32 = 18;
pub const HEADER_TRACING_DATA: u32 = 66;
pub const FINISHED_ROUND: u32 = 68;
pub const AUXTRACE: u32 = 71;
pub const COMPRESSED: u32 = 81;
pub const COMPRESSED2: u32 = 83;

/// `misc & CPUMODE_MASK` values.
pub mod cpumode {
    pub const MASK: u16 = 7;
    pub const KERNEL: u16 = 1;
    pub const USER: u16 = 2;
    pub const HYPERVISOR: u16 = 3;
    pub const GUEST_KERNEL: u16 = 4;
}
// Three flags share bit 13 of `misc`, one per record type.
/// `PERF_RECORD_MISC_COMM_EXEC`: a COMM record's name changed by exec.
pub const MISC_COMM_EXEC: u16 = 1 << 13;
/// `PERF_RECORD_MISC_MMAP_DATA`: an MMAP record maps data, not code.
pub const MISC_MMAP_DATA: u16 = 1 << 13;
/// `PERF_RECORD_MISC_FORK_EXEC`: perf's own mark on a FORK record it synthesized for an exec.
pub const MISC_FORK_EXEC: u16 = 1 << 13;
/// `PERF_RECORD_KSYMBOL_TYPE_BPF`: a KSYMBOL record of a JIT-ed BPF program.
pub const KSYMBOL_TYPE_BPF: u16 = 1;
/// `PERF_BPF_EVENT_PROG_LOAD`: a BPF_EVENT record of a program loaded.
pub const BPF_EVENT_PROG_LOAD: u16 = 1;
/// `PROT_EXEC` in an MMAP2 record's `prot`.
pub const PROT_EXEC: u32 = 4;
/// `PERF_RECORD_MISC_MMAP_BUILD_ID`.
pub const MISC_MMAP_BUILD_ID: u16 = 1 << 14;

/// One record as it sits in the data section.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RawRecord<'a> {
    /// Byte offset of the record's header in the file.
    pub offset: u64,
    /// `header.type`.
    pub kind: u32,
    /// `header.misc`.
    pub misc: u16,
    /// The bytes after the 8-byte header, `header.size - 8` of them.
    pub body: &'a [u8],
}

/// The records of a data section in file order; stops at the first error.
#[derive(Debug, Clone)]
pub struct Records<'a> {
    data: &'a [u8],
    base: u64,
    pos: usize,
    endian: Endian,
    failed: bool,
}

impl<'a> Records<'a> {
    /// Walk `data`, which starts at file offset `base`.
    pub(crate) fn new(data: &'a [u8], base: u64, endian: Endian) -> Records<'a> {
        Records {
            data,
            base,
            pos: 0,
            endian,
            failed: false,
        }
    }

    fn next_record(&mut self) -> Result<RawRecord<'a>, PerfDataError> {
        let at = self.base + self.pos as u64;
        let rest = self.data.get(self.pos..).unwrap_or_default();
        let (Some(kind), Some(misc), Some(size)) = (
            u32_at(rest, 0, self.endian),
            super::cursor::u16_at(rest, 4, self.endian),
            super::cursor::u16_at(rest, 6, self.endian),
        ) else {
            return Err(truncated(format!("a record header at byte {at} is cut")));
        };
        let size = usize::from(size);
        if size < 8 {
            return Err(malformed(format!(
                "record at byte {at} claims {size} bytes"
            )));
        }
        if kind == COMPRESSED || kind == COMPRESSED2 {
            return Err(unsupported("compressed records (perf record -z)"));
        }
        let body = rest
            .get(8..size)
            .ok_or_else(|| truncated(format!("the record at byte {at} is cut")))?;
        let extra = self.payload_after(kind, body, at)?;
        self.pos += size + extra;
        Ok(RawRecord {
            offset: at,
            kind,
            misc,
            body,
        })
    }

    /// Bytes that two user records carry after `header.size` (HEADER_TRACING_DATA's
    /// `u32 size` + data padded to 8, AUXTRACE's `u64 size` + data).
    fn payload_after(&self, kind: u32, body: &[u8], at: u64) -> Result<usize, PerfDataError> {
        let claimed = match kind {
            HEADER_TRACING_DATA => {
                u32_at(body, 0, self.endian).map(|payload| u64::from(payload).next_multiple_of(8))
            }
            AUXTRACE => u64_at(body, 0, self.endian),
            _ => return Ok(0),
        };
        let payload = claimed
            .and_then(to_usize)
            .ok_or_else(|| malformed(format!("record at byte {at} has no payload size")))?;
        let end = self
            .pos
            .checked_add(8 + body.len())
            .and_then(|p| p.checked_add(payload));
        match end {
            Some(end_at) if end_at <= self.data.len() => Ok(payload),
            _ => Err(truncated(format!(
                "the payload of the record at byte {at} is cut"
            ))),
        }
    }
}

impl<'a> Iterator for Records<'a> {
    type Item = Result<RawRecord<'a>, PerfDataError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed || self.pos >= self.data.len() {
            return None;
        }
        let raw = self.next_record();
        self.failed = raw.is_err();
        Some(raw)
    }
}

/// The `sample_id` trailer of a non-sample record.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SampleId {
    pub pid: Option<u32>,
    pub tid: Option<u32>,
    pub time: Option<u64>,
    pub cpu: Option<u32>,
}

/// Read the trailer at the end of `body` (`perf_evsel__parse_id_sample`); `None` when the body
/// is shorter than the trailer.
pub(crate) fn sample_id(body: &[u8], attr: &EventAttr, endian: Endian) -> Option<SampleId> {
    let len = attr.trailer_len();
    if len == 0 {
        return Some(SampleId::default());
    }
    let mut cursor = Cursor::new(body.get(body.len().checked_sub(len)?..)?, endian);
    let mut id = SampleId::default();
    if attr.has(sample::TID) {
        id.pid = cursor.u32();
        id.tid = cursor.u32();
    }
    if attr.has(sample::TIME) {
        id.time = cursor.u64();
    }
    if attr.has(sample::ID) {
        cursor.u64()?;
    }
    if attr.has(sample::STREAM_ID) {
        cursor.u64()?;
    }
    if attr.has(sample::CPU) {
        id.cpu = cursor.u32();
    }
    Some(id)
}

/// A decoded PERF_RECORD_SAMPLE, up to its callchain.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sample<'a> {
    pub ip: u64,
    pub pid: u32,
    pub tid: u32,
    pub time: Option<u64>,
    pub cpu: Option<u32>,
    pub period: Option<u64>,
    /// The callchain's entries, still in the file's byte order (8 bytes each).
    pub callchain: Option<&'a [u8]>,
}

/// Decode a sample body for `attr` (field order of `evsel__parse_sample`).
pub(crate) fn parse_sample<'a>(
    body: &'a [u8],
    attr: &EventAttr,
    endian: Endian,
) -> Option<Sample<'a>> {
    let mut cursor = Cursor::new(body, endian);
    let mut sample = Sample {
        ip: 0,
        pid: u32::MAX,
        tid: u32::MAX,
        time: None,
        cpu: None,
        period: None,
        callchain: None,
    };
    let has = |b| attr.has(b);
    if has(sample::IDENTIFIER) {
        cursor.u64()?;
    }
    if has(sample::IP) {
        sample.ip = cursor.u64()?;
    }
    if has(sample::TID) {
        sample.pid = cursor.u32()?;
        sample.tid = cursor.u32()?;
    }
    if has(sample::TIME) {
        sample.time = Some(cursor.u64()?);
    }
    for skip in [sample::ADDR, sample::ID, sample::STREAM_ID] {
        if has(skip) {
            cursor.u64()?;
        }
    }
    if has(sample::CPU) {
        sample.cpu = Some(cursor.u32()?);
        cursor.u32()?;
    }
    if has(sample::PERIOD) {
        sample.period = Some(cursor.u64()?);
    }
    if has(sample::READ) {
        skip_read_values(&mut cursor, attr.read_format)?;
    }
    if has(sample::CALLCHAIN) {
        let nr = to_usize(cursor.u64()?)?;
        sample.callchain = Some(cursor.bytes(nr.checked_mul(8)?)?);
    }
    Some(sample)
}

/// Skip a `read_format` block (`perf_evsel__read_size` / the READ branch of
/// `evsel__parse_sample`).
fn skip_read_values(cursor: &mut Cursor<'_>, rf: u64) -> Option<()> {
    let per_value =
        1 + usize::from(rf & read_format::ID != 0) + usize::from(rf & read_format::LOST != 0);
    let times = usize::from(rf & read_format::TOTAL_TIME_ENABLED != 0)
        + usize::from(rf & read_format::TOTAL_TIME_RUNNING != 0);
    if rf & read_format::GROUP != 0 {
        let nr = to_usize(cursor.u64()?)?;
        cursor.skip(times * 8)?;
        cursor.skip(nr.checked_mul(per_value * 8)?)
    } else {
        cursor.skip((per_value + times) * 8)
    }
}

/// The callchain entries of a sample, leaf first, decoded lazily.
pub(crate) fn callchain_entries(raw: &[u8], endian: Endian) -> impl Iterator<Item = u64> + '_ {
    raw.chunks_exact(8)
        .filter_map(move |w| u64_at(w, 0, endian))
}

/// A record decoded (see [`PerfData::decode`](super::PerfData::decode)).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Record<'a> {
    Sample(Sample<'a>),
    Mmap(Mmap<'a>),
    Comm(Comm<'a>),
    Fork(Task),
    Exit(Task),
    Ksymbol(Ksymbol<'a>),
    BpfEvent(BpfEvent),
    FinishedRound,
    /// Any other type, or a record too short for its type.
    Other,
}

/// Decode `r` for the event `attr` it belongs to.
pub(crate) fn decode<'a>(raw: &RawRecord<'a>, attr: &EventAttr, endian: Endian) -> Record<'a> {
    let trailer = attr.trailer_len();
    let decoded = match raw.kind {
        SAMPLE => parse_sample(raw.body, attr, endian).map(Record::Sample),
        MMAP | MMAP2 => parse_mmap(raw, trailer, endian).map(Record::Mmap),
        COMM => parse_comm(raw, trailer, endian).map(Record::Comm),
        FORK => parse_task(raw.body, endian).map(Record::Fork),
        EXIT => parse_task(raw.body, endian).map(Record::Exit),
        KSYMBOL => parse_ksymbol(raw, trailer, endian).map(Record::Ksymbol),
        BPF_EVENT => parse_bpf_event(raw.body, endian).map(Record::BpfEvent),
        FINISHED_ROUND => Some(Record::FinishedRound),
        _ => None,
    };
    decoded.unwrap_or(Record::Other)
}

/// PERF_RECORD_MMAP and PERF_RECORD_MMAP2.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Mmap<'a> {
    pub pid: u32,
    pub tid: u32,
    pub start: u64,
    pub len: u64,
    pub pgoff: u64,
    /// `PROT_*` (MMAP2 only; MMAP implies exec unless it is a data mapping).
    pub prot: Option<u32>,
    pub filename: &'a [u8],
    /// The build id MMAP2 carries with `PERF_RECORD_MISC_MMAP_BUILD_ID`.
    pub build_id: Option<&'a [u8]>,
}

/// Decode MMAP (type 1) or MMAP2 (type 10); `trailer` bytes at the end are not the filename.
pub(crate) fn parse_mmap<'a>(
    raw: &RawRecord<'a>,
    trailer: usize,
    endian: Endian,
) -> Option<Mmap<'a>> {
    let body = raw.body.get(..raw.body.len().checked_sub(trailer)?)?;
    let mut cursor = Cursor::new(body, endian);
    let pid = cursor.u32()?;
    let tid = cursor.u32()?;
    let start = cursor.u64()?;
    let len = cursor.u64()?;
    let pgoff = cursor.u64()?;
    let mut mmap = Mmap {
        pid,
        tid,
        start,
        len,
        pgoff,
        prot: None,
        filename: &[],
        build_id: None,
    };
    if raw.kind == MMAP2 {
        let id = cursor.bytes(24)?;
        if raw.misc & MISC_MMAP_BUILD_ID != 0 {
            let id_len = usize::from(id[0]).min(20);
            mmap.build_id = Some(&id[4..4 + id_len]);
        }
        mmap.prot = Some(cursor.u32()?);
        cursor.u32()?; // flags
    }
    mmap.filename = c_str(cursor.rest());
    Some(mmap)
}

/// PERF_RECORD_COMM.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Comm<'a> {
    pub pid: u32,
    pub tid: u32,
    pub comm: &'a [u8],
    /// `PERF_RECORD_MISC_COMM_EXEC`: the name changed by exec.
    pub exec: bool,
}

pub(crate) fn parse_comm<'a>(
    raw: &RawRecord<'a>,
    trailer: usize,
    endian: Endian,
) -> Option<Comm<'a>> {
    let body = raw.body.get(..raw.body.len().checked_sub(trailer)?)?;
    let mut cursor = Cursor::new(body, endian);
    Some(Comm {
        pid: cursor.u32()?,
        tid: cursor.u32()?,
        comm: c_str(cursor.rest()),
        exec: raw.misc & MISC_COMM_EXEC != 0,
    })
}

/// PERF_RECORD_FORK and PERF_RECORD_EXIT.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Task {
    pub pid: u32,
    pub ppid: u32,
    pub tid: u32,
    pub ptid: u32,
    pub time: u64,
}

pub(crate) fn parse_task(body: &[u8], endian: Endian) -> Option<Task> {
    let mut cursor = Cursor::new(body, endian);
    Some(Task {
        pid: cursor.u32()?,
        ppid: cursor.u32()?,
        tid: cursor.u32()?,
        ptid: cursor.u32()?,
        time: cursor.u64()?,
    })
}

/// PERF_RECORD_KSYMBOL: a kernel symbol (a JIT-ed BPF program, a trampoline) appearing or
/// going away.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ksymbol<'a> {
    pub addr: u64,
    pub len: u32,
    /// 0 unknown, 1 BPF, 2 out-of-line code (kprobe slots, ftrace trampolines).
    pub ksym_type: u16,
    /// Bit 0: unregister.
    pub flags: u16,
    pub name: &'a [u8],
}

impl Ksymbol<'_> {
    /// `PERF_RECORD_KSYMBOL_FLAGS_UNREGISTER`.
    pub fn unregister(&self) -> bool {
        self.flags & 1 != 0
    }
}

pub(crate) fn parse_ksymbol<'a>(
    raw: &RawRecord<'a>,
    trailer: usize,
    endian: Endian,
) -> Option<Ksymbol<'a>> {
    let body = raw.body.get(..raw.body.len().checked_sub(trailer)?)?;
    let mut cursor = Cursor::new(body, endian);
    Some(Ksymbol {
        addr: cursor.u64()?,
        len: cursor.u32()?,
        ksym_type: cursor.u16()?,
        flags: cursor.u16()?,
        name: c_str(cursor.rest()),
    })
}

/// PERF_RECORD_BPF_EVENT: a BPF program loaded or unloaded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BpfEvent {
    /// 1 PROG_LOAD, 2 PROG_UNLOAD.
    pub kind: u16,
    pub flags: u16,
    /// The program id.
    pub id: u32,
    /// The program tag.
    pub tag: [u8; 8],
}

pub(crate) fn parse_bpf_event(body: &[u8], endian: Endian) -> Option<BpfEvent> {
    let mut cursor = Cursor::new(body, endian);
    Some(BpfEvent {
        kind: cursor.u16()?,
        flags: cursor.u16()?,
        id: cursor.u32()?,
        tag: cursor.bytes(8)?.try_into().ok()?,
    })
}
