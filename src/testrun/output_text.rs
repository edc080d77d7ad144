//! The test run's report as text: a line on what ran, a table of the classes from the
//! cheapest, the notes, the gates.

use super::output::{ClassReport, TestRunReport};
use std::fmt::Write;

/// Print the report: the table, or `{"test_run": …}` with `json`.
pub fn emit(report: &TestRunReport, json: bool) -> anyhow::Result<()> {
    if json {
        let document = serde_json::json!({ "test_run": report });
        let text = serde_json::to_string_pretty(&document)?;
        return crate::out::stdout(&format!("{text}\n"));
    }
    crate::out::stdout(&table(report))
}

/// The whole report as text.
pub fn table(report: &TestRunReport) -> String {
    let mut text = String::new();
    let _ = writeln!(text, "{}", headline(report));
    let compare = report.compare.is_some();
    let _ = write!(
        text,
        "  {:<14} {:>7} {:>9}  {:<19} {:>6}",
        "verdict", "packets", "p50 ns", "interval", "R"
    );
    if compare {
        let _ = write!(
            text,
            "  {:<14} {:>9}  {:<24}",
            "B verdict", "B p50 ns", "B - A ns [interval]"
        );
    }
    let _ = writeln!(text, "  example");
    for class in &report.classes {
        let _ = writeln!(text, "{}", row(class));
    }
    for note in &report.notes {
        let _ = writeln!(text, "note: {note}");
    }
    for gate in &report.gates {
        let verdict = if gate.exceeded { "EXCEEDED" } else { "ok" };
        let _ = writeln!(text, "gate {verdict}: {}", gate.message);
    }
    text
}

fn headline(report: &TestRunReport) -> String {
    let against = report
        .compare
        .as_deref()
        .map_or(String::new(), |b| format!(", against {b} (B)"));
    let mode = match report.mode {
        "live_frames" => ", live frames",
        _ => "",
    };
    format!(
        "test run of {} ({}) in {}{against}{mode}: {} packets ({}) in {} classes; per class the median of its batches' per-run cost (the slope of calls of R and 2R runs) with its {:.0}% interval",
        report.program,
        report.kind,
        report.object,
        report.packets,
        report.packets_from,
        report.classes.len(),
        report.confidence * 100.0
    )
}

fn row(class: &ClassReport) -> String {
    let interval = format!("[{:.1}, {:.1}]", class.lo_ns, class.hi_ns);
    let mut line = format!(
        "  {:<14} {:>7} {:>9.1}  {:<19} {:>6}",
        class.verdict, class.packets, class.p50_ns, interval, class.repeat
    );
    if let Some(compare) = &class.compare {
        let delta = format!(
            "{:+.1} [{:+.1}, {:+.1}]",
            compare.delta_ns, compare.delta_lo_ns, compare.delta_hi_ns
        );
        let _ = write!(
            line,
            "  {:<14} {:>9.1}  {:<24}",
            compare.verdict, compare.p50_ns, delta
        );
    }
    let fresh = if class.timing == "fresh_copy" {
        " (fresh copy per run)"
    } else {
        ""
    };
    let _ = write!(line, "  {}{fresh}", class.example);
    line
}
