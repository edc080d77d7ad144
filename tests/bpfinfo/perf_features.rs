//! Test-only: the raw bytes of one feature section of a perf.data file, from its header and
//! feature table (perf `tools/perf/util/header.c: perf_file_header__read`,
//! `perf_header__process_sections`; notes perfdata-research.md §1.1, §1.5). The real container
//! parser lives elsewhere; this is just enough to feed `bpfinfo` in tests.

/// `HEADER_BPF_PROG_INFO`.
pub const BPF_PROG_INFO: u32 = 25;
/// `HEADER_BPF_BTF`.
pub const BPF_BTF: u32 = 26;

fn u64_at(data: &[u8], at: usize, le: bool) -> Option<u64> {
    let raw: [u8; 8] = data.get(at..at + 8)?.try_into().ok()?;
    Some(if le {
        u64::from_le_bytes(raw)
    } else {
        u64::from_be_bytes(raw)
    })
}

/// The file's byte order from its magic: `Some(true)` for little-endian `PERFILE2`.
pub fn little_endian(data: &[u8]) -> Option<bool> {
    match data.get(..8)? {
        b"PERFILE2" => Some(true),
        b"2ELIFREP" => Some(false),
        _ => None,
    }
}

/// The body of feature `feat`, or `None` if the file does not have it (or is not a 104-byte
/// header perf.data file).
pub fn feature(data: &[u8], feat: u32) -> Option<&[u8]> {
    let le = little_endian(data)?;
    if u64_at(data, 8, le)? != 104 || feat >= 256 {
        return None;
    }
    let bitmap: Vec<u64> = (0..4)
        .map(|i| u64_at(data, 72 + 8 * i, le))
        .collect::<Option<_>>()?;
    let bit = |n: u32| bitmap[n as usize / 64] >> (n % 64) & 1 == 1;
    if !bit(feat) {
        return None;
    }
    let index = (0..feat).filter(|&n| bit(n)).count();
    let table = u64_at(data, 40, le)?.checked_add(u64_at(data, 48, le)?)? as usize;
    let entry = table.checked_add(16 * index)?;
    let (offset, size) = (
        u64_at(data, entry, le)? as usize,
        u64_at(data, entry + 8, le)? as usize,
    );
    data.get(offset..offset.checked_add(size)?)
}
