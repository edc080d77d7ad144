//! [`Annotation`] as text for a person: per BPF function its hottest source lines with their
//! inclusive and self shares of all samples, the share of the function, and the helpers each
//! line spent its time in; `--asm` instructions under each line; notes last.

use std::fmt::Write;

use super::build::{Annotation, Line, Program};

/// Renders the annotation.
pub fn render(a: &Annotation) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{}: {:.1}% of the samples' weight is in BPF programs the header describes{}",
        a.input,
        a.bpf_percent,
        if a.unmapped_bpf_percent >= 0.01 {
            format!(
                ", {:.2}% in BPF code without program info",
                a.unmapped_bpf_percent
            )
        } else {
            String::new()
        }
    );
    let _ = writeln!(
        s,
        "incl: the line is the innermost BPF frame (its own code, or a helper it called); self: the CPU was in the line's code; % of all samples"
    );
    for p in &a.programs {
        program(&mut s, p);
    }
    if !a.notes.is_empty() {
        let _ = writeln!(s, "\nnotes");
        for n in &a.notes {
            let _ = writeln!(s, "  {n}");
        }
    }
    s
}

fn program(s: &mut String, p: &Program) {
    let sub = p
        .subprogram_of
        .as_ref()
        .map_or_else(String::new, |m| format!(", sub-program of {m}"));
    let _ = writeln!(
        s,
        "\n{} (prog id {}{sub}): {:.1}% incl, {:.1}% self",
        p.name, p.id, p.percent, p.self_percent
    );
    let _ = writeln!(
        s,
        "  {:<24} {:>6} {:>6} {:>6}  source",
        "line", "incl%", "self%", "of fn"
    );
    for l in &p.lines {
        line(s, l);
    }
}

fn line(s: &mut String, l: &Line) {
    let place = match (&l.offset, l.line) {
        (Some(off), _) => off.clone(),
        (None, 0) => format!("{}:?", l.file),
        (None, n) => format!("{}:{n}", l.file),
    };
    let source = if l.line == 0 && l.offset.is_none() {
        "(code clang gave no line: spills, loop set-up)".to_string()
    } else {
        l.source.clone()
    };
    let helpers: Vec<String> = l
        .helpers
        .iter()
        .filter(|h| h.percent >= 0.05)
        .take(3)
        .map(|h| format!("in {} {:.1}%", h.name, h.percent))
        .collect();
    let tail = if helpers.is_empty() {
        String::new()
    } else {
        format!("   {}", helpers.join(", "))
    };
    let _ = writeln!(
        s,
        "  {:<24} {:>6.1} {:>6.1} {:>6.1}  {}{tail}",
        place,
        l.incl_percent,
        l.self_percent,
        l.function_percent,
        clip(&source, 60)
    );
    for i in l.asm.iter().flatten() {
        let call = if i.call_percent > 0.0 {
            format!("   calls {:.1}%", i.call_percent)
        } else {
            String::new()
        };
        let _ = writeln!(
            s,
            "      +{:<6x} {:>6.1}  {}{call}",
            i.offset, i.self_percent, i.text
        );
    }
}

/// At most `n` characters, with `…` when cut.
fn clip(text: &str, n: usize) -> String {
    if text.chars().count() <= n {
        return text.to_string();
    }
    let mut t: String = text.chars().take(n - 1).collect();
    t.push('…');
    t
}
