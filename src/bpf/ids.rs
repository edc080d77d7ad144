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

/// A program's `bpf_prog_info`, the ids of the maps it uses and the addresses of its JIT-ed
/// functions (the program, then its sub-functions: each has a `bpf_prog_<tag>_<name>` symbol).
pub(crate) struct ProgInfo {
    pub(crate) info: libbpf_sys::bpf_prog_info,
    pub(crate) map_ids: Vec<u32>,
    pub(crate) jited_ksyms: Vec<u64>,
}

/// `bpf_prog_get_info_by_fd`, twice when `with_arrays`: once for the number of map ids and
/// JIT-ed functions, once with arrays that size.
pub(crate) fn prog_info(fd: BorrowedFd<'_>, with_arrays: bool) -> anyhow::Result<ProgInfo> {
    let info = prog_info_raw(fd, &mut [], &mut [])?;
    if !with_arrays || info.nr_map_ids == 0 && info.nr_jited_ksyms == 0 {
        return Ok(ProgInfo {
            info,
            map_ids: Vec::new(),
            jited_ksyms: Vec::new(),
        });
    }
    let mut map_ids = vec![0u32; info.nr_map_ids as usize];
    let mut jited_ksyms = vec![0u64; info.nr_jited_ksyms as usize];
    let info = prog_info_raw(fd, &mut map_ids, &mut jited_ksyms)?;
    // A program can gain maps (BPF_PROG_BIND_MAP) between the calls: keep what fitted.
    map_ids.truncate(info.nr_map_ids as usize);
    jited_ksyms.truncate(info.nr_jited_ksyms as usize);
    Ok(ProgInfo {
        info,
        map_ids,
        jited_ksyms,
    })
}

fn prog_info_raw(
    fd: BorrowedFd<'_>,
    map_ids: &mut [u32],
    jited_ksyms: &mut [u64],
) -> anyhow::Result<libbpf_sys::bpf_prog_info> {
    let mut info = libbpf_sys::bpf_prog_info {
        nr_map_ids: map_ids.len() as u32,
        map_ids: map_ids.as_mut_ptr() as u64,
        nr_jited_ksyms: jited_ksyms.len() as u32,
        jited_ksyms: jited_ksyms.as_mut_ptr() as u64,
        ..Default::default()
    };
    let mut len = std::mem::size_of::<libbpf_sys::bpf_prog_info>() as u32;
    // SAFETY: `info` is sized `len`; the only output arrays requested are `map_ids` and
    // `jited_ksyms`, whose lengths are `nr_map_ids` and `nr_jited_ksyms` (the kernel writes at
    // most that many entries). The kernel zeroes addresses it hides from this reader.
    let ret = unsafe { libbpf_sys::bpf_prog_get_info_by_fd(fd.as_raw_fd(), &mut info, &mut len) };
    if ret < 0 {
        return Err(syscall_error("reading bpf_prog_info", -ret));
    }
    Ok(info)
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
    let rec = std::mem::size_of::<libbpf_sys::bpf_func_info>() as u32;
    let mut query = libbpf_sys::bpf_prog_info {
        nr_func_info: 1,
        func_info_rec_size: rec,
        func_info: func.as_mut_ptr() as u64,
        ..Default::default()
    };
    let mut len = std::mem::size_of::<libbpf_sys::bpf_prog_info>() as u32;
    // SAFETY: `query` is sized `len`; the only output array requested is `func`, one record of
    // `func_info_rec_size` bytes (the kernel writes at most `nr_func_info` records of that size).
    let ret = unsafe { libbpf_sys::bpf_prog_get_info_by_fd(fd.as_raw_fd(), &mut query, &mut len) };
    if ret < 0 || query.func_info_rec_size != rec {
        return None;
    }
    btf_type_name(query.btf_id, func[0].type_id)
}

/// The name of type `type_id` in the kernel's BTF object `btf_id`, read through libbpf.
fn btf_type_name(btf_id: u32, type_id: u32) -> Option<String> {
    // SAFETY: libbpf returns an owned BTF object or NULL (errno set); it is freed below and not
    // used after. The type and name pointers point into that object and are copied out before
    // the free; each is checked for NULL.
    unsafe {
        let btf = libbpf_sys::btf__load_from_kernel_by_id(btf_id);
        if btf.is_null() {
            return None;
        }
        let t = libbpf_sys::btf__type_by_id(btf, type_id);
        let name = if t.is_null() {
            std::ptr::null()
        } else {
            libbpf_sys::btf__name_by_offset(btf, (*t).name_off)
        };
        let out = (!name.is_null())
            .then(|| {
                std::ffi::CStr::from_ptr(name)
                    .to_string_lossy()
                    .into_owned()
            })
            .filter(|n| !n.is_empty());
        libbpf_sys::btf__free(btf);
        out
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
