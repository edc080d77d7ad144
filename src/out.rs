//! Every line the tool prints goes through here, so that no output path can panic.
//!
//! Rust ignores SIGPIPE, so a write to a closed pipe (`ebpf-prof doctor | true`, `| head`)
//! returns EPIPE — and `println!`/`eprintln!` panic on any write error, a closed stderr (`2>&-`)
//! included. Here: stdout text is written with its errors returned, a broken pipe counting as
//! success (the reader has what it wanted: ripgrep does the same); progress and warnings on
//! stderr are best effort (a closed stderr loses the message, never the run).
//!
//! [`install`] also sets what the process does when an output fails outside these functions:
//! a file size limit (`ulimit -f`) gives EFBIG rather than killing the process with SIGXFSZ
//! (so the temp file of an output is removed and the old file stays), and a panic — a bug —
//! prints one line and exits 101, the code documented for it.

use std::io::Write;

/// The version of every JSON document the tool writes (its `schema` field): raised when a
/// field changes meaning or goes away; new fields do not raise it.
pub const JSON_SCHEMA: u32 = 1;

/// The exit code of a panic (Rust's own): a bug, said in one line by the hook [`install`] sets.
pub const PANIC_EXIT: i32 = 101;

/// Set up the process: SIGXFSZ ignored (a write past `ulimit -f` fails with EFBIG, handled as
/// any failed write) and a panic hook that prints one line instead of Rust's default (a
/// backtrace only when RUST_BACKTRACE asks for one). Called once, first thing in `main`.
pub fn install() {
    // SAFETY: setting a signal's disposition to SIG_IGN, before any other thread exists.
    unsafe {
        libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
    }
    std::panic::set_hook(Box::new(|info| {
        let what = info
            .payload()
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| info.payload().downcast_ref::<String>().cloned())
            .unwrap_or_default();
        let at = info
            .location()
            .map_or_else(String::new, |l| format!(" at {l}"));
        err_text(&format!(
            "ebpf-prof: internal error (a bug, please report it): {what}{at}; sysctls and programs are put back as the process unwinds (exit {PANIC_EXIT})\n"
        ));
        if std::env::var_os("RUST_BACKTRACE").is_some_and(|v| v != "0") {
            err_text(&format!("{}\n", std::backtrace::Backtrace::force_capture()));
        }
    }));
}

/// Write `text` to stdout and flush; a closed pipe is not an error. Control characters other
/// than newline and tab are shown escaped ([`escape_controls`]): a process or file name that
/// carries a terminal escape never reaches the terminal as one.
pub fn stdout(text: &str) -> anyhow::Result<()> {
    stdout_bytes(escape_controls(text, Keep::Layout).as_bytes())
}

/// Which characters [`escape_controls`] leaves as they are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Keep {
    /// Newline and tab, the layout of a whole text.
    Layout,
    /// None: a name is one line, so a newline or tab in it is escaped too.
    Nothing,
}

/// `text` with every control character (C0, DEL, C1) and every bidirectional override shown as
/// an escape: `\xNN` below U+0080 (`\x1b` for ESC), `\uNNNN` above (`\u009b`, `\u202e`), the
/// spelling JSON reads as the same character, so a JSON document stays valid. A terminal then
/// shows the name instead of obeying it; a backslash is left as it is.
pub fn escape_controls(text: &str, keep: Keep) -> std::borrow::Cow<'_, str> {
    let kept = |character: char| keep == Keep::Layout && matches!(character, '\n' | '\t');
    let bidi = |character: char| matches!(character, '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}');
    let escaped = |character: char| (character.is_control() || bidi(character)) && !kept(character);
    if !text.chars().any(escaped) {
        return text.into();
    }
    let mut shown = String::with_capacity(text.len() + 8);
    for character in text.chars() {
        let code = u32::from(character);
        if !escaped(character) {
            shown.push(character);
        } else if code < 0x80 {
            shown.push_str(&format!("\\x{code:02x}"));
        } else {
            shown.push_str(&format!("\\u{code:04x}"));
        }
    }
    shown.into()
}

/// Write `bytes` to stdout and flush; a closed pipe is not an error, a closed stdout (`>&-`)
/// or a full disk behind it is.
pub fn stdout_bytes(bytes: &[u8]) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    let r = out.write_all(bytes).and_then(|()| out.flush());
    match r {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        Err(e) => Err(stdout_error(&e)),
        Ok(()) => Ok(()),
    }
}

/// A failed write to stdout (closed, or a full disk behind it), as one line.
pub fn stdout_error(e: &std::io::Error) -> anyhow::Error {
    anyhow::anyhow!(
        "cannot write to standard output: {}; redirect it to a file or a pipe with room",
        plain(e)
    )
}

/// An OS error without Rust's "(os error N)" tail.
pub fn plain(e: &std::io::Error) -> String {
    let s = e.to_string();
    match s.find(" (os error") {
        Some(i) => s[..i].to_string(),
        None => s,
    }
}

/// A progress line or warning on stderr, prefixed `ebpf-prof: `; lost if stderr is closed.
pub fn say(msg: impl std::fmt::Display) {
    let line = msg.to_string();
    let line = escape_controls(&line, Keep::Layout);
    let _ = writeln!(std::io::stderr().lock(), "ebpf-prof: {line}");
}

/// Text on stderr as it is (no prefix, no newline added); lost if stderr is closed.
pub fn err_text(text: &str) {
    let mut e = std::io::stderr().lock();
    let _ = e.write_all(text.as_bytes()).and_then(|()| e.flush());
}

/// Whether a progress line is on the terminal now: one at a time, so reads running side by
/// side (`diff`) do not take turns on the same line.
static PROGRESS_LINE: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Take the terminal's progress line; false when another progress line has it.
pub fn claim_progress_line() -> bool {
    use std::sync::atomic::Ordering;
    PROGRESS_LINE
        .compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire)
        .is_ok()
}

/// Give the progress line back (its holder has cleared it).
pub fn release_progress_line() {
    PROGRESS_LINE.store(false, std::sync::atomic::Ordering::Release);
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

    #[test]
    fn terminal_escapes_are_shown_not_obeyed() {
        let title = "bench\x1b]0;owned\x07\x1b[2J\u{9b}31m\u{202e}x\x7f";
        let shown = escape_controls(title, Keep::Layout);
        assert_eq!(
            shown,
            "bench\\x1b]0;owned\\x07\\x1b[2J\\u009b31m\\u202ex\\x7f"
        );
        assert!(!shown.chars().any(|c| c.is_control()));
        assert_eq!(escape_controls("a\tb\nc", Keep::Layout), "a\tb\nc");
        assert_eq!(escape_controls("a\tb\nc", Keep::Nothing), "a\\x09b\\x0ac");
        let json = "{\"name\": \"a\u{9b}b\u{202e}\"}";
        let read: serde_json::Value =
            serde_json::from_str(&escape_controls(json, Keep::Layout)).unwrap();
        assert_eq!(read["name"], "a\u{9b}b\u{202e}");
        assert!(matches!(
            escape_controls("plain name_[k]", Keep::Nothing),
            std::borrow::Cow::Borrowed(_)
        ));
    }
}
