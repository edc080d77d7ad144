//! Reaches pseudo-filesystems that this system has not mounted, without mounting them on the
//! host.
//!
//! libbpf resolves `SEC("tracepoint/<category>/<name>")` through tracefs
//! (`/sys/kernel/tracing/events/<category>/<name>/id`), and the lockdown mode is only readable
//! from securityfs (`/sys/kernel/security/lockdown`). Minimal systems (containers, microVMs)
//! boot with neither mounted. There the work runs on a helper thread that unshares its mount
//! namespace and mounts the filesystem in it only: the host's mount table is unchanged, and
//! file descriptors created there (perf events, links) outlive the thread.
//! Check with `mount | grep -E 'tracefs|securityfs'` before and after.

use std::ffi::CStr;
use std::io;
use std::path::Path;

use super::Host;

/// Where libbpf looks for tracepoint ids.
pub const TRACEFS: &CStr = c"/sys/kernel/tracing";
/// Where libbpf-tools also look for tracepoints.
pub const DEBUGFS: &CStr = c"/sys/kernel/debug";
/// Where the lockdown mode and the active LSM list are.
pub const SECURITYFS: &CStr = c"/sys/kernel/security";

/// Whether libbpf can find tracepoint ids (tracefs or the old debugfs location is mounted)
/// on `host`.
pub fn tracefs_visible(host: &Host) -> bool {
    host.path("sys/kernel/tracing/events").is_dir()
        || host.path("sys/kernel/debug/tracing/events").is_dir()
}

/// Runs `f` on a thread that sees a private mount of `fstype` at `target`. If the mount fails
/// (no privileges), `f` still runs there and meets the missing files itself.
pub fn with_private_mount<T: Send>(
    fstype: &CStr,
    target: &CStr,
    f: impl FnOnce() -> T + Send,
) -> T {
    std::thread::scope(|scope| {
        let worker = scope.spawn(|| {
            let _mounted = mount_privately(fstype, target);
            f()
        });
        worker
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
    })
}

/// `unshare -m`, `mount --make-rprivate /`, `mount -t <fstype> nodev <target>`, for the
/// calling thread only.
fn mount_privately(fstype: &CStr, target: &CStr) -> io::Result<()> {
    unshare_private()?;
    mount_fs(fstype, target)
}

/// A mount namespace of this thread's own (this process's, in a child between fork and exec),
/// whose mounts do not propagate back to the host.
fn unshare_private() -> io::Result<()> {
    // SAFETY: unshare(2) with CLONE_NEWNS affects only this thread (it implies CLONE_FS).
    check(unsafe { libc::unshare(libc::CLONE_NEWNS) })?;
    // Without this, mounts below a shared "/" would propagate back to the host.
    let private = libc::MS_REC | libc::MS_PRIVATE;
    let null = std::ptr::null();
    // SAFETY: valid NUL-terminated strings, NULL where mount(2) allows it.
    check(unsafe { libc::mount(null, c"/".as_ptr(), null, private, null.cast()) })
}

/// `mount -t <fstype> nodev <target>`.
fn mount_fs(fstype: &CStr, target: &CStr) -> io::Result<()> {
    let null = std::ptr::null::<libc::c_void>();
    // SAFETY: valid NUL-terminated strings, NULL data.
    check(unsafe { libc::mount(c"nodev".as_ptr(), target.as_ptr(), fstype.as_ptr(), 0, null) })
}

/// For a child between fork and exec (it allocates nothing, as `pre_exec` requires): a mount
/// namespace of its own with tracefs mounted, and debugfs where it mounts (libbpf-tools look
/// for tracepoints under /sys/kernel/debug/tracing too), so that a libbpf-based loader finds
/// tracepoint ids while the host's mount table stays as it is.
pub fn tracing_namespace_for_exec() -> io::Result<()> {
    unshare_private()?;
    match mount_fs(c"tracefs", TRACEFS) {
        // EBUSY: tracefs is mounted there already (as in a virtme-ng guest), which is all the
        // loader needs.
        Err(error) if error.raw_os_error() == Some(libc::EBUSY) => {}
        other => other?,
    }
    let _ = mount_fs(c"debugfs", DEBUGFS);
    Ok(())
}

fn check(ret: libc::c_int) -> io::Result<()> {
    if ret == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// A securityfs file such as `lockdown` or `lsm`, mounting securityfs privately if needed.
pub fn read_securityfs(name: &str) -> Option<String> {
    let path = Path::new("/sys/kernel/security").join(name);
    if let Ok(text) = std::fs::read_to_string(&path) {
        return Some(text);
    }
    if Path::new("/sys/kernel/security/lsm").exists() {
        return None; // mounted: the file is absent or unreadable, not hidden
    }
    with_private_mount(c"securityfs", SECURITYFS, || {
        std::fs::read_to_string(&path).ok()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tracefs_visible_at_either_place_on_a_fixture_tree() {
        for (dir, visible) in [
            (None, false),
            (Some("sys/kernel/tracing/events"), true),
            (Some("sys/kernel/debug/tracing/events"), true),
            (Some("sys/kernel/tracing"), false), // mounted point, no tracefs in it
        ] {
            let d = tempfile::tempdir().unwrap();
            if let Some(dir) = dir {
                std::fs::create_dir_all(d.path().join(dir)).unwrap();
            }
            assert_eq!(tracefs_visible(&Host::at(d.path())), visible, "{dir:?}");
        }
    }
}
