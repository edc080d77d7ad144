//! Bounds-checked little- or big-endian reads from a byte slice: every read returns `None`
//! instead of panicking when it would run past the end, and offsets are added with overflow
//! checks. The feature sections are read only through this.

use crate::profile::perfdata::cursor::{u32_at, u64_at};
use crate::profile::perfdata::Endian;

/// A byte slice with the byte order of whoever wrote it; the reads are the perf.data reader's
/// ([`crate::profile::perfdata::cursor`]).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Bytes<'a> {
    buf: &'a [u8],
    endian: Endian,
}

impl<'a> Bytes<'a> {
    /// `buf`, read in the given byte order.
    pub(crate) fn new(buf: &'a [u8], little_endian: bool) -> Bytes<'a> {
        let endian = match little_endian {
            true => Endian::Little,
            false => Endian::Big,
        };
        Bytes { buf, endian }
    }

    /// Number of bytes.
    pub(crate) fn len(&self) -> usize {
        self.buf.len()
    }

    /// Whether values are little-endian.
    pub(crate) fn little_endian(&self) -> bool {
        self.endian == Endian::Little
    }

    /// `len` bytes at `off`, if all of them are there.
    pub(crate) fn slice(&self, off: usize, len: usize) -> Option<&'a [u8]> {
        self.buf.get(off..off.checked_add(len)?)
    }

    /// The same byte order over `len` bytes at `off`.
    pub(crate) fn sub(&self, off: usize, len: usize) -> Option<Bytes<'a>> {
        Some(Bytes {
            buf: self.slice(off, len)?,
            endian: self.endian,
        })
    }

    /// The u32 at `off`.
    pub(crate) fn u32(&self, off: usize) -> Option<u32> {
        u32_at(self.buf, off, self.endian)
    }

    /// The u64 at `off`.
    pub(crate) fn u64(&self, off: usize) -> Option<u64> {
        u64_at(self.buf, off, self.endian)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_stop_at_the_end() {
        let b = Bytes::new(&[1, 0, 0, 0, 2], true);
        assert_eq!(b.u32(0), Some(1));
        assert_eq!(b.u32(1), Some(0x0200_0000));
        assert_eq!(b.u32(2), None);
        assert_eq!(b.u32(4), None);
        assert_eq!(b.slice(usize::MAX, 2), None);
        assert_eq!(Bytes::new(&[0, 0, 0, 1], false).u32(0), Some(1));
    }
}
