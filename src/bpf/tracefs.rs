//! Makes tracefs visible to libbpf while it attaches, without mounting it on the host.
//!
//! libbpf resolves `SEC("tracepoint/<category>/<name>")` through
//! `/sys/kernel/tracing/events/<category>/<name>/id`. Minimal systems (containers, microVMs)
//! boot without tracefs mounted, and the attach then fails with ENOENT. There the attach runs
//! on a helper thread that unshares its mount namespace and mounts tracefs in it only: the
//! host's mounts stay as they were, and the perf events and links created outlive the thread.
//! Check with `mount | grep tracefs` (empty on such a system, before and after).

use std::ffi::CStr;
use std::io;
use std::path::Path;

const TRACEFS: &CStr = c"/sys/kernel/tracing";

/// Whether libbpf can find tracepoint ids (tracefs or the old debugfs location is mounted).
pub(crate) fn tracefs_visible() -> bool {
    Path::new("/sys/kernel/tracing/events").is_dir()
        || Path::new("/sys/kernel/debug/tracing/events").is_dir()
}

/// Runs `f` where tracefs is visible: here if it already is, else on a thread with a private
/// mount namespace that has it mounted (if that fails, `f` runs there anyway and reports).
pub(crate) fn with_tracefs<T: Send>(f: impl FnOnce() -> T + Send) -> T {
    if tracefs_visible() {
        return f();
    }
    std::thread::scope(|scope| {
        let worker = scope.spawn(|| {
            // On failure, f's own ENOENT error explains (see diagnose::attach_error).
            let _mounted = mount_private_tracefs();
            f()
        });
        worker
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
    })
}

/// `unshare -m`, `mount --make-rprivate /`, `mount -t tracefs nodev /sys/kernel/tracing`,
/// for the calling thread only.
fn mount_private_tracefs() -> io::Result<()> {
    // SAFETY: unshare(2) with CLONE_NEWNS affects only this thread (it implies CLONE_FS).
    check(unsafe { libc::unshare(libc::CLONE_NEWNS) })?;
    let flags = libc::MS_REC | libc::MS_PRIVATE;
    // SAFETY: all pointers are valid NUL-terminated strings or NULL where mount(2) allows.
    check(unsafe {
        libc::mount(
            std::ptr::null(),
            c"/".as_ptr(),
            std::ptr::null(),
            flags,
            std::ptr::null(),
        )
    })?;
    // SAFETY: as above.
    check(unsafe {
        libc::mount(
            c"nodev".as_ptr(),
            TRACEFS.as_ptr(),
            c"tracefs".as_ptr(),
            0,
            std::ptr::null(),
        )
    })
}

fn check(ret: libc::c_int) -> io::Result<()> {
    if ret == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}
