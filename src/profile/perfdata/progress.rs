//! A progress bar on stderr for reads that take longer than a second, drawn only when stderr
//! is a terminal and cleared when the read ends: `[#########           ] 45%  30/66 MB`.
//! Updates are cheap to call often (one clock read every [`Progress::EVERY`] calls). One bar
//! at a time ([`crate::out::claim_progress_line`]): when reads run side by side (`diff`), the
//! first to be due draws and the others stay quiet, instead of taking turns on the same line.

use std::io::IsTerminal;
use std::time::{Duration, Instant};

/// How far a long read has come.
#[derive(Debug)]
pub(crate) struct Progress {
    start: Instant,
    last: Option<Instant>,
    calls: u32,
    enabled: bool,
    total: u64,
    label: &'static str,
}

impl Progress {
    /// Calls between two looks at the clock.
    const EVERY: u32 = 4096;
    /// Nothing is drawn before a read has taken this long.
    const AFTER: Duration = Duration::from_secs(1);

    /// A bar for a read of `total` bytes, shown on a terminal only.
    pub fn new(label: &'static str, total: u64) -> Progress {
        Progress::with_terminal(label, total, std::io::stderr().is_terminal())
    }

    fn with_terminal(label: &'static str, total: u64, enabled: bool) -> Progress {
        Progress {
            start: Instant::now(),
            last: None,
            calls: 0,
            enabled,
            total,
            label,
        }
    }

    /// `done` bytes of `total` are read.
    pub fn update(&mut self, done: u64) {
        self.calls = self.calls.wrapping_add(1);
        if !self.enabled || self.calls % Self::EVERY != 0 {
            return;
        }
        let now = Instant::now();
        let due = match self.last {
            None => now.duration_since(self.start) >= Self::AFTER,
            Some(t) => now.duration_since(t) >= Duration::from_millis(100),
        };
        if due && self.claim() {
            crate::out::err_text(&format!("\r{}", self.line(done)));
            self.last = Some(now);
        }
    }

    /// Whether this bar may draw: it already does, or no other bar does (then it is this
    /// one's until it is dropped). A bar that finds another drawing stays quiet for good.
    fn claim(&mut self) -> bool {
        if self.last.is_some() {
            return true;
        }
        let free = crate::out::claim_progress_line();
        self.enabled = free;
        free
    }

    /// The bar's text for `done` bytes.
    fn line(&self, done: u64) -> String {
        const WIDTH: u64 = 30;
        let done = done.min(self.total);
        let filled = (done * WIDTH).checked_div(self.total).unwrap_or(WIDTH);
        let pct = (done * 100).checked_div(self.total).unwrap_or(100);
        format!(
            "{} [{}{}] {pct:>3}% {:.0}/{:.0} MB",
            self.label,
            "#".repeat(filled as usize),
            " ".repeat((WIDTH - filled) as usize),
            done as f64 / 1e6,
            self.total as f64 / 1e6
        )
    }

    /// Whether the bar has been drawn.
    pub fn shown(&self) -> bool {
        self.last.is_some()
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        if self.shown() {
            crate::out::err_text(&format!("\r{}\r", " ".repeat(self.line(0).len())));
            crate::out::release_progress_line();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bar_fills_with_the_bytes_read() {
        let p = Progress::with_terminal("reading", 200_000_000, false);
        let half = p.line(100_000_000);
        assert!(
            half.contains(" 50%") && half.contains("100/200 MB"),
            "{half}"
        );
        assert_eq!(half.matches('#').count(), 15);
        assert!(p.line(u64::MAX).contains("100%"), "clamped");
        let empty = Progress::with_terminal("x", 0, false);
        assert!(empty.line(0).contains("100%"), "no division by zero");
    }

    #[test]
    fn one_bar_draws_at_a_time() {
        let mut first = Progress::with_terminal("a", 10, true);
        let mut second = Progress::with_terminal("b", 10, true);
        assert!(first.claim());
        first.last = Some(Instant::now()); // drawn
        assert!(first.claim(), "the drawing bar keeps drawing");
        assert!(!second.claim(), "another stays quiet");
        assert!(!second.enabled, "for good");
        drop(first);
        let mut third = Progress::with_terminal("c", 10, true);
        assert!(third.claim(), "free again once the first is gone");
        third.last = Some(Instant::now());
    }

    #[test]
    fn nothing_is_drawn_off_a_terminal_or_in_the_first_second() {
        let mut off = Progress::with_terminal("x", 10, false);
        let mut on = Progress::with_terminal("x", 10, true);
        for i in 0..3 * Progress::EVERY {
            off.update(u64::from(i));
            on.update(u64::from(i));
        }
        assert!(!off.shown());
        assert!(!on.shown(), "a fast read draws nothing");
    }
}
