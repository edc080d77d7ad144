//! Attachments held by kernel link objects (`BPF_LINK_GET_NEXT_ID`, `bpftool link show`): a
//! tracepoint or kprobe's name for perf-event links (Linux 6.6+ says which), the raw
//! tracepoint's name, the kernel function of an LSM/fentry/fexit program (its BTF name), the
//! interface of an XDP or tc link, the cgroup of a cgroup link.

use super::{AttachPoint, Attachment, Direction, Holder, InterfaceHook, NetkitSide, Probe};
use libbpf_rs::query::{LinkInfoIter, LinkTypeInfo, PerfEventType};
use libbpf_rs::ProgramAttachType;

/// Every link's attachment. A link whose kind this libbpf does not know still attaches its
/// program: it is kept, described as such. Unreadable links are skipped.
pub(super) fn attachments() -> Vec<Attachment> {
    LinkInfoIter::default()
        .map(|link| Attachment {
            prog_id: link.prog_id,
            point: describe(&link.info).unwrap_or_else(|| AttachPoint::Other {
                description: "a link of a kind this build does not read".into(),
            }),
            holder: Holder::Link { id: link.id },
        })
        .collect()
}

fn describe(info: &LinkTypeInfo) -> Option<AttachPoint> {
    let text = match info {
        LinkTypeInfo::RawTracepoint(link) => {
            return Some(AttachPoint::RawTracepoint {
                name: link.name.clone(),
            })
        }
        LinkTypeInfo::Tracing(link) => {
            return btf_target("tracing", link.target_obj_id, link.target_btf_id)
        }
        LinkTypeInfo::Cgroup(link) => {
            return Some(AttachPoint::Cgroup {
                cgroup: format!("id {}", link.cgroup_id),
                attach_type: format!("{:?}", link.attach_type),
            })
        }
        LinkTypeInfo::PerfEvent(link) => return perf_event(&link.event_type),
        LinkTypeInfo::Xdp(link) => {
            return Some(on_index(InterfaceHook::Xdp { mode: None }, link.ifindex))
        }
        LinkTypeInfo::Tcx(link) => {
            let direction = match link.attach_type {
                ProgramAttachType::TcxEgress => Direction::Egress,
                _ => Direction::Ingress,
            };
            return Some(on_index(InterfaceHook::Tcx { direction }, link.ifindex));
        }
        LinkTypeInfo::Netkit(link) => {
            let side = match link.attach_type {
                ProgramAttachType::NetkitPeer => NetkitSide::Peer,
                _ => NetkitSide::Primary,
            };
            return Some(on_index(InterfaceHook::Netkit { side }, link.ifindex));
        }
        LinkTypeInfo::NetNs(link) => format!("netns {} ({:?})", link.ino, link.attach_type),
        LinkTypeInfo::Iter(link) => format!("iter {}", link.target_name.to_string_lossy()),
        LinkTypeInfo::StructOps(link) => format!("struct_ops map {}", link.map_id),
        LinkTypeInfo::Netfilter(link) => {
            format!(
                "netfilter pf {} hook {}",
                link.protocol_family, link.hooknum
            )
        }
        LinkTypeInfo::KprobeMulti(link) => format!("kprobe_multi ({} functions)", link.count),
        LinkTypeInfo::UprobeMulti(link) => format!("uprobe_multi ({} offsets)", link.count),
        LinkTypeInfo::SockMap(link) => format!("sockmap map {}", link.map_id),
        LinkTypeInfo::Unknown => return None,
    };
    Some(AttachPoint::Other { description: text })
}

/// A link's interface hook, by the interface's index: the interface walk gives it its name.
fn on_index(hook: InterfaceHook, ifindex: u32) -> AttachPoint {
    AttachPoint::InterfaceIndex { hook, ifindex }
}

/// A perf-event link's event: what the kernel tells of it since Linux 6.6.
pub(super) fn perf_event(event: &PerfEventType) -> Option<AttachPoint> {
    let name = |raw: &Option<std::ffi::OsString>| {
        raw.as_ref().map(|text| text.to_string_lossy().into_owned())
    };
    let probe = |is_return: bool| match is_return {
        true => Probe::Return,
        false => Probe::Entry,
    };
    match event {
        PerfEventType::Tracepoint { name: raw, .. } => {
            Some(AttachPoint::Tracepoint { name: name(raw)? })
        }
        PerfEventType::Kprobe {
            func_name,
            is_retprobe,
            offset,
            ..
        } => Some(match name(func_name) {
            Some(function) => AttachPoint::Kprobe {
                probe: probe(*is_retprobe),
                function,
                offset: *offset as u64,
            },
            None => AttachPoint::KprobeAtAddress {
                probe: probe(*is_retprobe),
            },
        }),
        PerfEventType::Uprobe {
            file_name,
            is_retprobe,
            offset,
            ..
        } => Some(AttachPoint::Uprobe {
            probe: probe(*is_retprobe),
            path: name(file_name)?,
            offset: *offset as u64,
        }),
        PerfEventType::Event {
            config, event_type, ..
        } => Some(AttachPoint::PerfEvent {
            event_type: *event_type,
            config: *config,
        }),
        PerfEventType::Unknown(_) => None,
    }
}

/// An LSM or tracing program's target function: type `btf_id` of BTF object `btf_obj_id`
/// (0 for vmlinux), or `None` for other program types or when the BTF cannot be read.
pub(crate) fn btf_target(prog_type: &str, btf_obj_id: u32, btf_id: u32) -> Option<AttachPoint> {
    if btf_id == 0 || !matches!(prog_type, "lsm" | "tracing") {
        return None;
    }
    Some(AttachPoint::Function {
        kind: prog_type.into(),
        name: btf_type_name(btf_obj_id, btf_id)?,
    })
}
/// The name of type `btf_id` in kernel BTF object `btf_obj_id` (vmlinux when 0 or named
/// `vmlinux`; a module's BTF is read on top of vmlinux's).
fn btf_type_name(btf_obj_id: u32, btf_id: u32) -> Option<String> {
    use libbpf_rs::libbpf_sys as sys;
    // SAFETY: libbpf returns an owned btf or an error pointer / NULL (checked); every btf we
    // get is freed below, the split one before its base; the name pointer is read while the
    // btf that owns it lives.
    unsafe {
        let base = sys::btf__load_vmlinux_btf();
        if base.is_null() || sys::libbpf_get_error(base.cast()) != 0 {
            return None;
        }
        let (btf, split) = if btf_obj_id == 0 || is_vmlinux_btf(btf_obj_id) {
            (base, false)
        } else {
            let btf_split = sys::btf__load_from_kernel_by_id_split(btf_obj_id, base);
            if btf_split.is_null() || sys::libbpf_get_error(btf_split.cast()) != 0 {
                sys::btf__free(base);
                return None;
            }
            (btf_split, true)
        };
        let ty = sys::btf__type_by_id(btf, btf_id);
        let name = (!ty.is_null())
            .then(|| sys::btf__name_by_offset(btf, (*ty).name_off))
            .filter(|n| !n.is_null())
            .map(|n| std::ffi::CStr::from_ptr(n).to_string_lossy().into_owned());
        if split {
            sys::btf__free(btf);
        }
        sys::btf__free(base);
        name.filter(|n| !n.is_empty())
    }
}

/// Whether kernel BTF object `id` is vmlinux's.
fn is_vmlinux_btf(id: u32) -> bool {
    use libbpf_rs::libbpf_sys as sys;
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
    // SAFETY: a non-negative return is a fresh fd we own; `info` is sized `len` and its one
    // output buffer, `name`, is `name_len` bytes.
    unsafe {
        let fd = sys::bpf_btf_get_fd_by_id(id);
        if fd < 0 {
            return false;
        }
        let fd = OwnedFd::from_raw_fd(fd);
        let mut name = [0u8; 64];
        let mut info = sys::bpf_btf_info {
            name: name.as_mut_ptr() as u64,
            name_len: name.len() as u32,
            ..Default::default()
        };
        let mut len = std::mem::size_of::<sys::bpf_btf_info>() as u32;
        if sys::bpf_btf_get_info_by_fd(fd.as_raw_fd(), &mut info, &mut len) != 0 {
            return false;
        }
        info.kernel_btf != 0 && name.starts_with(b"vmlinux\0")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn perf_event_links_name_their_event() {
        let tp = PerfEventType::Tracepoint {
            name: Some("sys_enter_openat".into()),
            cookie: 0,
        };
        assert_eq!(
            perf_event(&tp).unwrap().to_string(),
            "tracepoint sys_enter_openat"
        );
        let kp = PerfEventType::Kprobe {
            func_name: Some("do_sys_openat2".into()),
            is_retprobe: true,
            addr: 0,
            offset: 0,
            missed: 0,
            cookie: 0,
        };
        assert_eq!(
            perf_event(&kp).unwrap().to_string(),
            "kretprobe do_sys_openat2"
        );
        let by_address = PerfEventType::Kprobe {
            func_name: None,
            is_retprobe: false,
            addr: 0xffff_ffff_8100_0000,
            offset: 0,
            missed: 0,
            cookie: 0,
        };
        let said = perf_event(&by_address).unwrap().to_string();
        assert!(!said.contains("ffff"), "{said}");
        assert!(perf_event(&PerfEventType::Unknown(9)).is_none());
    }
}
