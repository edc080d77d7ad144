//! Every precondition of `record`, one check each (ok/warn/fail), with the exact command that
//! fixes each warn or fail; read from a [`Host`] (the live machine, or a fixture tree in tests).

mod checks;

use crate::bpf::InventoryProgram;
use crate::host::Host;
use crate::perf::PerfChoice;
use crate::recording::filter_regex;
use anyhow::Result;
use serde::Serialize;

/// How a check came out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    Ok,
    Warn,
    Fail,
}

/// One line of the doctor's report.
#[derive(Debug, Clone, Serialize)]
pub struct Check {
    pub name: String,
    pub status: Status,
    pub detail: String,
    /// The command that fixes it, for warn and fail.
    pub fix: Option<String>,
}

pub(crate) fn ok(name: &str, detail: impl Into<String>) -> Check {
    Check {
        name: name.into(),
        status: Status::Ok,
        detail: detail.into(),
        fix: None,
    }
}

pub(crate) fn warn(name: &str, detail: impl Into<String>, fix: impl Into<String>) -> Check {
    Check {
        name: name.into(),
        status: Status::Warn,
        detail: detail.into(),
        fix: Some(fix.into()),
    }
}

pub(crate) fn fail(name: &str, detail: impl Into<String>, fix: impl Into<String>) -> Check {
    Check {
        name: name.into(),
        status: Status::Fail,
        detail: detail.into(),
        fix: Some(fix.into()),
    }
}

/// What doctor takes.
#[derive(Debug, Clone)]
pub struct DoctorOptions {
    pub filter: Option<String>,
    pub json: bool,
    pub perf: PerfChoice,
}

/// Every BPF program loaded right now ([`crate::bpf::inventory`]), named from `host`'s
/// kallsyms; the error says why they could not be listed (not root, most often).
pub fn loaded_programs(host: &Host) -> std::result::Result<Vec<InventoryProgram>, String> {
    let syms = crate::host::kallsyms::read(host)
        .map(|s| crate::host::kallsyms::bpf_programs(&s))
        .unwrap_or_default();
    let stats_on = crate::bpf::run_stats_state(host).enabled();
    crate::bpf::inventory(&syms, stats_on).map_err(|err| {
        let needs_root = if crate::host::security::is_root() {
            ""
        } else {
            " (needs root)"
        };
        format!("{err:#}{needs_root}")
    })
}

/// The loaded programs `--filter` keeps (all of them without one).
pub fn listed<'a>(
    loaded: &'a [InventoryProgram],
    filter: Option<&regex::Regex>,
) -> Vec<&'a InventoryProgram> {
    loaded
        .iter()
        .filter(|p| filter.is_none_or(|f| crate::recording::gate::matches(f, p)))
        .collect()
}

/// The compiled `--filter` of `opts`.
pub fn filter(opts: &DoctorOptions) -> Result<Option<regex::Regex>> {
    opts.filter.as_deref().map(filter_regex).transpose()
}

/// Run every check against `host`, with `loaded` from [`loaded_programs`].
pub fn checks(
    host: &Host,
    opts: &DoctorOptions,
    loaded: &std::result::Result<Vec<InventoryProgram>, String>,
) -> Result<Vec<Check>> {
    use checks::*;
    let filter = filter(opts)?;
    let mut results = vec![privileges(host)];
    results.extend(jit_sysctls(host));
    results.push(kallsyms_check(host));
    let listing = crate::host::sysctl::read(host, "net.core.bpf_jit_kallsyms")
        .is_ok_and(|results| results == "1");
    results.push(programs(loaded, filter.as_ref(), listing));
    results.push(perf_check(&opts.perf));
    results.extend(perf_choice_and_annotate(&opts.perf));
    results.push(pmu(host));
    results.push(btf(host));
    results.push(lockdown(host));
    results.push(lsm(host));
    results.extend(tools());
    results.push(cpu_check(host));
    results.push(rt_runtime(host));
    results.push(stale_state(host));
    Ok(results)
}
