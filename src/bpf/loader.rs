//! Opens, loads and attaches a libbpf-style object, and keeps it attached until dropped.
//!
//! The steps are libbpf's (`bpf_object__open_mem`, `bpf_object__load`, `bpf_program__attach`),
//! called directly where libbpf-rs would hide the errno we need to explain a failure.

use std::borrow::Cow;
use std::collections::HashSet;
use std::os::fd::{AsFd, BorrowedFd};
use std::path::Path;
use std::ptr::NonNull;

use anyhow::Context;
use libbpf_rs::{
    libbpf_sys, AsRawLibbpf, Link, MapCore, MapFlags, MapType, Object, ObjectBuilder, OpenObject,
    Program,
};

use super::diagnose::{self, ProgMeta};
use super::libbpf_log::Capture;
use super::packet::Attachment;
use super::{ObjectSource, ProgramInfo};
use crate::host::mounts::{self, tracefs_visible, with_private_mount};
use crate::host::Host;
use crate::input::{open_regular, read_whole, Role};

/// A loaded object whose auto-attachable programs are attached; dropping it detaches and
/// unloads everything. [`Attached::detach`] and [`Attached::attach_again`] take the programs
/// off their hooks and put them back without unloading (what `overhead` does between rounds:
/// a link comes and goes in well under a millisecond, an unload waits for an RCU grace period).
pub struct Attached {
    // Fields drop in order: the links (detach) before the object (unload).
    links: Vec<Attachment>,
    object: Object,
    programs: Vec<ProgramInfo>,
    name: String,
    /// The private pin directory of its maps pinned by name, held only to be removed after the
    /// object (fields drop in order).
    _pins: Option<super::pins::PinRoot>,
}

impl Attached {
    /// Every loaded program of the object, attached or not, in the object's order.
    pub fn programs(&self) -> &[ProgramInfo] {
        &self.programs
    }

    /// The object's display name: the path as given, or the name passed with the bytes.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The underlying libbpf-rs object, for reading its maps.
    pub fn object(&self) -> &Object {
        &self.object
    }

    /// Slot `index` of the array (or per-CPU array, summed over CPUs) map `map` of u64
    /// counters, such as the sample hooks' `hits`.
    pub fn read_counter(&self, map: &str, index: u32) -> anyhow::Result<u64> {
        let found = self.object.maps().find(|m| m.name() == map);
        let map = found.with_context(|| format!("{} has no map named `{map}`", self.name))?;
        let key = index.to_ne_bytes();
        let values = match map.map_type() {
            MapType::PercpuArray => map.lookup_percpu(&key, MapFlags::ANY)?.unwrap_or_default(),
            _ => map.lookup(&key, MapFlags::ANY)?.into_iter().collect(),
        };
        Ok(values.iter().map(|v| u64_from(v)).sum())
    }
}

/// Open, load and attach every program of a libbpf-style object by its SEC() name; programs
/// whose section has no attach target (tail-call targets like SEC("tracepoint")) are loaded
/// but not attached; tail-call tables declared in the object are filled by libbpf.
///
/// Programs that a PROG_ARRAY of the object points at after loading are tail-call targets
/// and are not attached either, whatever their section says (an LSM tail-call target must
/// name a hook too).
pub fn attach(src: ObjectSource<'_>) -> anyhow::Result<Attached> {
    let name = src.display_name();
    let bytes = src.bytes()?;
    let capture = Capture::start();
    let (object, pins) = load(&name, &bytes, &capture)?;
    if let Some(root) = &pins {
        crate::out::say(format!(
            "{name} pins maps by name: they are pinned in {} for this load only (removed after), never at a pin of the same name someone else has",
            root.dir().display()
        ));
    }
    let attach = || attach_all(&name, &object, &capture);
    let (links, programs) = if tracefs_visible(&Host::live()) {
        attach()
    } else {
        with_private_mount(c"tracefs", mounts::TRACEFS, attach)
    }?;
    Ok(Attached {
        links,
        object,
        programs,
        name,
        _pins: pins,
    })
}

impl Attached {
    /// Take every program off its hook (destroy the links); the object stays loaded. Closing a
    /// link detaches before `close(2)` returns (the file's release runs on the way back to user
    /// space), so the hook does not fire for events that start after this.
    pub fn detach(&mut self) {
        self.links.clear();
    }

    /// Take the programs' links off the object without destroying them: whoever drops them
    /// detaches the programs (`overhead` hands them to a thread, so that the tracepoint's
    /// teardown — tens of ms of RCU grace periods after the program is already off the hook —
    /// does not hold up the next round). The object stays loaded.
    pub fn take_links(&mut self) -> Vec<Attachment> {
        std::mem::take(&mut self.links)
    }

    /// Whether the programs are on their hooks.
    pub fn is_attached(&self) -> bool {
        !self.links.is_empty()
    }

    /// Put back on their hooks the programs that were attached when loaded.
    pub fn attach_again(&mut self) -> anyhow::Result<()> {
        if self.is_attached() {
            return Ok(());
        }
        let wanted: HashSet<String> = self
            .programs
            .iter()
            .filter(|p| p.attached)
            .map(|p| p.name.clone())
            .collect();
        let capture = Capture::start();
        let (name, object) = (&self.name, &self.object);
        let attach = || -> anyhow::Result<Vec<Attachment>> {
            let mut links = Vec::new();
            for prog in object.progs() {
                let pname = prog.name().to_string_lossy().into_owned();
                if !wanted.contains(&pname) {
                    continue;
                }
                let link = attach_one(&prog, Announce::Quiet).map_err(|errno| {
                    let meta = ProgMeta {
                        name: pname.clone(),
                        section: prog.section().to_string_lossy().into_owned(),
                    };
                    diagnose::attach_error(&Host::live(), name, &meta, errno, &capture.lines())
                })?;
                links.extend(link);
            }
            Ok(links)
        };
        self.links = if tracefs_visible(&Host::live()) {
            attach()
        } else {
            with_private_mount(c"tracefs", mounts::TRACEFS, attach)
        }?;
        Ok(())
    }
}

/// Open and load `bytes` without attaching anything.
pub(crate) fn load_only(name: &str, bytes: &[u8]) -> anyhow::Result<Object> {
    let capture = Capture::start();
    // The pins go at once; the object keeps its maps through its own descriptors.
    load(name, bytes, &capture).map(|(object, _pins)| object)
}

impl ObjectSource<'_> {
    fn display_name(&self) -> String {
        match self {
            ObjectSource::Path(path) => path.display().to_string(),
            ObjectSource::Bytes { name, .. } => name.to_string(),
        }
    }

    fn bytes(&self) -> anyhow::Result<Cow<'_, [u8]>> {
        match self {
            ObjectSource::Bytes { bytes, .. } => Ok(Cow::Borrowed(bytes)),
            ObjectSource::Path(path) => read_whole(path, Role::BpfObject).map(Cow::Owned),
        }
    }
}

/// Refuse, before anything changes, a `--load`/`--compare` path that is no regular file of a
/// plausible size (a FIFO would block the open, a device be read until memory runs out): the
/// check every command that takes a BPF object makes, the one reading it makes too.
pub(crate) fn check_object(path: &Path) -> anyhow::Result<()> {
    open_regular(path, Role::BpfObject, false).map(drop)
}

/// Open (parse, not load) `bytes` as libbpf does, with a clear error for what is no object.
fn open(name: &str, bytes: &[u8], capture: &Capture) -> anyhow::Result<OpenObject> {
    diagnose::check_elf(name, bytes)?;
    ObjectBuilder::default()
        .name(libbpf_object_name(name))
        .and_then(|builder| builder.open_memory(bytes))
        .map_err(|e| diagnose::open_error(name, &e, &capture.lines()))
}

/// The programs of an opened object, name and section, in its order.
fn metas(open: &OpenObject) -> Vec<ProgMeta> {
    open.progs()
        .map(|p| ProgMeta {
            name: p.name().to_string_lossy().into_owned(),
            section: p.section().to_string_lossy().into_owned(),
        })
        .collect()
}

/// Every program of an object with its ELF section (`SEC()` name), read without loading it
/// (no root, no kernel support needed): where `--op auto` learns what the programs attach to.
pub fn object_programs(src: ObjectSource<'_>) -> anyhow::Result<Vec<(String, String)>> {
    let name = src.display_name();
    let bytes = src.bytes()?;
    let capture = Capture::start();
    let open = open(&name, &bytes, &capture)?;
    let progs = metas(&open);
    if progs.is_empty() {
        return Err(diagnose::no_programs(&name));
    }
    Ok(progs.into_iter().map(|p| (p.name, p.section)).collect())
}

fn load(
    name: &str,
    bytes: &[u8],
    capture: &Capture,
) -> anyhow::Result<(Object, Option<super::pins::PinRoot>)> {
    let mut open = open(name, bytes, capture)?;
    let progs = metas(&open);
    if progs.is_empty() {
        return Err(diagnose::no_programs(name));
    }
    let pins = super::pins::PinRoot::for_object(&mut open, name)?;
    let object = load_open(open).map_err(|errno| {
        diagnose::load_error(&Host::live(), name, errno, &capture.lines(), &progs)
    })?;
    Ok((object, pins))
}

/// `bpf_object__load`, keeping the errno that `OpenObject::load` folds into an io::Error.
fn load_open(open: OpenObject) -> Result<Object, i32> {
    let ptr = open.take_ptr();
    // SAFETY: `ptr` is an opened, not yet loaded object that we own.
    let ret = unsafe { libbpf_sys::bpf_object__load(ptr.as_ptr()) };
    if ret < 0 {
        // SAFETY: we own `ptr`; libbpf closes a failed object like any other.
        unsafe { libbpf_sys::bpf_object__close(ptr.as_ptr()) };
        return Err(-ret);
    }
    // SAFETY: `ptr` is loaded and owned by us; `Object` takes it over.
    Ok(unsafe { Object::from_ptr(ptr) })
}

/// libbpf's object name (it prefixes internal maps): the file name without `.bpf.o`.
fn libbpf_object_name(display: &str) -> String {
    let file = Path::new(display)
        .file_name()
        .map_or(Cow::Borrowed(display), |f| f.to_string_lossy());
    let stem = file.strip_suffix(".o").unwrap_or(&file);
    stem.strip_suffix(".bpf").unwrap_or(stem).to_string()
}

fn attach_all(
    name: &str,
    object: &Object,
    capture: &Capture,
) -> anyhow::Result<(Vec<Attachment>, Vec<ProgramInfo>)> {
    let targets = tail_call_targets(object);
    let mut links = Vec::new();
    let mut programs = Vec::new();
    for prog in object.progs().filter(|p| p.autoload()) {
        let mut info = program_info(&prog)?;
        if !targets.contains(&info.id) {
            if let Some(link) = attach_one(&prog, Announce::Say).map_err(|errno| {
                let meta = ProgMeta {
                    name: info.name.clone(),
                    section: info.section.clone(),
                };
                diagnose::attach_error(&Host::live(), name, &meta, errno, &capture.lines())
            })? {
                links.push(link);
                info.attached = true;
            }
        }
        programs.push(info);
    }
    Ok((links, programs))
}

/// Whether attaching says where a packet program went (once, when the object is loaded; not
/// each time `overhead` puts it back).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Announce {
    Say,
    Quiet,
}

/// `Ok(None)` when libbpf cannot auto-attach the program's section (no attach target) and it is
/// no packet program the run has a place for (`super::packet`).
fn attach_one(prog: &Program<'_>, announce: Announce) -> Result<Option<Attachment>, i32> {
    let section = prog.section().to_string_lossy().into_owned();
    if let Some(attached) = super::packet::attach(prog, &section) {
        let (link, line) = attached?;
        if announce == Announce::Say {
            super::packet::say_once(line);
        }
        return Ok(Some(link));
    }
    Ok(attach_by_section(prog)?.map(Attachment::Link))
}

/// libbpf's own attach of `prog` by its section; `Ok(None)` when it cannot (no target).
fn attach_by_section(prog: &Program<'_>) -> Result<Option<Link>, i32> {
    let raw = prog.as_libbpf_object();
    // SAFETY: `raw` is a loaded program of a live object.
    let link = unsafe { libbpf_sys::bpf_program__attach(raw.as_ptr()) };
    // SAFETY: libbpf_get_error accepts any pointer libbpf returned, NULL included.
    let err = unsafe { libbpf_sys::libbpf_get_error(link.cast()) };
    match (NonNull::new(link), err) {
        (_, err) if err == -i64::from(libc::EOPNOTSUPP) => Ok(None),
        // SAFETY: a non-NULL link without error is ours to own and destroy.
        (Some(link), 0) => Ok(Some(unsafe { Link::from_ptr(link) })),
        (_, err) => Err(i32::try_from(-err).unwrap_or(libc::EINVAL)),
    }
}

/// Ids of the programs the object's PROG_ARRAY maps hold (filled by libbpf at load).
fn tail_call_targets(object: &Object) -> HashSet<u32> {
    let maps: Vec<u32> = object
        .maps()
        .filter(|m| m.map_type() == MapType::ProgArray)
        .filter_map(|m| m.info().ok().map(|i| i.info.id))
        .collect();
    super::pressure::tail_call_targets(&maps)
        .map(|t| t.into_iter().collect())
        .unwrap_or_default()
}

fn program_info(prog: &Program<'_>) -> anyhow::Result<ProgramInfo> {
    let (id, tag) = kernel_id_and_tag(prog.as_fd())?;
    Ok(ProgramInfo {
        id,
        name: prog.name().to_string_lossy().into_owned(),
        tag,
        section: prog.section().to_string_lossy().into_owned(),
        attached: false,
    })
}

/// The program's kernel id and tag (hex, as in `bpf_prog_<tag>_<name>`), from bpf_prog_info.
fn kernel_id_and_tag(fd: BorrowedFd<'_>) -> anyhow::Result<(u32, String)> {
    let info = super::ids::prog_info(fd, false)
        .context("reading a loaded program's bpf_prog_info failed")?
        .info;
    Ok((info.id, super::ids::hex_tag(&info.tag)))
}

/// A little-endian-agnostic read of up to 8 native-endian bytes (4-byte ids, 8-byte counters).
fn u64_from(bytes: &[u8]) -> u64 {
    match bytes.len() {
        4 => bytes
            .try_into()
            .map_or(0, |b| u64::from(u32::from_ne_bytes(b))),
        8 => bytes.try_into().map_or(0, u64::from_ne_bytes),
        _ => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn object_name_drops_directories_and_suffixes() {
        assert_eq!(libbpf_object_name("/a/b/hook.bpf.o"), "hook");
        assert_eq!(libbpf_object_name("hook.o"), "hook");
        assert_eq!(libbpf_object_name("openat_hook"), "openat_hook");
    }

    #[test]
    fn ids_and_counters_read_native_endian() {
        assert_eq!(u64_from(&7u32.to_ne_bytes()), 7);
        assert_eq!(u64_from(&9u64.to_ne_bytes()), 9);
        assert_eq!(u64_from(&[1, 2, 3]), 0);
    }
}
