//! The CI gates of a test run: `--max-p50-ns` on each class's p50 (on its difference with
//! `--compare`), `--max-p50-pct` on the difference in percent of the first object's p50.
//! A gate is exceeded when the lower end of the interval it looks at is above its limit.

use super::output::{ClassReport, GateReport};
use super::Gates;

/// Every gate on every class.
pub fn evaluate(gates: &Gates, classes: &[ClassReport]) -> Vec<GateReport> {
    let mut reports = Vec::new();
    for class in classes {
        if let Some(limit) = gates.max_p50_ns {
            reports.push(nanoseconds(limit, class));
        }
        if let (Some(limit), Some(compare)) = (gates.max_p50_pct, &class.compare) {
            let lower_end = compare.delta_lo_ns / class.p50_ns * 100.0;
            reports.push(report("max_p50_pct", limit, class, lower_end, "%"));
        }
    }
    reports
}

fn nanoseconds(limit: f64, class: &ClassReport) -> GateReport {
    match &class.compare {
        Some(compare) => report("max_p50_ns", limit, class, compare.delta_lo_ns, " ns more"),
        None => report("max_p50_ns", limit, class, class.lo_ns, " ns"),
    }
}

fn report(
    gate: &'static str,
    limit: f64,
    class: &ClassReport,
    lower_end: f64,
    unit: &str,
) -> GateReport {
    let exceeded = lower_end > limit;
    let name = format!("{} {}", class.verdict, class.example);
    GateReport {
        gate,
        limit,
        class: name.clone(),
        lower_end,
        exceeded,
        message: format!(
            "--{} {limit}: {name} is at least {lower_end:.1}{unit} per run",
            gate.replace('_', "-")
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testrun::output::CompareReport;

    fn class(lo_ns: f64, compare: Option<CompareReport>) -> ClassReport {
        ClassReport {
            verdict: "XDP_PASS".into(),
            retval: 2,
            family: crate::testrun::classes::Family::Ipv4,
            protocol: "TCP".into(),
            destination_port: Some(443),
            packets: 8,
            p50_ns: lo_ns + 5.0,
            lo_ns,
            hi_ns: lo_ns + 10.0,
            kernel_p50_ns: lo_ns + 5.0,
            batches: 400,
            repeat: 28,
            timing: "slope",
            rewrites: false,
            example: "TCP 10.0.0.1:41000 > 10.0.0.2:443 SYN".into(),
            compare,
        }
    }

    #[test]
    fn a_gate_is_exceeded_only_when_the_lower_end_is_above_it() {
        let gates = Gates {
            max_p50_ns: Some(100.0),
            max_p50_pct: None,
        };
        let over = evaluate(&gates, &[class(100.5, None)]);
        assert!(over[0].exceeded, "{over:?}");
        assert!(
            over[0].message.contains("--max-p50-ns 100"),
            "{}",
            over[0].message
        );
        let within = evaluate(&gates, &[class(99.5, None)]);
        assert!(!within[0].exceeded);
    }

    #[test]
    fn with_compare_the_gates_look_at_the_difference() {
        let compare = CompareReport {
            verdict: "XDP_PASS".into(),
            p50_ns: 130.0,
            lo_ns: 128.0,
            hi_ns: 132.0,
            delta_ns: 30.0,
            delta_lo_ns: 28.0,
            delta_hi_ns: 32.0,
        };
        let gates = Gates {
            max_p50_ns: Some(25.0),
            max_p50_pct: Some(30.0),
        };
        // p50 of the first object 105: 28 ns is 26.7% of it.
        let reports = evaluate(&gates, &[class(100.0, Some(compare))]);
        assert_eq!(reports.len(), 2);
        assert!(reports[0].exceeded, "28 > 25 ns");
        assert!(!reports[1].exceeded, "26.7% < 30%");
    }
}
