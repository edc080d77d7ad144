//! BTF blobs: read from the kernel by id, and parsed by hand in either byte order. This is the
//! one reader of BTF in the tool. `bpf::ids` names programs with it, and `bpfinfo` reads the
//! BTF a perf.data carries (feature 26) with it.
//!
//! A raw blob is what `btf__raw_data()` returns and what perf stores: a 24-byte
//! `struct btf_header` (`include/uapi/linux/btf.h`), then the type and string sections at
//! offsets relative to the header's end. Two things are needed from a program's BTF: the names
//! of FUNC types, which the functions' `func_info[].type_id` point at, and strings by offset,
//! for the file names and source text of `line_info`. Types are variable-length, so they are
//! walked once from id 1, with the trailing bytes per kind as libbpf's `btf_type_size()` adds
//! them. An unknown kind stops the walk, and the types before it stay usable. Every string
//! read is bounds-checked. The unit tests are in `bpfinfo/btf_tests.rs`, beside the builders of
//! BTF bytes they use.

use std::borrow::Cow;
use std::fmt;
use std::ops::Range;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use libbpf_rs::libbpf_sys;

const BTF_MAGIC: u16 = 0xeb9f;
const HEADER_LEN: usize = 24;
const TYPE_LEN: usize = 12;
/// `BTF_KIND_FUNC`.
pub(crate) const KIND_FUNC: u32 = 12;

/// A BTF blob that cannot be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BtfError {
    /// The BTF object's id.
    pub btf_id: u32,
    /// Why it cannot be read.
    pub reason: String,
}

impl fmt::Display for BtfError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "BTF {}: {}", self.btf_id, self.reason)
    }
}

impl std::error::Error for BtfError {}

/// The byte order of a blob, told by where its magic's bytes are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ByteOrder {
    Little,
    Big,
}

/// The u32 at `off` of `data`, if all four bytes are there.
fn u32_at(data: &[u8], off: usize, order: ByteOrder) -> Option<u32> {
    let bytes: [u8; 4] = data.get(off..off.checked_add(4)?)?.try_into().ok()?;
    Some(match order {
        ByteOrder::Little => u32::from_le_bytes(bytes),
        ByteOrder::Big => u32::from_be_bytes(bytes),
    })
}

/// One parsed BTF blob.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Btf {
    /// BTF object id (as in `bpf_prog_info.btf_id`).
    pub id: u32,
    data: Vec<u8>,
    order: ByteOrder,
    strings: Range<usize>,
    /// Offset in `data` of each type; index 0 is type id 1.
    types: Vec<usize>,
    /// Why the type walk stopped early, if it did.
    walk_stopped: Option<String>,
}

impl Btf {
    /// Parses a raw BTF blob (what `btf__raw_data()` returns) in either byte order.
    pub fn parse(id: u32, data: Vec<u8>) -> Result<Btf, BtfError> {
        let bad = |reason: String| BtfError { btf_id: id, reason };
        let magic = data.get(..2).unwrap_or_default();
        let order = if magic == BTF_MAGIC.to_le_bytes() {
            ByteOrder::Little
        } else if magic == BTF_MAGIC.to_be_bytes() {
            ByteOrder::Big
        } else {
            return Err(bad(format!("no BTF magic in {} bytes", data.len())));
        };
        let field = |off| u32_at(&data, off, order).ok_or_else(|| bad("truncated header".into()));
        let header_len = field(4)? as usize;
        if header_len < HEADER_LEN || header_len > data.len() {
            return Err(bad(format!(
                "header length {header_len} in {} bytes",
                data.len()
            )));
        }
        let types = section(data.len(), header_len, field(8)?, field(12)?)
            .ok_or_else(|| bad("type section out of bounds".into()))?;
        let strings = section(data.len(), header_len, field(16)?, field(20)?)
            .ok_or_else(|| bad("string section out of bounds".into()))?;
        if !strings.is_empty() && (data[strings.start] != 0 || data[strings.end - 1] != 0) {
            return Err(bad("string section does not start and end with NUL".into()));
        }
        let (offsets, walk_stopped) = walk_types(&data, order, types);
        Ok(Btf {
            id,
            data,
            order,
            strings,
            types: offsets,
            walk_stopped,
        })
    }

    /// The NUL-terminated string at `off` of the string section; `None` if `off` is outside it.
    pub fn string(&self, off: u32) -> Option<Cow<'_, str>> {
        let table = self.data.get(self.strings.clone())?;
        let rest = table.get(off as usize..)?;
        let end = rest.iter().position(|&byte| byte == 0)?;
        Some(String::from_utf8_lossy(&rest[..end]))
    }

    /// Number of types the walk found (ids 1 ..= this).
    pub fn type_count(&self) -> u32 {
        self.types.len() as u32
    }

    /// Why the type walk stopped before the end of the type section, if it did.
    pub fn walk_stopped(&self) -> Option<&str> {
        self.walk_stopped.as_deref()
    }

    /// `(kind, name_off)` of type `id`.
    pub fn type_kind_name(&self, id: u32) -> Option<(u32, u32)> {
        let at = *self.types.get((id as usize).checked_sub(1)?)?;
        let info = u32_at(&self.data, at + 4, self.order)?;
        Some(((info >> 24) & 0x1f, u32_at(&self.data, at, self.order)?))
    }

    /// The name of type `id` if it is a FUNC (what `func_info[].type_id` points at).
    pub fn func_name(&self, id: u32) -> Option<Cow<'_, str>> {
        match self.type_kind_name(id)? {
            (KIND_FUNC, name_off) => self.string(name_off),
            _ => None,
        }
    }
}

/// `off..off+len` of a blob of `blob_len` bytes, relative to the header's end, if it is
/// inside the blob.
fn section(blob_len: usize, header_len: usize, off: u32, len: u32) -> Option<Range<usize>> {
    let start = header_len.checked_add(off as usize)?;
    let end = start.checked_add(len as usize)?;
    (end <= blob_len).then_some(start..end)
}

/// Offsets of the types in `range`, and why the walk stopped early (unknown kind, truncated).
fn walk_types(data: &[u8], order: ByteOrder, range: Range<usize>) -> (Vec<usize>, Option<String>) {
    let mut offsets = Vec::new();
    let mut at = range.start;
    while at < range.end {
        let Some(info) = u32_at(data, at + 4, order).filter(|_| at + TYPE_LEN <= range.end) else {
            return (offsets, Some(format!("truncated type at {at}")));
        };
        let Some(extra) = trailing_bytes(info) else {
            let why = format!(
                "unknown kind {} at type id {}",
                (info >> 24) & 0x1f,
                offsets.len() + 1
            );
            return (offsets, Some(why));
        };
        offsets.push(at);
        at += TYPE_LEN + extra;
    }
    if at > range.end {
        return (offsets, Some("last type runs past the type section".into()));
    }
    (offsets, None)
}

/// Bytes after the 12-byte `struct btf_type` for its kind (libbpf `btf_type_size`).
fn trailing_bytes(info: u32) -> Option<usize> {
    let vlen = (info & 0xffff) as usize;
    match (info >> 24) & 0x1f {
        2 | 7..=12 | 16 | 18 => Some(0),
        1 | 14 | 17 => Some(4),
        3 => Some(12),
        4 | 5 | 15 | 19 => Some(vlen * 12),
        6 | 13 => Some(vlen * 8),
        _ => None,
    }
}

/// The raw blob of the kernel's BTF object `id`, as `btf__raw_data()` would give it
/// (`BPF_BTF_GET_FD_BY_ID`, then `BPF_OBJ_GET_INFO_BY_FD` for its size and its bytes).
pub(crate) fn raw_from_kernel(id: u32) -> Result<Vec<u8>, BtfError> {
    let bad = |what: &str| BtfError {
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
    btf_info(&fd, &mut info).map_err(|()| bad("reading BTF info"))?;
    let mut data = vec![0u8; info.btf_size as usize];
    let size = info.btf_size;
    info = libbpf_sys::bpf_btf_info {
        btf: data.as_mut_ptr() as u64,
        btf_size: size,
        ..Default::default()
    };
    btf_info(&fd, &mut info).map_err(|()| bad("reading BTF data"))?;
    data.truncate(info.btf_size.min(size) as usize);
    Ok(data)
}

fn btf_info(fd: &OwnedFd, info: &mut libbpf_sys::bpf_btf_info) -> Result<(), ()> {
    let mut len = std::mem::size_of::<libbpf_sys::bpf_btf_info>() as u32;
    // SAFETY: `info` is a valid bpf_btf_info of `len` bytes; when `info.btf` is set it points
    // at a live buffer of `info.btf_size` bytes.
    let ret = unsafe { libbpf_sys::bpf_btf_get_info_by_fd(fd.as_raw_fd(), info, &mut len) };
    match ret {
        0 => Ok(()),
        _ => Err(()),
    }
}

/// The name of FUNC type `type_id` in the kernel's BTF object `btf_id`; `None` when the
/// object cannot be read or the type is not a named FUNC.
pub(crate) fn kernel_func_name(btf_id: u32, type_id: u32) -> Option<String> {
    let btf = Btf::parse(btf_id, raw_from_kernel(btf_id).ok()?).ok()?;
    let name = btf.func_name(type_id)?.into_owned();
    (!name.is_empty()).then_some(name)
}
