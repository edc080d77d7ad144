//! Captures libbpf's log output while we open, load and attach an object.
//!
//! libbpf prints its warnings (and the verifier log of a rejected program) through one
//! process-wide callback. During a load we point it at a buffer instead of stderr, so a
//! successful load prints nothing and a failed one can quote the relevant lines in its error.
//! Because the callback is global, captures are serialised by a lock.
//!
//! The callback is ours, registered with libbpf directly rather than through
//! `libbpf_rs::set_print`: that one formats each message into a `String` with a conversion that
//! panics on bytes that are not UTF-8, and an object's BTF strings (quoted in the verifier log)
//! may hold any byte. A panic cannot unwind through libbpf's C frames, so the process would
//! abort without putting the sysctls back. Here the bytes are converted lossily, and anything
//! else that could panic is caught before it reaches C.

use std::ffi::c_char;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Mutex, MutexGuard, PoisonError};

use libbpf_sys::{libbpf_print_fn_t, libbpf_print_level, LIBBPF_DEBUG};

/// Held for the whole of a capture: only one load at a time owns libbpf's print callback.
static SESSION: Mutex<()> = Mutex::new(());
/// What libbpf printed since the current capture started, one message per entry.
static MESSAGES: Mutex<Vec<String>> = Mutex::new(Vec::new());

/// Redirects libbpf's output into a buffer until dropped, then restores the previous callback.
pub(crate) struct Capture {
    previous: libbpf_print_fn_t,
    _session: MutexGuard<'static, ()>,
}

impl Capture {
    /// Starts capturing, waiting for any other capture in this process to end first.
    pub(crate) fn start() -> Capture {
        let session = SESSION.lock().unwrap_or_else(PoisonError::into_inner);
        messages().clear();
        // SAFETY: `print` has the signature libbpf expects and stays valid for the whole run.
        let previous = unsafe { libbpf_sys::libbpf_set_print(Some(print)) };
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
        // SAFETY: `previous` is what libbpf held before, a valid callback or none.
        unsafe { libbpf_sys::libbpf_set_print(self.previous) };
        messages().clear();
    }
}

fn messages() -> MutexGuard<'static, Vec<String>> {
    MESSAGES.lock().unwrap_or_else(PoisonError::into_inner)
}

fn record(message: String) {
    messages().push(message);
}

/// libbpf's print callback: format the message, keep it (debug chatter aside). Never unwinds.
unsafe extern "C" fn print(
    level: libbpf_print_level,
    format: *const c_char,
    args: *mut libbpf_sys::__va_list_tag,
) -> i32 {
    if level == LIBBPF_DEBUG {
        return 0;
    }
    let kept = catch_unwind(AssertUnwindSafe(|| {
        // SAFETY: libbpf passes a valid format string with the va_list that goes with it.
        let formatted = unsafe { vsprintf::vsprintf_raw(format, args) };
        record(match formatted {
            Ok(bytes) => lossy(&bytes),
            Err(e) => format!("libbpf printed a message that could not be formatted: {e}"),
        });
    }));
    // A panic was caught here (and its message printed by the panic hook); libbpf ignores the
    // return value, so there is nothing more to do than to go on.
    drop(kept);
    0
}

/// A message's bytes as text, any byte that is not UTF-8 shown as U+FFFD.
fn lossy(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_split_multi_line_messages() {
        let capture = Capture::start();
        record("libbpf: one\n".to_string());
        record("a\nb  \n".to_string());
        assert_eq!(capture.lines(), ["libbpf: one", "a", "b"]);
    }

    #[test]
    fn bytes_that_are_not_utf8_are_kept_lossily() {
        assert_eq!(
            lossy(b"; return *v\xffalue > 1;"),
            "; return *v\u{fffd}alue > 1;"
        );
    }
}
