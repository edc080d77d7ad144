//! Maps an object pins by name (`__uint(pinning, LIBBPF_PIN_BY_NAME)`). libbpf pins such a map
//! at `/sys/fs/bpf/<map name>` and, when a pin of that name is already there, reuses the pinned
//! map instead of creating one: a deployed agent's map of the same name would be written to,
//! and every "fresh" load of `overhead` would share one map's state. So before the load each
//! such map is pointed at a private pin directory, made by us under /sys/fs/bpf (new, 0700,
//! root's), and the directory with its pins is removed when the object is.

use anyhow::{Context, Result};
use libbpf_rs::{AsRawLibbpf, OpenObject};
use std::path::{Path, PathBuf};

/// Where bpffs is mounted on every system libbpf supports.
const BPFFS: &str = "/sys/fs/bpf";

/// A private pin directory under bpffs; removed with every pin in it when dropped.
#[derive(Debug)]
pub(crate) struct PinRoot {
    dir: PathBuf,
}

impl PinRoot {
    /// Point every map of `open` that libbpf would pin by name at a fresh private directory;
    /// `None` when the object pins nothing. `name` is the object's, for messages.
    pub(crate) fn for_object(open: &mut OpenObject, name: &str) -> Result<Option<PinRoot>> {
        let pinned: Vec<String> = open
            .maps()
            .filter(|map| pinned_by_libbpf(map.as_libbpf_object().as_ptr()))
            .map(|map| map.name().to_string_lossy().into_owned())
            .collect();
        if pinned.is_empty() {
            return Ok(None);
        }
        let root = PinRoot::create(name, &pinned)?;
        for mut map in open.maps_mut() {
            if !pinned_by_libbpf(map.as_libbpf_object().as_ptr()) {
                continue;
            }
            let own = root.dir.join(map.name());
            map.set_pin_path(&own).with_context(|| {
                format!(
                    "{name}: cannot pin map {} at {}",
                    map.name().to_string_lossy(),
                    own.display()
                )
            })?;
        }
        Ok(Some(root))
    }

    /// A new 0700 directory `ebpf-prof-PID-N` under bpffs.
    fn create(name: &str, pinned: &[String]) -> Result<PinRoot> {
        use std::os::unix::fs::DirBuilderExt;
        let mut last = None;
        for attempt in 0..16u32 {
            let dir = Path::new(BPFFS).join(format!("ebpf-prof-{}-{attempt}", std::process::id()));
            match std::fs::DirBuilder::new().mode(0o700).create(&dir) {
                Ok(()) => return Ok(PinRoot { dir }),
                Err(err) if err.kind() == std::io::ErrorKind::AlreadyExists => last = Some(err),
                Err(err) => return Err(refused(name, pinned, &err)),
            }
        }
        let err = last.unwrap_or_else(|| std::io::Error::from_raw_os_error(libc::EEXIST));
        Err(refused(name, pinned, &err))
    }

    /// The private directory, for messages and tests.
    pub(crate) fn dir(&self) -> &Path {
        &self.dir
    }
}

/// The one line for an object whose pinned maps cannot be given a private directory.
fn refused(name: &str, pinned: &[String], err: &std::io::Error) -> anyhow::Error {
    crate::error::usage(format!(
        "{name} pins map {} by name: it is loaded with a private pin directory under {BPFFS}, which cannot be made ({}); mount bpffs there (mount -t bpf bpf {BPFFS}) or build the object without LIBBPF_PIN_BY_NAME",
        pinned.join(", "),
        crate::out::plain(err)
    ))
}

/// Whether libbpf will pin a map when the object loads (it has a pin path).
fn pinned_by_libbpf(map: *mut libbpf_rs::libbpf_sys::bpf_map) -> bool {
    // SAFETY: `map` is a live map of an opened object; libbpf returns NULL or a string it owns.
    let path = unsafe { libbpf_rs::libbpf_sys::bpf_map__pin_path(map) };
    !path.is_null()
}

impl Drop for PinRoot {
    fn drop(&mut self) {
        // Only pins are in it, each removed by unlink; then the directory.
        if let Ok(entries) = std::fs::read_dir(&self.dir) {
            for entry in entries.flatten() {
                let _ = std::fs::remove_file(entry.path());
            }
        }
        let _ = std::fs::remove_dir(&self.dir);
    }
}
