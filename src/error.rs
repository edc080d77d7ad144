//! Error kinds and the exit codes they map to (documented in the README):
//! 0 success, 1 a check or gate failed, 2 usage or input error, 3 a program we ran failed,
//! 4 anything else (an OS call failed, a file could not be written, …), 128+N stopped by signal N.

use std::fmt;

/// What went wrong, as far as the exit code is concerned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A check or gate failed (doctor found a blocker).
    Check,
    /// The user's input is wrong: arguments, files, paths.
    Usage,
    /// A program we ran (perf, the benchmark, the user's loader) failed.
    Child,
}

impl Kind {
    /// The process exit code for this kind.
    pub fn code(self) -> i32 {
        match self {
            Kind::Check => 1,
            Kind::Usage => 2,
            Kind::Child => 3,
        }
    }
}

/// An error that carries its exit code; anything else exits with 4.
#[derive(Debug)]
pub(crate) struct Failure {
    pub kind: Kind,
    pub message: String,
}

impl fmt::Display for Failure {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str(&self.message)
    }
}

impl std::error::Error for Failure {}

/// A usage or input error: what is wrong and what to do, in one line.
pub fn usage(message: impl Into<String>) -> anyhow::Error {
    Failure {
        kind: Kind::Usage,
        message: message.into(),
    }
    .into()
}

/// A failed check or gate.
pub fn check(message: impl Into<String>) -> anyhow::Error {
    Failure {
        kind: Kind::Check,
        message: message.into(),
    }
    .into()
}

/// A program we ran failed; `message` should carry its command line and stderr.
pub fn child(message: impl Into<String>) -> anyhow::Error {
    Failure {
        kind: Kind::Child,
        message: message.into(),
    }
    .into()
}

/// The exit code for an error chain: the first `Failure` in it decides, else 4.
pub fn exit_code(err: &anyhow::Error) -> i32 {
    if let Some(at) = err
        .chain()
        .find_map(|e| e.downcast_ref::<crate::signals::Interrupted>())
    {
        return 128 + at.0;
    }
    err.chain()
        .find_map(|e| e.downcast_ref::<Failure>())
        .map_or(4, |f| f.kind.code())
}

#[cfg(test)]
mod tests {
    use super::*;
    use anyhow::Context;

    #[test]
    fn code_survives_context() {
        let e = Err::<(), _>(usage("bad cpu"))
            .context("record")
            .unwrap_err();
        assert_eq!(exit_code(&e), 2);
        assert_eq!(exit_code(&anyhow::anyhow!("io")), 4);
        assert_eq!(exit_code(&check("x")), 1);
        assert_eq!(exit_code(&child("x")), 3);
    }
}
