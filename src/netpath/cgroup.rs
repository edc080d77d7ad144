//! The cgroup a packet run's bench sends from: `ebpf-prof-PID-N` at the root of the cgroup v2
//! hierarchy, made beside the veth pair, with this process moved into it so that the bench it
//! starts is in it too; cgroup_skb programs attach to it (`bpf::packet`). Dropping it moves this
//! process back to the cgroup it came from and removes the directory; after a SIGKILL the next
//! start removes it (it is empty once the run's processes are gone), as the pair's note says.

use anyhow::{Context, Result};
use std::path::{Path, PathBuf};

/// This process in a cgroup of its own, until dropped.
#[derive(Debug)]
pub struct BenchCgroup {
    path: PathBuf,
    came_from: PathBuf,
}

/// Where the cgroup v2 hierarchy is mounted (`/sys/fs/cgroup`, or `/sys/fs/cgroup/unified` on
/// a hybrid system), from this process's mount table.
pub fn cgroup2_root() -> Option<PathBuf> {
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    mounts.lines().find_map(|line| {
        let (before, after) = line.split_once(" - ")?;
        let fstype = after.split_whitespace().next()?;
        let mount_point = before.split_whitespace().nth(4)?;
        (fstype == "cgroup2").then(|| PathBuf::from(mount_point))
    })
}

/// This process's cgroup v2 path (`0::/PATH` in /proc/self/cgroup), under `root`.
fn current(root: &Path) -> Option<PathBuf> {
    let text = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    let path = text.lines().find_map(|l| l.strip_prefix("0::"))?;
    Some(root.join(path.trim_start_matches('/')))
}

/// Move this process (every thread of it) into the cgroup at `dir`.
fn move_into(dir: &Path) -> Result<()> {
    std::fs::write(dir.join("cgroup.procs"), std::process::id().to_string())
        .with_context(|| format!("cannot move ebpf-prof into the cgroup {}", dir.display()))
}

impl BenchCgroup {
    /// Make the cgroup `name` and move this process into it.
    pub fn create(name: &str) -> Result<BenchCgroup> {
        let root = cgroup2_root()
            .context("no cgroup v2 hierarchy is mounted: cgroup_skb programs need one")?;
        let came_from = current(&root).context("cannot read this process's cgroup v2 path")?;
        let path = root.join(name);
        std::fs::create_dir(&path)
            .with_context(|| format!("cannot make the cgroup {}", path.display()))?;
        let made = BenchCgroup { path, came_from };
        move_into(&made.path)?;
        Ok(made)
    }

    /// The cgroup's directory.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for BenchCgroup {
    fn drop(&mut self) {
        if let Err(e) = move_into(&self.came_from) {
            crate::out::say(format!("warning: {e:#}"));
        }
        remove(&self.path);
    }
}

/// Remove the cgroup at `dir` if it is there; once its processes are gone it is empty.
pub fn remove(dir: &Path) -> Option<String> {
    match std::fs::remove_dir(dir) {
        Ok(()) => None,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => Some(format!(
            "could not remove the cgroup {}: {}",
            dir.display(),
            crate::out::plain(&e)
        )),
    }
}
