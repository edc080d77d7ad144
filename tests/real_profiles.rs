//! `flame`, `report` and `diff` on real perf.data files recorded here by perf: read by root
//! when a user owns them (perf's own ownership check refused them), counted without their run
//! record, and cut short or left unfinished by a killed perf. Needs root (perf records kernel
//! stacks) — run by scripts/test.sh.

mod common;

use common::{ebpf_prof, need_root, run};
use std::os::unix::fs::chown;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// Record a small profile with perf itself; returns its path and perf's sample count.
fn perf_record(dir: &Path, name: &str) -> (PathBuf, u64) {
    let out = dir.join(name);
    let r = Command::new("perf")
        .args(["record", "-g", "-F", "2000", "-o"])
        .arg(&out)
        .args([
            "--",
            "sh",
            "-c",
            "i=0; while [ $i -lt 4000 ]; do cat /etc/hostname >/dev/null; i=$((i+1)); done",
        ])
        .stdout(Stdio::null())
        .output()
        .expect("perf");
    let err = String::from_utf8_lossy(&r.stderr);
    assert!(r.status.success(), "{err}");
    // "[ perf record: Captured and wrote 0.3 MB p.data (1234 samples) ]"
    let n = err
        .rsplit_once(" samples)")
        .and_then(|(a, _)| a.rsplit_once('(')?.1.parse().ok())
        .unwrap_or_else(|| panic!("no sample count in {err}"));
    (out, n)
}

/// As root, perf refused a user's file ("File perf.data.old not
/// owned by current user or root"), under sudo or not. Now root reads it: perf gets the file
/// ebpf-prof opened and checked, with `-f`.
#[test]
#[ignore = "needs root: records with perf"]
fn regression_root_reads_a_users_profile() {
    if !need_root("regression_root_reads_a_users_profile") {
        return;
    }
    let d = common::open_tempdir();
    let (data, _) = perf_record(d.path(), "perf.data");
    let old = d.path().join("perf.data.old");
    std::fs::copy(&data, &old).unwrap();
    for f in [&data, &old] {
        chown(f, Some(65534), Some(65534)).unwrap();
    }
    for sudo in [false, true] {
        // The built-in reader, and perf itself on the file we opened and checked (`-f`).
        let cmds: [&[&str]; 6] = [
            &["flame", "perf.data.old"],
            &["report", "perf.data.old"],
            &["diff", "perf.data", "perf.data.old", "--text"],
            &["flame", "--via-perf", "perf.data.old"],
            &["report", "--via-perf", "perf.data.old"],
            &["diff", "--via-perf", "perf.data", "perf.data.old", "--text"],
        ];
        for args in cmds {
            let mut c = ebpf_prof(args, d.path());
            if sudo {
                c.env("SUDO_UID", "65534").env("SUDO_GID", "65534");
            }
            let r = run(c);
            assert_eq!(r.code(), Some(0), "sudo={sudo}: {r:?}");
            assert!(!r.stderr().contains("not owned"), "{r:?}");
            assert!(!r.stdout().is_empty(), "{r:?}");
        }
    }
}

/// `report` on a perf.data without its perf.data.json said just
/// "sample count unknown"; it counts the samples in the profile: perf's own count.
#[test]
#[ignore = "needs root: records with perf"]
fn report_counts_the_samples_without_a_run_record() {
    if !need_root("report_counts_the_samples_without_a_run_record") {
        return;
    }
    let d = common::open_tempdir();
    let (_, n) = perf_record(d.path(), "p.data");
    let r = run(ebpf_prof(&["report", "--json", "p.data"], d.path()));
    assert_eq!(r.code(), Some(0), "{r:?}");
    let j: serde_json::Value = serde_json::from_str(&r.stdout()).unwrap();
    assert_eq!(j["samples"], n, "perf said {n}: {r:?}");
    assert_eq!(j["samples_source"], "counted");
    let text = run(ebpf_prof(&["report", "p.data"], d.path())).stdout();
    assert!(
        text.starts_with(&format!("p.data: {n} samples of ")),
        "{text}"
    );
}

/// A truncated perf.data exited 3 with perf's message. A real recording
/// cut in half, and one whose perf was SIGKILLed, say "truncated", exit 2, before perf runs.
#[test]
#[ignore = "needs root: records with perf"]
fn regression_real_perf_data_cut_or_unfinished_is_truncated() {
    if !need_root("regression_real_perf_data_cut_or_unfinished_is_truncated") {
        return;
    }
    let d = common::open_tempdir();
    let (data, _) = perf_record(d.path(), "whole.data");
    let bytes = std::fs::read(&data).unwrap();
    std::fs::write(d.path().join("half.data"), &bytes[..bytes.len() / 2]).unwrap();
    // perf and its workload in a process group of their own, killed together once perf has
    // written its first header (data size 0 until it stops).
    let killed = d.path().join("killed.data");
    let mut perf = Command::new("perf")
        .args(["record", "-g", "-o"])
        .arg(&killed)
        .args(["--", "sleep", "30"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .process_group(0)
        .spawn()
        .unwrap();
    let started = std::time::Instant::now();
    while std::fs::metadata(&killed).map_or(0, |m| m.len()) < 104
        && started.elapsed().as_secs() < 20
    {
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    std::thread::sleep(std::time::Duration::from_millis(500));
    // SAFETY: kill(2) on the process group of the perf this test started (perf and its sleep).
    unsafe { libc::kill(-(perf.id() as i32), libc::SIGKILL) };
    perf.wait().unwrap();
    for f in ["half.data", "killed.data"] {
        for cmd in ["flame", "report"] {
            let r = run(ebpf_prof(&[cmd, f], d.path()));
            assert_eq!(r.code(), Some(2), "{r:?}");
            let want = format!(
                "ebpf-prof: error: {f} is truncated: the recording did not finish; record again"
            );
            assert!(r.stderr().contains(&want), "{r:?}");
            assert!(!r.stderr().contains("perf script"), "perf never ran: {r:?}");
        }
    }
}
