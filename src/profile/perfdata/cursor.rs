//! Bounds-checked reading of perf.data bytes in the file's byte order. Every read returns
//! `None` past the end instead of panicking; callers turn that into a [`PerfDataError`] that
//! names what was being read.
//!
//! [`PerfDataError`]: super::PerfDataError

/// The byte order of a perf.data file (`PERFILE2` little-endian, `2ELIFREP` big-endian).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Endian {
    /// Written by a little-endian machine (x86-64, arm64).
    Little,
    /// Written by a big-endian machine (s390x, ppc64).
    Big,
}

impl Endian {
    /// A u16 from two bytes.
    pub fn u16(self, bytes: [u8; 2]) -> u16 {
        match self {
            Endian::Little => u16::from_le_bytes(bytes),
            Endian::Big => u16::from_be_bytes(bytes),
        }
    }

    /// A u32 from four bytes.
    pub fn u32(self, bytes: [u8; 4]) -> u32 {
        match self {
            Endian::Little => u32::from_le_bytes(bytes),
            Endian::Big => u32::from_be_bytes(bytes),
        }
    }

    /// A u64 from eight bytes.
    pub fn u64(self, bytes: [u8; 8]) -> u64 {
        match self {
            Endian::Little => u64::from_le_bytes(bytes),
            Endian::Big => u64::from_be_bytes(bytes),
        }
    }
}

/// The `N` bytes of `buf` at `off`, if they are all there.
fn array<const N: usize>(buf: &[u8], off: usize) -> Option<[u8; N]> {
    buf.get(off..off.checked_add(N)?)?.try_into().ok()
}

/// A u16 at `off`.
pub(crate) fn u16_at(buf: &[u8], off: usize, endian: Endian) -> Option<u16> {
    array(buf, off).map(|bytes| endian.u16(bytes))
}

/// A u32 at `off`.
pub(crate) fn u32_at(buf: &[u8], off: usize, endian: Endian) -> Option<u32> {
    array(buf, off).map(|bytes| endian.u32(bytes))
}

/// A u64 at `off`.
pub(crate) fn u64_at(buf: &[u8], off: usize, endian: Endian) -> Option<u64> {
    array(buf, off).map(|bytes| endian.u64(bytes))
}

/// The bytes of a NUL-terminated string that starts at the beginning of `buf` (all of `buf`
/// when there is no NUL).
pub(crate) fn c_str(buf: &[u8]) -> &[u8] {
    match buf.iter().position(|&byte| byte == 0) {
        Some(end) => &buf[..end],
        None => buf,
    }
}

/// A u64 count or offset as `usize`, or `None` when it cannot be one.
pub(crate) fn to_usize(value: u64) -> Option<usize> {
    usize::try_from(value).ok()
}

/// A forward reader over a byte slice.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Cursor<'a> {
    buf: &'a [u8],
    pos: usize,
    endian: Endian,
}

impl<'a> Cursor<'a> {
    /// Read `buf` from its start.
    pub fn new(buf: &'a [u8], endian: Endian) -> Cursor<'a> {
        Cursor {
            buf,
            pos: 0,
            endian,
        }
    }

    /// Bytes not read yet.
    #[cfg(test)]
    pub fn remaining(&self) -> usize {
        self.buf.len().saturating_sub(self.pos)
    }

    /// The next `n` bytes.
    pub fn bytes(&mut self, count: usize) -> Option<&'a [u8]> {
        let end = self.pos.checked_add(count)?;
        let slice = self.buf.get(self.pos..end)?;
        self.pos = end;
        Some(slice)
    }

    /// Skip `n` bytes.
    pub fn skip(&mut self, count: usize) -> Option<()> {
        self.bytes(count).map(|_| ())
    }

    /// The next u16.
    pub fn u16(&mut self) -> Option<u16> {
        let value = u16_at(self.buf, self.pos, self.endian)?;
        self.pos += 2;
        Some(value)
    }

    /// The next u32.
    pub fn u32(&mut self) -> Option<u32> {
        let value = u32_at(self.buf, self.pos, self.endian)?;
        self.pos += 4;
        Some(value)
    }

    /// The next u64.
    pub fn u64(&mut self) -> Option<u64> {
        let value = u64_at(self.buf, self.pos, self.endian)?;
        self.pos += 8;
        Some(value)
    }

    /// Everything not read yet.
    pub fn rest(&self) -> &'a [u8] {
        self.buf.get(self.pos..).unwrap_or(&[])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_both_byte_orders() {
        let b = [1u8, 2, 3, 4, 5, 6, 7, 8];
        for (e, want16, want32, want64) in [
            (
                Endian::Little,
                0x0201,
                0x0403_0201,
                0x0807_0605_0403_0201u64,
            ),
            (Endian::Big, 0x0102, 0x0102_0304, 0x0102_0304_0506_0708u64),
        ] {
            assert_eq!(u16_at(&b, 0, e), Some(want16));
            assert_eq!(u32_at(&b, 0, e), Some(want32));
            assert_eq!(u64_at(&b, 0, e), Some(want64));
        }
    }

    #[test]
    fn regression_reads_past_the_end_are_none_not_panics() {
        let b = [0u8; 7];
        assert_eq!(u64_at(&b, 0, Endian::Little), None);
        assert_eq!(u32_at(&b, 4, Endian::Little), None);
        assert_eq!(u16_at(&b, usize::MAX, Endian::Little), None);
        let mut c = Cursor::new(&b, Endian::Big);
        assert_eq!(c.u32(), Some(0));
        assert_eq!(c.u32(), None, "3 bytes left");
        assert_eq!(c.u16(), Some(0));
        assert_eq!(c.bytes(usize::MAX), None);
        assert_eq!(c.remaining(), 1);
        assert_eq!(c.rest(), &[0]);
    }

    #[test]
    fn c_strings_stop_at_nul_or_end() {
        assert_eq!(c_str(b"abc\0\0\0"), b"abc");
        assert_eq!(c_str(b"abc"), b"abc");
        assert_eq!(c_str(b""), b"");
        assert_eq!(to_usize(u64::MAX).is_some(), usize::BITS == 64);
    }
}
