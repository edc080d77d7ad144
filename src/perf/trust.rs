//! As root, never run a perf another user could have replaced (`--perf`/`$PERF` pointing into
//! a world-writable place): refused unless `--trust-perf`.

use crate::error::usage;
use anyhow::Result;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

/// As root, refuse an explicit perf that a non-root user could have replaced: the file, its
/// real directory or the directory it was named through is writable by group or others.
pub(super) fn check_trust(path: &Path, label: &str, as_root: bool, trusted: bool) -> Result<()> {
    if !as_root || trusted {
        return Ok(());
    }
    match untrusted_reason(path) {
        None => Ok(()),
        Some(why) => Err(usage(format!(
            "refusing to run {label} as root: {why}, so another user could replace what root \
             runs; fix the permissions (chmod go-w) or pass --trust-perf if you trust it"
        ))),
    }
}

/// Why `path` is not safe to run as root, if it is not.
pub(super) fn untrusted_reason(path: &Path) -> Option<String> {
    let real = fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    let mut checked = vec![real.clone()];
    checked.extend(real.parent().map(Path::to_path_buf));
    checked.extend(
        path.parent()
            .filter(|dir| !dir.as_os_str().is_empty())
            .map(Path::to_path_buf),
    );
    checked.iter().find_map(|p| {
        let mode = fs::metadata(p).ok()?.permissions().mode();
        (mode & 0o022 != 0).then(|| {
            format!(
                "{} is writable by group or others (mode {:o})",
                p.display(),
                mode & 0o7777
            )
        })
    })
}
