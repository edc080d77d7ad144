//! Captures libbpf's log output while we open, load and attach an object.
//!
//! libbpf prints its warnings (and the verifier log of a rejected program) through one
//! process-wide callback. During a load we point it at a buffer instead of stderr, so a
//! successful load prints nothing and a failed one can quote the relevant lines in its error.
//! Because the callback is global, captures are serialised by a lock.

use std::sync::{Mutex, MutexGuard, PoisonError};

use libbpf_rs::{PrintCallback, PrintLevel};

/// Held for the whole of a capture: only one load at a time owns libbpf's print callback.
static SESSION: Mutex<()> = Mutex::new(());
/// What libbpf printed since the current capture started, one message per entry.
static MESSAGES: Mutex<Vec<String>> = Mutex::new(Vec::new());

/// Redirects libbpf's output into a buffer until dropped, then restores the previous callback.
pub(crate) struct Capture {
    previous: Option<(PrintLevel, PrintCallback)>,
    _session: MutexGuard<'static, ()>,
}

impl Capture {
    /// Starts capturing, waiting for any other capture in this process to end first.
    pub(crate) fn start() -> Capture {
        let session = SESSION.lock().unwrap_or_else(PoisonError::into_inner);
        messages().clear();
        let previous = libbpf_rs::set_print(Some((PrintLevel::Info, record)));
        Capture {
            previous,
            _session: session,
        }
    }

    /// Everything captured so far, split into lines (a verifier log arrives as one message).
    pub(crate) fn lines(&self) -> Vec<String> {
        messages()
            .iter()
            .flat_map(|message| message.lines())
            .map(|line| line.trim_end().to_string())
            .collect()
    }
}

impl Drop for Capture {
    fn drop(&mut self) {
        libbpf_rs::set_print(self.previous.take());
        messages().clear();
    }
}

fn messages() -> MutexGuard<'static, Vec<String>> {
    MESSAGES.lock().unwrap_or_else(PoisonError::into_inner)
}

fn record(_level: PrintLevel, message: String) {
    messages().push(message);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_split_multi_line_messages() {
        let capture = Capture::start();
        record(PrintLevel::Warn, "libbpf: one\n".to_string());
        record(PrintLevel::Warn, "a\nb  \n".to_string());
        assert_eq!(capture.lines(), ["libbpf: one", "a", "b"]);
    }
}
