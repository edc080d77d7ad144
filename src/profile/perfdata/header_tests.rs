//! Unit tests of `header.rs`.

use super::*;

/// A little-endian header with one attr of `attr_size` 136 and the given sections.
pub(crate) fn header_bytes(attrs: (u64, u64), data: (u64, u64), feats: u64) -> Vec<u8> {
    let mut b = Vec::new();
    b.extend_from_slice(b"PERFILE2");
    for v in [
        104, 136, attrs.0, attrs.1, data.0, data.1, 0, 0, feats, 0, 0, 0,
    ] {
        b.extend_from_slice(&u64::to_le_bytes(v));
    }
    b
}

#[test]
fn header_checks_table() {
    // (description, bytes, expected error text or "ok")
    let mut ok = header_bytes((104, 0), (104, 8), 0);
    ok.resize(112, 0);
    let mut pipe = b"PERFILE2".to_vec();
    pipe.extend_from_slice(&16u64.to_le_bytes());
    let mut zero_attr = ok.clone();
    zero_attr[16..24].copy_from_slice(&0u64.to_le_bytes());
    let mut past_end = header_bytes((104, 0), (104, 1 << 40), 0);
    past_end.resize(112, 0);
    let mut wrap = header_bytes((104, 0), (u64::MAX, 2), 0);
    wrap.resize(112, 0);
    let mut overlap = header_bytes((104, 16), (112, 16), 0);
    overlap.resize(200, 0);
    let mut into_header = header_bytes((0, 16), (104, 8), 0);
    into_header.resize(112, 0);
    let mut empty_data = header_bytes((104, 0), (104, 0), 0);
    empty_data.resize(112, 0);
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        ("valid", ok, "ok"),
        ("empty file", vec![], "truncated"),
        ("cut magic", b"PERF".to_vec(), "truncated"),
        (
            "not perf",
            b"hello world, not perf".to_vec(),
            "not a perf.data",
        ),
        ("v1", b"PERFFILE\0\0\0\0\0\0\0\0".to_vec(), "unsupported"),
        ("pipe mode", pipe, "pipe-mode"),
        (
            "cut header",
            b"PERFILE2\x68\0\0\0\0\0\0\0".to_vec(),
            "truncated",
        ),
        ("attr_size 0", zero_attr, "attr_size is 0"),
        ("data past the end", past_end, "truncated"),
        ("offset overflow", wrap, "overflows"),
        ("overlapping sections", overlap, "overlap"),
        (
            "attrs over the header",
            into_header,
            "overlaps the file header",
        ),
        ("empty data", empty_data, "truncated"),
    ];
    for (what, bytes, want) in cases {
        let got = match parse_file_header(&bytes) {
            Ok(_) => "ok".to_string(),
            Err(e) => e.to_string(),
        };
        assert!(got.contains(want), "{what}: {got}");
    }
}

#[test]
fn big_endian_header_is_read() {
    let mut b = b"2ELIFREP".to_vec();
    for v in [104u64, 136, 104, 0, 104, 8, 0, 0, 1 << 3, 0, 0, 0] {
        b.extend_from_slice(&v.to_be_bytes());
    }
    b.resize(112 + 16, 0);
    let h = parse_file_header(&b).unwrap();
    assert_eq!(h.endian, Endian::Big);
    assert!(h.has_feature(feature::HOSTNAME));
    assert_eq!(
        h.data,
        Section {
            offset: 104,
            size: 8
        }
    );
}

#[test]
fn regression_feature_sections_past_the_end_or_over_data() {
    let mut b = header_bytes((104, 0), (104, 8), 1 << feature::HOSTNAME);
    b.resize(112, 0);
    // feature table: one entry {offset 128, size 8}; file ends at 136
    b.extend_from_slice(&128u64.to_le_bytes());
    b.extend_from_slice(&8u64.to_le_bytes());
    b.resize(136, 0);
    let h = parse_file_header(&b).unwrap();
    let t = parse_feature_table(&b, &h).unwrap();
    assert_eq!(t, vec![(feature::HOSTNAME, 128..136)]);
    let mut huge = b.clone();
    huge[120..128].copy_from_slice(&u64::MAX.to_le_bytes());
    let e = parse_feature_table(&huge, &h).unwrap_err().to_string();
    assert!(e.contains("overflows") || e.contains("truncated"), "{e}");
    let mut over = b.clone();
    over[112..120].copy_from_slice(&104u64.to_le_bytes());
    let e = parse_feature_table(&over, &h).unwrap_err().to_string();
    assert!(e.contains("overlaps"), "{e}");
    let cut = &b[..120];
    assert!(parse_feature_table(cut, &h).is_err());
}

#[test]
fn attrs_and_ids_are_bounded_by_the_section() {
    // header, then ids (2 × u64) at 104, then one attr (size 128) + ids section at 120
    let attr_off = 120u64;
    let mut b = header_bytes((attr_off, 144), (attr_off + 144, 8), 0);
    b.extend_from_slice(&7u64.to_le_bytes());
    b.extend_from_slice(&8u64.to_le_bytes());
    let mut attr = vec![0u8; 128];
    attr[4..8].copy_from_slice(&128u32.to_le_bytes());
    attr[24..32].copy_from_slice(&0x127u64.to_le_bytes());
    b.extend_from_slice(&attr);
    b.extend_from_slice(&104u64.to_le_bytes());
    b.extend_from_slice(&16u64.to_le_bytes());
    b.resize(b.len() + 8, 0);
    let h = parse_file_header(&b).unwrap();
    let attrs = parse_attrs(&b, &h).unwrap();
    assert_eq!(attrs.len(), 1);
    assert_eq!(attrs[0].ids, vec![7, 8]);
    assert_eq!(attrs[0].sample_type, 0x127);
    // attr.size larger than the section: an error, not a read past it
    let mut big = b.clone();
    big[124..128].copy_from_slice(&4000u32.to_le_bytes());
    assert!(parse_attrs(&big, &h).is_err());
    // ids claiming 2^60 bytes: an error, nothing allocated
    let mut ids = b.clone();
    ids[256..264].copy_from_slice(&(1u64 << 60).to_le_bytes());
    assert!(parse_attrs(&ids, &h).is_err());
    // attr.size below VER0
    let mut small = b.clone();
    small[124..128].copy_from_slice(&8u32.to_le_bytes());
    assert!(parse_attrs(&small, &h).is_err());
}

/// A header for [`incomplete`]: attrs at 104 (size 8), data at 112 (size `data`), and
/// the feature bits of the first byte of the bitmap.
fn header_for_check(data: u64, bits: u8) -> Vec<u8> {
    let mut header = MAGIC.to_vec();
    for word in [104u64, 136, 104, 8, 112, data, 0, 0] {
        header.extend_from_slice(&word.to_le_bytes());
    }
    header.push(bits);
    header.resize(HEADER_SIZE as usize, 0);
    header
}

fn check(file: &[u8]) -> Option<String> {
    let copy = file.to_vec();
    incomplete(file, file.len() as u64, |offset, count| {
        let start = offset as usize;
        copy.get(start..start + count).map(<[u8]>::to_vec)
    })
}

#[test]
fn complete_and_cut_files_are_told_apart() {
    let mut ok = header_for_check(16, 0b1);
    ok.resize(112 + 16, 0);
    // One feature section, at 144, of 4 bytes.
    ok.extend_from_slice(&144u64.to_le_bytes());
    ok.extend_from_slice(&4u64.to_le_bytes());
    ok.extend_from_slice(b"feat");
    assert_eq!(check(&ok), None);
    let mut pipe = MAGIC.to_vec();
    pipe.extend_from_slice(&16u64.to_le_bytes());
    pipe.extend_from_slice(&[7; 200]);
    assert_eq!(check(&pipe), None, "pipe mode has no sections to check");
    for cut in [10, 50, 104, 120, 130, 146] {
        let why = check(&ok[..cut]).unwrap_or_else(|| panic!("cut at {cut}"));
        assert!(!why.is_empty());
    }
    let mut killed = header_for_check(0, 0);
    killed.resize(400, 0);
    assert!(check(&killed).unwrap().contains("data size is 0"));
    let mut huge = header_for_check(u64::MAX, 0);
    huge.resize(400, 0);
    assert!(check(&huge).is_some(), "offset + size overflows");
}

#[test]
fn big_endian_headers_are_checked_too() {
    let mut header = MAGIC_SWAPPED.to_vec();
    for word in [104u64, 136, 104, 8, 112, 16, 0, 0] {
        header.extend_from_slice(&word.to_be_bytes());
    }
    header.resize(HEADER_SIZE as usize + 24, 0);
    assert_eq!(check(&header), None);
    assert!(check(&header[..120]).is_some());
    assert!(is_perf_data(&header) && is_perf_data(MAGIC) && !is_perf_data(MAGIC_V1));
}

#[test]
fn event_desc_names_and_absurd_counts() {
    let mut b = Vec::new();
    b.extend_from_slice(&2u32.to_le_bytes());
    b.extend_from_slice(&8u32.to_le_bytes());
    for name in ["cpu-clock:k", "dummy:u"] {
        b.extend_from_slice(&[0u8; 8]);
        b.extend_from_slice(&1u32.to_le_bytes());
        let mut s = name.as_bytes().to_vec();
        s.resize(64, 0);
        b.extend_from_slice(&(s.len() as u32).to_le_bytes());
        b.extend_from_slice(&s);
        b.extend_from_slice(&42u64.to_le_bytes());
    }
    let names = event_names(&b, Endian::Little);
    assert_eq!(
        names,
        vec![Some("cpu-clock:k".to_string()), Some("dummy:u".to_string())]
    );
    let mut absurd = b.clone();
    absurd[0..4].copy_from_slice(&u32::MAX.to_le_bytes());
    assert_eq!(event_names(&absurd, Endian::Little).len(), 2);
    assert!(event_names(&b[..5], Endian::Little).is_empty());
}
