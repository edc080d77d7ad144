//! `bpfinfo` on real data. Without root: the perf.data fixture recorded with the sample hook
//! (fixtures/perf-data/README.md): names and addresses as `perf report --header-only` prints
//! them, every line entry found back at its own addresses, the disassembly covering each
//! function, and a helper's return address charged to the line that called it. As root
//! (`live` module): the hook loaded now, read live and from a perf.data recorded meanwhile,
//! checked against libbpf's line lookup (what `bpftool prog dump jited … linum` runs) and
//! against `bpftool prog dump xlated … linum`.

mod common;
#[path = "bpfinfo/live.rs"]
mod live;
#[path = "bpfinfo/perf_features.rs"]
mod perf_features;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Command;

use ebpf_prof::bpfinfo::{
    aggregate_lines, disassemble, BpfInfo, Frame, FrameKind, IpKind, LineMapping, LineReport,
    ProgInfo, Sample, SourceLine,
};

const FIXTURE: &str = "fixtures/perf-data/hook-lines.data";

fn fixture_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(FIXTURE)
}

pub fn from_perf_data(data: &[u8]) -> BpfInfo {
    let le = perf_features::little_endian(data).expect("perf.data magic");
    let progs = perf_features::feature(data, perf_features::BPF_PROG_INFO).expect("feature 25");
    let btf = perf_features::feature(data, perf_features::BPF_BTF).expect("feature 26");
    BpfInfo::from_sections(progs, btf, le).expect("bpf sections parse")
}

fn fixture() -> BpfInfo {
    let path = fixture_path();
    from_perf_data(&std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display())))
}

/// `(prog id, function symbol, address, size)` as `perf report --header-only` prints them.
const PERF_HEADER: [(u32, &str, u64, u32); 3] = [
    (
        821,
        "bpf_prog_e03e9930c8521773_enforce_access_policy",
        0xffffffffc0027454,
        123,
    ),
    (
        821,
        "bpf_prog_02d72532ae93c2b5_path_check_callback",
        0xffffffffc002752c,
        521,
    ),
    (
        822,
        "bpf_prog_1307ade3162da109_tail_call_security_check",
        0xffffffffc0027774,
        177,
    ),
];

fn our_functions(info: &BpfInfo) -> Vec<(u32, String, u64, u32)> {
    let funcs = info
        .progs
        .iter()
        .flat_map(|p| p.funcs.iter().map(move |f| (p.id, f)));
    funcs
        .map(|(id, f)| (id, f.sym_name.clone(), f.addr, f.len))
        .collect()
}

#[test]
fn fixture_programs_are_named_as_perf_names_them() {
    let info = fixture();
    let want: Vec<_> = PERF_HEADER
        .iter()
        .map(|&(i, n, a, l)| (i, n.to_string(), a, l))
        .collect();
    assert_eq!(our_functions(&info), want);
    for p in &info.progs {
        assert_eq!(
            (p.btf_id, p.line_mapping, &p.problems),
            (918, LineMapping::JitedAddresses, &vec![]),
            "{}",
            p.id
        );
        assert_eq!(
            p.funcs.iter().map(|f| f.len as usize).sum::<usize>(),
            p.jited_insns.len()
        );
    }
    assert_eq!(info.btfs.ids().collect::<Vec<_>>(), [918]);
    assert_eq!(
        info.prog(821).map(|p| p.name.as_str()),
        Some("enforce_access_")
    );
}

/// The same, against perf itself when it is installed (`perf report --header-only`).
#[test]
fn fixture_programs_match_perf_report_header() {
    let Ok(out) = Command::new("perf")
        .args(["report", "--header-only", "-f", "-i"])
        .arg(fixture_path())
        .output()
    else {
        assert!(
            !common::under_ci(),
            "perf is missing under CI (scripts/install-deps.sh installs it)"
        );
        eprintln!("SKIP fixture_programs_match_perf_report_header: no perf");
        return;
    };
    let text = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<&str> = text.lines().filter(|l| l.contains(" addr 0x")).collect();
    let ours: Vec<String> = our_functions(&fixture())
        .iter()
        .map(|(_, name, addr, len)| format!("{name} addr {addr:#x} size {len}"))
        .collect();
    assert_eq!(lines.len(), ours.len(), "{text}");
    for (line, ours) in lines.iter().zip(&ours) {
        assert!(
            line.ends_with(ours.as_str()),
            "perf: {line:?}, ours: {ours:?}"
        );
    }
}

#[test]
fn fixture_every_line_entry_is_found_at_its_addresses() {
    let info = fixture();
    let mut checked = 0;
    for p in &info.progs {
        for (f, func) in p.funcs.iter().enumerate() {
            assert_eq!(
                func.lines.first().and_then(|l| l.addr),
                Some(func.addr),
                "{}",
                func.sym_name
            );
            for j in 0..func.lines.len() {
                let line = info.source_line(p, f, j);
                let r = line.addr_range.clone();
                assert!(!r.is_empty(), "{} entry {j}", func.sym_name);
                for (ip, kind) in [
                    (r.start, IpKind::Sample),
                    (r.end - 1, IpKind::Sample),
                    (r.start + 1, IpKind::Return),
                ] {
                    let loc = info.lookup(ip, kind).expect("found");
                    assert_eq!((loc.prog.id, loc.func_index), (p.id, f));
                    assert_eq!(loc.line.map(|l| l.index), Some(j), "{ip:#x} {kind:?}");
                }
                checked += 1;
            }
            assert!(info
                .lookup(func.end(), IpKind::Sample)
                .is_none_or(|l| l.func().addr == func.end()));
        }
    }
    let per_func: Vec<usize> = info
        .progs
        .iter()
        .flat_map(|p| p.funcs.iter().map(|f| f.lines.len()))
        .collect();
    assert_eq!(per_func, [8, 29, 7], "line entries per function");
    assert_eq!(checked, per_func.iter().sum::<usize>());
}

#[test]
fn fixture_disassembly_covers_each_function() {
    let info = fixture();
    for p in &info.progs {
        for (f, func) in p.funcs.iter().enumerate() {
            let insns =
                disassemble(p.func_code(f).expect("code"), func.addr, "x86_64").expect("x86_64");
            let mut at = func.addr;
            for insn in &insns {
                assert_eq!(insn.addr, at, "{}", func.sym_name);
                assert_ne!(insn.text, "(bad)", "{} at {at:#x}", func.sym_name);
                at += insn.len as u64;
            }
            assert_eq!(at, func.end(), "{}", func.sym_name);
        }
    }
}

/// The call of `bpf_probe_read_user_str` (line 89: `len = READ_PATH(…)`) is charged to line
/// 89 through its return address; the call of `path_check_callback` ends line 44, so its
/// return address is the first instruction of line 45 and only `ip - 1` charges it to 44.
#[test]
fn fixture_return_addresses_are_charged_to_the_calling_line() {
    let info = fixture();
    let p = info.prog(821).expect("prog 821");
    let helper = last_call_of_line(&info, p, 1, 89);
    assert_eq!(lines_of(&info, helper, IpKind::Return), Some(89));
    let l = line_of(&info, p, 1, 89);
    assert!(
        l.file.ends_with("fixtures/hooks/openat_hook_common.h"),
        "{}",
        l.file
    );
    assert_eq!(
        l.text,
        "\tlen = READ_PATH(buf->path, sizeof(buf->path), path);"
    );
    let sub_call = last_call_of_line(&info, p, 0, 44);
    assert_eq!(
        sub_call,
        line_of(&info, p, 0, 44).addr_range.end,
        "the call ends line 44"
    );
    assert_eq!(lines_of(&info, sub_call, IpKind::Return), Some(44));
    assert_eq!(lines_of(&info, sub_call, IpKind::Sample), Some(45));
}

fn line_of(info: &BpfInfo, p: &ProgInfo, f: usize, line: u32) -> SourceLine {
    let func = &p.funcs[f];
    let j = (0..func.lines.len())
        .rfind(|&j| func.lines[j].line() == line)
        .expect("line");
    info.source_line(p, f, j)
}

/// The return address of the last `call` in the last entry of `line` in function `f`.
fn last_call_of_line(info: &BpfInfo, p: &ProgInfo, f: usize, line: u32) -> u64 {
    let range = line_of(info, p, f, line).addr_range;
    let func = &p.funcs[f];
    let insns = disassemble(p.func_code(f).expect("code"), func.addr, "x86_64").expect("x86_64");
    let call = insns
        .iter()
        .rfind(|i| range.contains(&i.addr) && i.text.starts_with("call"));
    let call = call.unwrap_or_else(|| panic!("no call in line {line}"));
    call.addr + call.len as u64
}

fn lines_of(info: &BpfInfo, ip: u64, kind: IpKind) -> Option<u32> {
    info.lookup(ip, kind).and_then(|l| l.line).map(|l| l.line)
}

/// The stacks of the fixture's samples as `perf script -F ip,sym` prints them, innermost
/// first, as `(ip, symbol)`; `None` without perf. Kernel frames are named from the kallsyms
/// excerpt recorded with the fixture, not from the running kernel's.
fn perf_script_stacks() -> Option<Vec<Vec<(u64, String)>>> {
    let mut kallsyms = std::ffi::OsString::from("--kallsyms=");
    kallsyms.push(fixture_path().with_extension("data.kallsyms"));
    let out = Command::new("perf")
        .args(["script", "-f", "-F", "ip,sym"])
        .arg(kallsyms)
        .arg("-i")
        .arg(fixture_path())
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    let mut stacks = vec![Vec::new()];
    for line in text.lines() {
        let mut words = line.split_whitespace();
        match (
            words.next().map(|w| u64::from_str_radix(w, 16)),
            words.next(),
        ) {
            (Some(Ok(ip)), Some(sym)) => stacks.last_mut()?.push((ip, sym.to_string())),
            _ if line.trim().is_empty() && !stacks.last()?.is_empty() => stacks.push(Vec::new()),
            _ => {}
        }
    }
    stacks.retain(|s| !s.is_empty());
    Some(stacks)
}

/// The fixture's samples (symbolized by perf) aggregated per line: every BPF frame is found,
/// the self weights add up to the samples whose IP is in BPF code, each sample counts once at
/// its innermost BPF frame (functions named as perf names their frames), and line 89 calls
/// `bpf_probe_read_user_str` (found through the return address − 1).
#[test]
fn fixture_samples_aggregate_to_lines() {
    let Some(stacks) = perf_script_stacks() else {
        assert!(
            !common::under_ci(),
            "perf is missing under CI (scripts/install-deps.sh installs it)"
        );
        eprintln!("SKIP fixture_samples_aggregate_to_lines: no perf");
        return;
    };
    let is_bpf = |sym: &str| sym.starts_with("bpf_prog_");
    let info = fixture();
    let report = aggregate_lines(
        &info,
        stacks.iter().map(|s| Sample {
            frames: frames_of(s),
            weight: 1,
        }),
    );
    let in_bpf = stacks
        .iter()
        .filter(|s| s.iter().any(|(_, sym)| is_bpf(sym)))
        .count() as u64;
    let leaf_bpf = stacks.iter().filter(|s| is_bpf(&s[0].1)).count() as u64;
    assert_eq!(
        (report.total, report.in_bpf, report.unknown_bpf),
        (stacks.len() as u64, in_bpf, 0)
    );
    assert_eq!(
        report.lines.iter().map(|l| l.self_weight).sum::<u64>(),
        leaf_bpf
    );
    show_lines(&report);
    assert_eq!(
        report.lines.iter().map(|l| l.inclusive_weight).sum::<u64>(),
        in_bpf,
        "each sample counts once, at its innermost BPF frame"
    );
    assert_eq!(
        inclusive_per_function(&report),
        innermost_bpf_per_function(&stacks),
        "named as perf names the frames"
    );
    let read = report.lines.iter().find(|l| l.line == 89).expect("line 89");
    assert_eq!(
        read.callees.first().map(|c| c.0.as_str()),
        Some("bpf_probe_read_user_str")
    );
}

/// Each line's weights, for the log of a failing run.
fn show_lines(report: &LineReport) {
    for l in &report.lines {
        eprintln!(
            "{:>3} {:>3} {:>3}  {}:{} {:?} {:?}",
            l.self_weight,
            l.inclusive_weight,
            l.line,
            l.func_name,
            l.line,
            l.text.trim(),
            l.callees
        );
    }
}

/// Samples per function at the innermost BPF frame, as perf names the frames.
fn innermost_bpf_per_function(stacks: &[Vec<(u64, String)>]) -> BTreeMap<String, u64> {
    let mut per_function = BTreeMap::new();
    for s in stacks {
        if let Some((_, sym)) = s.iter().find(|(_, sym)| sym.starts_with("bpf_prog_")) {
            *per_function.entry(sym.clone()).or_default() += 1;
        }
    }
    per_function
}

/// The lines' inclusive weights summed per function.
fn inclusive_per_function(report: &LineReport) -> BTreeMap<String, u64> {
    let mut ours = BTreeMap::new();
    for l in &report.lines {
        *ours.entry(l.func_name.clone()).or_default() += l.inclusive_weight;
    }
    ours
}

fn frames_of(stack: &[(u64, String)]) -> Vec<Frame<'_>> {
    stack.iter().map(|(ip, sym)| frame(*ip, sym)).collect()
}

fn frame(ip: u64, sym: &str) -> Frame<'_> {
    let kind = if sym.starts_with("bpf_prog_") {
        FrameKind::Bpf
    } else {
        FrameKind::Kernel
    };
    Frame {
        ip,
        kind,
        name: Some(sym),
        prog: None,
    }
}
