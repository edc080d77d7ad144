//! Kernel frames are named only from a kallsyms of the recording's own kernel build: the
//! fixture perf.data read with its snapshot, without it (as if recorded on another build),
//! with `--kallsyms`, with a snapshot moved by KASLR, from perf's build-id cache and from the
//! running kernel's kallsyms. No test here reads the machine's /proc/kallsyms: the profile
//! readers are pointed at files the tests make (`EBPF_PROF_TEST_LIVE_KALLSYMS`), and perf's
//! build-id cache at an empty directory.

mod common;

use common::{ebpf_prof, run, Run, TestDir};
use std::path::{Path, PathBuf};
use std::process::Command;

const FIXTURE: &str = "fixtures/perf-data/hook-lines.data";

/// What an unnamed kernel frame folds to (perf printed `[unknown]`, inferno added the module).
const UNNAMED: &str = "[unknown]_[k]";

fn fixture(suffix: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(format!("{FIXTURE}{suffix}"))
}

/// The build id the fixture's run record gives for its kernel.
fn fixture_build_id() -> String {
    let text = std::fs::read_to_string(fixture(".json")).unwrap();
    let record: serde_json::Value = serde_json::from_str(&text).unwrap();
    record["kernel_build_id"].as_str().unwrap().to_string()
}

fn hex_bytes(hex: &str) -> Vec<u8> {
    (0..hex.len())
        .step_by(2)
        .map(|at| u8::from_str_radix(&hex[at..at + 2], 16).unwrap())
        .collect()
}

/// A place to read profiles in, with an empty build-id cache, an empty HOME and an empty file
/// standing for this machine's kallsyms.
struct Place {
    dir: TestDir,
}

impl Place {
    fn new() -> Place {
        let dir = common::open_tempdir();
        for sub in ["cache", "home"] {
            std::fs::create_dir(dir.path().join(sub)).unwrap();
        }
        std::fs::write(dir.path().join("no-kallsyms"), "").unwrap();
        Place { dir }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// The fixture's perf.data copied here, alone, its kernel build id replaced by `build`.
    fn profile_of_build(&self, build: &str) -> PathBuf {
        let mut data = std::fs::read(fixture("")).unwrap();
        let (from, to) = (hex_bytes(&fixture_build_id()), hex_bytes(build));
        let at = data
            .windows(from.len())
            .position(|w| w == from.as_slice())
            .expect("the fixture's build id is in its build-id table");
        data[at..at + to.len()].copy_from_slice(&to);
        let path = self.path("copied.data");
        std::fs::write(&path, data).unwrap();
        path
    }

    /// `ebpf-prof ARGS` run here, seeing only the symbol sources the test made.
    fn command(&self, args: &[&str]) -> Command {
        let mut c = ebpf_prof(args, self.dir.path());
        c.env("PERF_BUILDID_DIR", self.path("cache"))
            .env("HOME", self.path("home"))
            .env("EBPF_PROF_TEST_LIVE_KALLSYMS", self.path("no-kallsyms"));
        c
    }

    fn run(&self, args: &[&str]) -> Run {
        let r = run(self.command(args));
        assert_eq!(r.code(), Some(0), "{r:?}");
        r
    }

    fn folded(&self, input: &Path, extra: &[&str]) -> Run {
        let mut args = vec!["flame", "--folded", input.to_str().unwrap()];
        args.extend_from_slice(extra);
        self.run(&args)
    }
}

/// The fixture read where it lies, with the snapshot beside it.
fn named_in_place(place: &Place) -> String {
    let r = place.folded(&fixture(""), &[]);
    assert!(!r.stderr().contains("warning"), "{r:?}");
    let folded = r.stdout();
    assert!(folded.contains("__htab_map_lookup_elem_[k]"), "{folded}");
    assert!(!folded.contains(UNNAMED), "{folded}");
    folded
}

/// Every kernel frame of the folded stacks is unnamed; the BPF programs keep their names.
fn assert_no_kernel_frame_named(folded: &str) {
    let named: Vec<&str> = folded
        .lines()
        .flat_map(|l| l.rsplit_once(' ').map_or(l, |(stack, _)| stack).split(';'))
        .filter(|f| f.ends_with("_[k]") && *f != UNNAMED)
        .collect();
    assert!(named.is_empty(), "kernel frames named: {named:?}");
    assert!(folded.contains(UNNAMED), "{folded}");
    assert!(folded.contains("_path_check_callback"), "{folded}");
}

/// The one line naming the build the profile wants and the one found.
fn assert_names_both_builds(stderr: &str, wanted: &str) {
    let line = stderr
        .lines()
        .find(|l| l.contains("stay [unknown]"))
        .unwrap_or_else(|| panic!("no line about the kernel frames: {stderr}"));
    assert!(
        line.contains(&format!("recorded on kernel build {wanted} ")),
        "{line}"
    );
    let running = ebpf_prof::host::notes::running_build_id(&ebpf_prof::host::Host::live())
        .expect("/sys/kernel/notes shows the running kernel's build id");
    let running = ebpf_prof::profile::perfdata::hex(&running);
    assert!(
        line.contains(&format!("this machine runs build {running}")),
        "{line}"
    );
    assert!(line.contains("--kallsyms"), "{line}");
}

const ANOTHER_BUILD: &str = "eeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeee";

#[test]
fn a_profile_from_another_kernel_build_names_no_kernel_frame() {
    let place = Place::new();
    let copy = place.profile_of_build(ANOTHER_BUILD);
    let r = place.folded(&copy, &[]);
    assert_no_kernel_frame_named(&r.stdout());
    assert_names_both_builds(&r.stderr(), ANOTHER_BUILD);
    let input = copy.to_str().unwrap();
    let report = place.run(&["report", input]);
    assert!(report.stdout().contains("stay [unknown]"), "{report:?}");
    assert!(
        !report.stdout().contains("__htab_map_lookup_elem"),
        "{report:?}"
    );
    let annotate = place.run(&["annotate", input, "--prog", "path_check_callback"]);
    let hot = annotate.stdout();
    assert!(hot.contains("openat_hook_common.h:99"), "{hot}");
    assert!(hot.contains("in 0xffffffff"), "helpers by address: {hot}");
    assert!(!hot.contains("__htab_map_lookup_elem"), "{hot}");
    assert_names_both_builds(&annotate.stderr(), ANOTHER_BUILD);
    let speedscope = place.run(&["flame", "--format", "speedscope", "-o", "x.json", input]);
    let export = std::fs::read_to_string(place.path("x.json")).unwrap();
    assert!(!export.contains("__htab_map_lookup_elem"), "{speedscope:?}");
}

#[test]
fn regression_unnamed_kernel_frames_read_unknown_in_every_output() {
    let place = Place::new();
    let copy = place.profile_of_build(ANOTHER_BUILD);
    let input = copy.to_str().unwrap();
    let folded = place.folded(&copy, &[]).stdout();
    let flame = place.run(&["flame", input, "-o", "flame.svg"]);
    let diff = place.run(&["diff", input, input, "-o", "diff.svg"]);
    let svgs = ["flame.svg", "diff.svg"].map(|f| std::fs::read_to_string(place.path(f)).unwrap());
    for (what, text) in [("folded", &folded), ("flame", &svgs[0]), ("diff", &svgs[1])] {
        assert!(
            !text.contains("[[kernel.kallsyms]]"),
            "{what} shows inferno's name: {flame:?} {diff:?}"
        );
    }
    assert!(folded.contains(UNNAMED), "{folded}");
    for svg in &svgs {
        assert!(svg.contains(">[unknown] ("), "drawn as perf prints it");
    }
}

#[test]
fn perf_is_handed_no_kallsyms_of_another_build() {
    if !have_perf() {
        return;
    }
    let place = Place::new();
    let copy = place.profile_of_build(ANOTHER_BUILD);
    let r = place.folded(&copy, &["--via-perf"]);
    assert_no_kernel_frame_named(&r.stdout());
    assert_names_both_builds(&r.stderr(), ANOTHER_BUILD);
}

#[test]
fn the_right_snapshot_given_names_the_recordings_frames() {
    let place = Place::new();
    let want = named_in_place(&place);
    let copy = place.profile_of_build(ANOTHER_BUILD);
    let snapshot = fixture(".kallsyms");
    let r = place.folded(&copy, &["--kallsyms", snapshot.to_str().unwrap()]);
    assert_eq!(r.stdout(), want);
    assert!(!r.stderr().contains("[unknown]"), "{r:?}");
}

/// A laptop's kernel moves by one offset per boot (KASLR): a snapshot of another boot is
/// shifted to the recording's `_text`.
#[test]
fn a_snapshot_shifted_by_kaslr_gives_the_same_names() {
    const OFFSET: u64 = 0x1e0_0000;
    let place = Place::new();
    let want = named_in_place(&place);
    let shifted: String = std::fs::read_to_string(fixture(".kallsyms"))
        .unwrap()
        .lines()
        .map(|line| {
            let (addr, rest) = line.split_once(' ').unwrap();
            let moved = u64::from_str_radix(addr, 16).unwrap() + OFFSET;
            format!("{moved:016x} {rest}\n")
        })
        .collect();
    std::fs::write(place.path("shifted.kallsyms"), shifted).unwrap();
    let r = place.folded(&fixture(""), &["--kallsyms", "shifted.kallsyms"]);
    assert_eq!(r.stdout(), want);
}

/// `perf record` by hand leaves `~/.debug/[kernel.kallsyms]/<build-id>/kallsyms`: a profile
/// recorded so is named from it.
#[test]
fn perfs_build_id_cache_names_a_profile_recorded_by_hand() {
    let place = Place::new();
    let want = named_in_place(&place);
    let cached = place
        .path("cache")
        .join("[kernel.kallsyms]")
        .join(fixture_build_id());
    std::fs::create_dir_all(&cached).unwrap();
    std::fs::copy(fixture(".kallsyms"), cached.join("kallsyms")).unwrap();
    let copy = place.profile_of_build(&fixture_build_id());
    let r = place.folded(&copy, &[]);
    assert_eq!(r.stdout(), want, "{r:?}");
    assert!(!r.stderr().contains("warning"), "{r:?}");
}

/// A profile of the running kernel's build is named from its kallsyms, here a file standing
/// for it; one of another build is not, whatever that file holds.
#[test]
fn the_running_kernels_kallsyms_names_only_a_profile_of_its_build() {
    let Some(running) = ebpf_prof::host::notes::running_build_id(&ebpf_prof::host::Host::live())
    else {
        panic!("/sys/kernel/notes shows no build id on this machine kind");
    };
    let place = Place::new();
    let want = named_in_place(&place);
    let copy = place.profile_of_build(&ebpf_prof::profile::perfdata::hex(&running));
    let mut c = place.folded_command(&copy);
    c.env("EBPF_PROF_TEST_LIVE_KALLSYMS", fixture(".kallsyms"));
    let r = run(c);
    assert_eq!(r.stdout(), want, "{r:?}");
    let other = place.profile_of_build(ANOTHER_BUILD);
    let mut c = place.folded_command(&other);
    c.env("EBPF_PROF_TEST_LIVE_KALLSYMS", fixture(".kallsyms"));
    assert_no_kernel_frame_named(&run(c).stdout());
}

impl Place {
    fn folded_command(&self, input: &Path) -> Command {
        self.command(&["flame", "--folded", input.to_str().unwrap()])
    }
}

/// A kallsyms read by a user while kptr_restrict hides addresses shows only zeros: it would
/// name every frame after its first symbol, so it is never a source.
#[test]
fn a_kallsyms_of_zero_addresses_is_never_a_source() {
    let place = Place::new();
    let zeros: String = std::fs::read_to_string(fixture(".kallsyms"))
        .unwrap()
        .lines()
        .map(|line| format!("0000000000000000 {}\n", line.split_once(' ').unwrap().1))
        .collect();
    let copy = place.profile_of_build(&fixture_build_id());
    std::fs::write(place.path("copied.data.kallsyms"), &zeros).unwrap();
    let r = place.folded(&copy, &[]);
    assert_no_kernel_frame_named(&r.stdout());
    assert!(r.stderr().contains("shows no addresses"), "{r:?}");
    std::fs::write(place.path("zeros.kallsyms"), &zeros).unwrap();
    let given = run(place.command(&[
        "flame",
        "--folded",
        "--kallsyms",
        "zeros.kallsyms",
        "copied.data",
    ]));
    assert_eq!(given.code(), Some(2), "{given:?}");
    assert!(
        given.stderr().contains("shows only zero addresses"),
        "{given:?}"
    );
    assert_eq!(given.stderr().trim().lines().count(), 1, "{given:?}");
}

/// A snapshot beside the file whose run record names another kernel build is passed over.
#[test]
fn a_snapshot_of_another_build_beside_it_is_passed_over() {
    let place = Place::new();
    let copy = place.profile_of_build(&fixture_build_id());
    std::fs::copy(fixture(".kallsyms"), place.path("copied.data.kallsyms")).unwrap();
    let record = std::fs::read_to_string(fixture(".json"))
        .unwrap()
        .replace(&fixture_build_id(), ANOTHER_BUILD);
    std::fs::write(place.path("copied.data.json"), record).unwrap();
    let r = place.folded(&copy, &[]);
    assert_no_kernel_frame_named(&r.stdout());
    assert!(
        r.stderr().contains(&format!(
            "the snapshot beside it is of build {ANOTHER_BUILD}"
        )),
        "{r:?}"
    );
}

/// As an ordinary user too (addresses zeroed for them), a profile of another build gets no
/// kernel name: the file standing for /proc/kallsyms is the real one a user reads.
#[test]
#[ignore = "needs root: scripts/test.sh runs it (or as root: cargo test -- --include-ignored)"]
fn as_a_user_a_profile_from_another_build_names_no_kernel_frame() {
    if !common::need_root("as_a_user_a_profile_from_another_build_names_no_kernel_frame") {
        return;
    }
    let place = Place::new();
    let copy = place.profile_of_build(ANOTHER_BUILD);
    let mut c = Command::new("setpriv");
    c.args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .arg(common::bin())
        .args(["flame", "--folded"])
        .arg(&copy)
        .current_dir(place.dir.path())
        .env("PERF_BUILDID_DIR", place.path("cache"))
        .env("HOME", place.path("home"))
        .env_remove("EBPF_PROF_TEST_LIVE_KALLSYMS");
    let r = run(c);
    assert_eq!(r.code(), Some(0), "{r:?}");
    assert_no_kernel_frame_named(&r.stdout());
    assert_names_both_builds(&r.stderr(), ANOTHER_BUILD);
}

fn have_perf() -> bool {
    let ok = Command::new("perf").arg("--version").output().is_ok();
    assert!(ok || !common::under_ci(), "perf is missing under CI");
    ok
}
