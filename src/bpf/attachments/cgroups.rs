//! Cgroup attachments made without a link (`BPF_PROG_ATTACH`, as systemd attaches its device
//! and firewall programs): `BPF_PROG_QUERY` for each cgroup attach type on every directory of
//! the cgroup v2 hierarchy, as `bpftool cgroup tree` does. Cgroups are named by their path
//! under the hierarchy's mount point (`/system.slice`, `/` for the root).

use super::{AttachPoint, Attachment, Holder};
use crate::host::Host;
use libbpf_rs::libbpf_sys;
use libbpf_rs::ProgramAttachType;
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};

/// The most cgroup directories walked: a machine with more (a busy container host) has its
/// first ones read, in directory order.
const MAX_CGROUPS: usize = 4096;
/// The most programs one cgroup can hold per attach type (`BPF_CGROUP_MAX_PROGS`).
const MAX_PROGS: usize = 64;

/// The attach types a program can have on a cgroup.
const CGROUP_ATTACH_TYPES: &[u32] = &[
    libbpf_sys::BPF_CGROUP_INET_INGRESS,
    libbpf_sys::BPF_CGROUP_INET_EGRESS,
    libbpf_sys::BPF_CGROUP_INET_SOCK_CREATE,
    libbpf_sys::BPF_CGROUP_SOCK_OPS,
    libbpf_sys::BPF_CGROUP_DEVICE,
    libbpf_sys::BPF_CGROUP_INET4_BIND,
    libbpf_sys::BPF_CGROUP_INET6_BIND,
    libbpf_sys::BPF_CGROUP_INET4_CONNECT,
    libbpf_sys::BPF_CGROUP_INET6_CONNECT,
    libbpf_sys::BPF_CGROUP_INET4_POST_BIND,
    libbpf_sys::BPF_CGROUP_INET6_POST_BIND,
    libbpf_sys::BPF_CGROUP_UDP4_SENDMSG,
    libbpf_sys::BPF_CGROUP_UDP6_SENDMSG,
    libbpf_sys::BPF_CGROUP_SYSCTL,
    libbpf_sys::BPF_CGROUP_UDP4_RECVMSG,
    libbpf_sys::BPF_CGROUP_UDP6_RECVMSG,
    libbpf_sys::BPF_CGROUP_GETSOCKOPT,
    libbpf_sys::BPF_CGROUP_SETSOCKOPT,
    libbpf_sys::BPF_CGROUP_INET4_GETPEERNAME,
    libbpf_sys::BPF_CGROUP_INET6_GETPEERNAME,
    libbpf_sys::BPF_CGROUP_INET4_GETSOCKNAME,
    libbpf_sys::BPF_CGROUP_INET6_GETSOCKNAME,
    libbpf_sys::BPF_CGROUP_INET_SOCK_RELEASE,
];

/// Every program attached to a cgroup of `host`'s cgroup v2 hierarchy, found by asking each
/// cgroup; none when there is no such hierarchy.
pub(super) fn attachments(host: &Host) -> Vec<Attachment> {
    let Some(mount) = cgroup2_mount(host) else {
        return Vec::new();
    };
    let mut found = Vec::new();
    for dir in directories(&mount) {
        let Ok(fd) = open_directory(&dir) else {
            continue;
        };
        let relative = dir.strip_prefix(&mount).unwrap_or(&dir);
        let cgroup = format!("/{}", relative.display());
        for &attach_type in CGROUP_ATTACH_TYPES {
            for prog_id in query(&fd, attach_type) {
                found.push(Attachment {
                    prog_id,
                    point: AttachPoint::Cgroup {
                        cgroup: cgroup.clone(),
                        attach_type: format!("{:?}", ProgramAttachType::from(attach_type)),
                    },
                    holder: Holder::Cgroup,
                });
            }
        }
    }
    found
}

/// Where the cgroup v2 hierarchy is mounted (`/sys/fs/cgroup`, or `/sys/fs/cgroup/unified` on
/// a hybrid layout), from `host`'s mount table.
fn cgroup2_mount(host: &Host) -> Option<PathBuf> {
    let table = std::fs::read_to_string(host.path("proc/self/mounts")).ok()?;
    let mount_point = table.lines().find_map(|line| {
        let mut fields = line.split_whitespace();
        let point = fields.nth(1)?;
        (fields.next()? == "cgroup2").then(|| point.to_string())
    })?;
    Some(host.path(&mount_point))
}

/// `top` and the directories under it, breadth first, at most [`MAX_CGROUPS`]. Links are not
/// followed (a directory entry's type is read without following it).
fn directories(top: &Path) -> Vec<PathBuf> {
    let mut all = vec![top.to_path_buf()];
    let mut next = 0;
    while next < all.len() && all.len() < MAX_CGROUPS {
        let Ok(entries) = std::fs::read_dir(&all[next]) else {
            next += 1;
            continue;
        };
        for entry in entries.flatten() {
            if entry.file_type().is_ok_and(|kind| kind.is_dir()) && all.len() < MAX_CGROUPS {
                all.push(entry.path());
            }
        }
        next += 1;
    }
    all
}

/// The directory `dir`, opened without following a link in its last component.
fn open_directory(dir: &Path) -> std::io::Result<OwnedFd> {
    use std::os::unix::fs::OpenOptionsExt;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECTORY | libc::O_NOFOLLOW)
        .open(dir)?;
    Ok(file.into())
}

/// The programs attached to the cgroup `fd` with `attach_type`, directly (not inherited).
fn query(fd: &OwnedFd, attach_type: u32) -> Vec<u32> {
    let mut ids = vec![0u32; MAX_PROGS];
    let mut count = MAX_PROGS as u32;
    let mut flags = 0u32;
    // SAFETY: `ids` holds `count` u32s and outlives the call; `flags` is a u32 to write to.
    let ret = unsafe {
        libbpf_sys::bpf_prog_query(
            fd.as_raw_fd(),
            attach_type,
            0,
            &mut flags,
            ids.as_mut_ptr(),
            &mut count,
        )
    };
    if ret < 0 {
        return Vec::new();
    }
    ids.truncate((count as usize).min(MAX_PROGS));
    ids
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_v2_hierarchy_is_found_in_the_mount_table() {
        let root = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(root.path().join("proc/self")).unwrap();
        std::fs::write(
            root.path().join("proc/self/mounts"),
            "tmpfs /sys/fs/cgroup tmpfs rw 0 0\ncgroup /sys/fs/cgroup/cpu cgroup rw,cpu 0 0\ncgroup2 /sys/fs/cgroup/unified cgroup2 rw 0 0\n",
        )
        .unwrap();
        let host = Host::at(root.path());
        assert_eq!(
            cgroup2_mount(&host).unwrap(),
            root.path().join("sys/fs/cgroup/unified")
        );
        std::fs::write(
            root.path().join("proc/self/mounts"),
            "proc /proc proc rw 0 0\n",
        )
        .unwrap();
        assert!(cgroup2_mount(&host).is_none());
        assert!(attachments(&host).is_empty());
    }

    #[test]
    fn the_walk_does_not_follow_links() {
        let root = tempfile::tempdir().unwrap();
        let top = root.path().join("cg");
        std::fs::create_dir_all(top.join("a/b")).unwrap();
        std::os::unix::fs::symlink("/", top.join("elsewhere")).unwrap();
        let mut walked = directories(&top);
        walked.sort();
        assert_eq!(walked, [top.clone(), top.join("a"), top.join("a/b")]);
    }
}
