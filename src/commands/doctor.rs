//! `ebpf-prof doctor`: every precondition of `record` ([`crate::doctor`]), one line each, with
//! the command that fixes each problem. Exits 0 only when `record` can run.

use crate::doctor::{checks, DoctorOptions, Status};
use crate::error::check;
use crate::host::Host;
use anyhow::Result;

/// Run doctor and print; Err(check) when record cannot run.
pub fn run(opts: &DoctorOptions) -> Result<()> {
    let v = checks(&Host::live(), opts)?;
    let blocked = v.iter().filter(|c| c.status == Status::Fail).count();
    let text = if opts.json {
        let doc = serde_json::json!({
            "schema": crate::out::JSON_SCHEMA,
            "can_record": blocked == 0,
            "checks": v,
        });
        serde_json::to_string_pretty(&doc)? + "\n"
    } else {
        let mut s = String::new();
        for c in &v {
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
        s
    };
    crate::out::stdout(&text)?;
    if blocked > 0 {
        return Err(check(format!(
            "{blocked} blocker(s): record cannot run until they are fixed"
        )));
    }
    Ok(())
}
