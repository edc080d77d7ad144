//! `ebpf-prof doctor`: every precondition of `record` ([`crate::doctor`]), one line each, with
//! the command that fixes each problem, then every loaded BPF program (as the write-up's
//! `bpftool prog show`). Exits 0 only when `record` (with the same `--filter`) can run.

use crate::bpf::InventoryProgram;
use crate::doctor::{checks, filter, listed, loaded_programs, Check, DoctorOptions, Status};
use crate::error::check;
use crate::host::Host;
use anyhow::Result;

/// Run doctor and print; Err(check) when record cannot run.
pub fn run(opts: &DoctorOptions) -> Result<()> {
    let host = Host::live();
    let loaded = loaded_programs(&host);
    let v = checks(&host, opts, &loaded)?;
    let filter = filter(opts)?;
    let shown = loaded
        .as_ref()
        .map(|l| listed(l, filter.as_ref()))
        .unwrap_or_default();
    let blocked = v.iter().filter(|c| c.status == Status::Fail).count();
    // What the attachment walk could not read (a namespace not entered, no tcx), so that
    // "attached nowhere" is read knowing what was looked at.
    let not_read = match &loaded {
        Ok(_) => crate::bpf::attachments::seen(&host).notes,
        Err(_) => Vec::new(),
    };
    let text = if opts.json {
        let doc = serde_json::json!({
            "schema": crate::out::JSON_SCHEMA,
            "can_record": blocked == 0,
            "checks": v,
            "programs": loaded.as_ref().ok().map(|_| &shown),
            "attachments_not_read": not_read,
        });
        serde_json::to_string_pretty(&doc)? + "\n"
    } else {
        text(&v, loaded.is_ok().then_some(&shown[..])) + &not_read_lines(&not_read)
    };
    crate::out::stdout(&text)?;
    if blocked > 0 {
        return Err(check(format!(
            "{blocked} blocker(s): record cannot run until they are fixed"
        )));
    }
    Ok(())
}

fn text(v: &[Check], programs: Option<&[&InventoryProgram]>) -> String {
    let mut s = String::new();
    for c in v {
        let tag = match c.status {
            Status::Ok => "ok  ",
            Status::Warn => "warn",
            Status::Fail => "FAIL",
        };
        s.push_str(&format!("{tag} {:<26} {}\n", c.name, c.detail));
        if let Some(f) = &c.fix {
            s.push_str(&format!("     {:<26} fix: {f}\n", ""));
        }
    }
    if let Some(p) = programs {
        s.push_str(&program_table(p));
    }
    s
}

/// One line for each thing the attachment walk could not read, under the program table.
fn not_read_lines(notes: &[String]) -> String {
    notes
        .iter()
        .map(|note| format!("  attachments: {note}\n"))
        .collect()
}

/// The loaded programs, one line each: id, type, attach point, tag, name, runs and mean ns
/// when run statistics are on.
pub fn program_table(p: &[&InventoryProgram]) -> String {
    let mut s = format!("\nloaded BPF programs ({}):\n", p.len());
    if p.is_empty() {
        return s + "  none\n";
    }
    s.push_str(&format!(
        "  {:>6}  {:<16} {:<40} {:<16}  {}\n",
        "id", "type", "attached to", "tag", "name"
    ));
    for p in p {
        let runs = match (p.run_cnt, p.mean_run_ns) {
            (Some(n), Some(m)) => format!("  {n} runs, {m:.0} ns mean"),
            (Some(n), None) => format!("  {n} runs"),
            _ => String::new(),
        };
        s.push_str(&format!(
            "  {:>6}  {:<16} {:<40} {:<16}  {}{runs}\n",
            p.id,
            p.prog_type,
            attached_words(p),
            p.tag,
            p.name
        ));
    }
    s
}

/// Where a program is attached, or that it is attached nowhere (never a bare "-"). A program
/// held by a link whose info does not name its target (a tracepoint's perf_event link before
/// kernel 6.6) is said to be attached somewhere unnamed, not shown as unattached.
fn attached_words(p: &InventoryProgram) -> String {
    match (&p.attach, p.attached, &p.loaded_for) {
        (Some(points), _, _) => points.clone(),
        (None, true, _) => "? (the link does not say)".to_string(),
        (None, false, Some(target)) => format!("({target}: attached nowhere)"),
        (None, false, None) => format!("({})", crate::bpf::attachments::nowhere(&p.prog_type)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn program(id: u32, name: &str, runs: Option<(u64, f64)>) -> InventoryProgram {
        InventoryProgram {
            id,
            name: name.into(),
            tag: "b384d88950b7bbb9".into(),
            prog_type: "tracepoint".into(),
            attach: Some("tracepoint raw_syscalls/sys_enter".into()),
            attach_points: vec!["tracepoint raw_syscalls/sys_enter".into()],
            attached: true,
            loaded_for: None,
            symbol: None,
            functions: Vec::new(),
            traced_kind: true,
            run_cnt: runs.map(|r| r.0),
            mean_run_ns: runs.map(|r| r.1),
            map_ids: vec![7],
        }
    }

    /// Regression: on kernels before 6.6 a tracepoint program's link does not name its
    /// tracepoint; the table says so instead of calling it attached nowhere.
    #[test]
    fn regression_a_link_that_does_not_say_where_is_not_shown_unattached() {
        let mut linked = program(1, "on_link", None);
        linked.attach = None;
        let mut loose = program(2, "loose", None);
        loose.attach = None;
        loose.attached = false;
        let t = program_table(&[&linked, &loose]);
        let line = |id: &str| {
            t.lines()
                .find(|l| l.trim_start().starts_with(id))
                .unwrap_or_else(|| panic!("{t}"))
        };
        assert!(line("1").contains("? (the link does not say)"), "{t}");
        assert!(line("2").contains("attached nowhere"), "{t}");
    }

    /// Id, type, attach point, tag and name on each line, and the run count
    /// and mean ns when run statistics are on.
    #[test]
    fn program_table_lists_each_field_and_the_run_stats_when_on() {
        let (with, without) = (
            program(25554, "sys_enter", Some((20600, 392.4))),
            program(25556, "sys_exit", None),
        );
        let t = program_table(&[&with, &without]);
        assert!(t.contains("loaded BPF programs (2):"), "{t}");
        let line = |id: &str| {
            t.lines()
                .find(|l| l.trim_start().starts_with(id))
                .unwrap_or_else(|| panic!("{t}"))
        };
        let on = line("25554");
        for part in [
            "25554",
            "tracepoint",
            "tracepoint raw_syscalls/sys_enter",
            "b384d88950b7bbb9",
            "sys_enter  20600 runs, 392 ns mean",
        ] {
            assert!(on.contains(part), "{part:?} in {on:?}");
        }
        let mut nowhere = program(25557, "tail_target", None);
        nowhere.attach = None;
        nowhere.attached = false;
        let t_nowhere = program_table(&[&nowhere]);
        assert!(
            t_nowhere.contains("(loaded, attached nowhere)"),
            "{t_nowhere}"
        );
        let off = line("25556");
        assert!(
            off.ends_with("sys_exit") && !off.contains("runs"),
            "{off:?}"
        );
        assert!(program_table(&[]).contains("none"));
    }

    #[test]
    fn what_the_attachment_walk_did_not_read_is_listed_under_the_table() {
        let notes = ["this kernel has no tcx (Linux 6.6+): nothing to read there".to_string()];
        assert_eq!(
            not_read_lines(&notes),
            "  attachments: this kernel has no tcx (Linux 6.6+): nothing to read there\n"
        );
        assert_eq!(not_read_lines(&[]), "");
    }
}
