//! Programs in struct_ops maps (`BPF_MAP_TYPE_STRUCT_OPS`: a TCP congestion control, a
//! sched_ext scheduler, an HID driver): each such map's value is the kernel struct
//! (`bpf_struct_ops_tcp_congestion_ops`, holding a `tcp_congestion_ops`) whose function
//! pointers are the programs. Reading the map's one value gives, in each function pointer's
//! slot, the id of the program there: the kernel writes the id into the copy it returns
//! (`bpftool struct_ops dump` shows them). The value's layout comes from the kernel's BTF.
//!
//! A map counts as attaching its programs while it is registered: its value's `state` is in
//! use (registered by a map update), or ready with a struct_ops link holding it (Linux 6.4+).
//! An id read from a slot is taken only when that program is a struct_ops program loaded for
//! the same struct, so a kernel that leaves something else there cannot name a wrong program.

use super::{AttachPoint, Attachment, Holder};
use crate::bpf::ids;
use libbpf_rs::libbpf_sys;
use libbpf_rs::query::{LinkInfoIter, LinkTypeInfo};
use std::ffi::CStr;
use std::os::fd::{AsFd, AsRawFd};

/// `BPF_STRUCT_OPS_STATE_INUSE` and `…_READY` (kernel/bpf/bpf_struct_ops.c).
const STATE_IN_USE: u32 = 1;
const STATE_READY: u32 = 3;
/// BTF kinds (`BTF_KIND_*` in linux/btf.h).
const BTF_KIND_PTR: u32 = 2;
const BTF_KIND_STRUCT: u32 = 4;
const BTF_KIND_FUNC_PROTO: u32 = 13;
/// The size of `struct btf_type` before its members.
const BTF_TYPE_LEN: usize = 12;
/// The largest struct_ops value read (sched_ext's is a few hundred bytes).
const MAX_VALUE: u32 = 1 << 16;

/// Where a struct_ops value keeps its state and its programs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct ValueLayout {
    /// The kernel struct (`tcp_congestion_ops`) and its BTF type id.
    pub struct_name: String,
    pub struct_type_id: u32,
    /// The byte offset of the value's `state`.
    pub state_offset: Option<usize>,
    /// Each function pointer member, by name, and its byte offset in the value.
    pub functions: Vec<(String, usize)>,
}

/// Whether a value with `layout` is registered: in use, or ready and held by a link.
pub(super) fn registered(value: &[u8], layout: &ValueLayout, has_link: bool) -> bool {
    let state = layout
        .state_offset
        .and_then(|at| value.get(at..at + 4))
        .and_then(|bytes| bytes.try_into().ok())
        .map(u32::from_ne_bytes);
    match state {
        Some(STATE_IN_USE) => true,
        Some(STATE_READY) => has_link,
        _ => false,
    }
}

/// The (member, id) pairs of the value's function pointer slots that hold an id.
pub(super) fn slots(value: &[u8], layout: &ValueLayout) -> Vec<(String, u32)> {
    layout
        .functions
        .iter()
        .filter_map(|(member, at)| {
            let raw = u64::from_ne_bytes(value.get(*at..*at + 8)?.try_into().ok()?);
            let id = u32::try_from(raw).ok().filter(|id| *id != 0)?;
            Some((member.clone(), id))
        })
        .collect()
}

/// Every program of every registered struct_ops map.
pub(super) fn attachments() -> Vec<Attachment> {
    let linked: Vec<u32> = LinkInfoIter::default()
        .filter_map(|link| match link.info {
            LinkTypeInfo::StructOps(info) => Some(info.map_id),
            _ => None,
        })
        .collect();
    let mut found = Vec::new();
    for map_id in map_ids() {
        found.extend(of_map(map_id, linked.contains(&map_id)).unwrap_or_default());
    }
    found
}

/// Every map id.
fn map_ids() -> Vec<u32> {
    let mut all = Vec::new();
    let mut id = 0;
    // SAFETY: `next` is a u32 to write to.
    while unsafe { libbpf_sys::bpf_map_get_next_id(id, &mut id) } == 0 {
        all.push(id);
    }
    all
}

/// The programs of map `map_id` when it is a registered struct_ops map.
fn of_map(map_id: u32, has_link: bool) -> Option<Vec<Attachment>> {
    let fd = ids::open_map(map_id).ok()??;
    let info = ids::map_info(fd.as_fd()).ok()?;
    if info.type_ != libbpf_sys::BPF_MAP_TYPE_STRUCT_OPS || info.value_size > MAX_VALUE {
        return None;
    }
    let layout = layout_of(info.btf_vmlinux_id, info.btf_vmlinux_value_type_id)?;
    let mut value = vec![0u8; info.value_size as usize];
    let key = 0u32;
    // SAFETY: the key is a u32 (a struct_ops map's key size) and `value` is value_size bytes.
    let looked_up = unsafe {
        libbpf_sys::bpf_map_lookup_elem(
            fd.as_raw_fd(),
            (&key as *const u32).cast(),
            value.as_mut_ptr().cast(),
        )
    };
    if looked_up != 0 || !registered(&value, &layout, has_link) {
        return None;
    }
    let map_name = ids::object_name(&info.name);
    let programs = slots(&value, &layout)
        .into_iter()
        .filter(|(_, prog_id)| is_for_struct(*prog_id, layout.struct_type_id))
        .map(|(member, prog_id)| Attachment {
            prog_id,
            point: AttachPoint::StructOps {
                struct_name: layout.struct_name.clone(),
                member,
                map_name: map_name.clone(),
                map_id,
            },
            holder: Holder::StructOpsMap { id: map_id },
        })
        .collect();
    Some(programs)
}

/// Whether program `prog_id` is a struct_ops program loaded for the struct `struct_type_id`.
fn is_for_struct(prog_id: u32, struct_type_id: u32) -> bool {
    let Ok(Some(fd)) = ids::open_prog(prog_id) else {
        return false;
    };
    ids::prog_info(fd.as_fd(), false).is_ok_and(|prog| {
        prog.info.type_ == libbpf_sys::BPF_PROG_TYPE_STRUCT_OPS
            && prog.info.attach_btf_id == struct_type_id
    })
}

/// The layout of value type `value_type_id` (`bpf_struct_ops_X`) in kernel BTF object
/// `btf_obj_id` (0: vmlinux; else a module's, read on top of vmlinux's).
fn layout_of(btf_obj_id: u32, value_type_id: u32) -> Option<ValueLayout> {
    // SAFETY: libbpf returns an owned btf or an error pointer / NULL (checked); each btf we
    // get is freed below, a split one before its base; every type and name pointer is read
    // while the btf that owns it lives, and member arrays are read within the vlen BTF gives.
    unsafe {
        let base = libbpf_sys::btf__load_vmlinux_btf();
        if base.is_null() || libbpf_sys::libbpf_get_error(base.cast()) != 0 {
            return None;
        }
        let split = match btf_obj_id {
            0 => std::ptr::null_mut(),
            id => libbpf_sys::btf__load_from_kernel_by_id_split(id, base),
        };
        let usable_split = !split.is_null() && libbpf_sys::libbpf_get_error(split.cast()) == 0;
        let btf = if usable_split { split } else { base };
        let layout = (btf_obj_id == 0 || usable_split)
            .then(|| read_layout(btf, value_type_id))
            .flatten();
        if usable_split {
            libbpf_sys::btf__free(split);
        }
        libbpf_sys::btf__free(base);
        layout
    }
}

/// One member of a BTF struct: name, type id, byte offset.
type Member = (String, u32, usize);

/// The members of struct `type_id` in `btf`.
///
/// # Safety
/// `btf` must be a live btf.
unsafe fn members(btf: *const libbpf_sys::btf, type_id: u32) -> Option<Vec<Member>> {
    let ty = libbpf_sys::btf__type_by_id(btf, type_id);
    if ty.is_null() || ((*ty).info >> 24) & 0x1f != BTF_KIND_STRUCT {
        return None;
    }
    let bitfields = (*ty).info >> 31 == 1;
    let count = ((*ty).info & 0xffff) as usize;
    let first = ty
        .cast::<u8>()
        .add(BTF_TYPE_LEN)
        .cast::<libbpf_sys::btf_member>();
    let mut all = Vec::with_capacity(count);
    for index in 0..count {
        let member = &*first.add(index);
        let bits = match bitfields {
            true => member.offset & 0x00ff_ffff,
            false => member.offset,
        };
        all.push((
            name(btf, member.name_off),
            member.type_,
            (bits / 8) as usize,
        ));
    }
    Some(all)
}

/// # Safety
/// `btf` must be a live btf.
unsafe fn name(btf: *const libbpf_sys::btf, offset: u32) -> String {
    let text = libbpf_sys::btf__name_by_offset(btf, offset);
    match text.is_null() {
        true => String::new(),
        false => CStr::from_ptr(text).to_string_lossy().into_owned(),
    }
}

/// # Safety
/// `btf` must be a live btf.
unsafe fn read_layout(btf: *const libbpf_sys::btf, value_type_id: u32) -> Option<ValueLayout> {
    let value = members(btf, value_type_id)?;
    let state_offset = value.iter().find(|m| m.0 == "state").map(|m| m.2);
    let (_, data_type, data_offset) = value.into_iter().find(|m| m.0 == "data")?;
    let struct_type_id = u32::try_from(libbpf_sys::btf__resolve_type(btf, data_type)).ok()?;
    let struct_type = libbpf_sys::btf__type_by_id(btf, struct_type_id);
    let struct_name = name(btf, (*struct_type).name_off);
    let functions = members(btf, struct_type_id)?
        .into_iter()
        .filter(|(_, member_type, _)| is_function_pointer(btf, *member_type))
        .map(|(member, _, at)| (member, data_offset + at))
        .collect();
    Some(ValueLayout {
        struct_name,
        struct_type_id,
        state_offset,
        functions,
    })
}

/// # Safety
/// `btf` must be a live btf.
unsafe fn is_function_pointer(btf: *const libbpf_sys::btf, type_id: u32) -> bool {
    let kind = |id: u32| {
        let ty = libbpf_sys::btf__type_by_id(btf, id);
        (!ty.is_null()).then(|| (((*ty).info >> 24) & 0x1f, (*ty).__bindgen_anon_1.type_))
    };
    let Ok(resolved) = u32::try_from(libbpf_sys::btf__resolve_type(btf, type_id)) else {
        return false;
    };
    match kind(resolved) {
        Some((BTF_KIND_PTR, target)) => {
            let Ok(target) = u32::try_from(libbpf_sys::btf__resolve_type(btf, target)) else {
                return false;
            };
            kind(target).is_some_and(|(k, _)| k == BTF_KIND_FUNC_PROTO)
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The layout BTF gives `bpf_struct_ops_tcp_congestion_ops` on x86_64, cut to three of
    /// its functions: refcnt at 0, state at 4, the struct at 64 (cache-line aligned).
    fn congestion_control() -> ValueLayout {
        ValueLayout {
            struct_name: "tcp_congestion_ops".into(),
            struct_type_id: 4321,
            state_offset: Some(4),
            functions: vec![
                ("ssthresh".into(), 64 + 16),
                ("cong_avoid".into(), 64 + 24),
                ("set_state".into(), 64 + 32),
            ],
        }
    }

    fn value(state: u32, ids: [u64; 3]) -> Vec<u8> {
        let mut bytes = vec![0u8; 64 + 40];
        bytes[4..8].copy_from_slice(&state.to_ne_bytes());
        for (slot, id) in ids.iter().enumerate() {
            let at = 64 + 16 + 8 * slot;
            bytes[at..at + 8].copy_from_slice(&id.to_ne_bytes());
        }
        bytes
    }

    #[test]
    fn the_ids_in_a_values_function_slots_are_read_with_their_member() {
        let layout = congestion_control();
        let read = slots(&value(STATE_IN_USE, [31, 0, 33]), &layout);
        assert_eq!(
            read,
            [("ssthresh".to_string(), 31), ("set_state".to_string(), 33)]
        );
        // A slot holding more than an id (a kernel address) is not an id.
        let odd = slots(&value(STATE_IN_USE, [0xffff_ffff_8100_0000, 0, 0]), &layout);
        assert!(odd.is_empty());
        // A value shorter than its layout says reads what it has.
        assert!(slots(&value(STATE_IN_USE, [31, 32, 33])[..80], &layout).is_empty());
    }

    #[test]
    fn a_map_attaches_its_programs_only_while_registered() {
        let layout = congestion_control();
        assert!(registered(&value(STATE_IN_USE, [0; 3]), &layout, false));
        assert!(registered(&value(STATE_READY, [0; 3]), &layout, true));
        assert!(!registered(&value(STATE_READY, [0; 3]), &layout, false));
        assert!(!registered(&value(0, [0; 3]), &layout, true));
        assert!(!registered(&[], &layout, true));
    }
}
