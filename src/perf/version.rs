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
        kernel_major_minor(kernel_release).is_none_or(|kernel| {
            kernel
                == MajorMinor {
                    major: self.major,
                    minor: self.minor,
                }
        })
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

/// The major and minor numbers of a version, which order as the version does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct MajorMinor {
    pub major: u32,
    pub minor: u32,
}

impl std::fmt::Display for MajorMinor {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(formatter, "{}.{}", self.major, self.minor)
    }
}

/// Major and minor of a kernel release as `uname -r` prints it (`6.8.0-134-generic` → 6.8).
pub fn kernel_major_minor(release: &str) -> Option<MajorMinor> {
    numeric_prefix(release.trim()).map(|(major, minor, _)| MajorMinor { major, minor })
}

/// The command that installs a perf matching `kernel_release`, from `/etc/os-release`'s `ID`
/// then `ID_LIKE` (so Linux Mint gets Ubuntu's answer, Rocky gets Fedora's).
pub(crate) fn install_hint(os_release: &str, kernel_release: &str) -> String {
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
#[path = "version_tests.rs"]
mod tests;
