//! The report as text for a person: the same content as the JSON, in the order one reads a
//! profile — how much is BPF, where it hooks in, which programs, what they call, what to do.

use super::*;
use std::fmt::Write;

/// Render the whole report.
pub fn render(r: &Report) -> String {
    let mut s = String::new();
    header(&mut s, r);
    attach_points(&mut s, r);
    packet_hooks(&mut s, r);
    programs(&mut s, r);
    kernel_functions(&mut s, r);
    breakdown(&mut s, r);
    unresolved(&mut s, r);
    list(&mut s, "warnings", r.warnings.iter().map(String::as_str));
    s
}

fn header(s: &mut String, r: &Report) {
    let what = match (r.samples, &r.event) {
        (Some(n), Some(ev)) => {
            format!("{n} samples of {ev}, weighted by period ({})", r.count_unit)
        }
        (Some(n), None) if r.samples_source == SamplesSource::Counted => format!(
            "{n} samples (counted in the profile: no perf.data.json beside it to say the event)"
        ),
        (Some(n), None) => format!("{n} samples"),
        (None, Some(ev)) => format!("{ev}, sample count unknown"),
        (None, None) => "sample count unknown (no perf.data.json beside it, and the counts are periods, not samples)".to_string(),
    };
    let _ = writeln!(s, "{}: {what}", r.input);
    let b = &r.bpf;
    let n = b
        .samples
        .filter(|&n| n > 0)
        .map_or_else(String::new, |n| format!(" (about {n} samples)"));
    let _ = writeln!(
        s,
        "{:.1}% of the samples are inside BPF programs{n}",
        b.percent
    );
    if b.glue_percent > 0.0 {
        let _ = writeln!(
            s,
            "  {:.1}% in named programs, {:.1}% in glue above them (trampolines, dispatchers, unresolved frames)",
            b.programs_percent, b.glue_percent
        );
    }
    if let Some(ran) = r.programs_ran.as_ref().filter(|p| !p.fired()) {
        let _ = writeln!(
            s,
            "  the loaded programs did not run during the benchmark ({:.2} runs per timed {}): see the first warning",
            ran.runs_per_op, ran.op
        );
    }
    if b.unresolved_under_runners_percent > 0.0 {
        let _ = writeln!(
            s,
            "  {:.1}% more in unresolved frames right under a function that runs BPF programs: probably programs perf could not name",
            b.unresolved_under_runners_percent
        );
    }
}

fn attach_points(s: &mut String, r: &Report) {
    if r.attach_points.is_empty() {
        return;
    }
    let _ = writeln!(
        s,
        "\nattach points (the nearest non-BPF frame above the programs)"
    );
    for a in &r.attach_points {
        if a.name == walk::CALLER_LOST {
            let _ = writeln!(s, "  {}: {:.1}% of all samples: the kernel call chain stops at the BPF frame (sampled in a program's prologue, before it saved its frame pointer)", a.name, a.bpf_percent);
            continue;
        }
        let via = if a.via.is_empty() {
            String::new()
        } else {
            format!(", entered via {}", a.via.join(", "))
        };
        let _ = writeln!(
            s,
            "  {}: {:.1}% of all samples, {:.1}% of it inside BPF{via}",
            a.name, a.percent, a.bpf_share_of_it
        );
        for (rel, anc) in [("parent", &a.parent), ("grandparent", &a.grandparent)] {
            if let Some(p) = anc {
                let _ = writeln!(
                    s,
                    "    {rel} {} ({:.1}% of all samples): {} holds {:.1}% of it",
                    p.name, p.percent, a.name, p.hook_share
                );
            }
        }
        if let Some(line) = several_programs(a) {
            let _ = writeln!(s, "    {line}");
        }
    }
}

fn packet_hooks(s: &mut String, r: &Report) {
    if r.packet_hooks.is_empty() {
        return;
    }
    let _ = writeln!(
        s,
        "\npacket hooks (the attach points read from their callers)"
    );
    for h in &r.packet_hooks {
        let _ = writeln!(
            s,
            "  {}: {:.1}% of all samples inside BPF, at {}",
            h.what,
            h.bpf_percent,
            h.attach_points.join(", ")
        );
    }
}

/// What it means that several programs were entered at one attach point: each attached to an
/// event of its own that this function runs, or a tail-call target in its caller's place, as
/// far as the recording's program list tells.
fn several_programs(a: &crate::report::AttachPoint) -> Option<String> {
    let count = a.programs.len();
    if count < 2 {
        return None;
    }
    Some(match &a.attached_nowhere {
        None => format!("{count} programs entered here: each is attached to an event this function runs, or a tail-call target (a tail call replaces its caller's frame, so the target shows in the caller's place)"),
        Some(targets) if targets.is_empty() => format!("{count} programs entered here, each attached to an event of its own that this function runs"),
        Some(targets) => format!(
            "{count} programs entered here: {} attached nowhere, so entered by a tail call (a tail call replaces its caller's frame, so the target shows in the caller's place)",
            targets.join(", ")
        ),
    })
}

fn programs(s: &mut String, r: &Report) {
    if r.programs.is_empty() {
        return;
    }
    let _ = writeln!(
        s,
        "\nprograms (% of all samples; self = in its own JIT-ed code: not in sub-functions, not in helpers)"
    );
    let _ = writeln!(s, "  {:>7} {:>7}  name", "incl", "self");
    for p in &r.programs {
        let id = p.id.map_or_else(String::new, |i| format!(" (id {i})"));
        let _ = writeln!(
            s,
            "  {:>6.1}% {:>6.1}%  {}{id}, entered from {}",
            p.percent,
            p.self_percent,
            p.name,
            p.attach_points.join(", ")
        );
        for f in p.functions.iter().filter(|f| f.name != p.name) {
            function_line(s, f);
        }
    }
    if !r.not_sampled.is_empty() {
        let names: Vec<String> = r
            .not_sampled
            .iter()
            .map(|p| match p.id {
                Some(i) => format!("{} (id {i})", p.name),
                None => p.name.clone(),
            })
            .collect();
        let _ = writeln!(s, "  in the run record but on no sampled stack: {} (too short to be sampled, or a program that tail-calls at once: its target then stands in its place)", names.join(", "));
    }
}

fn function_line(s: &mut String, f: &Function) {
    let indent = "  ".repeat(f.depth.unwrap_or(1).max(1));
    let from = f
        .called_from
        .as_deref()
        .map_or_else(String::new, |c| format!(", below {c}"));
    let short = if f.unwound_short_percent > 0.0 {
        format!(
            "; {} seen right under the attach point (sampled in its prologue, caller lost)",
            small(f.unwound_short_percent)
        )
    } else {
        String::new()
    };
    let _ = writeln!(
        s,
        "  {:>6.1}% {:>6.1}%  {indent}{} (sub-function by stack position{from}){short}",
        f.percent, f.self_percent, f.name
    );
}

fn kernel_functions(s: &mut String, r: &Report) {
    if r.kernel_functions.is_empty() {
        return;
    }
    let _ = writeln!(
        s,
        "\nkernel functions the programs spend time in (% of all samples, under BPF code only)"
    );
    let _ = writeln!(s, "  {:>7} {:>7}  name", "incl", "self");
    for k in &r.kernel_functions {
        let cat = k
            .category
            .map_or_else(String::new, |c| format!(" [{}]", c.label()));
        let callers: Vec<String> = k
            .called_from
            .iter()
            .map(|c| format!("{} {:.1}%", c.name, c.percent))
            .collect();
        let _ = writeln!(
            s,
            "  {:>6.1}% {:>6.1}%  {}{cat}, from {}",
            k.percent,
            k.self_percent,
            k.name,
            callers.join(", ")
        );
    }
}

fn breakdown(s: &mut String, r: &Report) {
    if r.breakdown.is_empty() {
        return;
    }
    let parts: Vec<String> = r
        .breakdown
        .iter()
        .map(|c| format!("{} {:.1}%", c.category.label(), c.share_of_bpf))
        .collect();
    let _ = writeln!(s, "\nwhere the time inside BPF goes: {}", parts.join(", "));
    if r.bpf.samples.is_some_and(|n| n < r.bpf.min_samples) {
        let _ = writeln!(
            s,
            "  too few samples inside BPF for a hint (see the warnings)"
        );
    } else if r.hints.is_empty() {
        let _ = writeln!(
            s,
            "  no pattern with a change behind it takes {ACTION_SHARE:.0}% or more of it, and own code not {HINT_SHARE:.0}%: no hint"
        );
    }
    for h in &r.hints {
        let _ = writeln!(s, "  hint: {}", h.text);
    }
}

fn unresolved(s: &mut String, r: &Report) {
    if r.resolved.is_empty() && r.unresolved.is_empty() {
        return;
    }
    let _ = writeln!(s, "\nunresolved frames");
    for o in &r.resolved {
        let _ = writeln!(
            s,
            "  {} named {} from the kallsyms snapshot",
            o.frame,
            o.symbol.as_deref().unwrap_or("?")
        );
    }
    for u in &r.unresolved {
        let what = match u.role {
            Role::Glue => {
                "above the programs: JIT glue (a trampoline or dispatcher) with no symbol"
            }
            Role::InProgram => "among a program's frames",
            Role::UnderRunner => "probably a BPF program perf could not name",
            Role::Kernel => "kernel code perf could not name",
        };
        let near = u.nearest.as_deref().map_or_else(String::new, |n| {
            format!(" (nearest symbol below: {n}, its end unknown)")
        });
        let _ = writeln!(
            s,
            "  {:>6.1}%  {} under {}: {what}{near}",
            u.percent, u.frame, u.parent
        );
    }
}

/// A share that may round to nothing: `<0.1%` rather than `0.0%`.
fn small(p: f64) -> String {
    if p > 0.0 && p < 0.05 {
        "<0.1%".into()
    } else {
        format!("{p:.1}%")
    }
}

fn list<'a>(s: &mut String, title: &str, items: impl Iterator<Item = &'a str>) {
    let mut items = items.peekable();
    if items.peek().is_none() {
        return;
    }
    let _ = writeln!(s, "\n{title}");
    for i in items {
        let _ = writeln!(s, "  - {i}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn point(programs: &[&str], nowhere: Option<&[&str]>) -> crate::report::AttachPoint {
        crate::report::AttachPoint {
            name: "trace_call_bpf".into(),
            percent: 50.0,
            bpf_percent: 40.0,
            bpf_share_of_it: 80.0,
            parent: None,
            grandparent: None,
            programs: programs.iter().map(|p| p.to_string()).collect(),
            via: Vec::new(),
            attached_nowhere: nowhere.map(|n| n.iter().map(|p| p.to_string()).collect()),
        }
    }

    #[test]
    fn a_tail_call_is_named_only_where_there_is_one() {
        assert_eq!(several_programs(&point(&["a"], Some(&[]))), None);
        let opensnoop = point(
            &[
                "tracepoint__syscalls__sys_enter_openat",
                "tracepoint__syscalls__sys_exit_openat",
            ],
            Some(&[]),
        );
        let said = several_programs(&opensnoop).unwrap();
        assert_eq!(
            said,
            "2 programs entered here, each attached to an event of its own that this function runs"
        );
        let tail = point(
            &["enforce_access_policy", "tail_call_security_check"],
            Some(&["enforce_access_policy"]),
        );
        let said = several_programs(&tail).unwrap();
        assert!(said.starts_with("2 programs entered here: enforce_access_policy attached nowhere, so entered by a tail call"), "{said}");
        let unknown = several_programs(&point(&["a", "b"], None)).unwrap();
        assert!(unknown.contains("or a tail-call target"), "{unknown}");
    }
}
