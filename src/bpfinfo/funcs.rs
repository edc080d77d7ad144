//! From [`ProgParts`] to [`ProgInfo`]: the functions with their addresses, tags, code and
//! line info. The counts must agree as libbpf's `bpf_prog_linfo__new` and perf's
//! `perf_event__synthesize_one_bpf_prog` in `bpf-event.c` require them to: `nr_jited_ksyms`,
//! `nr_jited_func_lens` and `nr_prog_tags` are equal, `nr_func_info` is 0 or the same, and
//! `nr_jited_line_info` equals `nr_line_info`. Names follow perf's `synthesize_bpf_prog_name()`.

use std::ops::Range;

use super::btf::BtfSet;
use super::model::{FuncInfo, LineEntry, LineMapping, ProgParts, RawLineInfo};
use super::split::{addresses_fit, dissect_jited, split_by_insn_off};
use super::{BpfInfoError, ProgInfo};
use crate::host::kallsyms::prog_symbol;

impl ProgInfo {
    /// Builds the model from the raw content of a `bpf_prog_info`, checking its counts; what
    /// does not add up is left out and said in `problems`. Names are perf's names without
    /// BTF until [`ProgInfo::resolve_names`].
    pub fn from_parts(mut parts: ProgParts) -> ProgInfo {
        let mut problems = std::mem::take(&mut parts.problems);
        let mut funcs = functions(&parts, &mut problems);
        let line_mapping = assign_lines(&parts, &mut funcs, &mut problems);
        let mut prog = ProgInfo {
            id: parts.id,
            prog_type: parts.prog_type,
            tag: parts.tag,
            name: parts.name,
            btf_id: parts.btf_id,
            load_time: parts.load_time,
            funcs,
            line_mapping,
            jited_insns: parts.jited_insns,
            problems,
        };
        prog.resolve_names(&BtfSet::default());
        prog
    }

    /// Names every function as perf's `synthesize_bpf_prog_name()` does: `bpf_prog_<tag of
    /// the function>` then `_<BTF FUNC name>` when the program's BTF is in `btfs`, else
    /// `_<kernel name>` for a single-function program (nothing if that name is empty), else
    /// `_F`. A function without its own tag (`prog_tags` missing) uses the program's.
    pub fn resolve_names(&mut self, btfs: &BtfSet) {
        let btf = btfs.get(self.btf_id);
        let single = self.funcs.len() == 1;
        for func in &mut self.funcs {
            func.btf_name = match (btf, func.func_info) {
                (Some(btf), Some(fi)) => btf.func_name(fi.type_id).map(|n| n.into_owned()),
                _ => None,
            };
            let suffix = match (&func.btf_name, single) {
                (Some(name), _) => Some(name.as_str()),
                (None, true) if self.name.is_empty() => None,
                (None, true) => Some(self.name.as_str()),
                (None, false) => Some("F"),
            };
            func.sym_name = prog_symbol(&func.tag.unwrap_or(self.tag), suffix);
        }
    }
}

fn mismatch(id: u32, what: String) -> BpfInfoError {
    BpfInfoError::CountMismatch { prog_id: id, what }
}

/// The functions, if `jited_ksyms` and `jited_func_lens` agree; tags, func_info and code
/// are attached only when their counts agree too.
fn functions(parts: &ProgParts, problems: &mut Vec<BpfInfoError>) -> Vec<FuncInfo> {
    let count = parts.jited_ksyms.len();
    let id = parts.id;
    if parts.jited_func_lens.len() != count {
        let what = format!(
            "{count} jited_ksyms, {} jited_func_lens",
            parts.jited_func_lens.len()
        );
        problems.push(mismatch(id, what));
        return Vec::new();
    }
    let tags_ok = parts.prog_tags.len() == count;
    if !tags_ok && count > 0 {
        problems.push(mismatch(
            id,
            format!("{count} functions, {} prog_tags", parts.prog_tags.len()),
        ));
    }
    let finfo_ok = parts.func_info.len() == count;
    if !finfo_ok && !parts.func_info.is_empty() {
        problems.push(mismatch(
            id,
            format!("{count} functions, {} func_info", parts.func_info.len()),
        ));
    }
    let code = code_ranges(parts, problems);
    (0..count)
        .map(|index| FuncInfo {
            addr: parts.jited_ksyms[index],
            len: parts.jited_func_lens[index],
            tag: parts.prog_tags.get(index).copied().filter(|_| tags_ok),
            func_info: parts.func_info.get(index).copied().filter(|_| finfo_ok),
            btf_name: None,
            sym_name: String::new(),
            lines: Vec::new(),
            code: code.get(index).cloned(),
        })
        .collect()
}

/// Each function's bytes in `jited_insns` (the kernel copies them back to back), when the
/// lengths add up to what is there.
fn code_ranges(parts: &ProgParts, problems: &mut Vec<BpfInfoError>) -> Vec<Range<usize>> {
    if parts.jited_insns.is_empty() {
        return Vec::new();
    }
    let total: u64 = parts.jited_func_lens.iter().map(|&l| u64::from(l)).sum();
    if total != parts.jited_insns.len() as u64 {
        let what = format!(
            "jited_prog_len {}, sum of jited_func_lens {total}",
            parts.jited_insns.len()
        );
        problems.push(mismatch(parts.id, what));
        return Vec::new();
    }
    let mut start = 0;
    let lens = parts.jited_func_lens.iter().map(|&l| l as usize);
    lens.map(|len| {
        start += len;
        start - len..start
    })
    .collect()
}

/// Distributes the line info over the functions, with JIT addresses when they check out.
fn assign_lines(
    parts: &ProgParts,
    funcs: &mut [FuncInfo],
    problems: &mut Vec<BpfInfoError>,
) -> LineMapping {
    let bad = |reason: String| BpfInfoError::BadLineInfo {
        prog_id: parts.id,
        reason,
    };
    if parts.line_info.is_empty() || funcs.is_empty() {
        return LineMapping::Absent;
    }
    let jited = &parts.jited_line_info;
    match (split_by_addr(parts), split_by_insn(parts, funcs)) {
        (Ok(by_addr), Ok(by_insn)) if by_addr != by_insn => {
            problems.push(bad(format!(
                "JIT-address split {by_addr:?} differs from insn_off split {by_insn:?}"
            )));
            fill(funcs, &parts.line_info, Some(jited), &by_addr);
            LineMapping::JitedAddresses
        }
        (Ok(by_addr), _) => {
            fill(funcs, &parts.line_info, Some(jited), &by_addr);
            LineMapping::JitedAddresses
        }
        (Err(why), Ok(by_insn)) => {
            problems.push(bad(why));
            let fits = jited.len() == parts.line_info.len()
                && addresses_fit(&parts.jited_ksyms, &parts.jited_func_lens, jited, &by_insn);
            fill(
                funcs,
                &parts.line_info,
                fits.then_some(jited.as_slice()),
                &by_insn,
            );
            if fits {
                LineMapping::InsnOffsets
            } else {
                LineMapping::NoAddresses
            }
        }
        (Err(by_addr), Err(by_insn)) => {
            problems.push(bad(format!("{by_addr}; and by insn_off: {by_insn}")));
            LineMapping::Absent
        }
    }
}

type Split = Result<Vec<std::ops::Range<usize>>, String>;

/// The line info split per function by JIT addresses (libbpf's `dissect_jited_func`).
fn split_by_addr(parts: &ProgParts) -> Split {
    let jited = &parts.jited_line_info;
    if jited.len() != parts.line_info.len() {
        return Err(format!(
            "{} jited_line_info for {} line_info",
            jited.len(),
            parts.line_info.len()
        ));
    }
    dissect_jited(&parts.jited_ksyms, &parts.jited_func_lens, jited)
}

/// The line info split per function by `func_info[].insn_off`.
fn split_by_insn(parts: &ProgParts, funcs: &[FuncInfo]) -> Split {
    let funcs_info: Vec<_> = funcs.iter().filter_map(|f| f.func_info).collect();
    if funcs_info.len() == funcs.len() {
        split_by_insn_off(&funcs_info, &parts.line_info)
    } else if funcs.len() == 1 {
        Ok(std::iter::once(0..parts.line_info.len()).collect())
    } else {
        Err("no func_info for the functions".to_string())
    }
}

/// Gives function f the entries in `ranges[f]`, with their addresses if `jited` is given.
fn fill(
    funcs: &mut [FuncInfo],
    lines: &[RawLineInfo],
    jited: Option<&[u64]>,
    ranges: &[Range<usize>],
) {
    for (func, range) in funcs.iter_mut().zip(ranges) {
        func.lines = range
            .clone()
            .filter_map(|index| {
                let raw = *lines.get(index)?;
                let addr = jited.and_then(|a| a.get(index).copied());
                Some(LineEntry { raw, addr })
            })
            .collect();
    }
}
