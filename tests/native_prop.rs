//! The native perf.data reader on files built here, byte by byte, as perf 6.1 lays them out
//! (header, one `cpu-clock:k` attr, a kernel MMAP, a COMM, BPF KSYMBOLs and BPF_EVENTs,
//! samples with kernel call chains): what it folds them into, the same file in the other byte
//! order, two loads of one program at one place, bad input (each one clear line, never a
//! panic), and fuzzing: random cuts, byte flips and absurd
//! size claims, with an allocator that fails the test if any single allocation is larger than
//! the file could justify.

use ebpf_prof::profile::perfdata::{fold_data, PerfData, SymbolOptions};
use proptest::prelude::*;
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

/// Tracks the largest single allocation of this thread since the last reset (other tests run
/// on other threads at the same time).
struct Largest;
thread_local! {
    static LARGEST: Cell<usize> = const { Cell::new(0) };
}

fn note(size: usize) {
    let _ = LARGEST.try_with(|l| l.set(l.get().max(size)));
}

// SAFETY: forwards every call to the system allocator unchanged; only records sizes.
unsafe impl GlobalAlloc for Largest {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        note(l.size());
        // SAFETY: same layout, same contract as the caller's.
        unsafe { System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        // SAFETY: `p` came from `alloc` above with this layout.
        unsafe { System.dealloc(p, l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, new: usize) -> *mut u8 {
        note(new);
        // SAFETY: as the caller's contract.
        unsafe { System.realloc(p, l, new) }
    }
}

#[global_allocator]
static ALLOC: Largest = Largest;

const KSYM: &str = "bpf_prog_0123456789abcdef_hook";
const TEXT: u64 = 0xffff_ffff_8100_0000;
const PROG: u64 = 0xffff_ffff_c000_0000;
const KALLSYMS: &str = "ffffffff81000000 T _text\nffffffff81000100 T do_syscall_64\n\
                        ffffffff81000200 T trace_call_bpf\nffffffff81000300 T htab_map_hash\n\
                        ffffffff81000400 T _etext\n";

/// Writes numbers in one byte order.
struct W {
    b: Vec<u8>,
    be: bool,
}

impl W {
    fn u16(&mut self, v: u16) {
        self.b.extend(if self.be {
            v.to_be_bytes()
        } else {
            v.to_le_bytes()
        });
    }
    fn u32(&mut self, v: u32) {
        self.b.extend(if self.be {
            v.to_be_bytes()
        } else {
            v.to_le_bytes()
        });
    }
    fn u64(&mut self, v: u64) {
        self.b.extend(if self.be {
            v.to_be_bytes()
        } else {
            v.to_le_bytes()
        });
    }
    /// A NUL-terminated string padded to 8 bytes.
    fn str8(&mut self, s: &str) {
        let mut v = s.as_bytes().to_vec();
        v.push(0);
        v.resize(v.len().next_multiple_of(8), 0);
        self.b.extend(v);
    }
}

/// A record: header + body + the 16-byte sample_id trailer (pid/tid, time) of non-samples.
fn record(be: bool, kind: u32, misc: u16, body: impl FnOnce(&mut W), trailer: bool) -> Vec<u8> {
    let mut w = W { b: Vec::new(), be };
    body(&mut w);
    if trailer {
        w.u64(0);
        w.u64(0);
    }
    let mut r = W { b: Vec::new(), be };
    r.u32(kind);
    r.u16(misc);
    r.u16(8 + w.b.len() as u16);
    r.b.extend(w.b);
    r.b
}

/// `n` samples: every third through the BPF program, the others in do_syscall_64.
fn samples(be: bool, n: u64) -> Vec<u8> {
    let mut d = Vec::new();
    for i in 0..n {
        let chain: &[u64] = if i % 3 == 0 {
            &[TEXT + 0x310, PROG + 0x40, TEXT + 0x220, TEXT + 0x120]
        } else {
            &[TEXT + 0x130]
        };
        d.extend(record(
            be,
            9,
            1,
            |w| {
                w.u64(chain[0]);
                w.u32(100);
                w.u32(100);
                w.u64(1000 + i);
                w.u64(50_000);
                w.u64(chain.len() as u64 + 1);
                w.u64(-128i64 as u64);
                for &ip in chain {
                    w.u64(ip);
                }
            },
            false,
        ));
    }
    d
}

/// The kernel map and the comm of pid 100.
fn preamble(be: bool) -> Vec<u8> {
    let mut d = Vec::new();
    d.extend(record(
        be,
        1,
        1,
        |w| {
            w.u32(u32::MAX);
            w.u32(0);
            w.u64(TEXT);
            w.u64(0x100_0000);
            w.u64(TEXT);
            w.str8("[kernel.kallsyms]_text");
        },
        true,
    ));
    d.extend(record(
        be,
        3,
        0,
        |w| {
            w.u32(100);
            w.u32(100);
            w.str8("bench");
        },
        true,
    ));
    d
}

/// The data section: kernel map, comm, KSYMBOL, then `n` samples of two kinds of stacks.
fn data_section(be: bool, n: u64, extra: &[Vec<u8>]) -> Vec<u8> {
    let mut d = preamble(be);
    d.extend(record(
        be,
        17,
        0,
        |w| {
            w.u64(PROG);
            w.u32(0x200);
            w.u16(1);
            w.u16(0);
            w.str8(KSYM);
        },
        true,
    ));
    for e in extra {
        d.extend_from_slice(e);
    }
    d.extend(samples(be, n));
    d.extend(record(be, 68, 0, |_| {}, false));
    d
}

/// A whole perf.data: header, one attr (sample_type 0x127, freq, sample_id_all), data,
/// and an ARCH feature when `arch` is given.
fn perf_data(be: bool, n: u64, arch: Option<&str>, extra: &[Vec<u8>]) -> Vec<u8> {
    perf_file(be, data_section(be, n, extra), arch)
}

/// [`perf_data`] around a data section of one's own.
fn perf_file(be: bool, data: Vec<u8>, arch: Option<&str>) -> Vec<u8> {
    let (attrs_at, attr_size) = (104u64, 144u64);
    let data_at = attrs_at + attr_size;
    let mut w = W { b: Vec::new(), be };
    w.b.extend(if be { b"2ELIFREP" } else { b"PERFILE2" });
    for v in [
        104,
        attr_size,
        attrs_at,
        attr_size,
        data_at,
        data.len() as u64,
        0,
        0,
    ] {
        w.u64(v);
    }
    w.u64(1 << 3 | if arch.is_some() { 1 << 6 } else { 0 });
    for _ in 0..3 {
        w.u64(0);
    }
    w.u32(1);
    w.u32(128);
    w.u64(1);
    w.u64(997);
    w.u64(0x127);
    w.u64(0);
    let flags: u64 = 1 << 10 | 1 << 18;
    w.u64(if be { flags.reverse_bits() } else { flags });
    w.b.resize(data_at as usize - 16, 0);
    w.u64(0);
    w.u64(0);
    w.b.extend(data);
    // The feature table (HOSTNAME, then ARCH), then each body: `u32 len; char str[len]`.
    let bodies: Vec<&str> = std::iter::once("host").chain(arch).collect();
    let mut at = w.b.len() as u64 + 16 * bodies.len() as u64;
    for _ in &bodies {
        w.u64(at);
        w.u64(68);
        at += 68;
    }
    for name in bodies {
        let mut body = name.as_bytes().to_vec();
        body.resize(64, 0);
        w.u32(64);
        w.b.extend(body);
    }
    w.b
}

/// Fold bytes with the test kallsyms; the folded text, or the error's one line.
fn fold(bytes: Vec<u8>, kallsyms: Option<&std::path::Path>) -> Result<String, String> {
    let data = PerfData::from_bytes(bytes).map_err(|e| e.to_string())?;
    let opts = SymbolOptions {
        kallsyms: kallsyms.map(|path| std::fs::read(path).unwrap().into()),
        user_symbols: false,
        ..SymbolOptions::default()
    };
    fold_data(&data, &opts)
        .map(|p| p.folded.to_text())
        .map_err(|e| e.to_string())
}

fn kallsyms_file() -> tempfile::NamedTempFile {
    let f = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(f.path(), KALLSYMS).unwrap();
    f
}

#[test]
fn a_built_file_folds_as_perf_script_and_inferno_would() {
    let k = kallsyms_file();
    let got = fold(perf_data(false, 30, None, &[]), Some(k.path())).unwrap();
    let want = format!(
        "bench;do_syscall_64_[k] 1000000\n\
         bench;do_syscall_64_[k];trace_call_bpf_[k];{KSYM};htab_map_hash_[k] 500000\n"
    );
    assert_eq!(got, want);
    // Without kallsyms the kernel frames are unnamed, the BPF one still named (from KSYMBOL).
    let bare = fold(perf_data(false, 3, None, &[]), None).unwrap();
    assert!(
        bare.contains(&format!("[[kernel.kallsyms]]_[k];{KSYM}")),
        "{bare}"
    );
}

#[test]
fn the_other_byte_order_reads_the_same() {
    let k = kallsyms_file();
    let le = fold(perf_data(false, 12, None, &[]), Some(k.path())).unwrap();
    let be = fold(perf_data(true, 12, None, &[]), Some(k.path())).unwrap();
    assert_eq!(le, be);
}

#[test]
fn unknown_record_types_are_skipped_like_perf_does() {
    let k = kallsyms_file();
    let plain = fold(perf_data(false, 9, None, &[]), Some(k.path())).unwrap();
    let odd = [
        record(false, 200, 0, |w| w.u64(7), false),
        record(false, 63, 0, |w| w.u64(u64::MAX), true),
    ];
    let with = fold(perf_data(false, 9, None, &odd), Some(k.path())).unwrap();
    assert_eq!(plain, with);
}

#[test]
fn bad_input_is_one_line_each() {
    let good = perf_data(false, 5, None, &[]);
    let mut claims_more = good.clone();
    claims_more[48..56].copy_from_slice(&(1u64 << 40).to_le_bytes()); // data.size
    let mut feature_huge = perf_data(false, 5, Some("x86_64"), &[]);
    let at = feature_huge.len() - 2 * 68 - 8; // the ARCH entry's size
    feature_huge[at..at + 8].copy_from_slice(&(u64::MAX / 2).to_le_bytes());
    let mut zero_size = good.clone();
    let rec = 248 + 6; // the first record's size field
    zero_size[rec..rec + 2].copy_from_slice(&0u16.to_le_bytes());
    let mut pipe = b"PERFILE2".to_vec();
    pipe.extend(16u64.to_le_bytes());
    // (what, bytes, expected text)
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        (
            "cut in the data",
            good[..good.len() - 13].to_vec(),
            "truncated",
        ),
        ("cut in the header", good[..60].to_vec(), "truncated"),
        ("header claims more", claims_more, "truncated"),
        ("absurd feature size", feature_huge, "feature 6"),
        ("record of size 0", zero_size, "claims 0 bytes"),
        (
            "not perf.data",
            b"GIF89a and more bytes here".to_vec(),
            "not a perf.data",
        ),
        ("pipe mode", pipe, "pipe-mode"),
        (
            "another arch",
            perf_data(true, 5, Some("s390x"), &[]),
            "s390x",
        ),
    ];
    for (what, bytes, want) in cases {
        let e = fold(bytes, None).expect_err(what);
        assert!(e.contains(want), "{what}: {e}");
        assert!(!e.contains('\n'), "{what}: one line: {e}");
    }
}

/// The largest single allocation made while folding `bytes`.
fn largest_allocation(bytes: Vec<u8>) -> usize {
    LARGEST.with(|l| l.set(0));
    let _ = fold(bytes, None);
    LARGEST.with(Cell::get)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    /// Any cut, flipped bytes or planted u64 claims: an answer (folded text or one line), no
    /// panic, and no allocation beyond a few times the file.
    #[test]
    fn fuzzed_files_never_panic_nor_allocate_their_claims(
        be in any::<bool>(),
        n in 0u64..20,
        cut in any::<prop::sample::Index>(),
        flips in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 0..6),
        claims in prop::collection::vec((any::<prop::sample::Index>(), any::<u64>()), 0..3),
    ) {
        let mut b = perf_data(be, n, None, &[]);
        for (at, v) in flips {
            let i = at.index(b.len());
            b[i] = v;
        }
        for (at, v) in claims {
            let i = at.index(b.len().saturating_sub(8).max(1));
            if i + 8 <= b.len() {
                b[i..i + 8].copy_from_slice(&v.to_le_bytes());
            }
        }
        let keep = cut.index(b.len() + 1).max(b.len() / 2);
        b.truncate(keep);
        let len = b.len();
        let largest = largest_allocation(b);
        prop_assert!(largest <= 4 * len + (1 << 20), "{largest} bytes for a {len}-byte file");
    }
}

/// A non-sample record with its `sample_id` trailer (pid/tid 0, `time`).
fn timed(kind: u32, time: u64, body: impl FnOnce(&mut W)) -> Vec<u8> {
    let mut r = record(false, kind, 0, body, true);
    let at = r.len() - 8;
    r[at..].copy_from_slice(&time.to_le_bytes());
    r
}

/// A KSYMBOL (register, or unregister) of a BPF function of 0x40 bytes at `addr`.
fn ksymbol(time: u64, addr: u64, unregister: bool) -> Vec<u8> {
    timed(17, time, |w| {
        w.u64(addr);
        w.u32(0x40);
        w.u16(1);
        w.u16(u16::from(unregister));
        w.str8(KSYM);
    })
}

/// A PERF_RECORD_BPF_EVENT: program `id` loaded (1) or unloaded (2).
fn bpf_event(time: u64, kind: u16, id: u32) -> Vec<u8> {
    timed(18, time, |w| {
        w.u16(kind);
        w.u16(0);
        w.u32(id);
        w.u64(0x0123_4567_89ab_cdef);
    })
}

/// A sample in the BPF function at `ip`, at `time`.
fn bpf_sample(time: u64, ip: u64) -> Vec<u8> {
    record(
        false,
        9,
        1,
        |w| {
            w.u64(ip);
            w.u32(100);
            w.u32(100);
            w.u64(time);
            w.u64(50_000);
            w.u64(3);
            w.u64(-128i64 as u64);
            w.u64(ip);
            w.u64(TEXT + 0x220);
        },
        false,
    )
}

/// One object loaded, unloaded and loaded again while recording, the second load JIT-ed 0x10
/// bytes above the first (as measured with prog_pack on 6.18): the same KSYMBOL name, and
/// addresses both hold. Given each program's functions (the header's BPF_PROG_INFO), the
/// reader names the program each frame was in from the BPF_EVENT that followed its
/// KSYMBOL, by time; the folded stacks are the same as without.
#[test]
fn regression_two_loads_at_one_place_are_named_by_their_bpf_event() {
    use ebpf_prof::profile::perfdata::{fold_data_with, BpfPrograms, FoldHooks, Samples};
    let ip = PROG + 0x18;
    let mut d = preamble(false);
    d.extend(ksymbol(10, PROG, false));
    d.extend(bpf_event(11, 1, 1));
    (100..110).for_each(|t| d.extend(bpf_sample(t, ip)));
    d.extend(ksymbol(200, PROG, true));
    d.extend(bpf_event(201, 2, 1));
    d.extend(ksymbol(300, PROG + 0x10, false));
    d.extend(bpf_event(301, 1, 2));
    (400..405).for_each(|t| d.extend(bpf_sample(t, ip)));
    d.extend(record(false, 68, 0, |_| {}, false));
    let data = PerfData::from_bytes(perf_file(false, d, None)).unwrap();
    let opts = SymbolOptions {
        user_symbols: false,
        ..SymbolOptions::default()
    };
    let programs: BpfPrograms = [(1, vec![PROG]), (2, vec![PROG + 0x10])].into();
    let progs_of = |programs: BpfPrograms| {
        let mut samples = Samples::new(&data, &opts).unwrap().bpf_programs(programs);
        let mut got = Vec::new();
        while let Some(s) = samples.next_sample() {
            let f = s.table.get(s.frames[0]).unwrap();
            got.push((f.symbol_start.unwrap() - PROG, f.bpf_prog));
        }
        got
    };
    let want: Vec<_> = [(0, Some(1)); 10]
        .into_iter()
        .chain([(0x10, Some(2)); 5])
        .collect();
    assert_eq!(progs_of(programs.clone()), want);
    let unnamed: Vec<_> = want.iter().map(|&(at, _)| (at, None)).collect();
    assert_eq!(progs_of(BpfPrograms::new()), unnamed);
    let with = FoldHooks {
        bpf_programs: programs,
        ..FoldHooks::default()
    };
    let named = fold_data_with(&data, &opts, with).unwrap();
    assert_eq!(named, fold_data(&data, &opts).unwrap());
    let text = named.folded.to_text();
    assert!(text.contains(KSYM), "{text}");
}
