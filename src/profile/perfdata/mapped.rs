//! The bytes of a perf.data file: mapped read-only from an open file (no copy, no zeroed
//! buffer to fault in: reading a 66 MB recording into a `Vec` cost a third of the whole fold),
//! or owned (tests, fuzzing). A mapping of a regular file shares the page cache, so the
//! process holds the file once.
//!
//! A file truncated by someone else while it is mapped would fault (SIGBUS) on the lost pages:
//! perf itself reads perf.data the same way, and `ebpf-prof` only maps a regular file it has
//! opened and measured, never a FIFO or a device.

use std::fs::File;
use std::ops::Deref;

/// A read-only view of a whole file, or bytes owned in memory.
#[derive(Debug)]
pub(crate) enum Bytes {
    Owned(Vec<u8>),
    Mapped(Mapping),
}

impl Deref for Bytes {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        match self {
            Bytes::Owned(owned) => owned,
            Bytes::Mapped(mapping) => mapping.as_slice(),
        }
    }
}

/// A `mmap(PROT_READ, MAP_PRIVATE)` of a file, unmapped on drop.
#[derive(Debug)]
pub(crate) struct Mapping {
    ptr: *mut libc::c_void,
    len: usize,
}

// SAFETY: the mapping is read-only and owned by this value; sharing `&[u8]` into it across
// threads is as safe as sharing any immutable slice.
unsafe impl Send for Mapping {}
// SAFETY: as above, nothing mutates the mapped bytes through this type.
unsafe impl Sync for Mapping {}

impl Mapping {
    /// Map the first `len` bytes of `file` (its length when opened); `None` when the kernel
    /// refuses (the caller then reads the file instead).
    pub fn new(file: &File, len: usize) -> Option<Mapping> {
        use std::os::fd::AsRawFd;
        if len == 0 {
            return None;
        }
        // SAFETY: a fresh read-only private mapping of an fd we hold open; the kernel picks the
        // address; the result is checked against MAP_FAILED before use.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ,
                libc::MAP_PRIVATE | libc::MAP_POPULATE,
                file.as_raw_fd(),
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return None;
        }
        Some(Mapping { ptr, len })
    }

    fn as_slice(&self) -> &[u8] {
        // SAFETY: `ptr` is a live mapping of `len` readable bytes until drop, never written.
        unsafe { std::slice::from_raw_parts(self.ptr as *const u8, self.len) }
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: unmapping exactly the region mmap returned, once.
        unsafe {
            libc::munmap(self.ptr, self.len);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn a_mapping_reads_what_the_file_holds() {
        let mut f = tempfile::tempfile().unwrap();
        f.write_all(b"PERFILE2 and more").unwrap();
        let m = Bytes::Mapped(Mapping::new(&f, 17).unwrap());
        assert_eq!(&m[..8], b"PERFILE2");
        assert_eq!(m.len(), 17);
        assert!(Mapping::new(&f, 0).is_none());
    }
}
