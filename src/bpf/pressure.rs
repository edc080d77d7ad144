//! How full a BPF map is: type, capacity and the number of elements in it, read from user space
//! without changing the map.
//!
//! A full `hash` map refuses new keys (`bpf_map_update_elem` returns -E2BIG) and an `lru_hash`
//! map evicts silently: the hook's cache stops working and its cost jumps. The kernel keeps no
//! element count a user can read, so the elements are counted: by `BPF_MAP_LOOKUP_BATCH` for
//! hash maps (Linux 5.6+), else by walking the keys with `BPF_MAP_GET_NEXT_KEY`. Maps are
//! opened read-only (`BPF_F_RDONLY`), so the kernel itself refuses any write through our fd,
//! and neither call touches an LRU map's reference bits. Batch lookups hold each bucket's lock
//! for a moment: read pressure between measurements, not during them.
//!
//! A count is a snapshot: while programs insert and delete, a key walk may see an element
//! twice or miss one (it restarts when its key was deleted), so counts are capped at
//! `max_entries`. Compare with `bpftool map dump id N | tail -1`.

use std::os::fd::{AsFd, AsRawFd, BorrowedFd};
use std::ptr;

use libbpf_rs::libbpf_sys;

use super::ids;
use crate::error::usage;

/// Largest buffer of values one batch call may fill.
const BATCH_BYTES: usize = 4 << 20;
/// Most elements per batch call.
const BATCH_ELEMS: usize = 256;
/// The kernel's ENOTSUPP (524), which bpf() returns for maps without an operation.
const ENOTSUPP: i32 = 524;

/// One map's fill level.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct MapPressure {
    /// Kernel map id.
    pub id: u32,
    /// The kernel's copy of the name, cut to 15 bytes.
    pub name: String,
    /// The map type as libbpf and bpftool spell it: `hash`, `lru_hash`, `array`, ….
    pub map_type: String,
    /// Capacity.
    pub max_entries: u32,
    /// Elements in the map when `counted`. Array kinds (`array`, `percpu_array`, `prog_array`,
    /// …) always hold `max_entries` slots and are not counted: `entries` is `max_entries`.
    /// Maps without keys to walk (ring buffers, queues, bloom filters, storage maps) read 0.
    pub entries: u64,
    /// Whether `entries` was counted element by element.
    pub counted: bool,
}

impl MapPressure {
    /// A counted map at capacity: a `hash` map now refuses new keys, an LRU map evicts.
    pub fn is_full(&self) -> bool {
        self.counted && self.entries >= u64::from(self.max_entries)
    }
}

/// The fill level of each map in `map_ids`, in that order, never modifying them.
/// A map that is not loaded is an error naming its id.
pub fn map_pressure(map_ids: &[u32]) -> anyhow::Result<Vec<MapPressure>> {
    map_ids.iter().map(|&id| one_map(id)).collect()
}

fn one_map(id: u32) -> anyhow::Result<MapPressure> {
    let fd = ids::open_map(id)?.ok_or_else(|| {
        usage(format!(
            "BPF map {id} does not exist (any more): list maps with bpftool map show"
        ))
    })?;
    let info = ids::map_info(fd.as_fd())?;
    let (entries, counted) = if is_array_kind(info.type_) {
        (u64::from(info.max_entries), false)
    } else {
        match count_entries(fd.as_fd(), &info) {
            Ok(Some(count)) => (count, true),
            Ok(None) => (0, false),
            Err(errno) => {
                let what = format!("counting the elements of map {id}");
                return Err(ids::syscall_error(&what, errno));
            }
        }
    };
    Ok(MapPressure {
        id,
        name: ids::object_name(&info.name),
        map_type: ids::map_type_name(info.type_),
        max_entries: info.max_entries,
        entries,
        counted,
    })
}

/// Maps whose every slot exists from creation on.
fn is_array_kind(kind: u32) -> bool {
    matches!(
        kind,
        libbpf_sys::BPF_MAP_TYPE_ARRAY
            | libbpf_sys::BPF_MAP_TYPE_PERCPU_ARRAY
            | libbpf_sys::BPF_MAP_TYPE_PROG_ARRAY
            | libbpf_sys::BPF_MAP_TYPE_PERF_EVENT_ARRAY
            | libbpf_sys::BPF_MAP_TYPE_CGROUP_ARRAY
            | libbpf_sys::BPF_MAP_TYPE_ARRAY_OF_MAPS
    )
}

fn is_hash_kind(kind: u32) -> bool {
    matches!(
        kind,
        libbpf_sys::BPF_MAP_TYPE_HASH
            | libbpf_sys::BPF_MAP_TYPE_PERCPU_HASH
            | libbpf_sys::BPF_MAP_TYPE_LRU_HASH
            | libbpf_sys::BPF_MAP_TYPE_LRU_PERCPU_HASH
            | libbpf_sys::BPF_MAP_TYPE_HASH_OF_MAPS
    )
}

fn is_percpu(kind: u32) -> bool {
    matches!(
        kind,
        libbpf_sys::BPF_MAP_TYPE_PERCPU_HASH | libbpf_sys::BPF_MAP_TYPE_LRU_PERCPU_HASH
    )
}

/// `Ok(None)` for maps whose keys cannot be walked; `Err(errno)` when a call fails otherwise.
fn count_entries(fd: BorrowedFd<'_>, info: &libbpf_sys::bpf_map_info) -> Result<Option<u64>, i32> {
    let key_size = info.key_size as usize;
    if key_size == 0 {
        return Ok(None); // queues, stacks, bloom filters: no keys
    }
    let limit = u64::from(info.max_entries);
    if is_hash_kind(info.type_) {
        match count_by_batch(fd, key_size, value_bytes(info)) {
            Ok(count) => return Ok(Some(count.min(limit))),
            Err(errno) if unsupported(errno) || errno == libc::ENOSPC => {}
            Err(errno) => return Err(errno),
        }
    }
    match count_by_keys(fd, key_size, limit) {
        Ok(count) => Ok(Some(count)),
        Err(errno) if unsupported(errno) => Ok(None),
        Err(errno) => Err(errno),
    }
}

fn unsupported(errno: i32) -> bool {
    matches!(errno, libc::EINVAL | libc::EOPNOTSUPP | ENOTSUPP)
}

/// Bytes one element's value takes in a lookup buffer (per-CPU maps return one 8-byte-aligned
/// value per possible CPU).
fn value_bytes(info: &libbpf_sys::bpf_map_info) -> usize {
    let size = info.value_size as usize;
    if !is_percpu(info.type_) {
        return size.max(1);
    }
    // SAFETY: no arguments; libbpf reads /sys/devices/system/cpu/possible once.
    let cpus = unsafe { libbpf_sys::libbpf_num_possible_cpus() }.max(1) as usize;
    size.next_multiple_of(8) * cpus
}

/// Elements returned by successive `BPF_MAP_LOOKUP_BATCH` calls until ENOENT.
fn count_by_batch(fd: BorrowedFd<'_>, key_size: usize, value_size: usize) -> Result<u64, i32> {
    let chunk = (BATCH_BYTES / value_size).clamp(1, BATCH_ELEMS);
    let mut keys = vec![0u8; key_size * chunk];
    let mut values = vec![0u8; value_size * chunk];
    // Opaque resume tokens: a bucket index for hash maps, a key for others.
    let mut token_in = vec![0u8; key_size.max(8)];
    let mut token_out = vec![0u8; key_size.max(8)];
    let opts = libbpf_sys::bpf_map_batch_opts {
        sz: std::mem::size_of::<libbpf_sys::bpf_map_batch_opts>() as libbpf_sys::size_t,
        ..Default::default()
    };
    let mut total = 0u64;
    let mut first = true;
    loop {
        let mut count = chunk as u32;
        let resume = if first {
            ptr::null_mut()
        } else {
            token_in.as_mut_ptr().cast()
        };
        // SAFETY: `keys` and `values` hold `count` elements of their sizes, the tokens are
        // at least as large as the kernel's, and `opts` is a valid, sized options struct.
        let ret = unsafe {
            libbpf_sys::bpf_map_lookup_batch(
                fd.as_raw_fd(),
                resume,
                token_out.as_mut_ptr().cast(),
                keys.as_mut_ptr().cast(),
                values.as_mut_ptr().cast(),
                &mut count,
                &opts,
            )
        };
        // On ENOENT (the end), `count` holds the last partial batch.
        if ret == 0 || -ret == libc::ENOENT {
            total += u64::from(count);
        }
        match ret {
            0 => {}
            ret if -ret == libc::ENOENT => return Ok(total),
            ret => return Err(-ret),
        }
        std::mem::swap(&mut token_in, &mut token_out);
        first = false;
    }
}

/// Keys seen walking the map with `BPF_MAP_GET_NEXT_KEY`, at most `limit`.
/// Digests (FNV-1a, 64 bit) of the keys of map `id`, walked from user space with a read-only fd
/// (the map is never modified): enough to tell how many keys changed between two reads (the
/// churn of an LRU map). `None` for maps without keys to walk.
pub fn key_digests(id: u32) -> anyhow::Result<Option<Vec<u64>>> {
    let Some(fd) = ids::open_map(id)? else {
        return Ok(None);
    };
    let info = ids::map_info(fd.as_fd())?;
    let key_size = info.key_size as usize;
    if key_size == 0 || is_array_kind(info.type_) {
        return Ok(None);
    }
    let mut out = Vec::new();
    let walked = walk_keys(fd.as_fd(), key_size, u64::from(info.max_entries), |key| {
        out.push(key.iter().fold(0xcbf2_9ce4_8422_2325u64, |hash, byte| {
            (hash ^ u64::from(*byte)).wrapping_mul(0x0100_0000_01b3)
        }));
    });
    match walked {
        Ok(_) => Ok(Some(out)),
        Err(errno) if unsupported(errno) => Ok(None),
        Err(errno) => Err(ids::syscall_error(
            &format!("walking the keys of map {id}"),
            errno,
        )),
    }
}

/// The most PROG_ARRAY slots read when looking for tail-call targets.
const MAX_PROG_ARRAY_SLOTS: u32 = 1 << 16;

/// The ids of the programs that the tail-call tables (`PROG_ARRAY` maps) among `map_ids` hold,
/// read with read-only fds: from user space a slot reads as its program's id. Maps that are
/// gone are skipped.
pub fn tail_call_targets(map_ids: &[u32]) -> anyhow::Result<std::collections::BTreeSet<u32>> {
    let mut out = std::collections::BTreeSet::new();
    for &id in map_ids {
        let Some(fd) = ids::open_map(id)? else {
            continue;
        };
        let info = ids::map_info(fd.as_fd())?;
        if info.type_ != libbpf_sys::BPF_MAP_TYPE_PROG_ARRAY || info.value_size != 4 {
            continue;
        }
        for slot in 0..info.max_entries.min(MAX_PROG_ARRAY_SLOTS) {
            let mut prog: u32 = 0;
            // SAFETY: a 4-byte key and a 4-byte value buffer, as the map's sizes say.
            let ret = unsafe {
                libbpf_sys::bpf_map_lookup_elem(
                    fd.as_raw_fd(),
                    (&raw const slot).cast(),
                    (&raw mut prog).cast(),
                )
            };
            if ret == 0 {
                out.insert(prog);
            }
        }
    }
    Ok(out)
}

fn count_by_keys(fd: BorrowedFd<'_>, key_size: usize, limit: u64) -> Result<u64, i32> {
    walk_keys(fd, key_size, limit, |_| {})
}

/// Call `each` with every key (at most `limit`); returns how many.
fn walk_keys(
    fd: BorrowedFd<'_>,
    key_size: usize,
    limit: u64,
    mut each: impl FnMut(&[u8]),
) -> Result<u64, i32> {
    let mut key = vec![0u8; key_size];
    let mut next = vec![0u8; key_size];
    let mut count = 0u64;
    loop {
        let current = if count == 0 {
            ptr::null()
        } else {
            key.as_ptr().cast()
        };
        // SAFETY: `key` and `next` are `key_size` bytes, the map's key size.
        let ret = unsafe {
            libbpf_sys::bpf_map_get_next_key(fd.as_raw_fd(), current, next.as_mut_ptr().cast())
        };
        match ret {
            0 => {
                count += 1;
                each(&next);
            }
            ret if -ret == libc::ENOENT => return Ok(count),
            ret => return Err(-ret),
        }
        if count >= limit {
            return Ok(count); // a walk restarted by deletions would not end
        }
        std::mem::swap(&mut key, &mut next);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn array_kinds_are_not_counted_and_hash_kinds_are() {
        assert!(is_array_kind(libbpf_sys::BPF_MAP_TYPE_PERCPU_ARRAY));
        assert!(!is_array_kind(libbpf_sys::BPF_MAP_TYPE_HASH));
        assert!(is_hash_kind(libbpf_sys::BPF_MAP_TYPE_LRU_HASH));
        assert!(!is_hash_kind(libbpf_sys::BPF_MAP_TYPE_LPM_TRIE));
    }

    #[test]
    fn percpu_values_take_one_aligned_slot_per_cpu() {
        let info = libbpf_sys::bpf_map_info {
            type_: libbpf_sys::BPF_MAP_TYPE_PERCPU_HASH,
            value_size: 12,
            ..Default::default()
        };
        // SAFETY: no arguments.
        let cpus = unsafe { libbpf_sys::libbpf_num_possible_cpus() } as usize;
        assert_eq!(value_bytes(&info), 16 * cpus);
        let plain = libbpf_sys::bpf_map_info {
            type_: libbpf_sys::BPF_MAP_TYPE_HASH,
            value_size: 12,
            ..Default::default()
        };
        assert_eq!(value_bytes(&plain), 12);
    }

    #[test]
    fn full_means_counted_and_at_capacity() {
        let mut map = MapPressure {
            id: 1,
            name: "verdict_cache".into(),
            map_type: "hash".into(),
            max_entries: 1024,
            entries: 1024,
            counted: true,
        };
        assert!(map.is_full());
        map.entries = 1023;
        assert!(!map.is_full());
        map.counted = false;
        map.entries = 1024;
        assert!(!map.is_full(), "an uncounted array is not 'full'");
    }
}
