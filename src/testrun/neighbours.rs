//! How busy the CPUs other than the timing one were while the batches ran, from `/proc/stat`.
//! What a test run costs on one CPU moves with what the other CPUs do (on a VM of two CPUs a
//! memory-bound loop on the other one doubled it), so a report made while they were busy
//! says so: its figures are this moment's, and may not match a run on an idle machine.

use crate::host::Host;

/// Busy and total time of the other CPUs, in clock ticks since boot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ticks {
    busy: u64,
    total: u64,
}

/// The other CPUs' ticks now; `None` when `/proc/stat` cannot be read or lists no other CPU.
pub fn others(host: &Host, timing_cpu: u32) -> Option<Ticks> {
    parse(&host.read("proc/stat").ok()?, timing_cpu)
}

/// The `cpuN` lines of `/proc/stat` but the timing CPU's, summed: busy is all but idle and
/// iowait, of user, nice, system, idle, iowait, irq, softirq and steal.
fn parse(stat: &str, timing_cpu: u32) -> Option<Ticks> {
    let mut sum = Ticks { busy: 0, total: 0 };
    let mut seen = false;
    for line in stat.lines() {
        let mut fields = line.split_whitespace();
        let Some(number) = fields.next().and_then(|name| name.strip_prefix("cpu")) else {
            continue;
        };
        if number
            .parse::<u32>()
            .ok()
            .is_none_or(|cpu| cpu == timing_cpu)
        {
            continue;
        }
        let values: Vec<u64> = fields.take(8).filter_map(|v| v.parse().ok()).collect();
        if values.len() < 8 {
            continue;
        }
        let total: u64 = values.iter().sum();
        sum.total += total;
        sum.busy += total - values[3] - values[4];
        seen = true;
    }
    seen.then_some(sum)
}

/// The share of the time the other CPUs were busy between two readings, in percent.
pub fn busy_percent(before: Ticks, after: Ticks) -> Option<f64> {
    let total = after.total.checked_sub(before.total)?;
    let busy = after.busy.checked_sub(before.busy)?;
    (total > 0).then(|| 100.0 * busy as f64 / total as f64)
}

/// From this share on, the report says the other CPUs were busy.
const NOTE_FROM_PERCENT: f64 = 25.0;

/// The report's note when the other CPUs were busy while the batches ran.
pub fn note(percent: f64) -> Option<String> {
    (percent >= NOTE_FROM_PERCENT).then(|| {
        format!(
            "the other CPUs were busy {percent:.0}% of the time the batches ran: what a run costs moves with what they do (on a VM of two CPUs a memory-bound loop on the other one doubled it), so these figures are this moment's; compare runs made on an idle machine"
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const STAT: &str = "cpu  300 0 100 1000 0 0 0 0 0 0\n\
        cpu0 100 0 50 800 50 0 0 0 0 0\n\
        cpu1 200 0 50 200 0 0 0 0 0 0\n\
        intr 12345\n";

    #[test]
    fn the_timing_cpu_and_the_total_line_are_left_out() {
        assert_eq!(
            parse(STAT, 1),
            Some(Ticks {
                busy: 150,
                total: 1000
            })
        );
        assert_eq!(
            parse(STAT, 0),
            Some(Ticks {
                busy: 250,
                total: 450
            })
        );
        assert_eq!(
            parse("cpu  1 2 3 4 5 6 7 8\ncpu0 1 2 3 4 5 6 7 8\n", 0),
            None
        );
    }

    #[test]
    fn a_busy_share_above_a_quarter_is_noted() {
        let before = Ticks {
            busy: 100,
            total: 1000,
        };
        let after = Ticks {
            busy: 400,
            total: 1400,
        };
        let percent = busy_percent(before, after).expect("share");
        assert!((percent - 75.0).abs() < 1e-9, "{percent}");
        assert!(note(percent).expect("note").contains("busy 75%"));
        assert_eq!(note(10.0), None);
        assert_eq!(busy_percent(after, after), None, "no time passed");
        assert_eq!(busy_percent(after, before), None, "counters went back");
    }
}
