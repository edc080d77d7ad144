//! Every line the tool prints goes through here, so that no output path can panic.
//!
//! Rust ignores SIGPIPE, so a write to a closed pipe (`ebpf-prof doctor | true`, `| head`)
//! returns EPIPE — and `println!`/`eprintln!` panic on any write error, a closed stderr (`2>&-`)
//! included. Here: stdout text is written with its errors returned, a broken pipe counting as
//! success (the reader has what it wanted: ripgrep does the same); progress and warnings on
//! stderr are best effort (a closed stderr loses the message, never the run).

use std::io::Write;

/// The version of every JSON document the tool writes (its `schema` field): raised when a
/// field changes meaning or goes away; new fields do not raise it.
pub const JSON_SCHEMA: u32 = 1;

/// Write `text` to stdout and flush; a closed pipe is not an error.
pub fn stdout(text: &str) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    let r = out.write_all(text.as_bytes()).and_then(|()| out.flush());
    ok_unless_real(r.map_err(anyhow::Error::from))
}

/// Write `bytes` to stdout and flush; a closed pipe is not an error.
pub fn stdout_bytes(bytes: &[u8]) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    let r = out.write_all(bytes).and_then(|()| out.flush());
    ok_unless_real(r.map_err(anyhow::Error::from))
}

/// A progress line or warning on stderr, prefixed `ebpf-prof: `; lost if stderr is closed.
pub fn say(msg: impl std::fmt::Display) {
    let _ = writeln!(std::io::stderr().lock(), "ebpf-prof: {msg}");
}

/// Text on stderr as it is (no prefix, no newline added); lost if stderr is closed.
pub fn err_text(text: &str) {
    let mut e = std::io::stderr().lock();
    let _ = e.write_all(text.as_bytes()).and_then(|()| e.flush());
}

/// `Ok` for a broken pipe anywhere in the chain: the reader went away, which is not a failure.
pub fn ok_unless_real(r: anyhow::Result<()>) -> anyhow::Result<()> {
    match r {
        Err(e) if is_broken_pipe(&e) => Ok(()),
        other => other,
    }
}

/// Whether an error is a closed pipe (`| head`).
pub fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn broken_pipes_are_not_failures() {
        let pipe = anyhow::Error::from(std::io::Error::from(std::io::ErrorKind::BrokenPipe));
        assert!(ok_unless_real(Err(pipe.context("writing"))).is_ok());
        let full = anyhow::Error::from(std::io::Error::from(std::io::ErrorKind::StorageFull));
        assert!(ok_unless_real(Err(full)).is_err());
    }
}
