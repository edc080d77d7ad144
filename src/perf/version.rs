//! perf's version against the running kernel's: parsing `perf --version`, reading major.minor
//! from `uname -r`, and naming the package that brings a matching perf on each distribution.
//!
//! perf lives in the kernel tree and carries the kernel's version, but each distribution prints
//! it differently (real outputs in `fixtures/perf/versions/`):
//! - Debian and Ubuntu print the upstream stable version: `perf version 6.1.192`,
//!   `perf version 6.8.12` (Ubuntu's linux-tools-6.8.0-134, not `6.8.0-134`).
//! - RHEL-family and Fedora spec files put `-<release>.<arch>` into the kernel's EXTRAVERSION:
//!   `perf version 5.14.0-570.33.2.el9_6.x86_64`.
//! - Arch forces `$pkgver-$pkgrel`: in `perf version 6.16-3` the `3` is the package release.
//! - Builds from a git tree: `perf version 6.10.g5510fb5c79e9`, `6.12.rc3.g939b0caafd01`.
//!
//! Only major.minor is compared with the kernel: a perf older than the kernel still records and
//! reports (Debian 12's perf 6.1 on kernel 6.18 here), it may just not know newer features.

use serde::Serialize;

/// A perf version as printed by `perf --version`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PerfVersion {
    /// Kernel major version perf was built from (`6` in `6.1.192`).
    pub major: u32,
    /// Kernel minor version (`1` in `6.1.192`).
    pub minor: u32,
    /// Stable patch level when perf printed one (`192`); `None` for `6.16-3` or `6.10.g<hash>`.
    pub patch: Option<u32>,
    /// Everything after `perf version `, as printed (`5.14.0-570.33.2.el9_6.x86_64`).
    pub raw: String,
}

impl PerfVersion {
    /// Whether this perf's major.minor is the running kernel's (`uname -r`). A release that
    /// cannot be read (no `<major>.<minor>` prefix) counts as a match: nothing to warn about.
    pub fn matches_kernel(&self, kernel_release: &str) -> bool {
        kernel_major_minor(kernel_release).is_none_or(|mm| mm == (self.major, self.minor))
    }
}

/// Parses the output of `perf --version` (or `perf version --build-options`): the first line
/// starting with `perf version `. `None` when there is no such line or no `<major>.<minor>`.
pub fn parse_perf_version(output: &str) -> Option<PerfVersion> {
    let raw = output
        .lines()
        .find_map(|line| line.trim().strip_prefix("perf version "))?
        .trim();
    let (major, minor, patch) = numeric_prefix(raw)?;
    Some(PerfVersion {
        major,
        minor,
        patch,
        raw: raw.to_string(),
    })
}

/// Major and minor of a kernel release as `uname -r` prints it (`6.8.0-134-generic` → (6, 8)).
pub fn kernel_major_minor(release: &str) -> Option<(u32, u32)> {
    numeric_prefix(release.trim()).map(|(major, minor, _)| (major, minor))
}

/// The command that installs a perf matching `kernel_release`, from `/etc/os-release`'s `ID`
/// then `ID_LIKE` (so Linux Mint gets Ubuntu's answer, Rocky gets Fedora's).
pub fn install_hint(os_release: &str, kernel_release: &str) -> String {
    distro_ids(os_release)
        .into_iter()
        .find_map(|id| hint_for(&id, kernel_release))
        .unwrap_or_else(|| {
            format!(
                "install your distribution's perf package, or build tools/perf from the source \
                 of kernel {kernel_release}"
            )
        })
}

/// The install command for one os-release ID, if it is a distribution we know.
fn hint_for(id: &str, kernel_release: &str) -> Option<String> {
    let hint = match id {
        // Ubuntu ships one perf per kernel ABI and flavour: linux-tools-6.8.0-134-generic.
        "ubuntu" => format!("sudo apt install linux-tools-{kernel_release}"),
        // Debian's linux-perf follows the distribution's kernel (bookworm: 6.1); a newer
        // kernel from backports has its linux-perf in backports too.
        "debian" => "sudo apt install linux-perf".to_string(),
        "fedora" | "rhel" | "centos" => "sudo dnf install perf".to_string(),
        "arch" => "sudo pacman -S perf".to_string(),
        "suse" | "opensuse" => "sudo zypper install perf".to_string(),
        "alpine" => "apk add perf".to_string(),
        _ => return None,
    };
    Some(hint)
}

/// `ID` followed by the entries of `ID_LIKE`, unquoted and lowercase.
fn distro_ids(os_release: &str) -> Vec<String> {
    let mut ids: Vec<String> = os_release_value(os_release, "ID").into_iter().collect();
    if let Some(like) = os_release_value(os_release, "ID_LIKE") {
        ids.extend(like.split_whitespace().map(str::to_string));
    }
    ids.iter().map(|id| id.to_ascii_lowercase()).collect()
}

/// The value of `KEY=value` in an os-release file, without its quotes.
fn os_release_value(os_release: &str, key: &str) -> Option<String> {
    os_release.lines().find_map(|line| {
        let value = line.trim().strip_prefix(key)?.strip_prefix('=')?;
        Some(value.trim().trim_matches(['"', '\'']).to_string())
    })
}

/// `<major>.<minor>[.<patch>]` at the start of a version string. A component counts only when
/// it ends at a non-alphanumeric character: in `6.10.g5510fb5c79e9` there is no patch level.
fn numeric_prefix(text: &str) -> Option<(u32, u32, Option<u32>)> {
    let (major, rest) = component(text)?;
    let (minor, rest) = component(rest.strip_prefix('.')?)?;
    let patch = rest
        .strip_prefix('.')
        .and_then(component)
        .map(|(patch, _)| patch);
    Some((major, minor, patch))
}

/// A leading decimal number followed by the end or a separator, and what follows it.
fn component(text: &str) -> Option<(u32, &str)> {
    let end = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let rest = &text[end..];
    if rest.starts_with(|c: char| c.is_ascii_alphanumeric()) {
        return None;
    }
    Some((text[..end].parse().ok()?, rest))
}

#[cfg(test)]
mod tests {
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
        assert_eq!(kernel_major_minor("6.18.44-fc-v595"), Some((6, 18)));
        assert_eq!(kernel_major_minor("6.8.0-134-generic"), Some((6, 8)));
        assert_eq!(kernel_major_minor("6.1.0-28-amd64"), Some((6, 1)));
        assert_eq!(kernel_major_minor("6.11.5-arch1-1"), Some((6, 11)));
        assert_eq!(kernel_major_minor("6.9.10-200.fc40.x86_64"), Some((6, 9)));
        assert_eq!(kernel_major_minor("4.19.69-v8+"), Some((4, 19)));
        assert_eq!(kernel_major_minor("6.10"), Some((6, 10)));
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
}
