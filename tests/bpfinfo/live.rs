//! As root: the sample hook loaded now, its program info read live (libbpf-rs) and from a
//! perf.data recorded while it is loaded, and the IP → line mapping checked against
//! independent references:
//!
//! * `bpftool prog dump jited id N linum`, which prints `; source [file:… line_num:…
//!   line_col:…]` before the first instruction of each line: every instruction's line must be
//!   ours. Debian's bpftool 7.1 is built without libbfd and cannot disassemble; point
//!   `$BPFTOOL` at one that can (bpftool ≥ 7.3 built with LLVM) to run this part;
//! * what that bpftool runs, always: libbpf's `bpf_prog_linfo__new` on the kernel's arrays and
//!   `bpf_prog_linfo__lfind_addr_func` once per instruction with `nr_skip`, as bpftool's
//!   `disasm_print_insn` calls it (`tools/bpf/bpftool/jit_disasm.c`);
//! * `bpftool prog dump xlated id N linum`, which works without libbfd: every line info entry
//!   per function, in order, with its text, file, line and column.

use std::process::Command;

use ebpf_prof::bpf::{attach, Attached, ObjectSource, SAMPLE_HOOK};
use ebpf_prof::bpfinfo::{disassemble, live, BpfInfo, IpKind, LineMapping, ProgInfo, SourceLine};
use libbpf_rs::libbpf_sys;
use libbpf_rs::query::{ProgInfoIter, ProgInfoQueryOptions};

fn load() -> Attached {
    let src = ObjectSource::Bytes {
        name: "openat_hook",
        bytes: SAMPLE_HOOK,
    };
    attach(src).unwrap_or_else(|e| panic!("attaching the sample hook: {e:#}"))
}

#[test]
#[ignore = "needs root: scripts/test.sh runs it (or as root: cargo test -- --include-ignored)"]
fn live_line_mapping_agrees_with_libbpf_bpftool_and_perf_data() {
    if !super::common::need_root("live_line_mapping_agrees_with_libbpf_bpftool_and_perf_data") {
        return;
    }
    let hook = load();
    let ids = hook.program_ids();
    let info = live::bpf_info(&ids);
    assert_eq!(info.progs.len(), 2, "{ids:?}");
    assert_eq!(info.btfs.problems, vec![]);
    let mut funcs = 0;
    for prog in &info.progs {
        assert_eq!(
            (prog.line_mapping, &prog.problems),
            (LineMapping::JitedAddresses, &vec![])
        );
        funcs += prog.funcs.len();
        let (agree, insns) = against_libbpf(&info, prog);
        eprintln!(
            "prog {}: libbpf linum agrees on {agree}/{insns} instructions",
            prog.id
        );
        assert_eq!(agree, insns, "prog {}", prog.id);
        let entries = against_bpftool_xlated(&info, prog);
        eprintln!(
            "prog {}: bpftool xlated linum agrees on {entries} line entries",
            prog.id
        );
        match against_bpftool_jited(&info, prog) {
            Some((agree, insns)) => {
                eprintln!(
                    "prog {}: bpftool jited linum agrees on {agree}/{insns} instructions",
                    prog.id
                );
                assert_eq!(agree, insns, "prog {}", prog.id);
            }
            None => eprintln!(
                "note: {} cannot disassemble (no libbfd/LLVM); the libbpf check stands in",
                bpftool()
            ),
        }
    }
    assert_eq!(
        funcs, 3,
        "enforce_access_policy, path_check_callback, tail_call_security_check"
    );
    against_perf_data(&info);
}

/// Instructions of `prog` whose line (by our lookup) is the one libbpf annotates them with,
/// and how many instructions there are. libbpf gets the kernel's arrays afresh, as bpftool
/// does, not our split of them.
fn against_libbpf(info: &BpfInfo, prog: &ProgInfo) -> (usize, usize) {
    let linfo = LibbpfLinfo::new(prog.id);
    let (mut agree, mut total) = (0, 0);
    for (f, func) in prog.funcs.iter().enumerate() {
        let insns =
            disassemble(prog.func_code(f).expect("code"), func.addr, "x86_64").expect("x86");
        let (mut nr_skip, mut current) = (0, None);
        for insn in &insns {
            if let Some(insn_off) = linfo.lfind(insn.addr, f, nr_skip) {
                nr_skip += 1;
                current = Some(insn_off);
            }
            let ours = info.lookup(insn.addr, IpKind::Sample).and_then(|l| l.line);
            let ours = ours.map(|l| func.lines[l.index].raw.insn_off);
            total += 1;
            if ours == current {
                agree += 1;
            } else {
                eprintln!(
                    "{} {:#x} {}: ours {ours:?}, libbpf {current:?}",
                    func.sym_name, insn.addr, insn.text
                );
            }
        }
    }
    (agree, total)
}

/// libbpf's `struct bpf_prog_linfo` (`bpf_prog_linfo__new`), from the kernel's arrays.
struct LibbpfLinfo {
    ptr: *mut libbpf_sys::bpf_prog_linfo,
}

impl LibbpfLinfo {
    fn new(id: u32) -> LibbpfLinfo {
        let opts = ProgInfoQueryOptions::default().include_all();
        let p = ProgInfoIter::with_query_opts(opts)
            .find(|p| p.id == id)
            .expect("loaded");
        let lines: Vec<libbpf_sys::bpf_line_info> = p
            .line_info
            .iter()
            .map(|l| libbpf_sys::bpf_line_info {
                insn_off: l.insn_off,
                file_name_off: l.file_name_off,
                line_off: l.line_off,
                line_col: l.line_num << 10 | l.line_col,
            })
            .collect();
        let info = libbpf_sys::bpf_prog_info {
            nr_line_info: lines.len() as u32,
            line_info_rec_size: p.line_info_rec_size,
            line_info: lines.as_ptr() as u64,
            nr_jited_line_info: p.jited_line_info.len() as u32,
            jited_line_info_rec_size: p.jited_line_info_rec_size,
            jited_line_info: p.jited_line_info.as_ptr() as u64,
            nr_jited_ksyms: p.jited_ksyms.len() as u32,
            jited_ksyms: p.jited_ksyms.as_ptr() as u64,
            nr_jited_func_lens: p.jited_func_lens.len() as u32,
            jited_func_lens: p.jited_func_lens.as_ptr() as u64,
            ..Default::default()
        };
        // SAFETY: every pointer in `info` points at a live Vec of the stated length; libbpf
        // copies what it needs before returning.
        let ptr = unsafe { libbpf_sys::bpf_prog_linfo__new(&info) };
        assert!(!ptr.is_null(), "libbpf refused the line info of prog {id}");
        LibbpfLinfo { ptr }
    }

    /// `insn_off` of the entry libbpf finds for `addr` in function `f`.
    fn lfind(&self, addr: u64, f: usize, nr_skip: u32) -> Option<u32> {
        // SAFETY: `self.ptr` is a live bpf_prog_linfo; the result points into it.
        let found = unsafe {
            libbpf_sys::bpf_prog_linfo__lfind_addr_func(self.ptr, addr, f as u32, nr_skip)
        };
        // SAFETY: NULL or a valid record inside `self.ptr`.
        unsafe { found.as_ref() }.map(|l| l.insn_off)
    }
}

impl Drop for LibbpfLinfo {
    fn drop(&mut self) {
        // SAFETY: allocated by bpf_prog_linfo__new, freed once.
        unsafe { libbpf_sys::bpf_prog_linfo__free(self.ptr) }
    }
}

/// The bpftool to run: `$BPFTOOL`, else the one on PATH.
fn bpftool() -> String {
    std::env::var("BPFTOOL").unwrap_or_else(|_| "bpftool".to_string())
}

/// Instructions whose `; source [file:…]` annotation in `bpftool prog dump jited id N linum`
/// is the line our lookup gives, and how many instructions bpftool printed; `None` when
/// this bpftool has no disassembler (Debian's 7.1: "No libbfd support").
fn against_bpftool_jited(info: &BpfInfo, prog: &ProgInfo) -> Option<(usize, usize)> {
    let out = Command::new(bpftool())
        .args(["prog", "dump", "jited", "id", &prog.id.to_string(), "linum"])
        .output()
        .ok()?;
    if !out.status.success() {
        return None;
    }
    let (mut agree, mut total) = (0, 0);
    for (f, offset, annotation) in bpftool_jited_insns(&String::from_utf8_lossy(&out.stdout)) {
        let func = &prog.funcs[f];
        let ours = info
            .lookup(func.addr + offset, IpKind::Sample)
            .and_then(|l| l.line)
            .map(|l| annotate(&l));
        total += 1;
        if ours.as_deref() == annotation {
            agree += 1;
        } else {
            eprintln!(
                "{}+{offset:#x}: ours {ours:?}, bpftool {annotation:?}",
                func.sym_name
            );
        }
    }
    assert!(total > 0, "bpftool printed no instructions");
    Some((agree, total))
}

/// `(function index, offset, the last `; …` annotation)` of every instruction line
/// (`  1c:\tmovl …`) of a bpftool jited dump; offsets restart at 0 in each function.
fn bpftool_jited_insns(dump: &str) -> Vec<(usize, u64, Option<&str>)> {
    let (mut out, mut func, mut current) = (Vec::new(), None::<usize>, None);
    for line in dump.lines() {
        if let Some(entry) = line.strip_prefix("; ") {
            current = Some(entry);
            continue;
        }
        let Some((off, _)) = line.trim_start().split_once(":\t") else {
            continue;
        };
        let Ok(offset) = u64::from_str_radix(off, 16) else {
            continue;
        };
        if offset == 0 {
            func = Some(func.map_or(0, |f| f + 1));
        }
        out.push((
            func.expect("an instruction at offset 0 first"),
            offset,
            current,
        ));
    }
    out
}

/// A line as bpftool's `btf_dump_linfo_plain` prints it with `linum`.
fn annotate(l: &SourceLine) -> String {
    format!(
        "{} [file:{} line_num:{} line_col:{}]",
        l.text.trim_start(),
        l.file,
        l.line,
        l.col
    )
}

/// Compares every line entry, per function, with `bpftool prog dump xlated id N linum`;
/// returns how many entries were compared.
fn against_bpftool_xlated(info: &BpfInfo, prog: &ProgInfo) -> usize {
    let out = Command::new("bpftool")
        .args([
            "prog",
            "dump",
            "xlated",
            "id",
            &prog.id.to_string(),
            "linum",
        ])
        .output();
    let out = match out {
        Ok(out) if out.status.success() => String::from_utf8_lossy(&out.stdout).into_owned(),
        other => panic!("bpftool (scripts/install-deps.sh installs it): {other:?}"),
    };
    let theirs = bpftool_entries(&out);
    let ours: Vec<Vec<String>> = (0..prog.funcs.len())
        .map(|f| {
            (0..prog.funcs[f].lines.len())
                .map(|j| {
                    let l = info.source_line(prog, f, j);
                    format!(
                        "{} [file:{} line_num:{} line_col:{}]",
                        l.text.trim_start(),
                        l.file,
                        l.line,
                        l.col
                    )
                })
                .collect()
        })
        .collect();
    assert_eq!(ours, theirs, "prog {}", prog.id);
    ours.iter().map(Vec::len).sum()
}

/// The `; …` lines of a bpftool xlated dump, grouped by the function headers (`int f(…):`).
fn bpftool_entries(dump: &str) -> Vec<Vec<String>> {
    let mut funcs: Vec<Vec<String>> = Vec::new();
    for line in dump.lines() {
        if let Some(entry) = line.strip_prefix("; ") {
            funcs
                .last_mut()
                .expect("a function header first")
                .push(entry.to_string());
        } else if line.ends_with(':')
            && !line.trim_start().starts_with(|c: char| c.is_ascii_digit())
        {
            funcs.push(Vec::new());
        }
    }
    funcs
}

/// Records a short perf.data while the hook is loaded and checks that its feature sections
/// give the same programs as the live read.
fn against_perf_data(live: &BpfInfo) {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("perf.data");
    let status = Command::new("perf")
        .args(["record", "-q", "-e", "cpu-clock", "-a", "-o"])
        .arg(&path)
        .args(["--", "sleep", "0.1"])
        .status();
    match status {
        Ok(s) if s.success() => {}
        other => panic!("perf record (scripts/install-deps.sh installs perf): {other:?}"),
    }
    let recorded = super::from_perf_data(&std::fs::read(&path).expect("perf.data"));
    for prog in &live.progs {
        let from_perf = recorded
            .prog(prog.id)
            .unwrap_or_else(|| panic!("prog {} not in perf.data", prog.id));
        assert_eq!(
            from_perf, prog,
            "prog {}: perf.data and live differ",
            prog.id
        );
        let btf = |i: &BpfInfo| i.btfs.get(prog.btf_id).map(|b| b.type_count());
        assert_eq!(btf(&recorded), btf(live));
    }
    eprintln!(
        "perf.data: {} programs identical to the live read",
        live.progs.len()
    );
}
