//! Table-driven tests of the section parsers, the line split and the lookup on hand-built
//! byte buffers (see `testbuf.rs`): valid, truncated, bad offsets, wrong counts, no line info.

use super::testbuf::*;
use super::*;

fn sample_sections(le: bool) -> (Vec<u8>, Vec<u8>) {
    let (blob, strs) = sample_btf(le);
    (
        prog_section(&[sample_prog(strs)], le),
        btf_section(&[(7, blob)], le),
    )
}

fn sample_info(le: bool) -> BpfInfo {
    let (progs, btf) = sample_sections(le);
    BpfInfo::from_sections(&progs, &btf, le).unwrap()
}

#[test]
fn valid_sample_parses_in_both_byte_orders() {
    for le in [true, false] {
        let info = sample_info(le);
        let p = &info.progs[0];
        assert_eq!(
            (p.id, p.btf_id, p.prog_type, p.name.as_str()),
            (42, 7, 26, "main_fn")
        );
        assert_eq!(p.tag_hex(), "aaaaaaaaaaaaaaaa");
        assert_eq!(p.problems, vec![]);
        assert_eq!(p.line_mapping, LineMapping::JitedAddresses);
        let names: Vec<_> = p.funcs.iter().map(|f| f.sym_name.as_str()).collect();
        assert_eq!(
            names,
            [
                "bpf_prog_1111111111111111_main_fn",
                "bpf_prog_2222222222222222_sub_fn"
            ]
        );
        assert_eq!(p.funcs[1].btf_name.as_deref(), Some("sub_fn"));
        assert_eq!(
            p.funcs.iter().map(|f| f.lines.len()).collect::<Vec<_>>(),
            [2, 2]
        );
        assert_eq!(p.func_code(0).map(<[u8]>::len), Some(0x40));
        assert_eq!(p.func_code(1).map(<[u8]>::len), Some(0x80));
        assert_eq!(p.funcs[1].code, Some(0x40..0xc0));
    }
}

#[test]
fn names_without_btf_follow_perf() {
    let (_, strs) = sample_btf(true);
    let two = parse_prog_info(&prog_section(&[sample_prog(strs)], true), true).unwrap();
    assert_eq!(two[0].funcs[1].sym_name, "bpf_prog_2222222222222222_F");
    let mut one = sample_prog(strs);
    one.ksyms.truncate(1);
    one.lens = vec![0xc0];
    one.tags.truncate(1);
    one.func_info.truncate(1);
    let named = parse_prog_info(&prog_section(&[one.clone()], true), true).unwrap();
    assert_eq!(
        named[0].funcs[0].sym_name,
        "bpf_prog_1111111111111111_main_fn"
    );
    one.name = "";
    let bare = parse_prog_info(&prog_section(&[one], true), true).unwrap();
    assert_eq!(bare[0].funcs[0].sym_name, "bpf_prog_1111111111111111");
}

/// What a lookup should give: `(func, line, col, text, range)` or a `sym+off` string.
enum Want {
    Line(usize, u32, u32, &'static str, std::ops::Range<u64>),
    Nothing,
}

fn lookup_cases() -> Vec<(u64, IpKind, Want)> {
    vec![
        (
            BASE,
            IpKind::Sample,
            Want::Line(0, 5, 1, "int main_fn(void *ctx)", BASE..BASE + 0x10),
        ),
        (
            BASE + 0xf,
            IpKind::Sample,
            Want::Line(0, 5, 1, "int main_fn(void *ctx)", BASE..BASE + 0x10),
        ),
        (
            BASE + 0x10,
            IpKind::Sample,
            Want::Line(0, 6, 2, "\treturn sub_fn(ctx);", BASE + 0x10..BASE + 0x40),
        ),
        (
            BASE + 0x10,
            IpKind::Return,
            Want::Line(0, 5, 1, "int main_fn(void *ctx)", BASE..BASE + 0x10),
        ),
        (
            BASE + 0x11,
            IpKind::Return,
            Want::Line(0, 6, 2, "\treturn sub_fn(ctx);", BASE + 0x10..BASE + 0x40),
        ),
        (
            BASE + 0x3f,
            IpKind::Sample,
            Want::Line(0, 6, 2, "\treturn sub_fn(ctx);", BASE + 0x10..BASE + 0x40),
        ),
        (
            SUB + 0x7f,
            IpKind::Sample,
            Want::Line(
                1,
                21,
                9,
                "\treturn bpf_probe_read_user_str(buf, 128, p);",
                SUB + 0x20..SUB + 0x80,
            ),
        ),
        (SUB, IpKind::Return, Want::Nothing),
        (BASE + 0x40, IpKind::Sample, Want::Nothing),
        (SUB - 1, IpKind::Sample, Want::Nothing),
        (0, IpKind::Return, Want::Nothing),
        (u64::MAX, IpKind::Sample, Want::Nothing),
    ]
}

#[test]
fn lookup_table() {
    let info = sample_info(true);
    for (ip, kind, want) in lookup_cases() {
        let got = info.lookup(ip, kind);
        match (want, got) {
            (Want::Nothing, None) => {}
            (Want::Line(f, line, col, text, range), Some(loc)) => {
                let l = loc
                    .line
                    .clone()
                    .unwrap_or_else(|| panic!("{ip:#x}: no line"));
                assert_eq!(
                    (loc.func_index, l.line, l.col, l.text.as_str(), l.addr_range),
                    (f, line, col, text, range),
                    "{ip:#x}"
                );
                assert_eq!(l.file, "/src/hook.bpf.c");
                assert_eq!(loc.offset, ip - loc.func().addr);
            }
            (_, got) => panic!("{ip:#x} {kind:?}: got {got:?}"),
        }
    }
}

#[test]
fn without_line_info_lookup_gives_symbol_and_offset() {
    let (_, strs) = sample_btf(true);
    let mut p = sample_prog(strs);
    (p.ksyms, p.lens, p.tags, p.func_info) = (vec![BASE], vec![0x200], vec![[0x11; 8]], vec![]);
    (p.line_info, p.jited_line_info, p.insns) = (vec![], vec![], vec![0x90; 0x200]);
    let info = BpfInfo::from_sections(&prog_section(&[p], true), &[], true).unwrap();
    assert_eq!(info.progs[0].line_mapping, LineMapping::Absent);
    let loc = info.lookup(BASE + 0x19b, IpKind::Sample).unwrap();
    assert!(loc.line_info_missing());
    assert_eq!(
        loc.symbol_offset(),
        "bpf_prog_1111111111111111_main_fn+0x19b"
    );
}

#[test]
fn info_len_of_a_newer_struct_is_skipped_over() {
    let (blob, strs) = sample_btf(true);
    let mut p = sample_prog(strs);
    p.info_len = 240;
    let info = BpfInfo::from_sections(
        &prog_section(&[p.clone(), p], true),
        &btf_section(&[(7, blob)], true),
        true,
    )
    .unwrap();
    assert_eq!(info.progs.len(), 2);
    assert!(info
        .progs
        .iter()
        .all(|p| p.problems.is_empty() && p.line_mapping == LineMapping::JitedAddresses));
}

/// Where array `ptr_field` of the first entry starts in a built section.
fn array_at(sec: &[u8], ptr_field: usize) -> usize {
    let at = info_at(ptr_field);
    4 + 16 + 232 + u64::from_le_bytes(sec[at..at + 8].try_into().unwrap()) as usize
}

enum Expect {
    Err(&'static str),
    Ok(usize, LineMapping, Option<&'static str>),
}

type Edit = fn(&mut Vec<u8>);

/// Corruptions of the section's header and entry layout.
fn header_corruptions() -> Vec<(&'static str, Edit, Expect)> {
    use LineMapping::*;
    vec![
        ("valid", |_| {}, Expect::Ok(2, JitedAddresses, None)),
        (
            "count past the bytes",
            |s| put_u32(s, 0, 1000),
            Expect::Err("count 1000 is more"),
        ),
        (
            "second entry missing",
            |s| put_u32(s, 0, 2),
            Expect::Err("truncated bpf_prog_info entry header"),
        ),
        (
            "info_len too small",
            |s| put_u32(s, 4, 100),
            Expect::Err("info_len 100"),
        ),
        (
            "info_len huge",
            |s| put_u32(s, 4, 5000),
            Expect::Err("info_len 5000"),
        ),
        (
            "data_len unaligned",
            |s| put_u32(s, 8, 7),
            Expect::Err("data_len 7"),
        ),
        (
            "data_len past the end",
            |s| put_u32(s, 8, 4096),
            Expect::Err("truncated bpf_prog_info entry at"),
        ),
    ]
}

/// Corruptions of the arrays inside an entry: each a problem of that program, not an error.
fn array_corruptions() -> Vec<(&'static str, Edit, Expect)> {
    use LineMapping::*;
    vec![
        (
            "line_info past data",
            |s| put_u64(s, info_at(152), 1 << 20),
            Expect::Ok(2, Absent, Some("line_info (")),
        ),
        (
            "ksyms offset garbage",
            |s| put_u64(s, info_at(112), 0u64.wrapping_sub(0x7fff_0000)),
            Expect::Ok(0, Absent, Some("jited_ksyms (")),
        ),
        (
            "fewer func lens",
            |s| put_u32(s, info_at(108), 1),
            Expect::Ok(0, Absent, Some("2 jited_ksyms, 1 jited_func_lens")),
        ),
        (
            "fewer prog tags",
            |s| put_u32(s, info_at(180), 1),
            Expect::Ok(2, JitedAddresses, Some("1 prog_tags")),
        ),
        (
            "fewer func_info",
            |s| put_u32(s, info_at(144), 1),
            Expect::Ok(2, JitedAddresses, Some("1 func_info")),
        ),
    ]
}

/// Corruptions of the line info arrays' counts and record sizes.
fn line_info_corruptions() -> Vec<(&'static str, Edit, Expect)> {
    use LineMapping::*;
    vec![
        (
            "fewer jited_line_info",
            |s| put_u32(s, info_at(168), 3),
            Expect::Ok(2, NoAddresses, Some("3 jited_line_info for 4 line_info")),
        ),
        (
            "no line_info",
            |s| put_u32(s, info_at(148), 0),
            Expect::Ok(2, Absent, None),
        ),
        (
            "line_info rec_size 8",
            |s| put_u32(s, info_at(172), 8),
            Expect::Ok(2, Absent, Some("line_info (4 x 8")),
        ),
        (
            "jited_line_info rec_size 0",
            |s| put_u32(s, info_at(176), 0),
            Expect::Ok(2, NoAddresses, Some("jited_line_info (4 x 0")),
        ),
        (
            "func_info rec_size 4",
            |s| put_u32(s, info_at(132), 4),
            Expect::Ok(2, JitedAddresses, Some("func_info (2 x 4")),
        ),
    ]
}

/// Corruptions of the line addresses.
fn line_corruptions() -> Vec<(&'static str, Edit, Expect)> {
    use LineMapping::*;
    vec![
        (
            "first line not at function",
            |s| {
                let a = array_at(s, 160);
                put_u64(s, a, BASE + 4)
            },
            Expect::Ok(2, InsnOffsets, Some("first jited_line_info")),
        ),
        (
            "line addresses go back",
            |s| {
                let a = array_at(s, 160);
                put_u64(s, a + 8, BASE)
            },
            Expect::Ok(2, NoAddresses, Some("go back")),
        ),
        (
            "jited_prog_len wrong",
            |s| put_u32(s, info_at(16), 0x10),
            Expect::Ok(2, JitedAddresses, Some("jited_prog_len 16")),
        ),
    ]
}

#[test]
fn corrupted_prog_info_table() {
    let (sec, _) = sample_sections(true);
    let cases = header_corruptions()
        .into_iter()
        .chain(array_corruptions())
        .chain(line_info_corruptions())
        .chain(line_corruptions());
    for (name, edit, want) in cases {
        let mut s = sec.clone();
        edit(&mut s);
        match (parse_prog_info(&s, true), want) {
            (Err(e), Expect::Err(text)) => assert!(e.to_string().contains(text), "{name}: {e}"),
            (Ok(p), Expect::Ok(funcs, mapping, problem)) => {
                let problems: Vec<String> = p[0].problems.iter().map(ToString::to_string).collect();
                assert_eq!(
                    (p[0].funcs.len(), p[0].line_mapping),
                    (funcs, mapping),
                    "{name}: {problems:?}"
                );
                match problem {
                    Some(text) => assert!(
                        problems.iter().any(|m| m.contains(text)),
                        "{name}: {problems:?}"
                    ),
                    None => assert!(problems.is_empty(), "{name}: {problems:?}"),
                }
            }
            (got, _) => panic!("{name}: got {got:?}"),
        }
    }
}

#[test]
fn every_truncation_is_an_error_not_a_panic() {
    let (sec, btf) = sample_sections(true);
    assert_eq!(parse_prog_info(&[], true), Ok(vec![]));
    for cut in 1..sec.len() {
        assert!(parse_prog_info(&sec[..cut], true).is_err(), "cut at {cut}");
    }
    assert!(parse_btf_section(&[], true).unwrap().is_empty());
    for cut in 1..btf.len() {
        assert!(
            parse_btf_section(&btf[..cut], true).is_err(),
            "btf cut at {cut}"
        );
    }
}

#[test]
fn any_single_byte_change_never_panics() {
    let (sec, btf) = sample_sections(true);
    for i in 0..sec.len().max(btf.len()) {
        for v in [0u8, 0x01, 0x7f, 0x80, 0xff] {
            let (mut s, mut b) = (sec.clone(), btf.clone());
            if let Some(x) = s.get_mut(i) {
                *x = v;
            }
            if let Some(x) = b.get_mut(i) {
                *x = v;
            }
            if let Ok(info) = BpfInfo::from_sections(&s, &b, true) {
                for ip in [BASE, BASE + 0x10, SUB + 0x21, SUB + 0x7f] {
                    let _ = info.lookup(ip, IpKind::Return).map(|l| l.symbol_offset());
                }
            }
        }
    }
}

/// `report`'s hot lines add each distinct innermost BPF frame once
/// ([`annotate::ResolvedFeed`]): on the fixture recording, the aggregation is the one feeding
/// every sample's whole call chain gives, lines, callees, names and per-address weights.
#[test]
fn resolved_feed_aggregates_as_per_sample_feeding() {
    use crate::profile::perfdata::{fold_data_observed, PerfData, ResolvedSample, SymbolOptions};
    let path =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/perf-data/hook-lines.data");
    let (info, _) = annotate::load_info(&path).unwrap();
    let data = PerfData::open(&path).unwrap();
    let (mut feed, mut each) = (annotate::ResolvedFeed::default(), Aggregator::default());
    let mut observe = |s: &ResolvedSample<'_>| {
        feed.add(&info, s);
        let chain = source::raw_frames(s);
        annotate::feed(&info, &mut each, &chain, s.period.unwrap_or(1), s.time);
    };
    // The fixture's own snapshot: kernel names must not come from the machine the test runs on.
    let opts = SymbolOptions {
        kallsyms: Some(
            std::fs::read(path.with_extension("data.kallsyms"))
                .unwrap()
                .into(),
        ),
        ..SymbolOptions::default()
    };
    fold_data_observed(&data, &opts, Some(&mut observe)).unwrap();
    let mut deferred = Aggregator::default();
    feed.finish(&info, &mut deferred);
    let (got, want) = (deferred.finish(&info), each.finish(&info));
    assert!(want.0.in_bpf > 0 && want.0.lines.len() > 1, "{want:?}");
    assert!(want.0.lines.iter().any(|l| !l.callees.is_empty()));
    assert_eq!(got, want);
}

/// The same object loaded twice while recording (same tags, same names), the second JIT-ed
/// 0x10 bytes above the first, as measured on kernel 6.18 with prog_pack (`every_syscall`'s
/// `count_syscall` went from 0x…c000078c to 0x…c000079c): ids 42 (loaded at 1000) and 43
/// (loaded at 5000).
fn two_loads() -> BpfInfo {
    let (blob, strs) = sample_btf(true);
    let first = sample_prog(strs);
    let mut second = sample_prog(strs);
    second.id = 43;
    second.load_time = 5_000;
    second.ksyms = second.ksyms.iter().map(|a| a + 0x10).collect();
    second.jited_line_info = second.jited_line_info.iter().map(|a| a + 0x10).collect();
    BpfInfo::from_sections(
        &prog_section(&[first, second], true),
        &btf_section(&[(7, blob)], true),
        true,
    )
    .unwrap()
}

/// Line 6 of the first load, line 5 of the second.
const BOTH: u64 = BASE + 0x18;
const NAME: &str = "bpf_prog_1111111111111111_main_fn";

/// An address both loads hold belongs to the load the perf.data reader names for the frame
/// (from its BPF_EVENT): the first load's samples keep the first load's id and function
/// start, hence its lines.
#[test]
fn regression_a_reload_at_an_overlapping_place_is_told_apart_by_program_id() {
    let info = two_loads();
    let line = |prog| {
        let seen = FrameHints {
            name: Some(NAME),
            prog,
            time: None,
        };
        let l = info.lookup_hinted(BOTH, IpKind::Sample, seen)?;
        Some((l.prog.id, l.offset, l.line?.line))
    };
    assert_eq!(line(Some(42)), Some((42, 0x18, 6)));
    assert_eq!(line(Some(43)), Some((43, 0x8, 5)));
    // Without the reader's id (perf script's text): the later load, as before.
    assert_eq!(line(None), Some((43, 0x8, 5)));
    // Only the first load holds BASE + 0x8, whatever the id says.
    let seen = FrameHints {
        name: Some(NAME),
        prog: Some(43),
        time: None,
    };
    let low = info.lookup_hinted(BASE + 8, IpKind::Sample, seen);
    assert_eq!(low.map(|l| l.prog.id), Some(42));
    let frame = |prog| Frame {
        ip: BOTH,
        kind: FrameKind::Bpf,
        name: Some(NAME),
        prog,
    };
    let sample = |prog, weight| Sample {
        frames: [frame(prog)],
        weight,
    };
    let report = aggregate_lines(&info, [sample(Some(42), 7), sample(Some(43), 3)]);
    let got: Vec<_> = report
        .lines
        .iter()
        .map(|l| (l.prog_id, l.line, l.self_weight))
        .collect();
    assert_eq!(got, [(42, 6, 7), (43, 5, 3)]);
}

/// A per-task recording has no KSYMBOL of what another process loads or unloads: a frame
/// the reader could not name goes by the sample's time against the loads' load_time (1000
/// and 5000), and so does one the reader named from a map that went stale (the first load,
/// synthesized at the start, unloaded and replaced unseen).
#[test]
fn regression_a_reload_without_ksymbols_is_told_apart_by_time() {
    let info = two_loads();
    let at = |addr, name, prog, time| {
        let seen = FrameHints { name, prog, time };
        info.func_at_hinted(addr, seen)
            .map(|at| info.progs[at.prog].id)
    };
    assert_eq!(at(BOTH, None, None, Some(3_000)), Some(42));
    assert_eq!(at(BOTH, None, None, Some(6_000)), Some(43));
    assert_eq!(
        at(BOTH, None, None, Some(500)),
        Some(43),
        "before both: the later"
    );
    assert_eq!(at(BOTH, Some(NAME), Some(42), Some(3_000)), Some(42));
    assert_eq!(
        at(BOTH, Some(NAME), Some(42), Some(6_000)),
        Some(43),
        "stale"
    );
    assert_eq!(
        at(BOTH, Some(NAME), Some(43), Some(3_000)),
        Some(43),
        "the reader's"
    );
    assert_eq!(
        at(BASE + 8, None, None, Some(6_000)),
        Some(42),
        "one holder"
    );
    let mut agg = Aggregator::default();
    for (time, weight) in [(3_000, 2), (6_000, 1)] {
        let chain = [source::RawFrame {
            ip: BOTH,
            sym: None,
            prog: None,
        }];
        annotate::feed(&info, &mut agg, &chain, weight, Some(time));
    }
    let lines = agg.finish(&info).0.lines;
    let got: Vec<_> = lines
        .iter()
        .map(|l| (l.prog_id, l.line, l.self_weight))
        .collect();
    assert_eq!(got, [(42, 6, 2), (43, 5, 1)]);
}

/// `--asm` on a recording of another architecture (its `HEADER_ARCH`): the lines are read as
/// usual, the instructions are not, and a note says so; x86-64 gets them.
#[test]
fn asm_of_another_arch_is_a_note() {
    let path =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/perf-data/hook-lines.data");
    let (info, arch) = annotate::load_info(&path).unwrap();
    assert_eq!(arch.as_deref(), Some("x86_64"));
    let perf = crate::perf::PerfChoice::default();
    let req = annotate::Request {
        source: source::SampleSource {
            input: &path,
            kallsyms: None,
            perf: &perf,
            quiet: true,
        },
        prog: Some("path_check_callback".into()),
        top: 2,
        asm: true,
    };
    let read = |arch| {
        let agg = annotate::aggregate(&req.source, &info).unwrap();
        annotate::annotate_from(&req, &info, Some(arch), agg).unwrap()
    };
    let arm = read("aarch64");
    let note = "--asm: disassembling JIT-ed BPF code of aarch64 is not supported (x86_64 only)";
    assert_eq!(
        arm.notes.iter().filter(|n| *n == note).count(),
        1,
        "{arm:?}"
    );
    let lines = &arm.programs[0].lines;
    assert!(!lines.is_empty() && lines.iter().all(|l| l.asm.is_none()));
    let x86 = read("x86_64");
    assert!(x86.notes.iter().all(|n| !n.starts_with("--asm")));
    assert!(x86.programs[0].lines[0]
        .asm
        .as_ref()
        .is_some_and(|a| !a.is_empty()));
    assert_eq!(x86.programs[0].lines.len(), lines.len());
}
