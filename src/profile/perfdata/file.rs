//! [`PerfData`]: a whole perf.data file in memory, its header checked, its attrs and feature
//! sections located. Nothing here trusts a size the file claims before checking it against
//! the bytes actually read.

use super::attr::{Attribution, EventAttr};
use super::buildid::{self, BuildIdEntry};
use super::cursor::{Cursor, Endian};
use super::error::{malformed, truncated, unsupported, PerfDataError};
use super::header::{self, feature, FileHeader};
use super::record::{RawRecord, Record, Records, SampleId};
use std::ops::Range;
use std::path::Path;

/// A perf.data file (file mode), read into memory once.
#[derive(Debug)]
pub struct PerfData {
    bytes: Vec<u8>,
    header: FileHeader,
    attrs: Vec<EventAttr>,
    features: Vec<(u32, Range<usize>)>,
    attribution: Attribution,
}

/// The bytes of an opened regular file, read into memory. Not mapped: a mapped file that
/// another program truncates while it is read kills the reader with SIGBUS on the pages it lost,
/// and a recording can be cut short by the perf still writing it, or by anyone who may write
/// it. Read, a file cut short is one error naming the two lengths; one cut after the read
/// changes nothing here.
fn read_whole(file: &std::fs::File) -> Result<Vec<u8>, PerfDataError> {
    use std::os::unix::fs::FileExt;
    let io = |source| PerfDataError::Io {
        path: "perf.data".into(),
        source,
    };
    let len = file.metadata().map_err(io)?.len();
    let len = usize::try_from(len).map_err(|_| malformed("larger than the address space"))?;
    crate::failpoint::hit("perfdata:measured");
    // Zeroed lazily by the allocator (calloc): the pages are first touched by the read.
    let mut buffer = vec![0; len];
    let mut filled = 0;
    while filled < len {
        // Read at offsets: the descriptor's position stays for whoever reads next.
        match file.read_at(&mut buffer[filled..], filled as u64) {
            Ok(0) => break,
            Ok(read) => filled += read,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(io(e)),
        }
    }
    crate::failpoint::hit("perfdata:read");
    if filled < len {
        return Err(truncated(format!(
            "it had {len} bytes when opened and {filled} when read: something cut it short while it was read"
        )));
    }
    Ok(buffer)
}

impl PerfData {
    /// Open, read and check `path`. A directory (`perf record --threads`) is
    /// [`PerfDataError::Unsupported`].
    pub fn open(path: &Path) -> Result<PerfData, PerfDataError> {
        let io = |source| PerfDataError::Io {
            path: path.to_path_buf(),
            source,
        };
        if std::fs::metadata(path).map_err(io)?.is_dir() {
            return Err(unsupported(
                "a directory-format recording (perf record --threads)",
            ));
        }
        let file = std::fs::File::open(path).map_err(io)?;
        PerfData::from_file(&file).map_err(|err| match err {
            PerfDataError::Io { source, .. } => io(source),
            other => other,
        })
    }

    /// Read and check an opened regular file.
    pub fn from_file(file: &std::fs::File) -> Result<PerfData, PerfDataError> {
        PerfData::parse(read_whole(file)?, true)
    }

    /// [`PerfData::from_file`] for reading the header and its feature sections only: a
    /// recording whose records this reader does not handle (compressed, other arch) is
    /// accepted too.
    pub fn headers_of(file: &std::fs::File) -> Result<PerfData, PerfDataError> {
        PerfData::parse(read_whole(file)?, false)
    }

    /// Check the bytes of a perf.data file and index it.
    pub fn from_bytes(bytes: Vec<u8>) -> Result<PerfData, PerfDataError> {
        PerfData::parse(bytes, true)
    }

    fn parse(bytes: Vec<u8>, check: bool) -> Result<PerfData, PerfDataError> {
        let header = header::parse_file_header(&bytes[..])?;
        let features = header::parse_feature_table(&bytes[..], &header)?;
        let mut attrs = header::parse_attrs(&bytes[..], &header)?;
        if attrs.is_empty() {
            return Err(malformed("no event attributes"));
        }
        let mut data = PerfData {
            attribution: Attribution::new(&[]).map_err(unsupported)?,
            bytes,
            header,
            attrs: Vec::new(),
            features,
        };
        if check {
            data.check_features()?;
        }
        if let Some(body) = data.feature(feature::EVENT_DESC) {
            let names = header::event_names(body, data.header.endian);
            for (attr, name) in attrs.iter_mut().zip(names) {
                attr.name = name;
            }
        }
        data.attribution = Attribution::new(&attrs).map_err(unsupported)?;
        data.attrs = attrs;
        Ok(data)
    }

    /// Refuse what this reader does not handle: compression, directories, other machines.
    fn check_features(&self) -> Result<(), PerfDataError> {
        if self.header.has_feature(feature::COMPRESSED) {
            return Err(unsupported("a compressed recording (perf record -z)"));
        }
        if self.header.has_feature(feature::DIR_FORMAT) {
            return Err(unsupported(
                "a directory-format recording (perf record --threads)",
            ));
        }
        if let Some(arch) = self.arch() {
            if arch != "x86_64" {
                return Err(unsupported(format!("recorded on {arch}, not x86_64")));
            }
        }
        Ok(())
    }

    /// The file's byte order.
    pub fn endian(&self) -> Endian {
        self.header.endian
    }

    /// The event attributes, in file order.
    pub fn attrs(&self) -> &[EventAttr] {
        &self.attrs
    }

    /// The raw body of feature section `id` (for example 25 BPF_PROG_INFO, 26 BPF_BTF).
    pub fn feature(&self, id: u32) -> Option<&[u8]> {
        let range = self.features.iter().find(|(f, _)| *f == id)?.1.clone();
        self.bytes.get(range)
    }

    /// The ids of the feature sections present.
    pub fn feature_ids(&self) -> impl Iterator<Item = u32> + '_ {
        self.features.iter().map(|(id, _)| *id)
    }

    /// The ARCH feature (`x86_64`), when present.
    pub fn arch(&self) -> Option<String> {
        let mut cursor = Cursor::new(self.feature(feature::ARCH)?, self.header.endian);
        header::read_string(&mut cursor)
    }

    /// The build-id table (feature 2).
    pub fn build_ids(&self) -> Vec<BuildIdEntry> {
        self.feature(feature::BUILD_ID)
            .map(|b| buildid::parse(b, self.header.endian))
            .unwrap_or_default()
    }

    /// The build id of the recording's kernel (the `[kernel.kallsyms]` entry of the build-id
    /// table), when perf wrote one.
    pub fn kernel_build_id(&self) -> Option<Vec<u8>> {
        self.build_ids()
            .into_iter()
            .find(|b| b.filename == super::kernel::KERNEL_DSO.as_bytes())
            .map(|b| b.build_id)
            .filter(|id| !id.is_empty())
    }

    /// The data section's records in file order.
    pub fn records(&self) -> Records<'_> {
        let range = self.data_range();
        Records::new(
            self.bytes.get(range.clone()).unwrap_or_default(),
            range.start as u64,
            self.header.endian,
        )
    }

    /// The index in [`PerfData::attrs`] of the event a record belongs to, as perf decides it
    /// (by sample id; synthesized records go to the first); `None` for an unknown id.
    pub fn attr_of(&self, raw: &RawRecord<'_>) -> Option<usize> {
        let is_sample = raw.kind == super::record::SAMPLE;
        self.attribution
            .attr_of(is_sample, raw.body, self.header.endian)
    }

    /// Decode a record of this file.
    pub fn decode<'a>(&self, raw: &RawRecord<'a>) -> Record<'a> {
        match self.attr_of(raw).and_then(|i| self.attrs.get(i)) {
            Some(attr) => super::record::decode(raw, attr, self.header.endian),
            None => Record::Other,
        }
    }

    /// The `sample_id` trailer of a non-sample record (pid, tid, time, cpu).
    pub fn sample_id(&self, raw: &RawRecord<'_>) -> Option<SampleId> {
        let attr = self.attrs.get(self.attr_of(raw)?)?;
        super::record::sample_id(raw.body, attr, self.header.endian)
    }

    /// Size of the file in bytes.
    pub fn len(&self) -> usize {
        self.bytes.len()
    }

    /// Whether the file is empty (never, once parsed).
    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }

    fn data_range(&self) -> Range<usize> {
        let data = self.header.data;
        // Checked against the file length when the header was parsed.
        data.offset as usize..(data.offset + data.size) as usize
    }

    pub(crate) fn attribution(&self) -> &Attribution {
        &self.attribution
    }

    /// The record whose header is at file offset `offset` (one the iterator returned).
    pub(crate) fn record_at(&self, offset: u64) -> Option<RawRecord<'_>> {
        let at = usize::try_from(offset).ok()?;
        let endian = self.header.endian;
        let rest = self.bytes.get(at..)?;
        let size = usize::from(super::cursor::u16_at(rest, 6, endian)?);
        Some(RawRecord {
            offset,
            kind: super::cursor::u32_at(rest, 0, endian)?,
            misc: super::cursor::u16_at(rest, 4, endian)?,
            body: rest.get(8..size)?,
        })
    }
}
