//! The sample buffer: mmapped with MAP_POPULATE, mlocked and pre-touched, so the timed loop never
//! takes a page fault writing a sample.

use anyhow::{bail, Result};

/// An anonymous mapping of `len` u32 slots, unmapped on drop.
pub struct SampleBuffer {
    ptr: *mut u32,
    len: usize,
    bytes: usize,
    locked: bool,
}

impl SampleBuffer {
    /// Map, lock and touch a buffer of `len` samples. mlock failing (RLIMIT_MEMLOCK for a
    /// non-root user) is not fatal: MAP_POPULATE and the pre-touch already fault every page in.
    pub fn new(len: usize) -> Result<SampleBuffer> {
        let bytes = len.max(1) * std::mem::size_of::<u32>();
        // SAFETY: an anonymous private mapping with no address hint; the result is checked.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                bytes,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_POPULATE,
                -1,
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            bail!(
                "cannot map a {bytes}-byte sample buffer: {}",
                std::io::Error::last_os_error()
            );
        }
        // SAFETY: ptr..ptr+bytes is the mapping just made.
        let locked = unsafe { libc::mlock(ptr, bytes) } == 0;
        let mut buf = SampleBuffer {
            ptr: ptr.cast(),
            len,
            bytes,
            locked,
        };
        for slot in buf.as_mut_slice().iter_mut() {
            // SAFETY: writing through a valid &mut; volatile so the touch is not optimised away.
            unsafe { std::ptr::write_volatile(slot, 0) };
        }
        Ok(buf)
    }

    /// Whether mlock succeeded.
    pub fn locked(&self) -> bool {
        self.locked
    }

    /// The samples.
    pub fn as_mut_slice(&mut self) -> &mut [u32] {
        // SAFETY: the mapping holds `len` initialised u32s and lives as long as self.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.len) }
    }
}

impl Drop for SampleBuffer {
    fn drop(&mut self) {
        // SAFETY: unmapping exactly the mapping made in new(); munlock is implied.
        unsafe { libc::munmap(self.ptr.cast(), self.bytes) };
    }
}
