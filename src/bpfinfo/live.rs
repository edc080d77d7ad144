//! The same program info and BTF, read from the running kernel instead of perf.data, so that
//! tests can hold the two readings against each other. The program info comes from
//! [`crate::bpf::ids`], asking for every array as perf does when it records a program; the BTF
//! blob from `BPF_BTF_GET_FD_BY_ID` and `BPF_OBJ_GET_INFO_BY_FD` (`btf_get_info_by_fd` in the
//! kernel's `kernel/bpf/btf.c`), which hand out the raw blob perf stores in feature 26. Needs
//! root: CAP_SYS_ADMIN, and kernel addresses are zeroed unless `bpf_dump_raw_ok`.

use std::os::fd::AsFd;

use super::btf::{Btf, BtfError, BtfSet};
use super::model::{ProgParts, RawFuncInfo, RawLineInfo};
use super::{BpfInfo, ProgInfo};
use crate::bpf::ids::{self, Arrays};

/// What the kernel tells of a program, as [`ProgParts`].
fn parts_from_kernel(prog: ids::ProgInfo) -> ProgParts {
    let info = &prog.info;
    ProgParts {
        id: info.id,
        prog_type: info.type_,
        tag: info.tag,
        name: ids::object_name(&info.name),
        btf_id: info.btf_id,
        load_time: info.load_time,
        jited_ksyms: prog.jited_ksyms,
        jited_func_lens: prog.jited_func_lens,
        prog_tags: prog.prog_tags,
        func_info: prog
            .func_info
            .iter()
            .map(|func| RawFuncInfo {
                insn_off: func.insn_off,
                type_id: func.type_id,
            })
            .collect(),
        line_info: prog
            .line_info
            .iter()
            .map(|line| RawLineInfo {
                insn_off: line.insn_off,
                file_name_off: line.file_name_off,
                line_off: line.line_off,
                line_col: line.line_col,
            })
            .collect(),
        jited_line_info: prog.jited_line_info,
        jited_insns: prog.jited_insns,
        problems: Vec::new(),
    }
}

/// The loaded programs among `ids` (all of them when `ids` is empty), with every array, in
/// the order of their ids. A program that goes away or cannot be read is left out.
pub(crate) fn prog_infos(ids: &[u32]) -> Vec<ProgInfo> {
    let mut wanted = match ids.is_empty() {
        true => ids::all_prog_ids().unwrap_or_default(),
        false => ids.to_vec(),
    };
    wanted.sort_unstable();
    wanted.dedup();
    wanted
        .into_iter()
        .filter_map(|id| {
            let fd = ids::open_prog(id).ok()??;
            let prog = ids::prog_info_with(fd.as_fd(), Arrays::All).ok()?;
            Some(ProgInfo::from_parts(parts_from_kernel(prog)))
        })
        .collect()
}

/// The raw BTF blob of BTF object `id`, as `btf__raw_data()` would give it.
pub fn btf_blob(id: u32) -> Result<Vec<u8>, BtfError> {
    crate::bpf::btf::raw_from_kernel(id)
}

/// The programs among `ids` (all when empty) and their BTF, from the running kernel; a BTF
/// that cannot be read is noted in `btfs.problems`.
pub fn bpf_info(ids: &[u32]) -> BpfInfo {
    let progs = prog_infos(ids);
    let mut btfs = BtfSet::default();
    let mut btf_ids: Vec<u32> = progs
        .iter()
        .map(|p| p.btf_id)
        .filter(|&id| id != 0)
        .collect();
    btf_ids.sort_unstable();
    btf_ids.dedup();
    for id in btf_ids {
        match btf_blob(id).and_then(|data| Btf::parse(id, data)) {
            Ok(btf) => btfs.insert(btf),
            Err(err) => btfs.problems.push(err.into()),
        }
    }
    BpfInfo::new(progs, btfs)
}
