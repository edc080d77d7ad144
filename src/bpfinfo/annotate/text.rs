//! [`Annotation`] as text for a person: per BPF function its hottest source lines with their
//! inclusive and self shares of all samples, the share of the function, and the helpers each
//! line spent its time in; `--asm` instructions under each line; notes last.

use std::fmt::Write;

use super::build::{Annotation, Line, Program};

/// Renders the annotation.
pub fn render(annotation: &Annotation) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{}: {:.1}% of the samples' weight is in BPF programs the header describes{}",
        annotation.input,
        annotation.bpf_percent,
        if annotation.unmapped_bpf_percent >= 0.01 {
            format!(
                ", {:.2}% in BPF code without program info",
                annotation.unmapped_bpf_percent
            )
        } else {
            String::new()
        }
    );
    let _ = writeln!(
        out,
        "incl: the line is the innermost BPF frame (its own code, or a helper it called); self: the CPU was in the line's code; % of all samples"
    );
    for prog in &annotation.programs {
        program(&mut out, prog);
    }
    if !annotation.notes.is_empty() {
        let _ = writeln!(out, "\nnotes");
        for note in &annotation.notes {
            let _ = writeln!(out, "  {note}");
        }
    }
    out
}

fn program(out: &mut String, prog: &Program) {
    let sub = prog
        .subprogram_of
        .as_ref()
        .map_or_else(String::new, |m| format!(", sub-program of {m}"));
    let _ = writeln!(
        out,
        "\n{} (prog id {}{sub}): {:.1}% incl, {:.1}% self",
        prog.name, prog.id, prog.percent, prog.self_percent
    );
    let _ = writeln!(
        out,
        "  {:<24} {:>6} {:>6} {:>6}  source",
        "line", "incl%", "self%", "of fn"
    );
    for row in &prog.lines {
        line(out, row);
    }
}

fn line(out: &mut String, row: &Line) {
    let place = match (&row.offset, row.line) {
        (Some(off), _) => off.clone(),
        (None, 0) => format!("{}:?", row.file),
        (None, number) => format!("{}:{number}", row.file),
    };
    let source = if row.line == 0 && row.offset.is_none() {
        "(code clang gave no line: spills, loop set-up)".to_string()
    } else {
        row.source.clone()
    };
    let helpers: Vec<String> = row
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
        out,
        "  {:<24} {:>6.1} {:>6.1} {:>6.1}  {}{tail}",
        place,
        row.incl_percent,
        row.self_percent,
        row.function_percent,
        clip(&source, 60)
    );
    for insn in row.asm.iter().flatten() {
        let call = if insn.call_percent > 0.0 {
            format!("   calls {:.1}%", insn.call_percent)
        } else {
            String::new()
        };
        let target = insn
            .call_target
            .as_deref()
            .map_or(String::new(), |target| format!(" {target}"));
        let _ = writeln!(
            out,
            "      +{:<6x} {:>6.1}  {}{target}{call}",
            insn.offset, insn.self_percent, insn.text
        );
    }
}

/// At most `n` characters, with `…` when cut.
fn clip(text: &str, width: usize) -> String {
    if text.chars().count() <= width {
        return text.to_string();
    }
    let mut clipped: String = text.chars().take(width - 1).collect();
    clipped.push('…');
    clipped
}
