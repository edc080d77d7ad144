//! Unit tests of `btf.rs`, and of the BTF reader of `bpf/btf.rs` it uses.

use super::*;
use crate::bpf::btf::KIND_FUNC;
use crate::bpfinfo::testbuf::{btf_section, sample_btf, BtfBuf};

/// One type of every kind libbpf knows (1..=19), with its trailing records, then a FUNC.
fn every_kind(le: bool) -> Vec<u8> {
    let mut b = BtfBuf::new(le);
    let n = b.str("n");
    let trailing: [(u32, u32, usize); 19] = [
        (1, 0, 1),
        (2, 0, 0),
        (3, 0, 3),
        (4, 2, 6),
        (5, 1, 3),
        (6, 2, 4),
        (7, 0, 0),
        (8, 0, 0),
        (9, 0, 0),
        (10, 0, 0),
        (11, 0, 0),
        (12, 0, 0),
        (13, 2, 4),
        (14, 0, 1),
        (15, 1, 3),
        (16, 0, 0),
        (17, 0, 1),
        (18, 0, 0),
        (19, 1, 3),
    ];
    for (kind, vlen, words) in trailing {
        b.ty(kind, n, vlen, 1, &vec![0; words]);
    }
    let last = b.str("last");
    b.ty(KIND_FUNC, last, 0, 13, &[]);
    b.blob()
}

#[test]
fn walks_every_kind_in_both_byte_orders() {
    for le in [true, false] {
        let btf = Btf::parse(3, every_kind(le)).unwrap();
        assert_eq!((btf.type_count(), btf.walk_stopped()), (20, None));
        assert_eq!(btf.func_name(20).as_deref(), Some("last"));
        assert_eq!(btf.func_name(12).as_deref(), Some("n"));
        assert_eq!(btf.func_name(1), None, "an INT is not a FUNC");
        assert_eq!((btf.func_name(0), btf.func_name(21)), (None, None));
    }
}

#[test]
fn unknown_kind_stops_the_walk_keeping_earlier_types() {
    let mut b = BtfBuf::new(true);
    let f = b.str("f");
    b.ty(KIND_FUNC, f, 0, 0, &[]);
    b.ty(25, 0, 0, 0, &[]);
    b.ty(KIND_FUNC, f, 0, 0, &[]);
    let btf = Btf::parse(1, b.blob()).unwrap();
    assert_eq!(btf.type_count(), 1);
    assert_eq!(btf.func_name(1).as_deref(), Some("f"));
    assert_eq!(btf.walk_stopped(), Some("unknown kind 25 at type id 2"));
}

#[test]
fn strings_are_bounds_checked() {
    let (blob, offs) = sample_btf(true);
    let btf = Btf::parse(7, blob).unwrap();
    assert_eq!(btf.string(0).as_deref(), Some(""));
    assert_eq!(btf.string(offs[0]).as_deref(), Some("/src/hook.bpf.c"));
    assert_eq!(btf.string(offs[0] + 5).as_deref(), Some("hook.bpf.c"));
    assert_eq!(btf.string(100_000), None);
    assert_eq!(btf.string(u32::MAX), None);
}

#[test]
fn bad_blobs_table() {
    let (good, _) = sample_btf(true);
    let set = |at: usize, v: u32| {
        let mut b = good.clone();
        b[at..at + 4].copy_from_slice(&v.to_le_bytes());
        b
    };
    let mut unterminated = good.clone();
    *unterminated.last_mut().unwrap() = b'x';
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        ("empty", vec![], "no BTF magic"),
        ("bad magic", vec![0x12; 40], "no BTF magic"),
        (
            "short header",
            good[..10].to_vec(),
            "header length 24 in 10 bytes",
        ),
        ("no header length", good[..6].to_vec(), "truncated header"),
        ("hdr_len 8", set(4, 8), "header length 8"),
        ("hdr_len past end", set(4, 5000), "header length 5000"),
        (
            "types past end",
            set(12, 5000),
            "type section out of bounds",
        ),
        (
            "strings past end",
            set(16, u32::MAX),
            "string section out of bounds",
        ),
        (
            "strings not NUL-ended",
            unterminated,
            "does not start and end with NUL",
        ),
    ];
    for (name, blob, want) in cases {
        let err = Btf::parse(9, blob).unwrap_err().to_string();
        assert!(
            err.starts_with("BTF 9: ") && err.contains(want),
            "{name}: {err}"
        );
    }
    let btf = Btf::parse(9, set(12, 13)).unwrap();
    assert_eq!(
        btf.walk_stopped(),
        Some("last type runs past the type section")
    );
}

#[test]
fn section_table() {
    let (good, _) = sample_btf(true);
    let two = btf_section(&[(7, good.clone()), (8, good.clone())], true);
    let set = parse_btf_section(&two, true).unwrap();
    assert_eq!(set.ids().collect::<Vec<_>>(), [7, 8]);
    let bad_and_dup = btf_section(
        &[(7, good.clone()), (5, vec![1, 2, 3]), (7, good.clone())],
        true,
    );
    let set = parse_btf_section(&bad_and_dup, true).unwrap();
    assert_eq!(set.len(), 1);
    let problems: Vec<_> = set.problems.iter().map(ToString::to_string).collect();
    assert_eq!(
        problems,
        ["BTF 5: no BTF magic in 3 bytes", "BTF 7: duplicate id"]
    );
    let mut too_many = two.clone();
    too_many[..4].copy_from_slice(&1000u32.to_le_bytes());
    let err = parse_btf_section(&too_many, true).unwrap_err().to_string();
    assert!(err.contains("BTF count 1000"), "{err}");
    let mut long_blob = two;
    long_blob[8..12].copy_from_slice(&u32::MAX.to_le_bytes());
    let err = parse_btf_section(&long_blob, true).unwrap_err().to_string();
    assert!(err.starts_with("truncated BTF blob at offset 12"), "{err}");
}
