//! The one error type of the perf.data reader: what is wrong, in one line, and what to do.

use std::fmt;
use std::path::PathBuf;

/// Why a perf.data file could not be read.
#[derive(Debug)]
pub enum PerfDataError {
    /// The file could not be opened or read.
    Io {
        /// The file.
        path: PathBuf,
        /// What the OS said.
        source: std::io::Error,
    },
    /// The bytes are not a perf.data file at all.
    NotPerfData(String),
    /// The file ends before what its header promises (perf was killed, the disk filled up).
    Truncated(String),
    /// The file is inconsistent (sizes, offsets or records that cannot be right).
    Malformed(String),
    /// A valid recording this reader does not handle: the caller should fall back to
    /// `perf script`.
    Unsupported(String),
}

impl PerfDataError {
    /// Whether `perf script` may still read the file (the caller's cue to fall back).
    pub fn is_unsupported(&self) -> bool {
        matches!(self, PerfDataError::Unsupported(_))
    }
}

impl fmt::Display for PerfDataError {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PerfDataError::Io { path, source } => {
                write!(formatter, "cannot read {}: {source}", path.display())
            }
            PerfDataError::NotPerfData(what) => write!(
                formatter,
                "not a perf.data file ({what}): give the perf.data written by `ebpf-prof record`"
            ),
            PerfDataError::Truncated(what) => write!(
                formatter,
                "truncated: the recording did not finish; record again ({what})"
            ),
            PerfDataError::Malformed(what) => {
                write!(formatter, "corrupt perf.data ({what}): record again")
            }
            PerfDataError::Unsupported(what) => write!(
                formatter,
                "unsupported perf.data ({what}): read it with `perf script` instead"
            ),
        }
    }
}

impl std::error::Error for PerfDataError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            PerfDataError::Io { source, .. } => Some(source),
            _ => None,
        }
    }
}

/// Shorthand constructors, so parsing code reads as `return Err(truncated(..))`.
pub(crate) fn truncated(what: impl Into<String>) -> PerfDataError {
    PerfDataError::Truncated(what.into())
}

pub(crate) fn malformed(what: impl Into<String>) -> PerfDataError {
    PerfDataError::Malformed(what.into())
}

pub(crate) fn unsupported(what: impl Into<String>) -> PerfDataError {
    PerfDataError::Unsupported(what.into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_are_one_line_and_say_what_to_do() {
        let cases = [
            (truncated("data section"), "record again"),
            (malformed("record size 0"), "record again"),
            (unsupported("pipe mode"), "perf script"),
            (
                PerfDataError::NotPerfData("magic".into()),
                "ebpf-prof record",
            ),
        ];
        for (e, hint) in cases {
            let s = e.to_string();
            assert!(!s.contains('\n'), "{s}");
            assert!(s.contains(hint), "{s}");
        }
        assert!(truncated("x")
            .to_string()
            .starts_with("truncated: the recording did not finish; record again"));
        assert!(unsupported("x").is_unsupported());
        assert!(!truncated("x").is_unsupported());
    }
}
