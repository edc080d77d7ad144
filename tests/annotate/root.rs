//! As root. `annotate`'s shares against an independent mapping: `perf script` addresses of the
//! same perf.data mapped through `bpftool prog dump jited id N linum` taken while the hook was
//! loaded (function starts from the kernel's `jited_ksyms`), on the sample hook and on
//! `every_syscall` (two programs, no sub-program, no tail call): every line within 0.5 points,
//! self and inclusive. That needs a bpftool that disassembles (`$BPFTOOL`, e.g. 7.8 built with
//! LLVM; Debian's 7.1 cannot); without one, the kernel's own line arrays read live (what
//! bpftool's `linum` walks) stand in. Also: `record`'s files read by `nobody` with
//! kptr_restrict=1, a program loaded twice during one recording, a program without line info.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Stdio};

use ebpf_prof::bpf::{attach, ObjectSource, HOOK_EVERY_SYSCALL, SAMPLE_HOOK};
use libbpf_rs::query::{ProgInfoIter, ProgInfoQueryOptions};
use serde_json::Value;

use super::common::{ebpf_prof, need_root, open_tempdir, run, under_ci, SysctlSet};

/// One root test at a time: they load the same hooks.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// `(function short name, file, line)` → `(self, inclusive)` weight.
type Shares = BTreeMap<(String, String, u64), (f64, f64)>;

/// One JIT-ed function of a bpftool dump: its kallsyms name, start, and per instruction
/// offset the `file:line` bpftool annotates it with.
struct Func {
    short: String,
    start: u64,
    len: u64,
    insns: Vec<(u64, Option<(String, u64)>)>,
}

fn bpftool() -> Option<String> {
    let b = std::env::var("BPFTOOL").unwrap_or_else(|_| "bpftool".into());
    let probe = Command::new(&b).args(["version"]).output().ok()?;
    let text = String::from_utf8_lossy(&probe.stdout).into_owned();
    (text.contains("llvm") || text.contains("libbfd")).then_some(b)
}

fn prog_info(id: u32) -> libbpf_rs::query::ProgramInfo {
    let opts = ProgInfoQueryOptions::default().include_all();
    ProgInfoIter::with_query_opts(opts)
        .find(|p| p.id == id)
        .unwrap_or_else(|| panic!("prog {id} is gone"))
}

/// Start addresses of the JIT-ed functions of program `id`, from the kernel (libbpf).
fn jited_ksyms(id: u32) -> Vec<u64> {
    prog_info(id)
        .jited_ksyms
        .iter()
        .map(|&p| p as u64)
        .collect()
}

/// Without a bpftool that disassembles: the kernel's own arrays for program `id` (what
/// bpftool's `linum` walks with libbpf's `bpf_prog_linfo`): each line entry's JIT address,
/// line number, and file (a string of the program's BTF).
fn kernel_funcs(id: u32) -> Vec<Func> {
    let info = prog_info(id);
    let btf = ebpf_prof::bpfinfo::live::btf_blob(info.btf_id)
        .and_then(|b| ebpf_prof::bpfinfo::Btf::parse(info.btf_id, b))
        .expect("the program's BTF");
    let jli: Vec<u64> = info.jited_line_info.iter().map(|&a| a as u64).collect();
    let mut funcs = Vec::new();
    for (f, &start) in info.jited_ksyms.iter().enumerate() {
        let (start, len) = (start as u64, u64::from(info.jited_func_lens[f]));
        let ty = info.func_info[f].type_id;
        let short = btf
            .func_name(ty)
            .map(|n| n.into_owned())
            .unwrap_or_default();
        let insns = (0..jli.len())
            .filter(|&j| jli[j] >= start && jli[j] < start + len)
            .map(|j| {
                let l = &info.line_info[j];
                let file = btf.string(l.file_name_off).unwrap_or_default().into_owned();
                let base = file.rsplit('/').next().unwrap_or("").to_string();
                (jli[j] - start, Some((base, u64::from(l.line_num))))
            })
            .collect();
        funcs.push(Func {
            short,
            start,
            len,
            insns,
        });
    }
    funcs
}

/// Parses `bpftool prog dump jited id N linum`: functions in order, each headed by its BTF
/// signature (`int enforce_access_policy(void * ctx):`), its start from [`jited_ksyms`].
fn bpftool_funcs(bpftool: &str, id: u32) -> Vec<Func> {
    let out = Command::new(bpftool)
        .args(["prog", "dump", "jited", "id", &id.to_string(), "linum"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let starts = jited_ksyms(id);
    let mut funcs: Vec<Func> = Vec::new();
    let mut current: Option<(String, u64)> = None;
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        if let Some(sig) = line
            .strip_suffix(':')
            .filter(|l| l.contains('(') && !l.starts_with(';'))
        {
            let name = sig
                .split('(')
                .next()
                .unwrap_or("")
                .split_whitespace()
                .last()
                .unwrap_or("");
            let start = starts[funcs.len()];
            if let Some(last) = funcs.last_mut() {
                last.len = last.insns.last().map_or(0, |i| i.0) + 16;
            }
            funcs.push(Func {
                short: name.trim_start_matches('*').to_string(),
                start,
                len: 0,
                insns: Vec::new(),
            });
        } else if let Some(a) = line.strip_prefix("; ") {
            let file = a
                .split("[file:")
                .nth(1)
                .and_then(|r| r.split(' ').next())
                .unwrap_or("");
            let num = a
                .split("line_num:")
                .nth(1)
                .and_then(|r| r.split(' ').next()?.parse().ok());
            let base = file.rsplit('/').next().unwrap_or(file).to_string();
            current = num.map(|n| (base, n));
        } else if let Some((off, _)) = line.trim_start().split_once(":\t") {
            if let (Ok(o), Some(f)) = (u64::from_str_radix(off, 16), funcs.last_mut()) {
                f.insns.push((o, current.clone()));
            }
        }
    }
    assert_eq!(funcs.len(), starts.len(), "one signature per function");
    if let Some(last) = funcs.last_mut() {
        last.len = last.insns.last().map_or(0, |i| i.0) + 16;
    }
    funcs
}

/// Line of `addr` by the dump: the annotation of the last instruction at or below it.
fn line_of(funcs: &[Func], addr: u64) -> Option<(&Func, Option<(String, u64)>)> {
    let f = funcs
        .iter()
        .find(|f| addr >= f.start && addr < f.start + f.len)?;
    let off = addr - f.start;
    let i = f.insns.iter().rev().find(|i| i.0 <= off)?;
    Some((f, i.1.clone()))
}

/// The independent shares: `perf script` stacks, the innermost frame in one of `funcs`.
fn independent(data: &Path, funcs: &[Func]) -> Shares {
    let out = Command::new("perf")
        .args(["script", "-F", "period,ip", "-i"])
        .arg(data)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let (mut total, mut acc) = (0u64, BTreeMap::<(String, String, u64), (u64, u64)>::new());
    for sample in text.split("\n\n") {
        let mut lines = sample.lines().filter(|l| !l.trim().is_empty());
        let Some(period) = lines.next().and_then(|l| l.trim().parse::<u64>().ok()) else {
            continue;
        };
        total += period;
        let ips = lines.filter_map(|l| u64::from_str_radix(l.trim(), 16).ok());
        for (depth, ip) in ips.enumerate() {
            let addr = if depth == 0 { ip } else { ip.saturating_sub(1) };
            let Some((f, line)) = line_of(funcs, addr) else {
                continue;
            };
            let (file, n) = line.unwrap_or_default();
            let e = acc.entry((f.short.clone(), file, n)).or_default();
            e.1 += period;
            if depth == 0 {
                e.0 += period;
            }
            break;
        }
    }
    let pct = |w: u64| w as f64 * 100.0 / total as f64;
    acc.into_iter()
        .map(|(k, (s, i))| (k, (pct(s), pct(i))))
        .collect()
}

/// `annotate --json`'s shares, for the programs among `ids`.
fn ours(data: &Path, ids: &[u32]) -> Shares {
    let r = run(ebpf_prof(
        &[
            "annotate",
            "--json",
            "--top",
            "100000",
            data.to_str().unwrap(),
        ],
        Path::new("/"),
    ));
    assert_eq!(r.code(), Some(0), "{r:?}");
    let v: Value = serde_json::from_str(&r.stdout()).unwrap();
    let mut m = Shares::new();
    for p in v["programs"].as_array().unwrap() {
        if !ids.contains(&(p["id"].as_u64().unwrap() as u32)) {
            continue;
        }
        for l in p["lines"].as_array().unwrap() {
            let key = (
                p["name"].as_str().unwrap().to_string(),
                l["file"].as_str().unwrap().to_string(),
                l["line"].as_u64().unwrap(),
            );
            m.insert(
                key,
                (
                    l["self_percent"].as_f64().unwrap(),
                    l["incl_percent"].as_f64().unwrap(),
                ),
            );
        }
    }
    m
}

fn record(data: &Path, seconds: &str) {
    let bin = env!("CARGO_BIN_EXE_ebpf-prof");
    let st = Command::new("perf")
        .args([
            "record",
            "-q",
            "-g",
            "--call-graph",
            "fp",
            "-e",
            "cpu-clock:k",
            "-F",
            "4999",
            "-o",
        ])
        .arg(data)
        .args(["--", "timeout", seconds, bin, "bench", "-n", "3000000"])
        .stdout(Stdio::null())
        .status()
        .unwrap();
    assert!(st.code().is_some(), "perf record: {st:?}");
}

fn compare(hook: &str, ours: &Shares, theirs: &Shares) -> f64 {
    let mut worst: f64 = 0.0;
    let keys: std::collections::BTreeSet<_> = ours.keys().chain(theirs.keys()).collect();
    for k in keys {
        let (a, b) = (
            ours.get(k).copied().unwrap_or_default(),
            theirs.get(k).copied().unwrap_or_default(),
        );
        let d = (a.0 - b.0).abs().max((a.1 - b.1).abs());
        eprintln!(
            "{hook} {}:{}:{} ours self {:.2} incl {:.2}, bpftool self {:.2} incl {:.2}",
            k.0, k.1, k.2, a.0, a.1, b.0, b.1
        );
        assert!(d <= 0.5, "{hook} {k:?}: ours {a:?}, bpftool mapping {b:?}");
        worst = worst.max(d);
    }
    assert!(!theirs.is_empty(), "{hook}: no sample in the hook");
    worst
}

#[test]
#[ignore = "needs root: scripts/test.sh runs it (or as root: cargo test -- --include-ignored)"]
fn annotate_agrees_with_bpftool_linum_on_two_hooks() {
    if !need_root("annotate_agrees_with_bpftool_linum_on_two_hooks") {
        return;
    }
    let _serial = serial();
    let bpftool = bpftool();
    if bpftool.is_none() {
        eprintln!(
            "note: no bpftool that disassembles ($BPFTOOL): the kernel's line arrays stand in"
        );
    }
    for (name, bytes) in [
        ("openat_hook", SAMPLE_HOOK),
        ("every_syscall", HOOK_EVERY_SYSCALL),
    ] {
        let d = open_tempdir();
        let data = d.path().join("perf.data");
        let hook = attach(ObjectSource::Bytes { name, bytes }).unwrap();
        let ids = hook.program_ids();
        let funcs: Vec<Func> = ids
            .iter()
            .flat_map(|&id| match &bpftool {
                Some(b) => bpftool_funcs(b, id),
                None => kernel_funcs(id),
            })
            .collect();
        record(&data, "3");
        drop(hook);
        let worst = compare(name, &ours(&data, &ids), &independent(&data, &funcs));
        eprintln!("{name}: largest difference {worst:.2} points");
    }
}

#[test]
#[ignore = "needs root: scripts/test.sh runs it (or as root: cargo test -- --include-ignored)"]
fn record_files_annotate_as_nobody_with_kptr_restrict() {
    if !need_root("record_files_annotate_as_nobody_with_kptr_restrict") {
        return;
    }
    let _serial = serial();
    let d = open_tempdir();
    std::fs::write(d.path().join("hook.bpf.o"), SAMPLE_HOOK).unwrap();
    let mut c = ebpf_prof(
        &[
            "record",
            "-o",
            "perf.data",
            "--load",
            "hook.bpf.o",
            "-n",
            "100000",
            "-F",
            "4999",
        ],
        d.path(),
    );
    c.env("SUDO_UID", "65534").env("SUDO_GID", "65534");
    let r = run(c);
    assert_eq!(r.code(), Some(0), "{r:?}");
    let mut c = ebpf_prof(&["annotate", "--json", "perf.data"], d.path());
    c.env("SUDO_UID", "65534").env("SUDO_GID", "65534"); // root reads the user's files back
    let as_root = run(c);
    assert_eq!(as_root.code(), Some(0), "{as_root:?}");
    let _restrict = SysctlSet::new("kernel.kptr_restrict", "1");
    let mut c = Command::new("setpriv");
    c.args([
        "--reuid=65534",
        "--regid=65534",
        "--clear-groups",
        env!("CARGO_BIN_EXE_ebpf-prof"),
        "annotate",
        "--json",
        "perf.data",
    ])
    .current_dir(d.path());
    let nobody = run(c);
    assert_eq!(nobody.code(), Some(0), "{nobody:?}");
    assert_eq!(
        nobody.stdout(),
        as_root.stdout(),
        "the same reading as root"
    );
    let v: Value = serde_json::from_str(&nobody.stdout()).unwrap();
    let names: Vec<&str> = v["programs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    assert!(names.contains(&"path_check_callback"), "{names:?}");
    assert!(
        nobody.stdout().contains("bpf_probe_read_user_str"),
        "helpers named from the snapshot"
    );
}

/// `every_syscall` loaded, unloaded and loaded again while perf records the bench: two ids
/// per program, each shown apart and explained. With prog_pack (x86-64, 5.18+) the second load
/// is JIT-ed over (nearly) the first one's place (measured on 6.18: `count_syscall` at
/// 0x…c000078c, then at 0x…c000079c, 87 bytes each), so an address can be either load's: each
/// load, held as long as the other, must get about half of the two loads' samples (a lookup by
/// "highest id" gives the second load nearly all), and the same hottest line (a wrong function
/// start shifts the lines). Recorded per task (no KSYMBOL of the loads: told apart by time
/// against their load_time) and with `-a` (told apart by their KSYMBOL and BPF_EVENT records).
#[test]
#[ignore = "needs root: scripts/test.sh runs it (or as root: cargo test -- --include-ignored)"]
fn a_program_loaded_twice_while_recording_is_shown_per_id() {
    if !need_root("a_program_loaded_twice_while_recording_is_shown_per_id") {
        return;
    }
    let _serial = serial();
    // (-a, the first load before perf starts: its KSYMBOL synthesized, its unload unseen)
    for (all_cpus, first_before) in [(false, false), (true, false), (false, true)] {
        two_loads_apart(all_cpus, first_before);
    }
}

fn two_loads_apart(all_cpus: bool, first_before: bool) {
    let d = open_tempdir();
    let data = d.path().join("perf.data");
    let loads = record_two_loads(&data, all_cpus, first_before);
    let r = run(ebpf_prof(&["annotate", data.to_str().unwrap()], d.path()));
    assert_eq!(r.code(), Some(0), "{r:?}");
    let out = r.stdout();
    for id in loads.iter().flatten() {
        assert!(
            out.contains(&format!("count_syscall (prog id {id}"))
                || out.contains(&format!("drop_syscall (prog id {id}")),
            "prog {id}: {out}"
        );
    }
    assert!(
        out.contains("programs are named count_syscall (ids"),
        "explained: {out}"
    );
    let args = ["annotate", "--json", "--top", "1", data.to_str().unwrap()];
    let v: Value = serde_json::from_str(&run(ebpf_prof(&args, d.path())).stdout()).unwrap();
    let progs = v["programs"].as_array().unwrap();
    let share = |ids: &[u32]| -> f64 {
        progs
            .iter()
            .filter(|p| ids.iter().any(|&id| p["id"] == id))
            .map(|p| p["percent"].as_f64().unwrap())
            .sum()
    };
    let (first, second) = (share(&loads[0]), share(&loads[1]));
    let half = first / (first + second);
    eprintln!("-a {all_cpus}, first before {first_before}: first load {first:.2}%, second {second:.2}%: {half:.2} of the two");
    assert!(
        (0.25..=0.75).contains(&half),
        "each load held 1 s: {first}% vs {second}%: {v}"
    );
    let hottest = |id: u32| {
        let p = progs
            .iter()
            .find(|p| p["id"] == id && p["name"] == "count_syscall");
        p.map(|p| p["lines"][0]["line"].clone())
    };
    let (a, b) = (
        loads[0].iter().find_map(|&i| hottest(i)),
        loads[1].iter().find_map(|&i| hottest(i)),
    );
    assert!(
        a.is_some() && a == b,
        "the same hottest line: {a:?} {b:?}: {v}"
    );
}

/// perf records the bench for 5 s (or every CPU) while `every_syscall` is loaded twice, 1 s
/// each (the first from before perf starts with `first_before`); the program ids of each load. A first load before perf starts takes libbpf's feature probes
/// (cached for the process after), so the two recorded loads meet the same free JIT space:
/// the second then lands on (or next to) the first's place.
fn record_two_loads(data: &Path, all_cpus: bool, first_before: bool) -> Vec<Vec<u32>> {
    let every_syscall = || {
        attach(ObjectSource::Bytes {
            name: "every_syscall",
            bytes: HOOK_EVERY_SYSCALL,
        })
        .unwrap()
    };
    drop(every_syscall());
    // Its JIT space is freed a little later (the kernel frees programs deferred).
    std::thread::sleep(std::time::Duration::from_millis(500));
    let mut loads = Vec::new();
    let mut held = first_before.then(|| noted(every_syscall(), &mut loads));
    let bin = env!("CARGO_BIN_EXE_ebpf-prof");
    let mut perf = Command::new("perf")
        .args([
            "record",
            "-q",
            "-g",
            "-e",
            "cpu-clock:k",
            "-F",
            "4999",
            "-o",
        ])
        .arg(data)
        .args(all_cpus.then_some("-a"))
        .args(["--", "timeout", "5", bin, "bench", "-n", "3000000"])
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    // The holds are timed from the bench's start: perf's own start takes a varying time,
    // which would otherwise all fall into the first load's hold.
    wait_for_grandchild(perf.id(), bin);
    let second = std::time::Duration::from_millis(1000);
    for _ in 0..2 {
        if held.is_none() {
            std::thread::sleep(second);
            held = Some(noted(every_syscall(), &mut loads));
        }
        std::thread::sleep(second);
        drop(held.take());
    }
    perf.wait().unwrap();
    loads
}

/// Wait until a grandchild of `ancestor` (perf, then `timeout`) runs the binary `exe`.
fn wait_for_grandchild(ancestor: u32, exe: &str) {
    let parent_of = |pid: u32| -> Option<u32> {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        let after_name = &stat[stat.rfind(')')? + 2..];
        after_name.split(' ').nth(1)?.parse().ok()
    };
    let runs_exe = |pid: u32| {
        std::fs::read_link(format!("/proc/{pid}/exe")).is_ok_and(|path| path == Path::new(exe))
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while std::time::Instant::now() < deadline {
        let started = std::fs::read_dir("/proc")
            .unwrap()
            .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse::<u32>().ok())
            .any(|pid| runs_exe(pid) && parent_of(pid).and_then(parent_of) == Some(ancestor));
        if started {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    panic!("the bench did not start under perf within 10 s");
}

/// `hook`, its program ids added to `loads`, their addresses printed.
fn noted(hook: ebpf_prof::bpf::Attached, loads: &mut Vec<Vec<u32>>) -> ebpf_prof::bpf::Attached {
    let ids = hook.program_ids();
    let at: Vec<String> = ids
        .iter()
        .map(|&id| format!("{id} at {:x?}", jited_ksyms(id)))
        .collect();
    eprintln!("loaded: {}", at.join(", "));
    loads.push(ids);
    hook
}

/// Each program of the object (the filter left out tail_call_security_check, which the object
/// loaded all the same) gets the clang advice, and nothing about bpftrace.
fn assert_clang_advice_only(out: &str) {
    let notes: Vec<&str> = out
        .lines()
        .filter(|l| {
            (l.contains("enforce_access_…") || l.contains("tail_call_secur…"))
                && l.contains("no line info")
        })
        .collect();
    assert!(!notes.is_empty(), "the note on the program: {out}");
    for note in notes {
        assert!(
            note.contains("add -g to clang") && !note.contains("bpftrace"),
            "a program loaded from an object file gets the clang advice only: {note}"
        );
    }
}

/// A program without line info (the sample hook with its `.BTF.ext` removed, as if built
/// without `-g`): offsets instead of lines, and the advice to add `-g`.
#[test]
#[ignore = "needs root: scripts/test.sh runs it (or as root: cargo test -- --include-ignored)"]
fn a_program_without_line_info_is_shown_by_offsets() {
    if !need_root("a_program_without_line_info_is_shown_by_offsets") {
        return;
    }
    let _serial = serial();
    let d = open_tempdir();
    let full = d.path().join("full.bpf.o");
    std::fs::write(&full, SAMPLE_HOOK).unwrap();
    let strip = Command::new("llvm-objcopy")
        .args(["--remove-section=.BTF.ext"])
        .arg(&full)
        .arg(d.path().join("noline.bpf.o"))
        .status();
    if !matches!(strip, Ok(s) if s.success()) {
        assert!(!under_ci(), "llvm-objcopy is missing under CI: {strip:?}");
        eprintln!("SKIP: no llvm-objcopy");
        return;
    }
    let args = [
        "record",
        "-o",
        "perf.data",
        "--load",
        "noline.bpf.o",
        "-n",
        "100000",
        "-F",
        "4999",
        "--filter",
        "enforce",
    ];
    let r = run(ebpf_prof(&args, d.path()));
    assert_eq!(r.code(), Some(0), "{r:?}");
    let r = run(ebpf_prof(&["annotate", "perf.data", "--asm"], d.path()));
    assert_eq!(r.code(), Some(0), "{r:?}");
    let out = r.stdout();
    assert!(
        out.contains("has no line info") && out.contains("add -g to clang"),
        "{out}"
    );
    assert!(
        out.contains("enforce_access_…:sub1 (prog id"),
        "sub-program named from the program, whose name is marked as cut: {out}"
    );
    assert_clang_advice_only(&out);
    assert!(out.contains("  +0x"), "offsets: {out}");
    assert!(
        out.contains("call 0FFFFFFFF"),
        "--asm shows the call before a return offset: {out}"
    );
}
