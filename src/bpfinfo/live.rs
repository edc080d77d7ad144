//! The same program info and BTF, read from the running kernel instead of perf.data: through
//! libbpf-rs (`query::ProgInfoIter` with every array included, which is
//! `bpf_prog_get_info_by_fd` in `kernel/bpf/syscall.c`) and, for BTF, `BPF_BTF_GET_FD_BY_ID`
//! plus `BPF_OBJ_GET_INFO_BY_FD` (`kernel/bpf/btf.c: btf_get_info_by_fd`), which hands out
//! the raw blob perf stores in feature 26. Needs root (CAP_SYS_ADMIN, and kernel addresses
//! are zeroed unless `bpf_dump_raw_ok`).

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use libbpf_rs::libbpf_sys;
use libbpf_rs::query::{ProgInfoIter, ProgInfoQueryOptions, ProgramInfo};

use super::btf::{Btf, BtfSet};
use super::model::{ProgParts, RawFuncInfo, RawLineInfo};
use super::{BpfInfo, BpfInfoError, ProgInfo};

/// The content of a libbpf-rs `ProgramInfo` as [`ProgParts`].
pub fn parts_from_libbpf(info: &ProgramInfo) -> ProgParts {
    ProgParts {
        id: info.id,
        prog_type: info.ty as u32,
        tag: info.tag.0,
        name: info.name.to_string_lossy().into_owned(),
        btf_id: info.btf_id,
        jited_ksyms: info.jited_ksyms.iter().map(|&p| p as u64).collect(),
        jited_func_lens: info.jited_func_lens.clone(),
        prog_tags: info.prog_tags.iter().map(|t| t.0).collect(),
        func_info: info
            .func_info
            .iter()
            .map(|f| RawFuncInfo {
                insn_off: f.insn_off,
                type_id: f.type_id,
            })
            .collect(),
        line_info: info
            .line_info
            .iter()
            .map(|l| RawLineInfo {
                insn_off: l.insn_off,
                file_name_off: l.file_name_off,
                line_off: l.line_off,
                line_col: (l.line_num << 10) | (l.line_col & 0x3ff),
            })
            .collect(),
        jited_line_info: info.jited_line_info.iter().map(|&p| p as u64).collect(),
        jited_insns: info.jited_prog_insns.clone(),
        problems: Vec::new(),
    }
}

/// The loaded programs among `ids` (all of them when `ids` is empty), with every array.
pub fn prog_infos(ids: &[u32]) -> Vec<ProgInfo> {
    let opts = ProgInfoQueryOptions::default().include_all();
    ProgInfoIter::with_query_opts(opts)
        .filter(|p| ids.is_empty() || ids.contains(&p.id))
        .map(|p| ProgInfo::from_parts(parts_from_libbpf(&p)))
        .collect()
}

/// The raw BTF blob of BTF object `id`, as `btf__raw_data()` would give it.
pub fn btf_blob(id: u32) -> Result<Vec<u8>, BpfInfoError> {
    let bad = |what: &str| BpfInfoError::BadBtf {
        btf_id: id,
        reason: format!("{what}: {}", std::io::Error::last_os_error()),
    };
    // SAFETY: plain syscall wrapper; a non-negative return is a new fd we own.
    let fd = unsafe { libbpf_sys::bpf_btf_get_fd_by_id(id) };
    if fd < 0 {
        return Err(bad("opening BTF"));
    }
    // SAFETY: `fd` was just returned to us and is not owned elsewhere.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    let mut info = libbpf_sys::bpf_btf_info::default();
    btf_info(&fd, &mut info).map_err(|_| bad("reading BTF info"))?;
    let mut data = vec![0u8; info.btf_size as usize];
    let size = info.btf_size;
    info = libbpf_sys::bpf_btf_info {
        btf: data.as_mut_ptr() as u64,
        btf_size: size,
        ..Default::default()
    };
    btf_info(&fd, &mut info).map_err(|_| bad("reading BTF data"))?;
    data.truncate(info.btf_size.min(size) as usize);
    Ok(data)
}

fn btf_info(fd: &OwnedFd, info: &mut libbpf_sys::bpf_btf_info) -> Result<(), ()> {
    let mut len = std::mem::size_of::<libbpf_sys::bpf_btf_info>() as u32;
    // SAFETY: `info` is a valid bpf_btf_info of `len` bytes; when `info.btf` is set it points
    // at a live buffer of `info.btf_size` bytes.
    let ret = unsafe { libbpf_sys::bpf_btf_get_info_by_fd(fd.as_raw_fd(), info, &mut len) };
    if ret == 0 {
        Ok(())
    } else {
        Err(())
    }
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
            Err(err) => btfs.problems.push(err),
        }
    }
    BpfInfo::new(progs, btfs)
}

/// The name of FUNC type `type_id` in the loaded BTF object `btf_id` (a program's main
/// function: `func_info[0].type_id`), as bpftool and /proc/kallsyms name programs.
pub fn btf_func_name(btf_id: u32, type_id: u32) -> Option<String> {
    let btf = Btf::parse(btf_id, btf_blob(btf_id).ok()?).ok()?;
    btf.func_name(type_id).map(|n| n.into_owned())
}
