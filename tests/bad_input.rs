//! The bad-input table of `docs/bad-input.md`, run row by row: each row's command runs in a
//! fresh scratch directory holding every kind of bad file the table names, and its exit code
//! and the start of its message are checked — the document is the test's only source, so the
//! two cannot drift apart. Rows marked `nobody` run as uid 65534 (`setpriv`), `root` rows need
//! root. Every row also checks: no panic unless the row expects 101, at most one `error:` line,
//! and a file named by `keeps FILE` byte-identical afterwards. `docs/exit-codes.md` is walked
//! too: every documented code is shown by a row or a named test, and every row's code is
//! documented.

mod common;

use common::{bin, fake_perf, need_root, run, Run, TestDir};
use std::os::fd::FromRawFd;
use std::os::unix::fs::{symlink, PermissionsExt};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

const DOC: &str = include_str!("../docs/bad-input.md");
const CODES: &str = include_str!("../docs/exit-codes.md");

/// One row of the table.
#[derive(Debug, Clone)]
struct Row {
    n: String,
    command: String,
    how: Vec<String>,
    exit: i32,
    message: Option<String>,
}

fn cells(line: &str) -> Vec<String> {
    line.trim()
        .trim_matches('|')
        .split(" | ")
        .map(|c| c.trim().trim_matches('`').to_string())
        .collect()
}

/// The rows of the first table whose header starts `| # |` in `doc`.
fn rows(doc: &str) -> Vec<Row> {
    doc.lines()
        .skip_while(|l| !l.starts_with("| # |"))
        .skip(2)
        .take_while(|l| l.starts_with('|'))
        .map(|l| {
            let c = cells(l);
            assert_eq!(c.len(), 6, "a row has 6 cells: {l}");
            Row {
                n: c[0].clone(),
                command: c[2].clone(),
                how: c[3]
                    .split(',')
                    .map(|s| s.trim().to_string())
                    .filter(|s| !s.is_empty() && s != "—")
                    .collect(),
                exit: c[4].parse().unwrap_or_else(|_| panic!("exit code in {l}")),
                message: Some(c[5].clone()).filter(|m| m != "—"),
            }
        })
        .collect()
}

fn write(p: &Path, bytes: impl AsRef<[u8]>) {
    std::fs::write(p, bytes).unwrap();
}

fn mkfifo(p: &Path) {
    let c = std::ffi::CString::new(p.to_str().unwrap()).unwrap();
    // SAFETY: a NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
}

/// A perf.data header (little-endian): attrs at 104 (8 bytes), data at 112 (`data` bytes),
/// `bits` in the first byte of the feature bitmap.
fn perf_header(data: u64, bits: u8) -> Vec<u8> {
    let mut h = b"PERFILE2".to_vec();
    for w in [104u64, 136, 104, 8, 112, data, 0, 0] {
        h.extend_from_slice(&w.to_le_bytes());
    }
    h.push(bits);
    h.resize(104, 0);
    h
}

/// The same header written by a big-endian machine.
fn perf_header_be(data: u64) -> Vec<u8> {
    let mut h = b"2ELIFREP".to_vec();
    for w in [104u64, 136, 104, 8, 112, data, 0, 0] {
        h.extend_from_slice(&w.to_be_bytes());
    }
    h.resize(104, 0);
    h
}

/// A perf.data whose header is consistent with its length (its records are not real).
fn whole_perf_data() -> Vec<u8> {
    let mut f = perf_header(64, 0);
    f.resize(112 + 64, 0);
    f
}

fn perf_data_files(d: &Path) {
    write(&d.join("v1.data"), b"PERFFILE\x00\x01\x02\x03");
    write(&d.join("short.data"), &perf_header(1000, 0)[..42]);
    let mut cut = perf_header(1000, 0);
    cut.resize(300, 0);
    write(&d.join("cut.data"), &cut);
    let mut killed = perf_header(0, 0);
    killed.resize(1208, 0);
    write(&d.join("killed.data"), &killed);
    let mut feat = perf_header(64, 0b100);
    feat.resize(112 + 64, 0);
    write(&d.join("nofeatures.data"), &feat);
    let mut big = perf_header_be(64);
    big.resize(112 + 64, 0);
    write(&d.join("bigendian.data"), &big);
    for name in ["whole.data", "ksyms-fifo.data", "ksyms-link.data"] {
        write(&d.join(name), whole_perf_data());
    }
    mkfifo(&d.join("ksyms-fifo.data.kallsyms"));
    symlink("/etc/hostname", d.join("ksyms-link.data.kallsyms")).unwrap();
}

fn folded_files(d: &Path, good: &str) {
    write(&d.join("good.folded"), good);
    write(
        &d.join("overflow.folded"),
        "a;b 18446744073709551615\na;c 10\n",
    );
    write(&d.join("huge-count.folded"), "a;b 99999999999999999999\n");
    write(
        &d.join("overflow.txt"),
        "b 1 1.0: 18446744073709551615 cpu-clock:\n\tffffffff81000000 do_syscall_64 ([kernel.kallsyms])\n\nb 1 2.0: 5 cpu-clock:\n\tffffffff81000000 do_syscall_64 ([kernel.kallsyms])\n\n",
    );
    write(
        &d.join("splithead.txt"),
        "bench 7   1\n.4: 1 cpu-clock:k:\n\tffffffff81000130 h+0x1 ([kernel.kallsyms])\n\n",
    );
    write(
        &d.join("noframes.txt"),
        "b 1 1.0: 5 cpu-clock:\nb 1 2.0: 5 cpu-clock:\n",
    );
    write(
        &d.join("long-frame.folded"),
        format!("{};leaf 7\nb 1\n", "f".repeat(5000)),
    );
    write(
        &d.join("latin1.folded"),
        b"bench;caf\xe9_[k];x 3\nbench;y 1\n",
    );
    write(
        &d.join("mixed.folded"),
        "a;b 3\na;c 2\nthis is not a stack\na;d 1\n",
    );
    write(&d.join("zero.folded"), "a;b 0\n");
    write(
        &d.join("nobpf.folded"),
        include_str!("../fixtures/folded/no-bpf.folded"),
    );
    write(&d.join("hello.txt"), "hello world\n");
    write(&d.join("comments.txt"), "# only\n# comments\n");
    write(&d.join("garbage.bin"), [0u8, 1, 2, 0xff, 0xfe, 7, 0, 0, 9]);
    write(&d.join("empty"), "");
}

fn sidecar_files(d: &Path, good: &str) {
    let side = |stem: &str| {
        write(&d.join(format!("{stem}.folded")), good);
        d.join(format!("{stem}.folded.json"))
    };
    mkfifo(&side("json-fifo"));
    symlink("/dev/zero", side("json-zero")).unwrap();
    std::fs::create_dir(side("json-dir")).unwrap();
    write(&side("json-bad"), "this is not json");
    write(&side("json-empty"), "");
    write(&side("json-binary"), [0xffu8, 0xfe, 0]);
    let big = std::fs::File::create(side("json-huge")).unwrap();
    big.set_len(17 << 20).unwrap();
    write(&d.join("ksyms-fifo.folded"), good);
    mkfifo(&d.join("ksyms-fifo.folded.kallsyms"));
}

fn output_files(d: &Path) {
    write(&d.join("existing.svg"), "the old graph\n");
    symlink("existing.svg", d.join("link.svg")).unwrap();
    std::fs::create_dir(d.join("dir")).unwrap();
    std::fs::create_dir(d.join("ro")).unwrap();
    let secret = d.join("secret.folded");
    write(&secret, "a;b 1\n");
    std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o600)).unwrap();
    mkfifo(&d.join("fifo"));
    write(&d.join("notelf.o"), "not an ELF object");
    let execve = ebpf_prof::bpf::EVENT_HOOKS
        .iter()
        .find(|h| h.0 == "on_execve");
    write(&d.join("on_execve.bpf.o"), execve.unwrap().2);
    write(
        &d.join("badbtf.bpf.o"),
        common::object_with_a_bad_btf_string(),
    );
    // A perf others can replace: a copy in a world-writable directory.
    let open = d.join("open");
    std::fs::create_dir(&open).unwrap();
    std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).unwrap();
    std::fs::copy(fake_perf(), open.join("perf")).unwrap();
    // A directory reached through one others can write; an earlier demo's flame graph.
    std::fs::create_dir(open.join("sub")).unwrap();
    std::fs::create_dir(d.join("olddemo")).unwrap();
    write(&d.join("olddemo/flame.svg"), "an earlier demo's graph\n");
}

/// A scratch directory holding every file the table names, open to `nobody` for reading.
fn scratch() -> TestDir {
    let d = common::open_tempdir();
    let good = include_str!("../fixtures/folded/sample-hook.folded");
    perf_data_files(d.path());
    folded_files(d.path(), good);
    sidecar_files(d.path(), good);
    output_files(d.path());
    d
}

/// The command of a row, as an argv for the binary (`$FAKE_PERF` expanded).
fn argv(row: &Row) -> Vec<String> {
    let line = row
        .command
        .strip_prefix("ebpf-prof ")
        .unwrap_or_else(|| panic!("row {}: a command starts `ebpf-prof `", row.n));
    let line = line.replace("$FAKE_PERF", fake_perf().to_str().unwrap());
    shlex::split(&line).unwrap_or_else(|| panic!("row {}: cannot split {line}", row.n))
}

fn has(row: &Row, word: &str) -> bool {
    row.how.iter().any(|h| h == word)
}

/// The value of a `key=value` in the row's "how".
fn how_value<'a>(row: &'a Row, key: &str) -> Option<&'a str> {
    row.how
        .iter()
        .find_map(|h| h.strip_prefix(key)?.strip_prefix('='))
}

/// The program that starts a row's binary: the binary itself, `setpriv` for `nobody`, or
/// `unshare` for a `read-only` directory.
fn launcher(row: &Row, exe: &Path) -> Command {
    if let Some(read_only) = how_value(row, "read-only") {
        // In a mount namespace of its own, so the read-only mount is seen by this run only.
        let script = r#"mount -o bind,ro "$1" "$1" && shift && exec "$@""#;
        let mut c = Command::new("unshare");
        c.args([
            "--mount",
            "--propagation",
            "private",
            "sh",
            "-c",
            script,
            "sh",
        ])
        .arg(read_only)
        .arg(exe);
        c
    } else if has(row, "nobody") {
        let mut c = Command::new("setpriv");
        c.args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"])
            .arg(exe);
        c
    } else {
        Command::new(exe)
    }
}

fn command(row: &Row, dir: &Path, exe: &Path) -> Command {
    let mut c = launcher(row, exe);
    c.args(argv(row))
        .current_dir(dir)
        .env_remove("PERF")
        .env_remove("SUDO_UID")
        .env_remove("SUDO_GID")
        .env_remove("RUST_BACKTRACE")
        .stdin(Stdio::null());
    for h in &row.how {
        if let Some(kv) = h.strip_prefix("env ") {
            let (k, v) = kv.split_once('=').unwrap();
            c.env(k, v);
        }
    }
    if let Some(limit) = how_value(row, "fsize") {
        let bytes: u64 = limit.parse().unwrap();
        // SAFETY: setrlimit between fork and exec, async-signal-safe; SIGXFSZ is left at its
        // default, so the binary must ignore it itself to fail cleanly.
        unsafe {
            c.pre_exec(move || {
                let lim = libc::rlimit {
                    rlim_cur: bytes,
                    rlim_max: bytes,
                };
                if libc::setrlimit(libc::RLIMIT_FSIZE, &lim) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
    }
    if has(row, "stderr closed") {
        // SAFETY: close(2) between fork and exec, async-signal-safe.
        unsafe {
            c.pre_exec(|| {
                libc::close(2);
                Ok(())
            });
        }
    }
    c
}

/// Run a row; with `closed pipe`, stdout is a pipe whose reader is gone before the run; with
/// `stdout full`, /dev/full (every write fails with ENOSPC).
fn execute(row: &Row, dir: &Path, exe: &Path) -> Run {
    let mut c = command(row, dir, exe);
    if has(row, "stdout full") {
        c.stdout(
            std::fs::OpenOptions::new()
                .write(true)
                .open("/dev/full")
                .unwrap(),
        );
    }
    if !has(row, "closed pipe") {
        return run(c);
    }
    let mut fds = [0; 2];
    // SAFETY: pipe2 fills two fds we then own.
    assert_eq!(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) }, 0);
    // SAFETY: the read end is closed at once (no reader); the write end is ours, given up to
    // the OwnedFd that the child's stdout takes.
    let w = unsafe {
        libc::close(fds[0]);
        std::os::fd::OwnedFd::from_raw_fd(fds[1])
    };
    c.stdout(Stdio::from(w));
    run(c)
}

/// Whether `line` starts with `pattern`, where ` … ` in the pattern stands for any text (an
/// absolute path, a pid).
fn matches(line: &str, pattern: &str) -> bool {
    let mut parts = pattern.split('…');
    let Some(rest) = parts.next().and_then(|p| line.strip_prefix(p)) else {
        return false;
    };
    let mut rest = rest;
    for p in parts {
        match rest.find(p) {
            Some(i) => rest = &rest[i + p.len()..],
            None => return false,
        }
    }
    true
}

fn check_row(row: &Row, exe: &Path) -> Result<(), String> {
    let d = scratch();
    let keeps = how_value(row, "keeps").map(|f| (f, std::fs::read(d.path().join(f)).unwrap()));
    let r = execute(row, d.path(), exe);
    let err = r.stderr();
    let lines: Vec<&str> = err
        .lines()
        .map(|l| l.strip_prefix("ebpf-prof: ").unwrap_or(l))
        .collect();
    let mut wrong = Vec::new();
    if r.code() != Some(row.exit) {
        wrong.push(format!("exit {:?}, the table says {}", r.code(), row.exit));
    }
    if let Some(m) = &row.message {
        if !lines.iter().any(|l| matches(l, m)) {
            wrong.push(format!("no stderr line starts with {m:?}"));
        }
    }
    if row.exit != 101 && (err.contains("panicked") || err.contains("internal error")) {
        wrong.push("it panicked".into());
    }
    if lines.iter().filter(|l| l.starts_with("error:")).count() > 1 {
        wrong.push("more than one error line".into());
    }
    if let Some(f) = how_value(row, "absent") {
        if d.path().join(f).exists() {
            wrong.push(format!("{f} was left behind"));
        }
    }
    if let Some((f, before)) = keeps {
        if std::fs::read(d.path().join(f)).ok().as_ref() != Some(&before) {
            wrong.push(format!("{f} changed"));
        }
        let litter: Vec<_> = std::fs::read_dir(d.path())
            .unwrap()
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().contains(".tmp-"))
            .collect();
        if !litter.is_empty() {
            wrong.push(format!("temp files left: {litter:?}"));
        }
    }
    match wrong.is_empty() {
        true => Ok(()),
        false => Err(format!("row {}: {}{r:?}", row.n, wrong.join("; "))),
    }
}

/// The binary, copied where `nobody` can run it (the build tree may be closed to others).
fn exe_for_all(dir: &Path) -> PathBuf {
    let exe = dir.join("ebpf-prof");
    std::fs::copy(bin(), &exe).unwrap();
    std::fs::set_permissions(&exe, std::fs::Permissions::from_mode(0o755)).unwrap();
    exe
}

#[test]
fn the_table_has_every_kind_tried() {
    let rows = rows(DOC);
    assert!(rows.len() >= 60, "{} rows", rows.len());
    for (i, r) in rows.iter().enumerate() {
        assert_eq!(r.n, (i + 1).to_string(), "rows are numbered in order");
        argv(r);
    }
}

/// Every row that runs as the current user (rows marked `root` or `nobody` are in the root
/// test below).
#[test]
fn bad_input_table_as_a_user() {
    let bin_dir = common::open_tempdir();
    let exe = exe_for_all(bin_dir.path());
    let failures: Vec<String> = rows(DOC)
        .iter()
        .filter(|r| !has(r, "root") && !has(r, "nobody"))
        .filter_map(|r| check_row(r, &exe).err())
        .collect();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The rows that need root (to switch to `nobody`, or for `record`).
#[test]
#[ignore = "needs root: runs rows as nobody (setpriv) and record's refusals"]
fn bad_input_table_as_root_and_nobody() {
    if !need_root("bad_input_table_as_root_and_nobody") {
        return;
    }
    let bin_dir = common::open_tempdir();
    let exe = exe_for_all(bin_dir.path());
    let failures: Vec<String> = rows(DOC)
        .iter()
        .filter(|r| has(r, "root") || has(r, "nobody"))
        .filter_map(|r| check_row(r, &exe).err())
        .collect();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// `docs/exit-codes.md`: every code it documents is shown by a row of the bad-input table or by
/// the test it names; every row's code is documented; the library's codes are the table's.
#[test]
fn exit_code_table_is_walked() {
    let codes: Vec<(String, String)> = CODES
        .lines()
        .skip_while(|l| !l.starts_with("| code |"))
        .skip(2)
        .take_while(|l| l.starts_with('|'))
        .map(|l| {
            let c = cells(l);
            (c[0].clone(), c[2].clone())
        })
        .collect();
    let rows = rows(DOC);
    let tests: String = std::fs::read_dir(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests"))
        .unwrap()
        .flatten()
        .filter(|e| e.path().extension().is_some_and(|x| x == "rs"))
        .map(|e| std::fs::read_to_string(e.path()).unwrap())
        .collect();
    for (code, shown_by) in &codes {
        let by_row = rows.iter().any(|r| r.exit.to_string() == *code);
        let by_test = shown_by
            .strip_prefix("test ")
            .is_some_and(|t| tests.contains(&format!("fn {t}(")));
        assert!(
            by_row || by_test,
            "exit {code} is shown by no row and no test"
        );
    }
    for r in &rows {
        assert!(
            codes.iter().any(|(c, _)| *c == r.exit.to_string()),
            "row {}: exit {} is not documented",
            r.n,
            r.exit
        );
    }
    use ebpf_prof::error::Kind;
    for code in [
        Kind::Check.code(),
        Kind::Usage.code(),
        Kind::Child.code(),
        4,
        ebpf_prof::out::PANIC_EXIT,
    ] {
        assert!(codes.iter().any(|(c, _)| *c == code.to_string()), "{code}");
    }
}

/// `ebpf-prof doctor | true` panicked (101, a backtrace); `doctor` exits 0
/// or 1 by what it finds, never 101, with stdout a pipe nobody reads and with stderr closed.
#[test]
fn regression_doctor_into_a_closed_pipe_does_not_panic() {
    let d = common::open_tempdir();
    for how in ["closed pipe", "stderr closed"] {
        let row = Row {
            n: "doctor".into(),
            command: "ebpf-prof doctor".into(),
            how: vec![how.into()],
            exit: 0,
            message: None,
        };
        let r = execute(&row, d.path(), &bin());
        assert!(matches!(r.code(), Some(0 | 1)), "{how}: {r:?}");
        assert!(!r.stderr().contains("panicked"), "{r:?}");
    }
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// `println!`/`eprintln!` panic on a closed stream; every line the tool
/// prints goes through `src/out.rs`, which cannot. No print macro anywhere else outside tests.
#[test]
fn no_print_macro_outside_out_rs() {
    let mut files = Vec::new();
    rust_files(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("src"),
        &mut files,
    );
    let mut found = Vec::new();
    for f in files {
        let name = f.file_name().unwrap().to_string_lossy().into_owned();
        if name == "out.rs" || name.ends_with("tests.rs") {
            continue;
        }
        let text = std::fs::read_to_string(&f).unwrap();
        let code = text.split("#[cfg(test)]").next().unwrap_or("");
        for (i, l) in code.lines().enumerate() {
            let l = l.trim_start();
            if l.starts_with("//") {
                continue;
            }
            if ["println!(", "eprintln!(", "print!(", "eprint!("]
                .iter()
                .any(|m| l.contains(m))
            {
                found.push(format!("{}:{}: {l}", f.display(), i + 1));
            }
        }
    }
    assert!(
        found.is_empty(),
        "print macros outside src/out.rs:\n{}",
        found.join("\n")
    );
}

/// A full disk midway through `flame --force -o old.svg` — a 8 KB tmpfs in a
/// private mount namespace (gone with the shell) — leaves old.svg as it was and no temp file,
/// and a new output is not left behind partial;
/// exit 4 with a line that says the disk is full.
#[test]
#[ignore = "needs root: mounts a tiny tmpfs in a private mount namespace"]
fn regression_full_disk_keeps_the_old_output() {
    if !need_root("regression_full_disk_keeps_the_old_output") {
        return;
    }
    let d = scratch();
    let script = "mount -t tmpfs -o size=8k none mnt && echo old > mnt/old.svg \
        && { \"$0\" flame good.folded -o mnt/old.svg --force; echo \"exit $?\"; } \
        && { \"$0\" flame good.folded -o mnt/new.svg; echo \"exit $?\"; } \
        && cat mnt/old.svg && ls -A mnt";
    std::fs::create_dir(d.path().join("mnt")).unwrap();
    let mut c = Command::new("unshare");
    c.args(["--mount", "--propagation", "private", "sh", "-c", script])
        .arg(bin())
        .current_dir(d.path());
    let r = run(c);
    let out = r.stdout();
    // The old file survives; a new one is never left partial.
    assert_eq!(out, "exit 4\nexit 4\nold\nold.svg\n", "{r:?}");
    assert!(
        r.stderr()
            .contains("No space left on device (the disk is full; free some space or write elsewhere); nothing was left behind"),
        "{r:?}"
    );
}

/// `record` on a full disk said "No space left on device (os error 28)" and named no file: the
/// kallsyms snapshot failing names `perf.data.kallsyms`, and a benchmark or perf failing
/// (the disk fills while they write) names the disk of `-o`; nothing is left on it.
#[test]
#[ignore = "needs root: records on a tiny tmpfs in a private mount namespace"]
fn regression_record_on_a_full_disk_names_the_file() {
    if !need_root("regression_record_on_a_full_disk_names_the_file") {
        return;
    }
    let kallsyms = std::fs::read_to_string("/proc/kallsyms").unwrap().len() / 1024;
    // (tmpfs size in KiB, the line the run must print): too small for the snapshot; room for
    // the snapshot but not for the samples of 20000 iterations (about 100 KB).
    let cases = [
        (
            64,
            "error: cannot write mnt/perf.data.kallsyms: No space left on device (the disk is full",
        ),
        (
            kallsyms + 40,
            "error: the recording failed (exit status 255): the disk holding mnt/perf.data is full",
        ),
    ];
    for (size_k, want) in cases {
        let d = common::open_tempdir();
        std::fs::create_dir(d.path().join("mnt")).unwrap();
        let script = format!(
            "mount -t tmpfs -o size={size_k}k none mnt && \"$0\" record --allow-no-bpf -n 20000 \
             -o mnt/perf.data; echo \"exit $?\"; ls -A mnt"
        );
        let mut c = Command::new("unshare");
        c.args(["--mount", "--propagation", "private", "sh", "-c", &script])
            .arg(bin())
            .current_dir(d.path());
        let r = run(c);
        let code = if want.contains("recording failed") {
            3
        } else {
            4
        };
        assert_eq!(
            r.stdout(),
            format!("exit {code}\n"),
            "nothing left on the disk: {r:?}"
        );
        assert!(
            r.stderr()
                .lines()
                .any(|l| l.starts_with(&format!("ebpf-prof: {want}"))),
            "{r:?}"
        );
        assert!(!r.stderr().contains("(os error 28)"), "{r:?}");
    }
}
