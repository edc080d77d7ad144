//! Proving a perf runs: `perf --version` with a timeout, in its own process group (so a wrapper
//! script's children die with it), and the reason in one line when it does not.

use crate::perf::version::{parse_perf_version, PerfVersion};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::Path;
use std::process::Output;
use std::thread;
use std::time::Duration;

/// Runs `<path> --version` and parses it; `Err` is one line saying why this perf does not work.
pub(super) fn run_version(path: &Path, timeout: Duration) -> Result<PerfVersion, String> {
    let output = run_with_timeout(path, timeout)?;
    if !output.status.success() {
        return Err(failure_reason(&output));
    }
    let stdout = String::from_utf8_lossy(&output.stdout);
    parse_perf_version(&stdout).ok_or_else(|| {
        let said = first_line(&output.stdout).unwrap_or_else(|| "nothing".to_string());
        format!("`--version` printed no perf version (it printed: {said})")
    })
}

/// `<path> --version` with stdin closed and output captured, killed after `timeout`.
fn run_with_timeout(path: &Path, timeout: Duration) -> Result<Output, String> {
    let handle = start_version(path).map_err(|err| format!("could not run it: {err}"))?;
    match handle.wait_timeout(timeout) {
        Ok(Some(output)) => Ok(output.clone()),
        Ok(None) => {
            kill_group(&handle);
            Err(format!(
                "`--version` did not finish within {}s",
                timeout.as_secs_f32()
            ))
        }
        Err(err) => Err(format!("could not wait for it: {err}")),
    }
}

/// Starts `<path> --version` in its own process group, so a timeout can kill what a wrapper
/// script started too. Retries on ETXTBSY: exec of a script that was just written fails while
/// another thread's fork still holds it open for writing (seen in parallel tests).
fn start_version(path: &Path) -> std::io::Result<duct::Handle> {
    let expression = duct::cmd(path, ["--version"])
        .stdin_null()
        .stdout_capture()
        .stderr_capture()
        .unchecked()
        .before_spawn(|cmd| {
            super::without_caller_config(cmd).process_group(0);
            Ok(())
        });
    let mut tries = 0;
    loop {
        match expression.start() {
            Err(err) if err.raw_os_error() == Some(libc::ETXTBSY) && tries < 10 => {
                tries += 1;
                thread::sleep(Duration::from_millis(20));
            }
            started => return started,
        }
    }
}

/// Kills the process group of a timed-out `--version` and reaps it if that is quick.
fn kill_group(handle: &duct::Handle) {
    for pid in handle.pids() {
        if let Ok(pid) = libc::pid_t::try_from(pid) {
            // SAFETY: plain syscall; the child leads its own group (process_group(0)).
            unsafe { libc::kill(-pid, libc::SIGKILL) };
        }
    }
    let _ = handle.kill();
    let _ = handle.wait_timeout(Duration::from_secs(1));
}

/// Exit status and the first thing it said, e.g. `exited with status 2: WARNING: perf not found
/// for kernel 6.8.0-134 (...)`.
fn failure_reason(output: &Output) -> String {
    let status = match (output.status.code(), output.status.signal()) {
        (Some(code), _) => format!("exited with status {code}"),
        (None, Some(signal)) => format!("killed by signal {signal}"),
        (None, None) => "failed".to_string(),
    };
    let mut reason = match first_line(&output.stderr).or_else(|| first_line(&output.stdout)) {
        Some(said) => format!("{status}: {said}"),
        None => status,
    };
    if String::from_utf8_lossy(&output.stderr).contains("not found for kernel") {
        reason.push_str(
            " (Ubuntu's linux-tools-common wrapper: the running kernel's linux-tools are not \
             installed)",
        );
    }
    reason
}

/// The first non-blank line of some output, trimmed and cut at 200 characters.
fn first_line(bytes: &[u8]) -> Option<String> {
    let text = String::from_utf8_lossy(bytes);
    let line = text.lines().map(str::trim).find(|l| !l.is_empty())?;
    Some(line.chars().take(200).collect())
}
