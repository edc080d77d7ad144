//! Unit tests of `version.rs`.

use super::*;
use std::path::PathBuf;

fn fixture(rel: &str) -> String {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures/perf")
        .join(rel);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Every file in fixtures/perf/versions, with the version it must parse to.
const VERSION_FIXTURES: &[(&str, u32, u32, Option<u32>, &str)] = &[
    ("arch.txt", 6, 16, None, "6.16-3"),
    ("debian-12.txt", 6, 1, Some(192), "6.1.192"),
    ("debian-12-build-options.txt", 6, 1, Some(192), "6.1.192"),
    (
        "fedora-kernel-next.txt",
        6,
        11,
        Some(0),
        "6.11.0-20240909.rc7.git205.100cc857359b.300.fc40.s390x+next",
    ),
    ("git-build.txt", 6, 10, None, "6.10.g5510fb5c79e9"),
    ("git-build-rc.txt", 6, 12, None, "6.12.rc3.g939b0caafd01"),
    (
        "rocky-9.txt",
        5,
        14,
        Some(0),
        "5.14.0-570.33.2.el9_6.x86_64",
    ),
    ("tarball-rc.txt", 6, 9, Some(0), "6.9.0-rc5"),
    ("ubuntu-22.04.txt", 5, 15, Some(178), "5.15.178"),
    ("ubuntu-24.04.txt", 6, 8, Some(12), "6.8.12"),
    (
        "wsl2-kernel-tree.txt",
        5,
        15,
        Some(146),
        "5.15.146.1.gee5b8e3dcbc6",
    ),
];

#[test]
fn parses_every_captured_version() {
    for &(file, major, minor, patch, raw) in VERSION_FIXTURES {
        let got = parse_perf_version(&fixture(&format!("versions/{file}")));
        let want = PerfVersion {
            major,
            minor,
            patch,
            raw: raw.to_string(),
        };
        assert_eq!(got, Some(want), "{file}");
    }
}

#[test]
fn every_version_fixture_is_covered() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fixtures/perf/versions");
    let mut files: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    files.sort();
    let mut covered: Vec<String> = VERSION_FIXTURES.iter().map(|f| f.0.to_string()).collect();
    covered.sort();
    assert_eq!(files, covered);
}

#[test]
fn arch_package_release_is_not_a_patch_level() {
    let v = parse_perf_version("perf version 6.7-3\n").unwrap();
    assert_eq!((v.major, v.minor, v.patch), (6, 7, None));
}

#[test]
fn rejects_output_without_a_version() {
    assert_eq!(parse_perf_version(""), None);
    assert_eq!(
        parse_perf_version("WARNING: perf not found for kernel 6.8.0-134\n"),
        None
    );
    assert_eq!(parse_perf_version("perf version unknown\n"), None);
    assert_eq!(parse_perf_version("perf version 6\n"), None);
    assert_eq!(parse_perf_version("perf version 99999999999.1\n"), None);
}

#[test]
fn finds_the_version_line_after_other_output() {
    let v = parse_perf_version("some banner\n  perf version 6.8.12  \n").unwrap();
    assert_eq!(v.raw, "6.8.12");
}

#[test]
fn kernel_major_minor_of_real_releases() {
    assert_eq!(
        kernel_major_minor("6.18.44-fc-v595"),
        Some(MajorMinor {
            major: 6,
            minor: 18
        })
    );
    assert_eq!(
        kernel_major_minor("6.8.0-134-generic"),
        Some(MajorMinor { major: 6, minor: 8 })
    );
    assert_eq!(
        kernel_major_minor("6.1.0-28-amd64"),
        Some(MajorMinor { major: 6, minor: 1 })
    );
    assert_eq!(
        kernel_major_minor("6.11.5-arch1-1"),
        Some(MajorMinor {
            major: 6,
            minor: 11
        })
    );
    assert_eq!(
        kernel_major_minor("6.9.10-200.fc40.x86_64"),
        Some(MajorMinor { major: 6, minor: 9 })
    );
    assert_eq!(
        kernel_major_minor("4.19.69-v8+"),
        Some(MajorMinor {
            major: 4,
            minor: 19
        })
    );
    assert_eq!(
        kernel_major_minor("6.10"),
        Some(MajorMinor {
            major: 6,
            minor: 10
        })
    );
    assert_eq!(kernel_major_minor("garbage"), None);
}

#[test]
fn matches_kernel_compares_major_minor_only() {
    let v = parse_perf_version("perf version 6.8.12").unwrap();
    assert!(v.matches_kernel("6.8.0-134-generic"));
    assert!(!v.matches_kernel("6.18.44-fc-v595"));
    assert!(v.matches_kernel("not a release"));
}

#[test]
fn install_hint_per_distribution() {
    let cases = [
        (
            "ubuntu-24.04",
            "sudo apt install linux-tools-6.8.0-134-generic",
        ),
        ("debian-12", "sudo apt install linux-perf"),
        ("fedora-40", "sudo dnf install perf"),
        ("arch", "sudo pacman -S perf"),
        ("rocky-9.4", "sudo dnf install perf"),
    ];
    for (file, want) in cases {
        let os = fixture(&format!("os-release/{file}"));
        assert_eq!(install_hint(&os, "6.8.0-134-generic"), want, "{file}");
    }
}

#[test]
fn install_hint_follows_id_like_in_order() {
    let mint = "ID=linuxmint\nID_LIKE=\"ubuntu debian\"\n";
    assert_eq!(
        install_hint(mint, "6.8.0-45-generic"),
        "sudo apt install linux-tools-6.8.0-45-generic"
    );
    let manjaro = "ID=manjaro\nID_LIKE=arch\n";
    assert_eq!(install_hint(manjaro, "6.9.1-1"), "sudo pacman -S perf");
}

#[test]
fn install_hint_for_unknown_or_missing_os_release() {
    for os in ["", "ID=gentoo\n", "VERSION_ID=12\n"] {
        let hint = install_hint(os, "6.18.44-fc-v595");
        assert!(hint.contains("tools/perf"), "{hint}");
        assert!(hint.contains("6.18.44-fc-v595"), "{hint}");
    }
}
