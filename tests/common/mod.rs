//! Shared test harness: run the binary, show everything when an assertion fails, and gate tests
//! that need root (skipped with a reason outside CI, a failure under CI=true).
#![allow(dead_code)]

pub mod runs;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The built binary.
pub fn bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_ebpf-prof"))
}

/// The fake perf script for error paths.
pub fn fake_perf() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/fake-perf/perf")
}

/// A finished run of the binary, printed in full by `Debug` so failed asserts say everything.
pub struct Run {
    pub cmd: String,
    pub out: Output,
}

impl Run {
    pub fn code(&self) -> Option<i32> {
        self.out.status.code()
    }
    pub fn stdout(&self) -> String {
        String::from_utf8_lossy(&self.out.stdout).into_owned()
    }
    pub fn stderr(&self) -> String {
        String::from_utf8_lossy(&self.out.stderr).into_owned()
    }
}

impl std::fmt::Debug for Run {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "\n$ {}\nexit: {:?}\n--- stdout ---\n{}\n--- stderr ---\n{}\n",
            self.cmd,
            self.out.status,
            truncate(&self.stdout()),
            self.stderr()
        )
    }
}

fn truncate(s: &str) -> &str {
    &s[..s.len().min(4000)]
}

/// Run `cmd` and capture it.
pub fn run(mut cmd: Command) -> Run {
    let line = format!("{cmd:?}");
    let out = cmd.output().expect("spawn");
    Run { cmd: line, out }
}

/// The binary with `args`, in `cwd`.
pub fn ebpf_prof(args: &[&str], cwd: &Path) -> Command {
    let mut c = Command::new(bin());
    c.args(args)
        .current_dir(cwd)
        .env_remove("PERF")
        .env_remove("SUDO_UID")
        .env_remove("SUDO_GID");
    c
}

/// Whether we run under CI.
pub fn under_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true" || v == "1")
}

/// True when the test may go on as root. Outside CI a non-root run skips with a reason; under
/// CI=true not being root fails the test: the end-to-end tests must run there.
pub fn need_root(test: &str) -> bool {
    if unsafe_is_root() {
        return true;
    }
    if under_ci() {
        panic!("{test}: needs root, and CI=true: end-to-end tests must run under CI, not skip");
    }
    eprintln!("SKIP {test}: needs root (run the tests with sudo, see README)");
    false
}

fn unsafe_is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// How many times slower than an ordinary machine this one runs syscalls:
/// `EBPF_PROF_TEST_SLOWDOWN`, which scripts/kernels-guest.sh sets under QEMU without KVM; 1 when
/// unset.
pub fn slowdown() -> u64 {
    std::env::var("EBPF_PROF_TEST_SLOWDOWN")
        .ok()
        .and_then(|value| value.parse::<u64>().ok())
        .filter(|&value| value > 0)
        .unwrap_or(1)
}

/// Whether the tests run on an emulated machine, where timings mean nothing: statistical
/// claims about them are not judged there, only behaviour.
pub fn emulated() -> bool {
    slowdown() > 1
}

/// An iteration count for `-n`: `native` on an ordinary machine, divided by the slowdown
/// elsewhere, never below 200 so that a run still has something to profile.
pub fn iterations(native: u64) -> String {
    (native / slowdown()).max(200).min(native).to_string()
}

/// An iteration count for a recording whose hook must show up in the samples: as
/// [`iterations`], but under emulation ten times that (within `native`), because there the
/// time in BPF is a sliver of the run and a few hundred runs of a cheap hook may go unsampled.
pub fn sampled_iterations(native: u64) -> String {
    let emulated_count = (native / slowdown()).max(200) * 10;
    emulated_count.min(native).to_string()
}

/// How long to wait for something that takes `native` on an ordinary machine: ten times as long
/// on an emulated one (its processes start and load programs slower, not a thousand times).
pub fn patience(native: std::time::Duration) -> std::time::Duration {
    if emulated() {
        native * 10
    } else {
        native
    }
}

/// Whether the running kernel is `major.minor` or newer.
pub fn kernel_at_least(major: u32, minor: u32) -> bool {
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap();
    let mut parts = release
        .trim()
        .split(|c: char| !c.is_ascii_digit())
        .map(|part| part.parse::<u32>().unwrap_or(0));
    let found = (parts.next().unwrap_or(0), parts.next().unwrap_or(0));
    found >= (major, minor)
}

/// A sysctl's value.
pub fn sysctl(name: &str) -> String {
    std::fs::read_to_string(format!("/proc/sys/{}", name.replace('.', "/")))
        .unwrap()
        .trim()
        .to_string()
}

/// Sets a sysctl for the life of the value, then puts it back.
pub struct SysctlSet {
    name: String,
    before: String,
}

impl SysctlSet {
    pub fn new(name: &str, value: &str) -> SysctlSet {
        let before = sysctl(name);
        std::fs::write(format!("/proc/sys/{}", name.replace('.', "/")), value).unwrap();
        SysctlSet {
            name: name.into(),
            before,
        }
    }
}

impl Drop for SysctlSet {
    fn drop(&mut self) {
        let _ = std::fs::write(
            format!("/proc/sys/{}", self.name.replace('.', "/")),
            &self.before,
        );
    }
}

/// A temp dir anyone can enter (for runs as `nobody`).
pub fn open_tempdir() -> TestDir {
    use std::os::unix::fs::PermissionsExt;
    let d = tempfile::Builder::new()
        .prefix("ebpf-prof-test")
        .tempdir()
        .unwrap();
    std::fs::set_permissions(d.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    TestDir(d)
}

/// A test's temporary directory, removed when dropped. When the test fails and
/// `EBPF_PROF_KEEP_FAILED` names a directory, its files are first copied into a directory there
/// named after the test: the kernel matrix's guests set it, because their /tmp, and with it the
/// recording that would say why, is gone with the guest.
pub struct TestDir(tempfile::TempDir);

/// Files bigger than this are left out of a failed test's copy.
const KEPT_FILE_LIMIT: u64 = 64 << 20;

impl TestDir {
    pub fn path(&self) -> &Path {
        self.0.path()
    }
}

impl Drop for TestDir {
    fn drop(&mut self) {
        let Some(keep) = std::env::var_os("EBPF_PROF_KEEP_FAILED") else {
            return;
        };
        if !std::thread::panicking() {
            return;
        }
        let test = std::thread::current()
            .name()
            .unwrap_or("test")
            .replace("::", "-");
        let to = Path::new(&keep).join(format!("{test}-{}", std::process::id()));
        let Ok(entries) = std::fs::read_dir(self.path()) else {
            return;
        };
        let _ = std::fs::create_dir_all(&to);
        for entry in entries.flatten() {
            let small_file = entry
                .metadata()
                .is_ok_and(|m| m.is_file() && m.len() <= KEPT_FILE_LIMIT);
            if small_file {
                let _ = std::fs::copy(entry.path(), to.join(entry.file_name()));
            }
        }
        eprintln!("the test's files are kept in {}", to.display());
    }
}

/// Whether a JIT-ed BPF symbol whose name holds `part` is in /proc/kallsyms (a program of ours
/// still loaded).
pub fn bpf_symbol_loaded(part: &str) -> bool {
    std::fs::read_to_string("/proc/kallsyms")
        .unwrap()
        .lines()
        .any(|l| l.ends_with("[bpf]") && l.contains(part))
}

/// The dispatch split follows from the p50 difference and the programs' own time: a gap is
/// shown (as `dispatch_gap_ns` too) exactly when its interval reaches 0 or above, and is
/// `Δp50 − own` with the interval moved by the same amount; never a negative cost.
pub fn assert_dispatch_split(v: &serde_json::Value) {
    let dispatch = &v["dispatch"];
    let own = dispatch["own_ns"]
        .as_f64()
        .unwrap_or_else(|| panic!("the built-in bench separates the runs: {dispatch}"));
    let p50 = v["comparison"]["diffs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["q"] == 50.0)
        .unwrap();
    let (delta, lo, hi) = (
        p50["delta"].as_f64().unwrap(),
        p50["lo"].as_f64().unwrap(),
        p50["hi"].as_f64().unwrap(),
    );
    assert_eq!(v["dispatch_gap_ns"], dispatch["gap_ns"], "{dispatch}");
    let sentence = dispatch["sentence"].as_str().unwrap();
    if hi - own < 0.0 {
        assert!(
            dispatch["gap_ns"].is_null(),
            "a negative gap shown: {dispatch}"
        );
        assert!(dispatch["gap_hi"].is_null(), "{dispatch}");
        assert!(sentence.contains("cannot be separated"), "{dispatch}");
    } else {
        let close = |k: &str, want: f64| {
            let got = dispatch[k]
                .as_f64()
                .unwrap_or_else(|| panic!("{k}: {dispatch}"));
            assert!((got - want).abs() < 1e-6, "{k} {got} != {want}: {dispatch}");
        };
        close("gap_ns", delta - own);
        close("gap_lo", lo - own);
        close("gap_hi", hi - own);
        assert!(dispatch["gap_hi"].as_f64().unwrap() >= 0.0, "{dispatch}");
        assert!(
            sentence.contains("beyond the programs' own time"),
            "{dispatch}"
        );
    }
}

/// Whether the program at `path` is installed: outside CI a missing one skips with a reason,
/// under CI=true it fails (scripts/install-deps.sh installs `package`).
pub fn need_tool(path: &str, package: &str) -> bool {
    if Path::new(path).is_file() {
        return true;
    }
    assert!(
        !under_ci(),
        "{path} is missing and CI=true: scripts/install-deps.sh installs {package}"
    );
    eprintln!("SKIP: {path} is missing (apt-get install {package})");
    false
}

/// The sample hook the verifier rejects, with one byte of a source line in its BTF string
/// table made invalid UTF-8: the verifier log libbpf prints quotes that line.
pub fn object_with_a_bad_btf_string() -> Vec<u8> {
    use object::{Object, ObjectSection};
    let mut bytes = ebpf_prof::bpf::SAMPLE_HOOK_REJECTED.to_vec();
    let at = {
        let elf = object::File::parse(&*bytes).unwrap();
        let btf = elf.section_by_name(".BTF").unwrap();
        let (start, _) = btf.file_range().unwrap();
        let line = b"return *value";
        let data = btf.data().unwrap();
        let found = data.windows(line.len()).position(|w| w == line).unwrap();
        start as usize + found + 1
    };
    bytes[at] = 0xff;
    bytes
}
