//! Kernel BPF objects by id: walking the program ids, opening an id, and reading
//! `bpf_prog_info` / `bpf_map_info`. This is what `bpftool prog show` and `bpftool map show` do.
//!
//! Ids are global and never reused while the object lives, but an object can go away between
//! seeing its id and opening it: [`open_prog`] and [`open_map`] return `Ok(None)` then.

use std::ffi::CStr;
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};

use libbpf_rs::libbpf_sys;

use crate::error::usage;

/// Every loaded program's id, ascending (`BPF_PROG_GET_NEXT_ID` from 0 until ENOENT).
pub(crate) fn all_prog_ids() -> anyhow::Result<Vec<u32>> {
    let mut ids = Vec::new();
    let mut id = 0;
    loop {
        let mut next = 0;
        // SAFETY: `next` is a valid u32 to write to.
        match unsafe { libbpf_sys::bpf_prog_get_next_id(id, &mut next) } {
            0 => ids.push(next),
            ret if -ret == libc::ENOENT => return Ok(ids),
            ret => return Err(syscall_error("listing BPF programs", -ret)),
        }
        id = next;
    }
}

/// Ids of the BPF links (kernel link objects: `bpftool link show`) whose program is one of
/// `progs`. Attachments made without a link object (perf events on kernels before 5.15, the
/// legacy ioctl) are not seen: their detach is the perf event's close.
pub(crate) fn links_to(progs: &[u32]) -> anyhow::Result<Vec<u32>> {
    let mut found = Vec::new();
    let mut id = 0;
    loop {
        let mut next = 0;
        // SAFETY: `next` is a valid u32 to write to.
        match unsafe { libbpf_sys::bpf_link_get_next_id(id, &mut next) } {
            0 => {}
            ret if -ret == libc::ENOENT => return Ok(found),
            ret => return Err(syscall_error("listing BPF links", -ret)),
        }
        id = next;
        // SAFETY: plain syscall wrapper; a non-negative return is a new fd we own.
        let fd = unsafe { libbpf_sys::bpf_link_get_fd_by_id(id) };
        let Some(fd) = owned_or_absent(fd, &format!("opening BPF link {id}"))? else {
            continue; // released since it was listed
        };
        let mut info = libbpf_sys::bpf_link_info::default();
        let mut len = std::mem::size_of::<libbpf_sys::bpf_link_info>() as u32;
        // SAFETY: `info` is a zeroed bpf_link_info of `len` bytes, no output arrays asked for.
        let ret =
            unsafe { libbpf_sys::bpf_link_get_info_by_fd(fd.as_raw_fd(), &mut info, &mut len) };
        if ret == 0 && progs.contains(&info.prog_id) {
            found.push(id);
        }
    }
}

/// An fd for program `id`; `Ok(None)` if no such program is loaded (any more).
pub(crate) fn open_prog(id: u32) -> anyhow::Result<Option<OwnedFd>> {
    // SAFETY: plain syscall wrapper; a non-negative return is a new fd we own.
    let fd = unsafe { libbpf_sys::bpf_prog_get_fd_by_id(id) };
    owned_or_absent(fd, &format!("opening BPF program {id}"))
}

/// A read-only fd for map `id` (`BPF_F_RDONLY`: the kernel refuses updates and deletes
/// through it, so reading cannot modify the map); `Ok(None)` if the map is gone.
pub(crate) fn open_map(id: u32) -> anyhow::Result<Option<OwnedFd>> {
    let opts = libbpf_sys::bpf_get_fd_by_id_opts {
        sz: std::mem::size_of::<libbpf_sys::bpf_get_fd_by_id_opts>() as libbpf_sys::size_t,
        open_flags: libbpf_sys::BPF_F_RDONLY,
        ..Default::default()
    };
    // SAFETY: `opts` is a valid, sized options struct; a non-negative return is ours.
    let fd = unsafe { libbpf_sys::bpf_map_get_fd_by_id_opts(id, &opts) };
    owned_or_absent(fd, &format!("opening BPF map {id}"))
}

fn owned_or_absent(ret: i32, what: &str) -> anyhow::Result<Option<OwnedFd>> {
    if ret >= 0 {
        // SAFETY: libbpf returned a fresh fd that nothing else owns.
        return Ok(Some(unsafe { OwnedFd::from_raw_fd(ret) }));
    }
    if -ret == libc::ENOENT {
        return Ok(None);
    }
    Err(syscall_error(what, -ret))
}

/// A program's `bpf_prog_info` with the arrays asked for ([`Arrays`]); an array not asked for
/// is empty. This is the one reader of `bpf_prog_info`: `bpftool prog show` asks for the map
/// ids and the addresses of the JIT-ed functions, and the line info readers for every array,
/// as perf does when it records a program (`perf_event__synthesize_one_bpf_prog`).
pub(crate) struct ProgInfo {
    pub(crate) info: libbpf_sys::bpf_prog_info,
    pub(crate) map_ids: Vec<u32>,
    /// The address of each JIT-ed function: the program, then its sub-functions. Each has a
    /// `bpf_prog_<tag>_<name>` symbol.
    pub(crate) jited_ksyms: Vec<u64>,
    pub(crate) jited_func_lens: Vec<u32>,
    pub(crate) prog_tags: Vec<[u8; 8]>,
    pub(crate) func_info: Vec<libbpf_sys::bpf_func_info>,
    pub(crate) line_info: Vec<libbpf_sys::bpf_line_info>,
    pub(crate) jited_line_info: Vec<u64>,
    pub(crate) jited_insns: Vec<u8>,
}

/// Which of a program's arrays [`prog_info_with`] asks the kernel for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Arrays {
    /// None: `bpf_prog_info` alone.
    Nothing,
    /// The map ids and the addresses of the JIT-ed functions.
    MapsAndFunctions,
    /// Every array, the JIT-ed code and the line info included.
    All,
}

/// `bpf_prog_get_info_by_fd`, twice when `with_arrays`: once for the number of map ids and
/// JIT-ed functions, once with arrays that size.
pub(crate) fn prog_info(fd: BorrowedFd<'_>, with_arrays: bool) -> anyhow::Result<ProgInfo> {
    let arrays = match with_arrays {
        true => Arrays::MapsAndFunctions,
        false => Arrays::Nothing,
    };
    prog_info_with(fd, arrays)
}

/// `bpf_prog_get_info_by_fd` once for the sizes of the arrays, then, when any asked for is not
/// empty, once more with buffers that size.
pub(crate) fn prog_info_with(fd: BorrowedFd<'_>, arrays: Arrays) -> anyhow::Result<ProgInfo> {
    // SAFETY: the query asks for no array.
    let sizes = unsafe { query_prog_info(fd, libbpf_sys::bpf_prog_info::default()) }?;
    let mut out = ProgInfo::sized(sizes, arrays);
    if out.is_empty() {
        return Ok(out);
    }
    let query = out.query();
    // SAFETY: every array pointer of `query` points at one of `out`'s buffers, which hold as
    // many records of the kernel's record size as `query` counts, and `out` outlives the call.
    let info = unsafe { query_prog_info(fd, query) }?;
    Ok(out.keep(info))
}

impl ProgInfo {
    /// Empty buffers of the sizes `sizes` gives, for the arrays asked for. An array whose
    /// records the kernel sizes otherwise than the UAPI this was built with is left empty.
    fn sized(sizes: libbpf_sys::bpf_prog_info, arrays: Arrays) -> ProgInfo {
        let some = |count: u32| match arrays {
            Arrays::Nothing => 0,
            Arrays::MapsAndFunctions | Arrays::All => count as usize,
        };
        let all = |count: u32| match arrays {
            Arrays::All => count as usize,
            Arrays::Nothing | Arrays::MapsAndFunctions => 0,
        };
        let fits = |kernel: u32, ours: usize, count: u32| match kernel as usize == ours {
            true => count,
            false => 0,
        };
        let func_records = fits(sizes.func_info_rec_size, FUNC_INFO_SIZE, sizes.nr_func_info);
        let line_records = fits(sizes.line_info_rec_size, LINE_INFO_SIZE, sizes.nr_line_info);
        let jited_lines = fits(sizes.jited_line_info_rec_size, 8, sizes.nr_jited_line_info);
        ProgInfo {
            info: sizes,
            map_ids: vec![0; some(sizes.nr_map_ids)],
            jited_ksyms: vec![0; some(sizes.nr_jited_ksyms)],
            jited_func_lens: vec![0; all(sizes.nr_jited_func_lens)],
            prog_tags: vec![[0; 8]; all(sizes.nr_prog_tags)],
            func_info: vec![Default::default(); all(func_records)],
            line_info: vec![Default::default(); all(line_records)],
            jited_line_info: vec![0; all(jited_lines)],
            jited_insns: vec![0; all(sizes.jited_prog_len)],
        }
    }

    /// Whether there is no array to ask the kernel for.
    fn is_empty(&self) -> bool {
        self.map_ids.is_empty()
            && self.jited_ksyms.is_empty()
            && self.jited_func_lens.is_empty()
            && self.prog_tags.is_empty()
            && self.func_info.is_empty()
            && self.line_info.is_empty()
            && self.jited_line_info.is_empty()
            && self.jited_insns.is_empty()
    }

    /// The query that has the kernel fill these buffers.
    fn query(&mut self) -> libbpf_sys::bpf_prog_info {
        let len = |count: usize| count as u32;
        libbpf_sys::bpf_prog_info {
            nr_map_ids: len(self.map_ids.len()),
            map_ids: self.map_ids.as_mut_ptr() as u64,
            nr_jited_ksyms: len(self.jited_ksyms.len()),
            jited_ksyms: self.jited_ksyms.as_mut_ptr() as u64,
            nr_jited_func_lens: len(self.jited_func_lens.len()),
            jited_func_lens: self.jited_func_lens.as_mut_ptr() as u64,
            nr_prog_tags: len(self.prog_tags.len()),
            prog_tags: self.prog_tags.as_mut_ptr() as u64,
            func_info_rec_size: len(FUNC_INFO_SIZE),
            nr_func_info: len(self.func_info.len()),
            func_info: self.func_info.as_mut_ptr() as u64,
            line_info_rec_size: len(LINE_INFO_SIZE),
            nr_line_info: len(self.line_info.len()),
            line_info: self.line_info.as_mut_ptr() as u64,
            jited_line_info_rec_size: 8,
            nr_jited_line_info: len(self.jited_line_info.len()),
            jited_line_info: self.jited_line_info.as_mut_ptr() as u64,
            jited_prog_len: len(self.jited_insns.len()),
            jited_prog_insns: self.jited_insns.as_mut_ptr() as u64,
            ..Default::default()
        }
    }

    /// The info of the second call, and of each array what the kernel filled in: a program
    /// can gain maps (`BPF_PROG_BIND_MAP`) between the calls, so keep what fitted.
    fn keep(mut self, info: libbpf_sys::bpf_prog_info) -> ProgInfo {
        self.map_ids.truncate(info.nr_map_ids as usize);
        self.jited_ksyms.truncate(info.nr_jited_ksyms as usize);
        self.jited_func_lens
            .truncate(info.nr_jited_func_lens as usize);
        self.prog_tags.truncate(info.nr_prog_tags as usize);
        self.func_info.truncate(info.nr_func_info as usize);
        self.line_info.truncate(info.nr_line_info as usize);
        self.jited_line_info
            .truncate(info.nr_jited_line_info as usize);
        self.jited_insns.truncate(info.jited_prog_len as usize);
        self.info = info;
        self
    }
}

/// The size of a `struct bpf_func_info` record.
const FUNC_INFO_SIZE: usize = std::mem::size_of::<libbpf_sys::bpf_func_info>();
/// The size of a `struct bpf_line_info` record.
const LINE_INFO_SIZE: usize = std::mem::size_of::<libbpf_sys::bpf_line_info>();

/// One `bpf_prog_get_info_by_fd` call with `query`, which says which arrays to fill.
///
/// # Safety
/// Every array pointer of `query` whose count is not 0 must point at a buffer that lives
/// through the call and holds that many records of the record size `query` gives, or of the
/// array's element type where `query` gives none: the kernel writes at most that much.
unsafe fn query_prog_info(
    fd: BorrowedFd<'_>,
    mut query: libbpf_sys::bpf_prog_info,
) -> anyhow::Result<libbpf_sys::bpf_prog_info> {
    let mut len = std::mem::size_of::<libbpf_sys::bpf_prog_info>() as u32;
    // SAFETY: `query` is sized `len`; its arrays are as the caller promises. The kernel zeroes
    // addresses it hides from this reader.
    let ret = unsafe { libbpf_sys::bpf_prog_get_info_by_fd(fd.as_raw_fd(), &mut query, &mut len) };
    if ret < 0 {
        return Err(syscall_error("reading bpf_prog_info", -ret));
    }
    Ok(query)
}

/// The program's full name: its main function's name in its BTF, as `bpftool prog show` and
/// `/proc/kallsyms` give it. The kernel's own copy ([`object_name`]) is cut to 15 bytes, and
/// programs such as `tracepoint__syscalls__sys_enter_open` and `…_sys_enter_openat` (opensnoop)
/// share it. `None` without BTF (the caller keeps the short name).
pub(crate) fn full_name(fd: BorrowedFd<'_>, info: &libbpf_sys::bpf_prog_info) -> Option<String> {
    if info.btf_id == 0 || info.nr_func_info == 0 {
        return None;
    }
    let mut func = [libbpf_sys::bpf_func_info::default()];
    let query = libbpf_sys::bpf_prog_info {
        nr_func_info: 1,
        func_info_rec_size: FUNC_INFO_SIZE as u32,
        func_info: func.as_mut_ptr() as u64,
        ..Default::default()
    };
    // SAFETY: the only array asked for is `func`, one record of `func_info_rec_size` bytes.
    let answer = unsafe { query_prog_info(fd, query) }.ok()?;
    if answer.func_info_rec_size as usize != FUNC_INFO_SIZE {
        return None;
    }
    super::btf::kernel_func_name(answer.btf_id, func[0].type_id)
}

/// The longest name the kernel keeps for a program (`BPF_OBJ_NAME_LEN` less its NUL).
pub(crate) const KERNEL_NAME_MAX: usize = 15;

/// The kernel's copy of a name as shown when there is no BTF to give the whole one: with a
/// trailing `…` when it fills the kernel's 15 bytes, so a reader knows it may be cut
/// (`sys_enter_opena…`).
pub fn marked_if_cut(kernel_name: &str) -> String {
    match kernel_name.len() >= KERNEL_NAME_MAX {
        true => format!("{kernel_name}…"),
        false => kernel_name.to_string(),
    }
}

/// `bpf_map_get_info_by_fd`.
pub(crate) fn map_info(fd: BorrowedFd<'_>) -> anyhow::Result<libbpf_sys::bpf_map_info> {
    let mut info = libbpf_sys::bpf_map_info::default();
    let mut len = std::mem::size_of::<libbpf_sys::bpf_map_info>() as u32;
    // SAFETY: `info` is a zeroed bpf_map_info of `len` bytes; no output arrays.
    let ret = unsafe { libbpf_sys::bpf_map_get_info_by_fd(fd.as_raw_fd(), &mut info, &mut len) };
    if ret < 0 {
        return Err(syscall_error("reading bpf_map_info", -ret));
    }
    Ok(info)
}

/// The kernel's copy of an object name: NUL-terminated, cut to 15 bytes.
pub(crate) fn object_name(raw: &[std::ffi::c_char; 16]) -> String {
    let bytes: Vec<u8> = raw
        .iter()
        .take_while(|&&c| c != 0)
        .map(|&c| c as u8)
        .collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

/// A program tag as 16 hex digits, as in `/proc/kallsyms`' `bpf_prog_<tag>_<name>`.
pub(crate) fn hex_tag(tag: &[u8; 8]) -> String {
    crate::host::notes::hex(tag)
}

/// libbpf's name for a program type (`tracepoint`, `lsm`, …, as bpftool prints them).
pub(crate) fn prog_type_name(kind: u32) -> String {
    // SAFETY: libbpf returns a static string or NULL for types it does not know.
    let name = unsafe { libbpf_sys::libbpf_bpf_prog_type_str(kind) };
    static_str(name).unwrap_or_else(|| format!("type {kind}"))
}

/// libbpf's name for a map type (`hash`, `lru_hash`, `array`, …).
pub(crate) fn map_type_name(kind: u32) -> String {
    // SAFETY: as for `prog_type_name`.
    let name = unsafe { libbpf_sys::libbpf_bpf_map_type_str(kind) };
    static_str(name).unwrap_or_else(|| format!("type {kind}"))
}

fn static_str(ptr: *const std::ffi::c_char) -> Option<String> {
    if ptr.is_null() {
        return None;
    }
    // SAFETY: non-NULL pointers from libbpf's type tables are static C strings.
    Some(
        unsafe { CStr::from_ptr(ptr) }
            .to_string_lossy()
            .into_owned(),
    )
}

/// A failed bpf() call; EPERM says to run as root.
pub(crate) fn syscall_error(what: &str, errno: i32) -> anyhow::Error {
    if errno == libc::EPERM {
        return usage(format!(
            "{what} needs root (CAP_SYS_ADMIN): run ebpf-prof with sudo"
        ));
    }
    anyhow::anyhow!("{what} failed: {}", io::Error::from_raw_os_error(errno))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_stop_at_the_nul_and_tags_are_hex() {
        let mut raw = [0 as std::ffi::c_char; 16];
        for (slot, byte) in raw.iter_mut().zip(b"tail_call_secur") {
            *slot = *byte as std::ffi::c_char;
        }
        assert_eq!(object_name(&raw), "tail_call_secur");
        assert_eq!(
            hex_tag(&[0x13, 0x07, 0xad, 0xe3, 0, 1, 0xa1, 0x09]),
            "1307ade30001a109"
        );
    }

    #[test]
    fn a_name_that_fills_the_kernels_bytes_is_marked_cut() {
        assert_eq!(marked_if_cut("sys_enter_opena"), "sys_enter_opena…");
        assert_eq!(marked_if_cut("handle_exec"), "handle_exec");
        assert_eq!(marked_if_cut(""), "");
    }

    #[test]
    fn type_names_are_libbpfs() {
        assert_eq!(
            prog_type_name(libbpf_sys::BPF_PROG_TYPE_TRACEPOINT),
            "tracepoint"
        );
        assert_eq!(prog_type_name(libbpf_sys::BPF_PROG_TYPE_LSM), "lsm");
        assert_eq!(map_type_name(libbpf_sys::BPF_MAP_TYPE_LRU_HASH), "lru_hash");
        assert_eq!(
            map_type_name(libbpf_sys::BPF_MAP_TYPE_PERCPU_ARRAY),
            "percpu_array"
        );
        assert_eq!(map_type_name(9999), "type 9999");
    }

    #[test]
    fn permission_errors_say_sudo() {
        let err = syscall_error("listing BPF programs", libc::EPERM);
        assert!(err.to_string().contains("run ebpf-prof with sudo"), "{err}");
        assert_eq!(crate::error::exit_code(&err), 2);
    }
}
