//! Programs attached to perf events without a link (`PERF_EVENT_IOC_SET_BPF`, as bpftrace and
//! bcc attach tracepoints, kprobes and uprobes): every process's `anon_inode:[perf_event]` fds,
//! each asked with `BPF_TASK_FD_QUERY` which program it carries and where, as
//! `bpftool perf show` does. The kernel answers with a kind, a name (the tracepoint's, the
//! kprobe's symbol, the uprobe's file) and an offset ([`point_of_answer`] reads it).

use super::{AttachPoint, Attachment, Holder, Probe};
use crate::host::Host;
use libbpf_rs::libbpf_sys;
use std::ffi::CStr;

/// What `/proc/PID/fd/N` reads as for a perf event.
const PERF_EVENT_LINK: &str = "anon_inode:[perf_event]";
/// The longest name asked for: a uprobe's path can be a whole path.
const NAME_BYTES: usize = 4096;

/// The kernel's answer to `BPF_TASK_FD_QUERY` for one fd, without the program id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FdQueryAnswer {
    /// `BPF_FD_TYPE_*`.
    pub fd_type: u32,
    /// The tracepoint's name, the kprobe's symbol (empty for a probe placed by address) or the
    /// uprobe's file.
    pub name: String,
    pub probe_offset: u64,
    pub probe_addr: u64,
}

/// Where an answer says the program is attached; `None` for a kind this build does not know.
pub fn point_of_answer(answer: &FdQueryAnswer) -> Option<AttachPoint> {
    let name = answer.name.clone();
    let point = match answer.fd_type {
        libbpf_sys::BPF_FD_TYPE_TRACEPOINT => AttachPoint::Tracepoint { name },
        libbpf_sys::BPF_FD_TYPE_RAW_TRACEPOINT => AttachPoint::RawTracepoint { name },
        libbpf_sys::BPF_FD_TYPE_KPROBE | libbpf_sys::BPF_FD_TYPE_KRETPROBE => {
            let probe = match answer.fd_type {
                libbpf_sys::BPF_FD_TYPE_KRETPROBE => Probe::Return,
                _ => Probe::Entry,
            };
            match name.is_empty() {
                true => AttachPoint::KprobeAtAddress { probe },
                false => AttachPoint::Kprobe {
                    probe,
                    function: name,
                    offset: answer.probe_offset,
                },
            }
        }
        libbpf_sys::BPF_FD_TYPE_UPROBE | libbpf_sys::BPF_FD_TYPE_URETPROBE => AttachPoint::Uprobe {
            probe: match answer.fd_type {
                libbpf_sys::BPF_FD_TYPE_URETPROBE => Probe::Return,
                _ => Probe::Entry,
            },
            path: name,
            offset: answer.probe_offset,
        },
        _ => return None,
    };
    Some(point)
}

/// Every perf event of every process of `host` that carries a program. A process or fd gone
/// while it is walked, or one the kernel will not answer for, is skipped.
pub(super) fn attachments(host: &Host) -> Vec<Attachment> {
    let Ok(processes) = std::fs::read_dir(host.path("proc")) else {
        return Vec::new();
    };
    let mut found = Vec::new();
    for process in processes.flatten() {
        let Some(pid) = number(&process.file_name()) else {
            continue;
        };
        found.extend(of_process(&process.path(), pid));
    }
    found
}

/// The perf events of process `pid` (its directory under /proc is `dir`) that carry a program.
fn of_process(dir: &std::path::Path, pid: u32) -> Vec<Attachment> {
    let Ok(fds) = std::fs::read_dir(dir.join("fd")) else {
        return Vec::new();
    };
    let mut found = Vec::new();
    for entry in fds.flatten() {
        let Some(fd) = number(&entry.file_name()) else {
            continue;
        };
        // read_link reads the link itself: /proc's fd links are never followed here.
        let is_perf_event = std::fs::read_link(entry.path())
            .is_ok_and(|target| target.as_os_str() == PERF_EVENT_LINK);
        if !is_perf_event {
            continue;
        }
        if let Some((prog_id, answer)) = query(pid, fd) {
            if let Some(point) = point_of_answer(&answer) {
                found.push(Attachment {
                    prog_id,
                    point,
                    holder: Holder::PerfEvent { pid, fd },
                });
            }
        }
    }
    found
}

fn number(name: &std::ffi::OsStr) -> Option<u32> {
    name.to_str()?.parse().ok()
}

/// `BPF_TASK_FD_QUERY` for fd `fd` of process `pid`: the program it carries and the answer;
/// `None` when it carries none (ENOENT) or the kernel will not say.
fn query(pid: u32, fd: u32) -> Option<(u32, FdQueryAnswer)> {
    let mut name = vec![0u8; NAME_BYTES];
    let mut name_len = NAME_BYTES as u32;
    let (mut prog_id, mut fd_type, mut probe_offset, mut probe_addr) = (0u32, 0u32, 0u64, 0u64);
    // SAFETY: `name` is `name_len` bytes long and outlives the call; the other pointers are
    // to locals of the types the call writes.
    let ret = unsafe {
        libbpf_sys::bpf_task_fd_query(
            i32::try_from(pid).ok()?,
            i32::try_from(fd).ok()?,
            0,
            name.as_mut_ptr().cast(),
            &mut name_len,
            &mut prog_id,
            &mut fd_type,
            &mut probe_offset,
            &mut probe_addr,
        )
    };
    if ret < 0 {
        return None;
    }
    let name = CStr::from_bytes_until_nul(&name)
        .map(|text| text.to_string_lossy().into_owned())
        .unwrap_or_default();
    let answer = FdQueryAnswer {
        fd_type,
        name,
        probe_offset,
        probe_addr,
    };
    Some((prog_id, answer))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Answers of the shapes the kernel gives (`bpf_get_perf_event_info`): kprobes are not
    /// available on this project's machine kind, so these cases are read from answers written
    /// down rather than from a live probe.
    fn answer(fd_type: u32, name: &str, probe_offset: u64, probe_addr: u64) -> FdQueryAnswer {
        FdQueryAnswer {
            fd_type,
            name: name.into(),
            probe_offset,
            probe_addr,
        }
    }

    #[test]
    fn every_kind_of_answer_reads_as_its_point() {
        let cases = [
            (
                answer(libbpf_sys::BPF_FD_TYPE_TRACEPOINT, "sys_enter_openat", 0, 0),
                "tracepoint sys_enter_openat",
            ),
            (
                answer(libbpf_sys::BPF_FD_TYPE_KPROBE, "do_sys_openat2", 0, 0),
                "kprobe do_sys_openat2",
            ),
            (
                answer(libbpf_sys::BPF_FD_TYPE_KPROBE, "vfs_read", 0x1c, 0),
                "kprobe vfs_read+0x1c",
            ),
            (
                answer(libbpf_sys::BPF_FD_TYPE_KRETPROBE, "do_sys_openat2", 0, 0),
                "kretprobe do_sys_openat2",
            ),
            (
                answer(
                    libbpf_sys::BPF_FD_TYPE_UPROBE,
                    "/usr/lib/x86_64-linux-gnu/libc.so.6",
                    0x9ab40,
                    0,
                ),
                "uprobe /usr/lib/x86_64-linux-gnu/libc.so.6:0x9ab40",
            ),
            (
                answer(
                    libbpf_sys::BPF_FD_TYPE_URETPROBE,
                    "/usr/bin/bash",
                    0x3f2c0,
                    0,
                ),
                "uretprobe /usr/bin/bash:0x3f2c0",
            ),
            (
                answer(libbpf_sys::BPF_FD_TYPE_RAW_TRACEPOINT, "sys_enter", 0, 0),
                "raw_tracepoint sys_enter",
            ),
        ];
        for (given, want) in cases {
            let point = point_of_answer(&given).unwrap();
            assert_eq!(point.to_string(), want, "{given:?}");
        }
    }

    #[test]
    fn a_kprobe_by_address_keeps_no_address() {
        let by_address = answer(libbpf_sys::BPF_FD_TYPE_KPROBE, "", 0, 0xffff_ffff_8123_4560);
        let point = point_of_answer(&by_address).unwrap();
        assert_eq!(
            point,
            AttachPoint::KprobeAtAddress {
                probe: Probe::Entry
            }
        );
        assert!(!point.to_string().contains("ffff"));
        assert!(point_of_answer(&answer(99, "x", 0, 0)).is_none());
    }

    #[test]
    fn a_fixture_proc_without_perf_events_gives_none() {
        let root = tempfile::tempdir().unwrap();
        let fd_dir = root.path().join("proc/42/fd");
        std::fs::create_dir_all(&fd_dir).unwrap();
        std::os::unix::fs::symlink("/dev/null", fd_dir.join("0")).unwrap();
        std::os::unix::fs::symlink("anon_inode:[eventpoll]", fd_dir.join("1")).unwrap();
        assert!(attachments(&Host::at(root.path())).is_empty());
    }
}
