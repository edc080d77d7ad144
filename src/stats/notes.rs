//! Sentences about the rounds and caveats of a comparison: noted, never used to drop data.
//!
//! - rounds without a partner, or with no samples, are left out of the pairs and said so;
//! - with very few pairs no sign interval reaches the asked confidence: say what the
//!   interval shown achieves;
//! - a round whose longest sample is at least 10 ms is counted: far above the rare 10 µs–5 ms
//!   outliers of a healthy round, and the size of an RT-throttling stall (with the default
//!   `kernel.sched_rt_runtime_us = 950000` of a 1 s period, a SCHED_FIFO task that spins is
//!   parked for up to 50 ms each second).

use super::comparison::{Comparison, RoundSummary};
use super::modes::round_list;
use super::rank::critical_rank;

/// A round whose longest sample is at least this long is noted as a likely RT-throttling stall.
pub(crate) const STALL_NS: u64 = 10_000_000;

/// Notes on the `comparison` of the rounds `base` and `treat` (arms named `names`).
pub(super) fn comparison_notes(
    comparison: &Comparison,
    base: &[RoundSummary],
    treat: &[RoundSummary],
    names: &[String; 2],
) -> Vec<String> {
    let mut notes = Vec::new();
    if base.len() != treat.len() {
        notes.push(format!(
            "{} has {} rounds and {} has {}: only the first {} pairs are compared.",
            names[0],
            base.len(),
            names[1],
            treat.len(),
            base.len().min(treat.len())
        ));
    }
    for (index, (base_round, treat_round)) in base.iter().zip(treat).enumerate() {
        if base_round.n == 0 || treat_round.n == 0 {
            notes.push(format!(
                "Round {} is left out: one of its arms has no samples.",
                index + 1
            ));
        }
    }
    if let Some(diff) = comparison
        .diffs
        .first()
        .filter(|diff| diff.confidence < comparison.confidence - 1e-9)
    {
        let enough = (1..64)
            .find(|&pairs| critical_rank(pairs, comparison.confidence).1 >= comparison.confidence)
            .unwrap_or(64);
        notes.push(format!(
            "With {} pairs no interval reaches {:.0}%: each interval shown spans the whole range of \
             the pair differences, a {:.0}% interval; give at least {enough} pairs \
             (--rounds {enough}) for {:.0}%.",
            comparison.rounds,
            100.0 * comparison.confidence,
            100.0 * diff.confidence,
            100.0 * comparison.confidence
        ));
    }
    for (name, rounds) in names.iter().zip([base, treat]) {
        notes.extend(stall_note(name, rounds));
    }
    notes
}

/// One sentence for the rounds of an arm whose longest sample suggests RT throttling.
fn stall_note(arm: &str, rounds: &[RoundSummary]) -> Option<String> {
    let stalled: Vec<usize> = (0..rounds.len())
        .filter(|&i| rounds[i].max >= STALL_NS)
        .collect();
    let longest = stalled.iter().map(|&i| rounds[i].max).max()?;
    Some(format!(
        "{arm}: {} of {} rounds (round {}) had a sample of 10 ms or more (longest {:.1} ms) — a \
         stall this long is what RT throttling does (`sysctl kernel.sched_rt_runtime_us \
         kernel.sched_rt_period_us`); kept.",
        stalled.len(),
        rounds.len(),
        round_list(&stalled),
        longest as f64 / 1e6
    ))
}
