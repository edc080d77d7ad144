//! The range of every numeric option, checked while clap parses it: a value outside is refused
//! with one line naming the option, the value and the range (exit 2), before anything runs.
//! An unchecked value could panic (a duration past `u64::MAX` seconds, an allocation past the
//! address space), allocate for minutes, or turn a gate into one that always passes (NaN).
//! docs/security.md lists each option's range and why; a test walks that table.

use clap::builder::TypedValueParser;
use clap::error::ErrorKind;
use std::ffi::OsStr;
use std::marker::PhantomData;

/// How a parser names the option it refuses a value of: `--long`, else `-s`, else its id.
fn option_name(arg: Option<&clap::Arg>) -> String {
    let Some(arg) = arg else {
        return "the value".to_string();
    };
    match (arg.get_long(), arg.get_short()) {
        (Some(long), _) => format!("--{long}"),
        (None, Some(short)) => format!("-{short}"),
        (None, None) => arg.get_id().to_string(),
    }
}

/// One line for clap to print after `error: `.
fn refusal(arg: Option<&clap::Arg>, value: &OsStr, why: &str) -> clap::Error {
    let name = option_name(arg);
    let value = value.to_string_lossy();
    clap::Error::raw(ErrorKind::InvalidValue, format!("{name} {value} {why}\n"))
}

/// A whole number from `min` to `max` (both included), of type `T`.
#[derive(Debug)]
pub struct Whole<T> {
    min: u64,
    max: u64,
    /// What the number counts, or what to do instead, for the refusal.
    note: &'static str,
    kind: PhantomData<fn() -> T>,
}

impl<T> Clone for Whole<T> {
    fn clone(&self) -> Self {
        Whole { ..*self }
    }
}

impl<T> Whole<T> {
    /// The numbers `min..=max`; `note` ends the refusal in parentheses.
    pub const fn new(min: u64, max: u64, note: &'static str) -> Self {
        Whole {
            min,
            max,
            note,
            kind: PhantomData,
        }
    }

    fn check(&self, text: &str) -> Result<u64, String> {
        let give = format!("give {} to {} ({})", self.min, self.max, self.note);
        // Parsed wider than any option's type, so a number past it is "out of range", not
        // "not a number".
        match text.trim().parse::<u128>() {
            Ok(n) if (u128::from(self.min)..=u128::from(self.max)).contains(&n) => Ok(n as u64),
            Ok(_) => Err(format!("is out of range: {give}")),
            Err(_) if text.trim().parse::<i128>().is_ok() => {
                Err(format!("is out of range: {give}"))
            }
            Err(_) => Err(format!("is not a whole number: {give}")),
        }
    }
}

impl<T> TypedValueParser for Whole<T>
where
    T: TryFrom<u64> + Clone + Send + Sync + 'static,
{
    type Value = T;

    fn parse_ref(
        &self,
        _cmd: &clap::Command,
        arg: Option<&clap::Arg>,
        value: &OsStr,
    ) -> Result<T, clap::Error> {
        let number = self
            .check(&value.to_string_lossy())
            .map_err(|why| refusal(arg, value, &why))?;
        T::try_from(number).map_err(|_| refusal(arg, value, "does not fit this machine's numbers"))
    }
}

/// Whether an end of a [`Real`] range belongs to it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum End {
    Included,
    Excluded,
}

/// A real number between `low` and `high`, each end included or not; NaN and the infinities
/// are never in range.
#[derive(Debug, Clone, Copy)]
pub struct Real {
    low: (f64, End),
    high: (f64, End),
    note: &'static str,
}

impl Real {
    /// `[low, high]`.
    pub const fn closed(low: f64, high: f64, note: &'static str) -> Self {
        Real {
            low: (low, End::Included),
            high: (high, End::Included),
            note,
        }
    }

    /// `[low, high)`.
    pub const fn to_below(low: f64, high: f64, note: &'static str) -> Self {
        Real {
            low: (low, End::Included),
            high: (high, End::Excluded),
            note,
        }
    }

    /// `(low, high]`.
    pub const fn above_to(low: f64, high: f64, note: &'static str) -> Self {
        Real {
            low: (low, End::Excluded),
            high: (high, End::Included),
            note,
        }
    }

    fn contains(&self, x: f64) -> bool {
        let above = match self.low.1 {
            End::Included => x >= self.low.0,
            End::Excluded => x > self.low.0,
        };
        let below = match self.high.1 {
            End::Included => x <= self.high.0,
            End::Excluded => x < self.high.0,
        };
        above && below
    }

    /// The range as written in docs/security.md: `[0.5, 1)`.
    fn shown(&self) -> String {
        let open = if self.low.1 == End::Included {
            '['
        } else {
            '('
        };
        let close = if self.high.1 == End::Included {
            ']'
        } else {
            ')'
        };
        format!("{open}{}, {}{close}", self.low.0, self.high.0)
    }

    fn check(&self, text: &str) -> Result<f64, String> {
        let give = format!("give a number in {} ({})", self.shown(), self.note);
        match text.trim().parse::<f64>() {
            Ok(x) if self.contains(x) => Ok(x),
            Ok(_) => Err(format!("is out of range: {give}")),
            Err(_) => Err(format!("is not a number: {give}")),
        }
    }
}

/// A clap parser for a range whose `check` gives the value in seconds or as a real number.
macro_rules! parses_reals_by_check {
    ($range:ty) => {
        impl TypedValueParser for $range {
            type Value = f64;

            fn parse_ref(
                &self,
                _cmd: &clap::Command,
                arg: Option<&clap::Arg>,
                value: &OsStr,
            ) -> Result<f64, clap::Error> {
                self.check(&value.to_string_lossy())
                    .map_err(|why| refusal(arg, value, &why))
            }
        }
    };
}

parses_reals_by_check!(Real);

/// A duration (`30s`, `2m`, `500ms`, `1h`, plain seconds) from [`MIN_TIME_S`] to `max_s`
/// seconds, in seconds.
#[derive(Debug, Clone, Copy)]
pub struct Time {
    max_s: f64,
    /// How the maximum reads (`24h`).
    max_shown: &'static str,
}

/// The shortest duration taken: a millisecond. Anything shorter is no budget or timeout a run
/// can keep (`1e-300s` is 0 ns as a `Duration`), and is refused while parsing, before a run
/// waits for another to finish.
pub const MIN_TIME_S: f64 = 1e-3;
/// An hour, in seconds.
pub const HOUR_S: f64 = 3600.0;
/// A day, in seconds.
pub const DAY_S: f64 = 24.0 * HOUR_S;

impl Time {
    /// Up to an hour.
    pub const HOUR: Time = Time {
        max_s: HOUR_S,
        max_shown: "1h",
    };
    /// Up to a day.
    pub const DAY: Time = Time {
        max_s: DAY_S,
        max_shown: "24h",
    };

    fn check(&self, text: &str) -> Result<f64, String> {
        let give = format!(
            "give a duration from 1ms to {} (e.g. 30s, 2m, 500ms)",
            self.max_shown
        );
        match super::parse_duration(text) {
            Ok(s) if (MIN_TIME_S..=self.max_s).contains(&s) => Ok(s),
            Ok(_) => Err(format!("is out of range: {give}")),
            Err(_)
                if text
                    .trim()
                    .trim_end_matches(['m', 's', 'h'])
                    .parse::<f64>()
                    .is_ok() =>
            {
                Err(format!("is out of range: {give}"))
            }
            Err(_) => Err(format!("is not a duration: {give}")),
        }
    }
}

parses_reals_by_check!(Time);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn whole_numbers_outside_the_range_are_refused_in_one_line() {
        let w = Whole::<usize>::new(1, 100, "files");
        assert_eq!(w.check("1"), Ok(1));
        assert_eq!(w.check("100"), Ok(100));
        for text in [
            "0",
            "101",
            "-1",
            "18446744073709551616",
            "99999999999999999999999",
        ] {
            let e = w.check(text).unwrap_err();
            assert_eq!(e, "is out of range: give 1 to 100 (files)", "{text}");
        }
        assert_eq!(
            w.check("lots").unwrap_err(),
            "is not a whole number: give 1 to 100 (files)"
        );
    }

    #[test]
    fn reals_refuse_nan_infinities_and_open_ends() {
        let r = Real::to_below(0.5, 1.0, "a confidence");
        assert_eq!(r.check("0.5"), Ok(0.5));
        for text in ["1", "0.4", "NaN", "nan", "inf", "-inf", "1e300"] {
            assert!(
                r.check(text)
                    .unwrap_err()
                    .starts_with("is out of range: give a number in [0.5, 1)"),
                "{text}"
            );
        }
        assert!(r.check("x").unwrap_err().starts_with("is not a number"));
        let above = Real::above_to(0.0, 10.0, "ns");
        assert!(above.check("0").is_err());
        assert_eq!(above.check("10"), Ok(10.0));
    }

    #[test]
    fn durations_past_the_maximum_are_refused() {
        assert_eq!(Time::DAY.check("24h"), Ok(DAY_S));
        assert_eq!(Time::HOUR.check("30s"), Ok(30.0));
        assert_eq!(Time::DAY.check("1ms"), Ok(MIN_TIME_S));
        for text in [
            "1e300s", "25h", "86401", "0", "0s", "-1s", "NaN", "infs", "1e-300s", "0.5ms",
        ] {
            let e = Time::DAY.check(text).unwrap_err();
            assert!(
                e.starts_with("is out of range: give a duration from 1ms to 24h"),
                "{text}: {e}"
            );
        }
        assert!(Time::DAY
            .check("soon")
            .unwrap_err()
            .starts_with("is not a duration"));
    }
}
