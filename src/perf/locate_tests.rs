//! Tests of the perf search against fixture trees of each distribution's layout.
use super::*;
use crate::perf::version::MajorMinor;
use std::os::unix::fs::PermissionsExt;
use std::time::Instant;
use tempfile::TempDir;

const UBUNTU_RELEASE: &str = "6.8.0-134-generic";

fn fixture(rel: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures/perf")
        .join(rel)
}

/// A fake root file system in a temp dir.
struct Tree {
    dir: TempDir,
}

impl Tree {
    fn new() -> Tree {
        Tree {
            dir: tempfile::tempdir().unwrap(),
        }
    }

    /// A tree in a place whose every directory up to `/` passes the trust check (the build's
    /// `target/`, not /tmp: a sticky world-writable /tmp fails it, as it should).
    fn trusted() -> Tree {
        let base = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/trust-tests");
        fs::create_dir_all(&base).unwrap();
        assert_eq!(
            super::untrusted_reason(&base, &super::trusted_owners()),
            None,
            "the checkout itself must be a trusted place for these tests"
        );
        let dir = tempfile::tempdir_in(&base).unwrap();
        fs::set_permissions(dir.path(), fs::Permissions::from_mode(0o755)).unwrap();
        Tree { dir }
    }

    fn path(&self, rel: &str) -> PathBuf {
        self.dir.path().join(rel)
    }

    /// Writes an executable `#!/bin/sh` script at `rel`.
    fn script(&self, rel: &str, body: &str) -> PathBuf {
        let path = self.path(rel);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
        fs::set_permissions(&path, fs::Permissions::from_mode(0o755)).unwrap();
        path
    }

    /// A fake perf that prints `perf version <version>`.
    fn perf(&self, rel: &str, version: &str) -> PathBuf {
        self.script(rel, &format!("echo \"perf version {version}\""))
    }

    /// Ubuntu's wrapper at `rel`, pointed at this tree and at `release`.
    fn ubuntu_wrapper(&self, rel: &str, release: &str) -> PathBuf {
        let text = fs::read_to_string(fixture("ubuntu-wrapper.sh")).unwrap();
        let tools = self.path("usr/lib/linux-tools");
        let text = text
            .replace("`uname -r`", release)
            .replace("/usr/lib/linux-tools", tools.to_str().unwrap());
        let path = self.script(rel, "");
        fs::write(&path, text).unwrap();
        path
    }

    fn os_release(&self, name: &str) {
        fs::create_dir_all(self.path("etc")).unwrap();
        fs::copy(
            fixture(&format!("os-release/{name}")),
            self.path("etc/os-release"),
        )
        .unwrap();
    }

    /// A locator over this tree; `path_dirs` are relative to the tree.
    fn locator(&self, release: &str, path_dirs: &[&str]) -> Locator {
        let dirs = path_dirs.iter().map(|d| self.path(d));
        Locator {
            explicit: None,
            env: None,
            root: self.dir.path().to_path_buf(),
            kernel_release: release.to_string(),
            path_var: Some(std::env::join_paths(dirs).unwrap()),
            trust_perf: false,
            as_root: false,
        }
    }
}

fn paths(list: &[Candidate]) -> Vec<(PathBuf, Source)> {
    list.iter().map(|c| (c.path.clone(), c.source)).collect()
}

#[test]
fn ubuntu_picks_the_running_kernels_tools_among_several() {
    let t = Tree::new();
    t.perf("usr/lib/linux-tools/6.8.0-130-generic/perf", "6.8.12");
    let running = t.perf("usr/lib/linux-tools/6.8.0-134-generic/perf", "6.8.12");
    t.ubuntu_wrapper("usr/bin/perf", UBUNTU_RELEASE);
    let loc = t.locator(UBUNTU_RELEASE, &["usr/bin"]);
    let found = locate(&loc).unwrap();
    assert_eq!(found.path, running);
    assert_eq!(found.source, Source::LinuxToolsKernel);
    assert!(found.matches_kernel);
    assert_eq!(found.mismatch_hint, None);
    assert!(found.rejected.is_empty());
}

#[test]
fn ubuntu_wrapper_without_the_running_kernels_tools_is_rejected_with_its_warning() {
    let t = Tree::new();
    // Another major.minor's tools: tried only after every perf on PATH.
    t.perf("usr/lib/linux-tools/6.5.0-130-generic/perf", "6.5.12");
    let wrapper = t.ubuntu_wrapper("usr/bin/perf", UBUNTU_RELEASE);
    let built = t.perf("usr/local/bin/perf", "6.8.12");
    let loc = t.locator(UBUNTU_RELEASE, &["usr/bin", "usr/local/bin"]);
    let found = locate(&loc).unwrap();
    assert_eq!((found.path, found.source), (built, Source::Path));
    assert_eq!(found.rejected.len(), 1);
    let Rejected { path, why } = &found.rejected[0];
    assert_eq!(path, &wrapper);
    assert!(
        why.starts_with("exited with status 2: WARNING: perf not found for kernel 6.8.0-134"),
        "{why}"
    );
    assert!(why.contains("linux-tools-common"), "{why}");
}

#[test]
fn ubuntu_wrapper_alone_is_an_error_naming_the_package() {
    let t = Tree::new();
    t.os_release("ubuntu-24.04");
    t.ubuntu_wrapper("usr/bin/perf", UBUNTU_RELEASE);
    let loc = t.locator(UBUNTU_RELEASE, &["usr/bin"]);
    let err = format!("{:#}", locate(&loc).unwrap_err());
    assert!(
        err.contains("WARNING: perf not found for kernel 6.8.0-134"),
        "{err}"
    );
    assert!(
        err.contains("sudo apt install linux-tools-6.8.0-134-generic"),
        "{err}"
    );
    assert!(!err.contains('\n'), "{err}");
}

#[test]
fn ubuntu_wrapper_execs_the_running_kernels_perf() {
    let t = Tree::new();
    t.perf("usr/lib/linux-tools/6.8.0-134-generic/perf", "6.8.12");
    let wrapper = t.ubuntu_wrapper("usr/bin/perf", UBUNTU_RELEASE);
    assert_eq!(
        run_version(&wrapper, VERSION_TIMEOUT).unwrap().raw,
        "6.8.12"
    );
}

#[test]
fn ubuntu_abi_directory_layout() {
    let t = Tree::new();
    let abi = t.perf("usr/lib/linux-tools-6.8.0-134/perf", "6.8.12");
    t.perf("usr/lib/linux-tools-6.8.0-130/perf", "6.8.12");
    let found = locate(&t.locator(UBUNTU_RELEASE, &[])).unwrap();
    assert_eq!((found.path, found.source), (abi, Source::LinuxToolsVersion));
}

#[test]
fn ubuntu_symlinked_layout_is_one_candidate() {
    let t = Tree::new();
    let abi = t.perf("usr/lib/linux-tools-6.8.0-134/perf", "6.8.12");
    let link = t.path("usr/lib/linux-tools/6.8.0-134-generic/perf");
    fs::create_dir_all(link.parent().unwrap()).unwrap();
    std::os::unix::fs::symlink(&abi, &link).unwrap();
    let list = candidates(&t.locator(UBUNTU_RELEASE, &[]));
    assert_eq!(paths(&list), vec![(link, Source::LinuxToolsKernel)]);
}

#[test]
fn ubuntu_abi_strips_the_flavour_like_the_wrapper() {
    assert_eq!(ubuntu_abi("6.8.0-134-generic"), "6.8.0-134");
    assert_eq!(ubuntu_abi("6.8.0-45-generic-64k"), "6.8.0-45");
    assert_eq!(ubuntu_abi("4.19.69-v8+"), "4.19.69");
    assert_eq!(ubuntu_abi("6.10.0"), "6.10.0");
}

#[test]
fn debian_versioned_perf_comes_before_plain_perf() {
    let t = Tree::new();
    let versioned = t.perf("usr/bin/perf_6.1", "6.1.192");
    let plain = t.perf("usr/bin/perf", "6.1.192");
    t.perf("usr/bin/perf_5.10", "5.10.0");
    let list = candidates(&t.locator("6.1.0-28-amd64", &["usr/bin"]));
    assert_eq!(
        paths(&list),
        vec![(versioned, Source::DebianVersioned), (plain, Source::Path)]
    );
}

#[test]
fn fedora_and_arch_plain_usr_bin_perf() {
    for (release, version) in [
        ("6.9.10-200.fc40.x86_64", "6.9.10-200.fc40.x86_64"),
        ("6.11.5-arch1-1", "6.11-1"),
    ] {
        let t = Tree::new();
        let perf = t.perf("usr/bin/perf", version);
        let found = locate(&t.locator(release, &["usr/bin"])).unwrap();
        assert_eq!(
            (&found.path, found.source),
            (&perf, Source::Path),
            "{release}"
        );
        assert!(found.matches_kernel, "{release}");
    }
}

#[test]
fn every_perf_on_path_is_a_candidate_in_order() {
    let t = Tree::new();
    let first = t.perf("opt/a/perf", "6.1.1");
    let second = t.perf("opt/b/perf", "6.1.2");
    let list = candidates(&t.locator("6.1.0", &["opt/a", "opt/b"]));
    assert_eq!(
        paths(&list),
        vec![(first, Source::Path), (second, Source::Path)]
    );
}

#[test]
fn relative_path_entries_are_ignored() {
    let t = Tree::new();
    let mut loc = t.locator("6.1.0", &[]);
    loc.path_var = Some(OsString::from("fixtures/perf:."));
    assert!(candidates(&loc).is_empty());
}

#[test]
fn env_perf_overrides_everything() {
    let t = Tree::new();
    t.perf("usr/lib/linux-tools/6.8.0-134-generic/perf", "6.8.12");
    let mine = t.perf("home/me/perf", "6.8.99");
    let mut loc = t.locator(UBUNTU_RELEASE, &["usr/bin"]);
    loc.env = Some(mine.clone().into_os_string());
    let found = locate(&loc).unwrap();
    assert_eq!((found.path, found.source), (mine, Source::Env));
}

#[test]
fn flag_overrides_env_perf() {
    let t = Tree::new();
    let from_env = t.perf("home/me/env-perf", "6.8.1");
    let from_flag = t.perf("home/me/flag-perf", "6.8.2");
    let mut loc = t.locator(UBUNTU_RELEASE, &[]);
    loc.env = Some(from_env.into_os_string());
    loc.explicit = Some(from_flag.clone());
    let found = locate(&loc).unwrap();
    assert_eq!(
        (found.path, found.source),
        (from_flag.clone(), Source::Flag)
    );
    assert_eq!(paths(&candidates(&loc)), vec![(from_flag, Source::Flag)]);
}

#[test]
fn empty_env_perf_counts_as_unset() {
    let t = Tree::new();
    let perf = t.perf("usr/bin/perf", "6.1.1");
    let mut loc = t.locator("6.1.0", &["usr/bin"]);
    loc.env = Some(OsString::new());
    assert_eq!(locate(&loc).unwrap().path, perf);
}

#[test]
fn env_perf_bare_name_is_looked_up_on_path() {
    let t = Tree::new();
    let perf = t.perf("usr/bin/perf-6.8", "6.8.12");
    let mut loc = t.locator("6.8.0", &["usr/bin"]);
    loc.env = Some(OsString::from("perf-6.8"));
    assert_eq!(locate(&loc).unwrap().path, perf);
}

#[test]
fn missing_env_perf_is_an_error_not_a_fallthrough() {
    let t = Tree::new();
    t.perf("usr/bin/perf", "6.1.1");
    let mut loc = t.locator("6.1.0", &["usr/bin"]);
    loc.env = Some(t.path("nope/perf").into_os_string());
    let err = locate(&loc).unwrap_err();
    assert_eq!(crate::error::exit_code(&err), 2);
    let msg = format!("{err:#}");
    assert!(msg.starts_with("$PERF="), "{msg}");
    assert!(msg.contains("no such file; fix or unset PERF"), "{msg}");
    assert!(candidates(&loc).is_empty());
}

#[test]
fn missing_flag_perf_is_an_error() {
    let t = Tree::new();
    let mut loc = t.locator("6.1.0", &[]);
    loc.explicit = Some(t.path("nope/perf"));
    let msg = format!("{:#}", locate(&loc).unwrap_err());
    assert!(
        msg.starts_with("--perf ") && msg.contains("no such file"),
        "{msg}"
    );
}

#[test]
fn failing_candidate_is_rejected_with_its_stderr() {
    let t = Tree::new();
    let broken = t.script(
        "opt/a/perf",
        "echo 'perf: error while loading shared libraries: libpython3.11.so' >&2; exit 127",
    );
    let good = t.perf("opt/b/perf", "6.1.192");
    let found = locate(&t.locator("6.1.0", &["opt/a", "opt/b"])).unwrap();
    assert_eq!(found.path, good);
    assert_eq!(
        found.rejected,
        vec![Rejected {
            path: broken,
            why: "exited with status 127: perf: error while loading shared libraries: libpython3.11.so"
                .to_string()
        }]
    );
}

#[test]
fn failing_explicit_perf_is_an_error_with_its_stderr() {
    let t = Tree::new();
    let broken = t.script("opt/perf", "echo boom >&2; exit 1");
    t.perf("usr/bin/perf", "6.1.1");
    let mut loc = t.locator("6.1.0", &["usr/bin"]);
    loc.explicit = Some(broken);
    let err = locate(&loc).unwrap_err();
    assert_eq!(crate::error::exit_code(&err), 2);
    let msg = format!("{err:#}");
    assert!(
        msg.ends_with("does not work: exited with status 1: boom"),
        "{msg}"
    );
}

#[test]
fn candidate_printing_no_version_is_rejected() {
    let t = Tree::new();
    let odd = t.script("opt/perf", "echo hello");
    let why = run_version(&odd, VERSION_TIMEOUT).unwrap_err();
    assert_eq!(
        why,
        "`--version` printed no perf version (it printed: hello)"
    );
}

#[test]
fn hanging_candidate_is_killed_after_the_timeout() {
    let t = Tree::new();
    // No exec: the sleep is a grandchild holding the output pipes.
    let hang = t.script("opt/perf", "sleep 30; echo perf version 6.1.1");
    let started = Instant::now();
    let why = run_version(&hang, Duration::from_millis(300)).unwrap_err();
    assert!(why.contains("did not finish within 0.3s"), "{why}");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
}

#[test]
fn nothing_found_lists_where_it_looked_and_the_hint() {
    let t = Tree::new();
    t.os_release("fedora-40");
    let err = locate(&t.locator("6.9.10-200.fc40.x86_64", &["usr/bin"])).unwrap_err();
    assert_eq!(crate::error::exit_code(&err), 1);
    let msg = format!("{err:#}");
    assert!(
        msg.contains("linux-tools/6.9.10-200.fc40.x86_64/perf"),
        "{msg}"
    );
    assert!(msg.contains("perf_6.9 on PATH, perf on PATH"), "{msg}");
    assert!(msg.contains("install one (sudo dnf install perf)"), "{msg}");
}

#[test]
fn version_mismatch_warning_names_the_package_per_distro() {
    let cases = [
        (
            "ubuntu-24.04",
            "6.11.0-9-generic",
            "sudo apt install linux-tools-6.11.0-9-generic",
        ),
        (
            "debian-12",
            "6.18.44-fc-v595",
            "sudo apt install linux-perf",
        ),
        (
            "fedora-40",
            "6.11.5-300.fc40.x86_64",
            "sudo dnf install perf",
        ),
        ("arch", "6.11.5-arch1-1", "sudo pacman -S perf"),
    ];
    for (distro, release, package) in cases {
        let t = Tree::new();
        t.os_release(distro);
        let perf = t.perf("usr/bin/perf", "6.1.192");
        let found = locate(&t.locator(release, &["usr/bin"])).unwrap();
        assert!(!found.matches_kernel, "{distro}");
        let hint = found.mismatch_hint.unwrap();
        assert!(hint.contains(package), "{distro}: {hint}");
        assert!(
            hint.contains(&perf.display().to_string()),
            "{distro}: {hint}"
        );
        assert!(hint.contains("it still works"), "{distro}: {hint}");
    }
}

fn world_writable_perf(t: &Tree) -> PathBuf {
    let perf = t.perf("shared/perf", "6.1.192");
    fs::set_permissions(&perf, fs::Permissions::from_mode(0o777)).unwrap();
    perf
}

#[test]
fn world_writable_explicit_perf_is_refused_as_root() {
    let t = Tree::new();
    let perf = world_writable_perf(&t);
    let err = check_trust(&perf, "$PERF=x", true, false).unwrap_err();
    let msg = format!("{err:#}");
    assert!(
        msg.contains("writable by group or others (mode 777)"),
        "{msg}"
    );
    assert!(msg.contains("--trust-perf"), "{msg}");
    assert_eq!(crate::error::exit_code(&err), 2);
    assert!(check_trust(&perf, "$PERF=x", true, true).is_ok());
    assert!(check_trust(&perf, "$PERF=x", false, false).is_ok());
}

#[test]
fn group_writable_directory_is_refused_as_root() {
    let t = Tree::trusted();
    let perf = t.perf("shared/perf", "6.1.192");
    fs::set_permissions(t.path("shared"), fs::Permissions::from_mode(0o775)).unwrap();
    let msg = format!(
        "{:#}",
        check_trust(&perf, "--perf x", true, false).unwrap_err()
    );
    assert!(
        msg.contains("shared is writable by group or others (mode 775)"),
        "{msg}"
    );
    fs::set_permissions(t.path("shared"), fs::Permissions::from_mode(0o755)).unwrap();
    assert!(check_trust(&perf, "--perf x", true, false).is_ok());
}

#[test]
fn world_writable_env_perf_through_locate_as_root() {
    if !running_as_root() {
        eprintln!("SKIP world_writable_env_perf_through_locate_as_root: needs root");
        return;
    }
    let t = Tree::new();
    let perf = world_writable_perf(&t);
    let mut loc = t.locator("6.1.0", &[]);
    loc.as_root = true;
    loc.env = Some(perf.clone().into_os_string());
    let msg = format!("{:#}", locate(&loc).unwrap_err());
    assert!(msg.starts_with("refusing to run $PERF="), "{msg}");
    loc.trust_perf = true;
    assert_eq!(locate(&loc).unwrap().path, perf);
}

#[test]
fn from_env_reads_the_real_kernel_release() {
    let loc = Locator::from_env(None, false).unwrap();
    assert!(
        kernel_major_minor(&loc.kernel_release).is_some(),
        "{}",
        loc.kernel_release
    );
    assert_eq!(loc.root, PathBuf::from("/"));
}

/// This machine's real perf, found on PATH, its version compared with the running kernel's.
#[test]
fn real_perf_on_this_machine() {
    let real = Path::new("/usr/bin/perf");
    if !real.exists() {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI must have /usr/bin/perf"
        );
        eprintln!("SKIP real_perf_on_this_machine: no /usr/bin/perf");
        return;
    }
    let mut loc = Locator::from_env(None, false).unwrap();
    loc.env = None;
    loc.path_var = Some(OsString::from("/usr/bin"));
    let found = locate(&loc).unwrap();
    assert_eq!(found.path, real);
    assert_eq!(found.source, Source::Path);
    assert_eq!(
        found.matches_kernel,
        found.version.matches_kernel(&loc.kernel_release)
    );
    let os = read_os_release(Path::new("/"));
    if let Some(hint) = &found.mismatch_hint {
        assert!(
            hint.contains(&install_hint(&os, &loc.kernel_release)),
            "{hint}"
        );
    }
    // On Debian the hint names its package, whatever perf's version is.
    if os.contains("ID=debian") {
        if let Some(hint) = &found.mismatch_hint {
            assert!(hint.contains("sudo apt install linux-perf"), "{hint}");
        }
    }
}

/// (running kernel, installed linux-tools dirs under usr/lib, expected choice, why)
const NEAREST_CASES: &[(&str, &[&str], &str, &str)] = &[
    (
        "6.8.12-mykernel",
        &[
            "linux-tools/6.5.0-10",
            "linux-tools/6.8.0-134",
            "linux-tools/6.9.0-1",
            "linux-tools/5.15.0-1",
        ],
        "linux-tools/6.8.0-134",
        "has the running kernel's major.minor 6.8",
    ),
    (
        "6.8.12-mykernel",
        &[
            "linux-tools-6.5.0-10",
            "linux-tools-6.8.0-120",
            "linux-tools-6.8.0-134",
        ],
        "linux-tools-6.8.0-134",
        "has the running kernel's major.minor 6.8",
    ),
    (
        "6.10.3-custom",
        &[
            "linux-tools/6.9.0-1",
            "linux-tools-6.11.0-2",
            "linux-tools/5.10.0-3",
        ],
        "linux-tools-6.11.0-2",
        "6.11.0-2 (6.11) is the nearest installed",
    ),
    (
        "6.18.0",
        &[
            "linux-tools/5.15.0-1",
            "linux-tools/6.1.0-9",
            "linux-tools/weird",
        ],
        "linux-tools/6.1.0-9",
        "6.1.0-9 (6.1) is the nearest installed",
    ),
    (
        "6.18.0",
        &["linux-tools/weird"],
        "linux-tools/weird",
        "names no version",
    ),
];

/// A custom kernel's perf lives under a linux-tools name that is not `uname -r`.
#[test]
fn nearest_linux_tools_by_major_minor_table() {
    for (release, dirs, want, why) in NEAREST_CASES {
        let t = Tree::new();
        for d in *dirs {
            t.perf(&format!("usr/lib/{d}/perf"), "6.1.0");
        }
        let list = candidates(&t.locator(release, &[]));
        assert_eq!(list.len(), dirs.len(), "{release}: {list:?}");
        assert_eq!(
            list[0].path,
            t.path(&format!("usr/lib/{want}/perf")),
            "{release}: {list:?}"
        );
        assert_eq!(list[0].source, Source::LinuxToolsNearest);
        let note = list[0].note.clone().unwrap();
        assert!(note.contains(why), "{release}: {note}");
        let found = locate(&t.locator(release, &[])).unwrap();
        assert!(found.choice.contains(why), "{}", found.choice);
        assert!(found.choice.contains(*want), "{}", found.choice);
    }
}

#[test]
fn same_major_minor_tools_come_before_path_and_others_after() {
    let t = Tree::new();
    t.perf("usr/lib/linux-tools/6.5.0-1/perf", "6.5.0");
    t.perf("usr/lib/linux-tools/6.8.0-1/perf", "6.8.0");
    t.perf("usr/bin/perf", "6.1.0");
    let list = candidates(&t.locator("6.8.12-mykernel", &["usr/bin"]));
    let sources: Vec<Source> = list.iter().map(|c| c.source).collect();
    assert_eq!(
        sources,
        [
            Source::LinuxToolsNearest,
            Source::Path,
            Source::LinuxToolsNearest
        ]
    );
    assert!(list[0].path.ends_with("6.8.0-1/perf"));
    assert!(list[2].path.ends_with("6.5.0-1/perf"));
}

#[test]
fn exact_release_still_beats_a_nearest_version() {
    let t = Tree::new();
    t.perf("usr/lib/linux-tools/6.8.0-120/perf", "6.8.0");
    t.perf(
        &format!("usr/lib/linux-tools/{UBUNTU_RELEASE}/perf"),
        "6.8.0",
    );
    let list = candidates(&t.locator(UBUNTU_RELEASE, &[]));
    assert_eq!(list[0].source, Source::LinuxToolsKernel);
    assert_eq!(list[1].source, Source::LinuxToolsNearest);
    let found = locate(&t.locator(UBUNTU_RELEASE, &[])).unwrap();
    assert!(
        found
            .choice
            .contains("its major.minor is the running kernel's"),
        "{}",
        found.choice
    );
}

#[test]
fn version_rank_prefers_same_major_nearest_minor_then_newer() {
    use super::super::nearest::version_rank;
    let version = |major, minor| MajorMinor { major, minor };
    let kernel = Some(version(6, 10));
    let mut found = [(5, 10), (6, 9), (6, 11), (6, 10), (7, 0), (6, 2)];
    found.sort_by_key(|&(major, minor)| version_rank(Some(version(major, minor)), kernel));
    assert_eq!(found, [(6, 10), (6, 11), (6, 9), (6, 2), (5, 10), (7, 0)]);
    assert!(version_rank(None, kernel) > version_rank(Some(version(1, 0)), kernel));
}

fn chown(p: &Path, uid: u32) {
    std::os::unix::fs::chown(p, Some(uid), None).unwrap();
}

const NOBODY: u32 = 65534;

/// As root, a perf owned by another user in a 0755 directory is refused.
#[test]
fn perf_owned_by_another_user_is_refused_as_root() {
    if !running_as_root() {
        eprintln!("SKIP perf_owned_by_another_user_is_refused_as_root: needs root (chown)");
        return;
    }
    let t = Tree::trusted();
    let perf = t.perf("opt/perf", "6.1.0");
    assert!(check_trust(&perf, "--perf x", true, false).is_ok());
    chown(&perf, NOBODY);
    let msg = format!(
        "{:#}",
        check_trust(&perf, "--perf x", true, false).unwrap_err()
    );
    assert!(msg.contains("belongs to uid 65534"), "{msg}");
    chown(&perf, 0);
    chown(&t.path("opt"), NOBODY);
    let msg = format!(
        "{:#}",
        check_trust(&perf, "--perf x", true, false).unwrap_err()
    );
    assert!(msg.contains("opt belongs to uid 65534"), "{msg}");
}

/// A 0777 directory anywhere above the perf is refused, here its grandparent.
#[test]
fn world_writable_grandparent_is_refused_as_root() {
    let t = Tree::trusted();
    let perf = t.perf("a/b/perf", "6.1.0");
    fs::set_permissions(t.path("a"), fs::Permissions::from_mode(0o777)).unwrap();
    let msg = format!(
        "{:#}",
        check_trust(&perf, "$PERF=x", true, false).unwrap_err()
    );
    assert!(
        msg.contains("/a is writable by group or others (mode 777)"),
        "{msg}"
    );
    // A link in a safe place to a perf under the open directory: the real path is checked.
    fs::create_dir_all(t.path("bin")).unwrap();
    std::os::unix::fs::symlink(&perf, t.path("bin/perf")).unwrap();
    assert!(check_trust(&t.path("bin/perf"), "x", true, false).is_err());
    fs::set_permissions(t.path("a"), fs::Permissions::from_mode(0o755)).unwrap();
    assert!(check_trust(&t.path("bin/perf"), "x", true, false).is_ok());
}

/// A perf found on PATH is checked too, and an untrusted one is passed over with the reason.
#[test]
fn untrusted_perf_on_path_is_passed_over_as_root() {
    let t = Tree::trusted();
    t.perf("open/perf", "6.1.1");
    fs::set_permissions(t.path("open"), fs::Permissions::from_mode(0o777)).unwrap();
    let good = t.perf("usr/bin/perf", "6.1.2");
    let mut loc = t.locator("6.1.0", &["open", "usr/bin"]);
    loc.as_root = true;
    let found = locate(&loc).unwrap();
    assert_eq!(found.path, good);
    assert_eq!(found.rejected.len(), 1, "{:?}", found.rejected);
    assert!(
        found.rejected[0].why.contains("not run as root"),
        "{:?}",
        found.rejected
    );
    loc.as_root = false;
    assert_eq!(locate(&loc).unwrap().path, t.path("open/perf"));
}

/// A directory of root's with the sticky bit (as /tmp is) is a safe place above what root
/// runs: others can add entries to it but not rename or remove root's. Without the sticky
/// bit, or owned by another user, it is not.
#[test]
#[ignore = "needs root (chown): scripts/test.sh runs it"]
fn a_sticky_directory_of_roots_is_a_safe_ancestor_as_root() {
    if !crate::host::security::root_or_skip(
        "a_sticky_directory_of_roots_is_a_safe_ancestor_as_root",
    ) {
        return;
    }
    let t = Tree::trusted();
    let perf = t.perf("shared/opt/perf", "6.1.0");
    fs::set_permissions(t.path("shared"), fs::Permissions::from_mode(0o1777)).unwrap();
    assert!(check_trust(&perf, "--perf x", true, false).is_ok());
    chown(&t.path("shared"), NOBODY);
    let msg = format!(
        "{:#}",
        check_trust(&perf, "--perf x", true, false).unwrap_err()
    );
    assert!(msg.contains("shared belongs to uid 65534"), "{msg}");
    chown(&t.path("shared"), 0);
    fs::set_permissions(t.path("shared"), fs::Permissions::from_mode(0o777)).unwrap();
    let msg = format!(
        "{:#}",
        check_trust(&perf, "--perf x", true, false).unwrap_err()
    );
    assert!(
        msg.contains("shared is writable by group or others (mode 777)"),
        "{msg}"
    );
    // What root runs from a sticky directory must still be root's own.
    fs::set_permissions(t.path("shared"), fs::Permissions::from_mode(0o1777)).unwrap();
    chown(&t.path("shared/opt"), NOBODY);
    assert!(check_trust(&perf, "--perf x", true, false).is_err());
}
