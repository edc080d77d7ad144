//! A pass over `perf script` text as it streams into inferno's collapser: counts the samples
//! (one event line each), so that `report` knows the sample count of a perf.data without its
//! run record, and sums their periods with overflow checked — inferno adds periods without a
//! check and wraps (or panics) on a crafted file whose periods add past 2^64.
//!
//! An event line is a line that starts with neither a blank nor `#`; the period is the number
//! right after the timestamp (`comm pid [cpu] 123.456: PERIOD event:`), 1 when there is none,
//! as inferno reads it.

use std::cell::Cell;
use std::io::Read;
use std::rc::Rc;

/// What the scan found, shared with whoever wraps the reader.
#[derive(Debug, Default)]
pub struct Tally {
    /// Event lines seen so far.
    pub samples: Cell<u64>,
    /// Sum of their periods (saturated at overflow, see `overflow_line`).
    pub periods: Cell<u64>,
    /// The 1-based line at which the periods added past 2^64, if they did.
    pub overflow_line: Cell<Option<u64>>,
}

/// A reader that tallies the `perf script` text passing through it; it stops with an error
/// as soon as the periods overflow.
pub(crate) struct Scan<R> {
    inner: R,
    tally: Rc<Tally>,
    /// The current line, when it is an event line (its first 4096 bytes).
    line: Vec<u8>,
    line_no: u64,
    /// At the start of a line.
    fresh: bool,
    /// The current line is an event line.
    event: bool,
}

impl<R: Read> Scan<R> {
    /// Wrap `inner`; read the results from the returned tally.
    pub fn new(inner: R) -> (Scan<R>, Rc<Tally>) {
        let tally = Rc::new(Tally::default());
        let scan = Scan {
            inner,
            tally: Rc::clone(&tally),
            line: Vec::new(),
            line_no: 0,
            fresh: true,
            event: false,
        };
        (scan, tally)
    }

    fn byte(&mut self, value: u8) -> bool {
        if value == b'\n' {
            self.line_no += 1;
            let ok = !self.event || self.end_of_event();
            self.line.clear();
            self.fresh = true;
            self.event = false;
            return ok;
        }
        if self.fresh {
            self.fresh = false;
            self.event = !matches!(value, b' ' | b'\t' | b'#' | b'\r');
        }
        if self.event && self.line.len() < 4096 {
            self.line.push(value);
        }
        true
    }

    fn end_of_event(&mut self) -> bool {
        let tally = &self.tally;
        tally.samples.set(tally.samples.get() + 1);
        match tally.periods.get().checked_add(period(&self.line)) {
            Some(sum) => {
                tally.periods.set(sum);
                true
            }
            None => {
                tally.overflow_line.set(Some(self.line_no));
                false
            }
        }
    }
}

/// The period of an event line: the token after the `TIME:` token, else 1.
fn period(line: &[u8]) -> u64 {
    let text = String::from_utf8_lossy(line);
    let mut words = text.split_whitespace();
    let is_time = |word: &str| {
        word.strip_suffix(':')
            .is_some_and(|stamp| stamp.parse::<f64>().is_ok())
    };
    if words.by_ref().any(is_time) {
        if let Some(found) = words.next().and_then(|word| word.parse().ok()) {
            return found;
        }
    }
    1
}

impl<R: Read> Read for Scan<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if self.tally.overflow_line.get().is_some() {
            return Err(overflow());
        }
        let count = self.inner.read(buf)?;
        for &byte in &buf[..count] {
            if !self.byte(byte) {
                return Err(overflow());
            }
        }
        if count == 0 && self.event && !self.byte(b'\n') {
            return Err(overflow());
        }
        Ok(count)
    }
}

fn overflow() -> std::io::Error {
    std::io::Error::new(
        std::io::ErrorKind::InvalidData,
        "sample periods add up past 2^64",
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    const SCRIPT: &str = include_str!("../../fixtures/perf-script/openat-hook.txt");

    #[test]
    fn counts_the_samples_of_real_script_output() {
        let (mut s, t) = Scan::new(SCRIPT.as_bytes());
        std::io::copy(&mut s, &mut std::io::sink()).unwrap();
        let events = SCRIPT
            .lines()
            .filter(|l| !l.is_empty() && !l.starts_with([' ', '\t', '#']))
            .count() as u64;
        assert!(events > 0);
        assert_eq!(t.samples.get(), events);
        assert!(t.periods.get() >= events);
    }

    #[test]
    fn periods_that_overflow_stop_the_read_at_their_line() {
        let max = u64::MAX;
        let text = format!(
            "b 1 1.0: {max} cpu-clock:\n\tffff f ([k])\n\nb 1 2.0: 5 cpu-clock:\n\tffff f ([k])\n"
        );
        let (mut s, t) = Scan::new(text.as_bytes());
        assert!(std::io::copy(&mut s, &mut std::io::sink()).is_err());
        assert_eq!(t.overflow_line.get(), Some(4));
        assert_eq!(period(b"bench 12 [001] 3.5: 250000 cpu-clock:k:"), 250000);
        assert_eq!(period(b"java 25607 4794564.109216: cycles:"), 1);
    }
}
