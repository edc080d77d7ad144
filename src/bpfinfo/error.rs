//! The one error type of `bpfinfo`: what is wrong with a feature section, a BTF blob, or a
//! request (an architecture we cannot disassemble), said in one line.

use std::fmt;

/// What is wrong with the BPF program info or BTF we were given.
///
/// Section-level errors (a section that cannot be walked) are returned as `Err`; problems
/// confined to one program or one BTF blob are kept beside it (`ProgInfo::problems`,
/// `BtfSet::problems`) and the rest of the data stays usable.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BpfInfoError {
    /// The bytes end before a field or record that was announced.
    Truncated {
        /// What was being read.
        what: &'static str,
        /// Where it starts in the section or blob.
        offset: usize,
        /// Bytes it needs.
        need: u64,
        /// Bytes left.
        have: u64,
    },
    /// A record count larger than the bytes present can hold.
    CountTooLarge {
        /// What was counted.
        what: &'static str,
        /// The claimed count.
        count: u64,
        /// The most that fit.
        max: u64,
    },
    /// A `perf_bpil.info_len` outside `184..=4096`.
    BadInfoLen {
        /// Entry index in the section.
        entry: usize,
        /// The claimed length.
        info_len: u32,
    },
    /// A `perf_bpil.data_len` that is not a multiple of 8.
    BadDataLen {
        /// Entry index in the section.
        entry: usize,
        /// The claimed length.
        data_len: u32,
    },
    /// An array of `bpf_prog_info` that does not fit in `data[]`; it is treated as absent.
    BadArray {
        /// Program id.
        prog_id: u32,
        /// The array (`line_info`, `jited_ksyms`, …).
        array: &'static str,
        /// Its offset in `data[]`.
        offset: u64,
        /// Its element count.
        count: u32,
        /// Its element size.
        rec_size: u32,
        /// Bytes in `data[]`.
        data_len: u32,
    },
    /// Counts that must agree do not (perf: "mismatch in BPF sub program count").
    CountMismatch {
        /// Program id.
        prog_id: u32,
        /// Which counts, with their values.
        what: String,
    },
    /// The line info of a program cannot be split per function or mapped to JIT addresses.
    BadLineInfo {
        /// Program id.
        prog_id: u32,
        /// Why.
        reason: String,
    },
    /// A BTF blob that cannot be read.
    BadBtf {
        /// BTF object id.
        btf_id: u32,
        /// Why.
        reason: String,
    },
    /// Disassembly was asked for an architecture we do not decode.
    UnsupportedArch {
        /// The architecture as perf's header or `uname -m` names it.
        arch: String,
    },
}

impl From<crate::bpf::btf::BtfError> for BpfInfoError {
    fn from(err: crate::bpf::btf::BtfError) -> BpfInfoError {
        BpfInfoError::BadBtf {
            btf_id: err.btf_id,
            reason: err.reason,
        }
    }
}

impl fmt::Display for BpfInfoError {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        use BpfInfoError::*;
        match self {
            Truncated {
                what,
                offset,
                need,
                have,
            } => write!(
                formatter,
                "truncated {what} at offset {offset}: needs {need} bytes, {have} left"
            ),
            CountTooLarge { what, count, max } => write!(
                formatter,
                "{what} count {count} is more than the section can hold ({max} at most)"
            ),
            BadInfoLen { entry, info_len } => write!(
                formatter,
                "bpf_prog_info entry {entry}: info_len {info_len} is outside 184..=4096"
            ),
            BadDataLen { entry, data_len } => write!(
                formatter,
                "bpf_prog_info entry {entry}: data_len {data_len} is not a multiple of 8"
            ),
            BadArray {
                prog_id,
                array,
                offset,
                count,
                rec_size,
                data_len,
            } => write!(
                formatter,
                "BPF program {prog_id}: {array} ({count} x {rec_size} bytes at offset {offset}) \
                 does not fit in its {data_len} data bytes; ignored"
            ),
            CountMismatch { prog_id, what } => {
                write!(formatter, "BPF program {prog_id}: counts disagree: {what}")
            }
            BadLineInfo { prog_id, reason } => {
                write!(
                    formatter,
                    "BPF program {prog_id}: line info unusable: {reason}"
                )
            }
            BadBtf { btf_id, reason } => write!(formatter, "BTF {btf_id}: {reason}"),
            UnsupportedArch { arch } => write!(
                formatter,
                "disassembling JIT-ed BPF code of {arch} is not supported (x86_64 only)"
            ),
        }
    }
}

impl std::error::Error for BpfInfoError {}
