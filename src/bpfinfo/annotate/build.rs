//! What `annotate` prints ([`Annotation`], asked by a [`Request`]) and how it is built from
//! per-line weights ([`LineReport`]): shares,
//! names, the `--prog` filter, `--top`, the notes that explain what could not be mapped
//! (no line info, programs of the same name, BPF code without program info), and `--asm`.

use std::collections::{BTreeMap, BTreeSet};
use std::ops::Range;

use anyhow::Result;
use serde::Serialize;

use super::calls::CallNames;
use crate::bpfinfo::source::SampleSource;
use crate::bpfinfo::{disassemble, AddressWeight, BpfInfo, LineCost, LineMapping, LineReport};
use crate::error::usage;
use crate::profile::prognames::ProgramNames;
use crate::runrecord::{Loader, RunRecord};
use crate::stats::pct;

/// A helper, kfunc or other kernel function a line called, with its share.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Helper {
    /// Its symbol (`bpf_probe_read_user_str`).
    pub name: String,
    /// % of all samples' weight spent below the line in it.
    pub percent: f64,
}

/// One JIT-ed instruction of a hot line (`--asm`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AsmInsn {
    /// Offset in the function.
    pub offset: u64,
    /// Intel syntax.
    pub text: String,
    /// % of all samples with the IP at this instruction.
    pub self_percent: f64,
    /// % of all samples in what this instruction called (its return address was on the stack).
    pub call_percent: f64,
    /// For a direct call, what it goes to: `<bpf_get_current_comm>` (a kernel function: a
    /// helper's or kfunc's), `<bpf path_check_callback>` (a BPF function), or
    /// `(unknown target)`; absent for other instructions.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub call_target: Option<String>,
}

/// One source line of a function (or one offset, without line info).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Line {
    /// Source file as clang recorded it.
    pub file: String,
    /// Line number; 0 for code clang gave no line, and without line info.
    pub line: u32,
    /// The source text of the line.
    pub source: String,
    /// Without line info: the offset in the function (`+0x19b`).
    pub offset: Option<String>,
    /// % of all samples' weight with the IP in the line's JIT-ed code.
    pub self_percent: f64,
    /// % of all samples' weight whose innermost BPF frame is in this line.
    pub incl_percent: f64,
    /// The line's inclusive weight over its function's (%).
    pub function_percent: f64,
    /// What it called, heaviest first.
    pub helpers: Vec<Helper>,
    /// Its instructions, with `--asm`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub asm: Option<Vec<AsmInsn>>,
}

/// One BPF function with samples: a program, a sub-program or a tail-called program.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Program {
    /// Its name without `bpf_prog_<tag>_` (the BTF or kernel name).
    pub name: String,
    /// Kernel program id.
    pub id: u32,
    /// Index of the function in the program (0: its main function).
    pub function_index: usize,
    /// Symbol as perf named the frames (`bpf_prog_<tag>_<name>`).
    pub symbol: String,
    /// For a sub-program (BPF-to-BPF call target): the program's main function.
    pub subprogram_of: Option<String>,
    /// % of all samples' weight whose innermost BPF frame is in this function.
    pub percent: f64,
    /// % of all samples' weight with the IP in this function's code.
    pub self_percent: f64,
    /// False when the program was built without `-g` (offsets stand in for lines).
    pub line_info: bool,
    /// Its hottest lines, by inclusive share.
    pub lines: Vec<Line>,
}

/// What `annotate` says about one perf.data.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Annotation {
    /// The version of this document ([`crate::out::JSON_SCHEMA`]).
    pub schema: u32,
    pub input: String,
    /// Sum of all samples' periods.
    pub total_weight: u64,
    /// % of the weight whose innermost BPF frame is in a program the header describes.
    pub bpf_percent: f64,
    /// % of the weight in BPF code the header has no program info for.
    pub unmapped_bpf_percent: f64,
    /// Functions, heaviest first.
    pub programs: Vec<Program>,
    /// What could not be mapped, and why.
    pub notes: Vec<String>,
}

/// What `annotate` is asked.
#[derive(Debug, Clone)]
pub struct Request<'a> {
    /// perf.data, kallsyms snapshot, perf.
    pub source: SampleSource<'a>,
    /// Only functions whose name (or symbol) is this.
    pub prog: Option<String>,
    /// Lines per function.
    pub top: usize,
    /// Disassemble the shown lines.
    pub asm: bool,
}

/// `bpf_prog_<tag>_<name>` → `name`; other symbols as they are.
pub(crate) fn short_name(symbol: &str) -> String {
    crate::host::kallsyms::ProgSymbol::parse(symbol)
        .map_or(symbol, |parts| parts.name)
        .to_string()
}

/// The name a function is shown under: for a main function the recording's name of its
/// program (whole from BTF, or the kernel's marked `…` as cut); else its BTF name; without BTF
/// (perf's `bpf_prog_<tag>_F` or a bare tag) the program's name for the main function,
/// `<name>:sub<N>` for sub-program N. [`ProgramNames`] decides each name.
pub(crate) fn display_name(
    info: &BpfInfo,
    names: &ProgramNames,
    at: (u32, usize),
    symbol: &str,
) -> String {
    let (id, func) = at;
    if let (0, Some(name)) = (func, names.of_id(id)) {
        return name.to_string();
    }
    let short = short_name(symbol);
    if !short.is_empty() && short != "F" && !short.starts_with("bpf_prog_") {
        return names.of_symbol(symbol).unwrap_or(short);
    }
    let prog = info
        .prog(id)
        .map(|prog| names.of_program(id, &prog.name))
        .unwrap_or_default();
    match (func, prog.is_empty()) {
        (_, true) => short,
        (0, false) => prog,
        (_, false) => format!("{prog}:sub{func}"),
    }
}

/// The annotation of `report`, filtered and cut as `req` asks.
pub fn build(info: &BpfInfo, report: &LineReport, req: &Request<'_>) -> Result<Annotation> {
    let total = report.total;
    let record = crate::profile::run_record_quiet(req.source.input);
    let names = ProgramNames::from_record(record.as_ref());
    let mut programs: Vec<Program> = by_function(&report.lines)
        .into_iter()
        .map(|((id, func), lines)| program(info, &names, (id, func), &lines, (total, req.top)))
        .collect();
    programs.sort_by(|left, right| {
        right
            .percent
            .total_cmp(&left.percent)
            .then(left.id.cmp(&right.id))
    });
    let mut notes = notes(info, report, &programs, record.as_ref());
    if let Some(want) = &req.prog {
        let all: BTreeSet<String> = programs.iter().map(|prog| prog.name.clone()).collect();
        programs.retain(|prog| {
            // A name marked as cut is also found by the kernel's 15 bytes, as typed.
            &prog.name == want
                || prog.name.strip_suffix('…') == Some(want.as_str())
                || &prog.symbol == want
                || prog.id.to_string() == *want
        });
        if programs.is_empty() {
            return Err(usage(format!(
                "no sampled BPF function is named {want:?} in {} (sampled: {})",
                req.source.input.display(),
                all.into_iter().collect::<Vec<_>>().join(", ")
            )));
        }
    }
    if report.in_bpf == 0 && report.unknown_bpf == 0 {
        notes.push("no sample is inside a BPF program: was a hook attached and running during the recording? (`ebpf-prof report` says more)".into());
    }
    Ok(Annotation {
        schema: crate::out::JSON_SCHEMA,
        input: req.source.input.display().to_string(),
        total_weight: total,
        bpf_percent: pct(report.in_bpf, total),
        unmapped_bpf_percent: pct(report.unknown_bpf, total),
        programs,
        notes,
    })
}

/// The shown function `(id, func)` of `lines`, its shares of `total` and its `top` lines.
fn program(
    info: &BpfInfo,
    names: &ProgramNames,
    (id, func): (u32, usize),
    lines: &[&LineCost],
    (total, top): (u64, usize),
) -> Program {
    let incl: u64 = lines.iter().map(|line| line.inclusive_weight).sum();
    let selfw: u64 = lines.iter().map(|line| line.self_weight).sum();
    let symbol = lines[0].func_name.clone();
    let main = info
        .prog(id)
        .and_then(|prog| prog.funcs.first())
        .map(|main| display_name(info, names, (id, 0), &main.sym_name));
    let mut rows: Vec<Line> = lines.iter().map(|cost| line(cost, total, incl)).collect();
    rows.sort_by(|left, right| {
        right
            .incl_percent
            .total_cmp(&left.incl_percent)
            .then(right.self_percent.total_cmp(&left.self_percent))
            .then(left.line.cmp(&right.line))
    });
    rows.truncate(top.max(1));
    Program {
        name: display_name(info, names, (id, func), &symbol),
        id,
        function_index: func,
        symbol,
        subprogram_of: (func > 0).then_some(main).flatten(),
        percent: pct(incl, total),
        self_percent: pct(selfw, total),
        line_info: has_lines(info, id),
        lines: rows,
    }
}

fn line(cost: &LineCost, total: u64, func_total: u64) -> Line {
    Line {
        file: basename(&cost.file).to_string(),
        line: cost.line,
        source: cost.text.trim().to_string(),
        offset: cost.offset.map(|offset| format!("+{offset:#x}")),
        self_percent: pct(cost.self_weight, total),
        incl_percent: pct(cost.inclusive_weight, total),
        function_percent: pct(cost.inclusive_weight, func_total),
        helpers: cost
            .callees
            .iter()
            .map(|(name, weight)| Helper {
                name: name.clone(),
                percent: pct(*weight, total),
            })
            .collect(),
        asm: None,
    }
}

/// The file name without its directories (clang records the path it was given).
pub(crate) fn basename(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

/// What the reader should know: functions without line info, names shared by several
/// programs (the same object loaded twice, or reloaded during the recording), BPF code perf
/// stored no program info for.
fn notes(
    info: &BpfInfo,
    report: &LineReport,
    programs: &[Program],
    record: Option<&RunRecord>,
) -> Vec<String> {
    let mut notes = Vec::new();
    let mut told = BTreeSet::new();
    for prog in programs
        .iter()
        .filter(|prog| !prog.line_info && told.insert(prog.id))
    {
        let btf = info.prog(prog.id).is_some_and(|p| p.btf_id != 0);
        notes.push(no_lines(prog, loaded_by(record, prog.id), btf));
    }
    let mut ids: BTreeMap<&str, BTreeSet<u32>> = BTreeMap::new();
    for prog in programs {
        ids.entry(&prog.name).or_default().insert(prog.id);
    }
    for (name, ids) in ids.iter().filter(|(_, ids)| ids.len() > 1) {
        let list: Vec<String> = ids.iter().map(u32::to_string).collect();
        notes.push(format!(
            "{} programs are named {name} (ids {}): shown apart by id; the same object loaded more than once, or unloaded and loaded again during the recording",
            ids.len(),
            list.join(", ")
        ));
    }
    if pct(report.unknown_bpf, report.total) >= 0.01 {
        notes.push(format!(
            "{:.2}% of the samples are in BPF code the perf.data header has no program info for (a program perf could not read when it was loaded): not mapped to lines",
            pct(report.unknown_bpf, report.total)
        ));
    }
    let _ = info;
    notes
}

/// Who loaded program `id`, as far as the recording says.
fn loaded_by(record: Option<&RunRecord>, id: u32) -> Loader {
    record.map_or(Loader::Other, |r| r.programs_from.loader_of(id))
}

/// The note on a program without line info. Only a program `record` loaded from an object
/// file is known to come from clang; bpftrace and other loaders get what is true of the
/// program and where to read which loaders give lines, never advice about clang.
pub(crate) fn no_lines(prog: &Program, from: Loader, btf: bool) -> String {
    let (name, id) = (&prog.name, prog.id);
    match (from, btf) {
        (Loader::ObjectFile, _) => format!(
            "{name} (id {id}) has no line info: its code is shown as offsets (+0x19b). Its object file was built without it: add -g to clang's command line (clang -O2 -g -target bpf …) to see source lines"
        ),
        (Loader::Other, false) => format!(
            "{name} (id {id}) carries no BTF, so no line info: its code is shown as offsets (+0x19b), and `annotate --asm` shows the instructions at each. Its loader gave the kernel none (bpftrace before 0.20 loads its programs so; docs/annotate.md says which loaders give source lines)"
        ),
        (Loader::Other, true) => format!(
            "{name} (id {id}) carries BTF but no line info: its code is shown as offsets (+0x19b), and `annotate --asm` shows the instructions at each. Its loader gave the kernel no lines (bpftrace 0.20 to 0.23 loads its programs so; docs/annotate.md says which loaders give source lines)"
        ),
    }
}

/// `--asm`: the JIT-ed instructions of each shown line, with their shares and the targets of
/// their calls named from `calls`.
pub(crate) fn add_asm(
    annotation: &mut Annotation,
    info: &BpfInfo,
    by_ip: &BTreeMap<u64, AddressWeight>,
    (arch, total): (Option<&str>, u64),
    calls: &CallNames,
) {
    let arch = arch.unwrap_or(std::env::consts::ARCH);
    for shown in &mut annotation.programs {
        let Some(prog) = info.prog(shown.id) else {
            continue;
        };
        let func_index = shown.function_index;
        let func = &prog.funcs[func_index];
        let Some(code) = prog.func_code(func_index) else {
            continue;
        };
        let insns = match disassemble(code, func.addr, arch) {
            Ok(insns) => insns,
            Err(err) => {
                annotation.notes.push(format!("--asm: {err}"));
                return;
            }
        };
        for row in &mut shown.lines {
            let ranges = line_ranges(info, prog.id, func_index, row);
            let weight_at = |addr: u64| by_ip.get(&addr).copied().unwrap_or_default();
            let asm = insns
                .iter()
                .filter(|insn| {
                    let end = insn.addr + insn.len as u64;
                    ranges
                        .iter()
                        .any(|range| range.start < end && insn.addr < range.end)
                })
                .map(|insn| AsmInsn {
                    offset: insn.addr - func.addr,
                    text: insn.text.clone(),
                    self_percent: pct(weight_at(insn.addr).at_ip, total),
                    // A call's time is charged to the instruction it returns to, the next.
                    call_percent: pct(weight_at(insn.addr + insn.len as u64).returning, total),
                    call_target: insn.call_target.map(|to| calls.target(to).label()),
                })
                .collect();
            row.asm = Some(asm);
        }
    }
}

/// The JIT address ranges of a shown line (one instruction's worth for an offset row).
fn line_ranges(info: &BpfInfo, id: u32, func_index: usize, row: &Line) -> Vec<Range<u64>> {
    let Some(prog) = info.prog(id) else {
        return Vec::new();
    };
    let func = &prog.funcs[func_index];
    if let Some(offset) = row
        .offset
        .as_deref()
        .and_then(|text| u64::from_str_radix(text.trim_start_matches("+0x"), 16).ok())
    {
        let start = func.addr + offset.saturating_sub(1);
        return std::iter::once(start..func.addr + offset + 1).collect();
    }
    (0..func.lines.len())
        .filter(|&index| {
            func.lines[index].line() == row.line
                && info
                    .source_line(prog, func_index, index)
                    .file
                    .ends_with(&row.file)
        })
        .map(|index| crate::bpfinfo::entry_range(func, index))
        .collect()
}

/// Lines grouped by `(prog id, func index)`, in report order.
pub(crate) fn by_function(lines: &[LineCost]) -> BTreeMap<(u32, usize), Vec<&LineCost>> {
    let mut grouped: BTreeMap<(u32, usize), Vec<&LineCost>> = BTreeMap::new();
    for line in lines {
        grouped
            .entry((line.prog_id, line.func_index))
            .or_default()
            .push(line);
    }
    grouped
}

/// Whether a program's functions have usable line info.
pub(crate) fn has_lines(info: &BpfInfo, id: u32) -> bool {
    info.prog(id)
        .is_some_and(|prog| prog.line_mapping != LineMapping::Absent && prog.has_line_addresses())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runrecord::ProgramsFrom;

    fn program(name: &str) -> Program {
        Program {
            name: name.into(),
            id: 7,
            function_index: 0,
            symbol: String::new(),
            subprogram_of: None,
            percent: 1.0,
            self_percent: 1.0,
            line_info: false,
            lines: Vec::new(),
        }
    }

    /// Only a program `record` loaded from an object file gets the clang advice; one another
    /// loader loaded (bpftrace) gets what is true of it.
    #[test]
    fn the_note_without_lines_fits_who_loaded_the_program() {
        let prog = program("sys_enter_opena…");
        let object = no_lines(&prog, Loader::ObjectFile, false);
        assert!(object.contains("add -g to clang"), "{object}");
        for btf in [false, true] {
            let other = no_lines(&prog, Loader::Other, btf);
            assert!(!other.contains("clang"), "{other}");
            assert!(
                other.starts_with("sys_enter_opena… (id 7) carries "),
                "{other}"
            );
            assert!(other.contains("docs/annotate.md"), "{other}");
            let btf_said = other.contains("carries BTF but no line info");
            assert_eq!(btf_said, btf, "{other}");
        }
        let mut record: RunRecord = serde_json::from_str(include_str!(
            "../../../fixtures/perf-data/bpftrace-cut.data.json"
        ))
        .unwrap();
        assert_eq!(loaded_by(Some(&record), 17226), Loader::Other, "bpftrace's");
        record.programs_from = ProgramsFrom::ObjectFile { ids: vec![7, 9] };
        assert_eq!(loaded_by(Some(&record), 7), Loader::ObjectFile);
        assert_eq!(loaded_by(Some(&record), 9), Loader::ObjectFile);
        assert_eq!(loaded_by(Some(&record), 8), Loader::Other);
        assert_eq!(loaded_by(None, 7), Loader::Other);
        let json = serde_json::to_value(&record.programs_from).unwrap();
        assert_eq!(
            json,
            serde_json::json!({"kind": "object_file", "ids": [7, 9]})
        );
    }
}
