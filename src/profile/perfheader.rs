//! The fixed header of a perf.data file, checked against the file's length before perf runs:
//! a recording that did not finish (perf killed, disk full, a copy cut short) is said to be
//! one, in our words, instead of perf's "failed to process type: 0 [Invalid argument]" or
//! "incompatible file format".
//!
//! The layout is `struct perf_file_header` in perf's `tools/perf/util/header.h`: magic, header
//! size, attr size, then three `{offset, size}` sections (attrs, data, event types) and a
//! 256-bit feature bitmap; the feature sections' own `{offset, size}` table sits right after
//! the data section, one entry per bit set. perf writes the header with a data size of 0 when
//! it starts and rewrites it when it stops: a 0 there means perf never got to the end.

/// `sizeof(struct perf_file_header)`.
const HEADER_LEN: usize = 104;

/// Why the header says the file is incomplete, if it does: `None` when it is consistent.
/// `head` is the file's first bytes (at least [`HEADER_LEN`] when the file has them), `len` its
/// length; `rest` reads on from the end of `head` (for the feature table after the data).
pub fn incomplete(
    head: &[u8],
    len: u64,
    rest: impl FnOnce(u64, usize) -> Option<Vec<u8>>,
) -> Option<String> {
    let big = head.starts_with(b"2ELIFREP");
    let short = || {
        Some(format!(
            "{len} bytes, shorter than perf's {HEADER_LEN}-byte header"
        ))
    };
    if head.len() < 16 {
        return short();
    }
    let word = |i: usize| {
        let b: [u8; 8] = head
            .get(i * 8..i * 8 + 8)
            .and_then(|s| s.try_into().ok())
            .unwrap_or([0; 8]);
        if big {
            u64::from_be_bytes(b)
        } else {
            u64::from_le_bytes(b)
        }
    };
    match word(1) {
        // `perf record -o -` (pipe mode): a 16-byte header, then records; nothing to check.
        16 => return None,
        // A layout this check does not know: perf judges.
        n if n != HEADER_LEN as u64 => return None,
        _ if head.len() < HEADER_LEN => return short(),
        _ => {}
    }
    let section = |i: usize| (word(i), word(i + 1));
    let ((a_off, a_size), (d_off, d_size)) = (section(3), section(5));
    let end = |off: u64, size: u64| off.checked_add(size).filter(|&e| e <= len);
    if end(a_off, a_size).is_none() {
        return Some(format!("its event descriptions end past its {len} bytes"));
    }
    if d_size == 0 {
        return Some("its data size is 0: perf never rewrote its header at the end".into());
    }
    let Some(data_end) = end(d_off, d_size) else {
        return Some(format!(
            "its data should end at byte {}, the file has {len}",
            d_off.saturating_add(d_size)
        ));
    };
    let features: u32 = head[72..HEADER_LEN].iter().map(|b| b.count_ones()).sum();
    let table = features as usize * 16;
    if features == 0 {
        return None;
    }
    if end(data_end, table as u64).is_none() {
        return Some("its feature sections are missing after the samples".into());
    }
    let bytes = rest(data_end, table)?;
    feature_sections_fit(&bytes, big, len)
}

/// Each `{offset, size}` of the feature table inside the file.
fn feature_sections_fit(table: &[u8], big: bool, len: u64) -> Option<String> {
    let word = |c: &[u8]| {
        let b: [u8; 8] = c.try_into().unwrap_or([0; 8]);
        if big {
            u64::from_be_bytes(b)
        } else {
            u64::from_le_bytes(b)
        }
    };
    for (i, pair) in table.chunks_exact(16).enumerate() {
        let (off, size) = (word(&pair[..8]), word(&pair[8..]));
        if off.checked_add(size).is_none_or(|e| e > len) {
            return Some(format!(
                "its feature section {} ends past its {len} bytes",
                i + 1
            ));
        }
    }
    None
}

/// Read `n` bytes at `offset` of `f` without moving its position.
pub fn read_at(f: &std::fs::File, offset: u64, n: usize) -> Option<Vec<u8>> {
    use std::os::unix::fs::FileExt;
    let mut buf = vec![0; n];
    f.read_exact_at(&mut buf, offset).ok()?;
    Some(buf)
}

/// Whether `head` starts like a perf.data (either byte order).
pub fn is_perf_data(head: &[u8]) -> bool {
    head.starts_with(b"PERFILE2") || head.starts_with(b"2ELIFREP")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A header: attrs at 104 (size 8), data at 112 (size `data`), features from `bits`.
    fn header(data: u64, bits: u8) -> Vec<u8> {
        let mut h = b"PERFILE2".to_vec();
        for w in [104u64, 136, 104, 8, 112, data, 0, 0] {
            h.extend_from_slice(&w.to_le_bytes());
        }
        h.push(bits);
        h.resize(HEADER_LEN, 0);
        h
    }

    fn check(file: &[u8]) -> Option<String> {
        let v = file.to_vec();
        incomplete(file, file.len() as u64, |off, n| {
            v.get(off as usize..off as usize + n).map(<[u8]>::to_vec)
        })
    }

    #[test]
    fn complete_and_cut_files_are_told_apart() {
        let mut ok = header(16, 0b1);
        ok.resize(112 + 16, 0);
        // one feature section: at 144, 4 bytes
        ok.extend_from_slice(&144u64.to_le_bytes());
        ok.extend_from_slice(&4u64.to_le_bytes());
        ok.extend_from_slice(b"feat");
        assert_eq!(check(&ok), None);
        let mut pipe = b"PERFILE2".to_vec();
        pipe.extend_from_slice(&16u64.to_le_bytes());
        pipe.extend_from_slice(&[7; 200]);
        assert_eq!(check(&pipe), None, "pipe mode has no sections to check");
        for cut in [10, 50, 104, 120, 130, 146] {
            let why = check(&ok[..cut]).unwrap_or_else(|| panic!("cut at {cut}"));
            assert!(!why.is_empty());
        }
        let mut killed = header(0, 0);
        killed.resize(400, 0);
        assert!(check(&killed).unwrap().contains("data size is 0"));
        let mut huge = header(u64::MAX, 0);
        huge.resize(400, 0);
        assert!(check(&huge).is_some(), "offset + size overflows");
    }

    #[test]
    fn big_endian_headers_are_read_too() {
        let mut h = b"2ELIFREP".to_vec();
        for w in [104u64, 136, 104, 8, 112, 16, 0, 0] {
            h.extend_from_slice(&w.to_be_bytes());
        }
        h.resize(HEADER_LEN + 24, 0);
        assert_eq!(check(&h), None);
        assert!(check(&h[..120]).is_some());
    }
}
