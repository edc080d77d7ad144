//! A progress bar for reads that take longer than a second, drawn on the tool's one progress
//! line ([`ProgressLine`]) and cleared when the read ends: `[#########           ] 45%  30/66
//! MB`. Updates are cheap to call often, with one clock read every [`Progress::EVERY`] calls.

use crate::perf::script::ProgressLine;
use std::time::{Duration, Instant};

/// How far a long read has come.
#[derive(Debug)]
pub(crate) struct Progress {
    start: Instant,
    last: Option<Instant>,
    calls: u32,
    line: ProgressLine,
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
        Progress::on(label, total, ProgressLine::new())
    }

    fn on(label: &'static str, total: u64, line: ProgressLine) -> Progress {
        Progress {
            start: Instant::now(),
            last: None,
            calls: 0,
            line,
            total,
            label,
        }
    }

    /// `done` bytes of `total` are read.
    pub fn update(&mut self, done: u64) {
        self.calls = self.calls.wrapping_add(1);
        if !self.line.enabled() || self.calls % Self::EVERY != 0 {
            return;
        }
        let now = Instant::now();
        let due = match self.last {
            None => now.duration_since(self.start) >= Self::AFTER,
            Some(then) => now.duration_since(then) >= Duration::from_millis(100),
        };
        if due {
            let text = self.bar(done);
            if self.line.draw(&text) {
                self.last = Some(now);
            }
        }
    }

    /// The bar's text for `done` bytes.
    fn bar(&self, done: u64) -> String {
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
}

#[cfg(test)]
mod tests {
    use super::*;

    fn off_terminal(label: &'static str, total: u64) -> Progress {
        Progress::on(label, total, ProgressLine::with_terminal(false))
    }

    #[test]
    fn the_bar_fills_with_the_bytes_read() {
        let progress = off_terminal("reading", 200_000_000);
        let half = progress.bar(100_000_000);
        assert!(
            half.contains(" 50%") && half.contains("100/200 MB"),
            "{half}"
        );
        assert_eq!(half.matches('#').count(), 15);
        assert!(progress.bar(u64::MAX).contains("100%"), "clamped");
        let empty = off_terminal("x", 0);
        assert!(empty.bar(0).contains("100%"), "no division by zero");
    }

    #[test]
    fn nothing_is_drawn_off_a_terminal_or_in_the_first_second() {
        let mut off = off_terminal("x", 10);
        let mut on = Progress::on("x", 10, ProgressLine::with_terminal(true));
        for done in 0..3 * Progress::EVERY {
            off.update(u64::from(done));
            on.update(u64::from(done));
        }
        assert!(off.last.is_none());
        assert!(on.last.is_none(), "a fast read draws nothing");
    }
}
