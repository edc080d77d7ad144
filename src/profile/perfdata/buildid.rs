//! The BUILD_ID feature: which build of each binary the recording saw, so symbols are only
//! taken from a file with the same build id (perf refuses a mismatching file too).
//!
//! Layout: `tools/perf/util/header.c: perf_header__read_build_ids()` — a run of
//! `struct perf_record_header_build_id { perf_event_header; i32 pid; u8 build_id[24];
//! char filename[]; }`, each `header.size` long; with `PERF_RECORD_MISC_BUILD_ID_SIZE`
//! (misc bit 15) `build_id[20]` holds the id's length.

use super::cursor::{c_str, u16_at, Endian};

/// One entry of the build-id table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BuildIdEntry {
    /// `misc & 7`: 1 for kernel objects, 2 for user ones.
    pub cpumode: u16,
    /// The object's name as perf knows it (`/usr/lib/x86_64-linux-gnu/libc.so.6`, `[vdso]`).
    pub filename: Vec<u8>,
    /// The GNU build id (usually 20 bytes).
    pub build_id: Vec<u8>,
}

/// Decode the BUILD_ID feature body; a cut or nonsensical entry ends the table.
pub(crate) fn parse(body: &[u8], endian: Endian) -> Vec<BuildIdEntry> {
    let mut out = Vec::new();
    let mut pos = 0usize;
    while let Some(rest) = body.get(pos..).filter(|r| !r.is_empty()) {
        let Some(entry) = parse_one(rest, endian) else {
            break;
        };
        out.push(entry.0);
        pos += entry.1;
    }
    out
}

fn parse_one(bytes: &[u8], endian: Endian) -> Option<(BuildIdEntry, usize)> {
    let misc = u16_at(bytes, 4, endian)?;
    let size = usize::from(u16_at(bytes, 6, endian)?);
    let rec = bytes.get(..size)?;
    let id = rec.get(12..36)?;
    let len = if misc & (1 << 15) != 0 {
        usize::from(id[20]).min(20)
    } else {
        20
    };
    let filename = c_str(rec.get(36..)?).to_vec();
    let entry = BuildIdEntry {
        cpumode: misc & 7,
        filename,
        build_id: id[..len].to_vec(),
    };
    Some((entry, size))
}

/// Lower-case hex, as perf prints and names build ids.
pub use crate::host::notes::hex;

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(misc: u16, id: &[u8], name: &str) -> Vec<u8> {
        let mut b = vec![0u8; 36];
        b[4..6].copy_from_slice(&misc.to_le_bytes());
        b[12..12 + id.len()].copy_from_slice(id);
        b[32] = id.len() as u8;
        b.extend_from_slice(name.as_bytes());
        b.push(0);
        b.resize(b.len().next_multiple_of(8), 0);
        let n = b.len() as u16;
        b[6..8].copy_from_slice(&n.to_le_bytes());
        b
    }

    #[test]
    fn build_id_table_table() {
        let mut body = entry(1 | 1 << 15, &[0xa3; 20], "[kernel.kallsyms]");
        body.extend(entry(2 | 1 << 15, &[0xc0; 20], "[vdso]"));
        body.extend(entry(2, &[0x11; 20], "/usr/lib/x.so"));
        let got = parse(&body, Endian::Little);
        assert_eq!(got.len(), 3);
        assert_eq!(got[0].filename, b"[kernel.kallsyms]");
        assert_eq!(got[0].cpumode, 1);
        assert_eq!(hex(&got[1].build_id), "c0".repeat(20));
        assert_eq!(got[2].build_id.len(), 20, "no size bit: 20 bytes");
        // a cut last entry and a size-0 entry end the table without panicking
        assert_eq!(parse(&body[..body.len() - 3], Endian::Little).len(), 2);
        let mut zero = body.clone();
        zero[6..8].copy_from_slice(&0u16.to_le_bytes());
        assert!(parse(&zero, Endian::Little).is_empty());
        assert!(parse(&[], Endian::Little).is_empty());
    }
}
