//! The two arms of an overhead measurement and how each round brings one about: nothing
//! attached, an object's programs put on their hooks, or the user's own loader running.
//!
//! An object is loaded once per measurement ([`Arm::prepare`]) and its programs are attached
//! for each of its rounds and detached after ([`Arm::engage`], [`Engaged::disengage`]), so its
//! maps live for the whole measurement, as a deployed hook's do, and a round costs no load
//! and verification. Taking a tracepoint program off its hook waits in `close` for grace
//! periods, often longer than a round, whose IPIs slow whatever runs meanwhile: a detached
//! round overlapping a teardown runs measurably slower (figures in docs/overhead-method.md). So:
//! - when both arms attach objects (`--compare`) to the same tracepoints, every round is
//!   followed by a teardown, the same for both arms: the links are closed on a helper thread
//!   while the next round runs, which starts once the tracepoint's own program array, read
//!   through a perf event held on it ([`super::anchor`]), no longer holds them;
//! - otherwise a teardown would fall only on rounds after an attached one, mostly detached
//!   ones, and bias the difference down: links are dropped in place, before the next round.
//!
//! After every detached round no kernel link may still attach the object's programs; at the
//! end the object is unloaded and its programs must be gone.

use super::anchor::Anchors;
use super::loader::Loader;
use crate::bpf::packet::Attachment;
use crate::bpf::{self, Attached, LoadedProgram, ObjectSource};
use crate::error::child;
use anyhow::{Context, Result};
use std::collections::BTreeSet;
use std::process::Child;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// What one arm has loaded while its rounds run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ArmSpec {
    /// Nothing attached: the baseline.
    Detached,
    /// A libbpf-style object, attached by its SEC() names: read into memory once, before the
    /// first load, and every load of the measurement (and of its `--profile` recording) is
    /// from those bytes, so a file swapped in at its path meanwhile is never what is loaded.
    InMemory(bpf::ObjectBytes),
    /// The user's loader, started for the round and stopped by its pid after.
    Command(Loader),
}

impl ArmSpec {
    /// A short label for tables and plots.
    pub fn label(&self) -> String {
        match self {
            ArmSpec::Detached => "detached".into(),
            ArmSpec::InMemory(object) => {
                let shown = std::path::Path::new(&object.name);
                shown
                    .file_name()
                    .map_or_else(|| object.name.clone(), |f| f.to_string_lossy().into_owned())
            }
            ArmSpec::Command(loader) => loader.label(),
        }
    }

    /// The object this arm loads, when it loads one itself.
    pub fn object(&self) -> Option<ObjectSource<'_>> {
        match self {
            ArmSpec::InMemory(object) => Some(object.source()),
            ArmSpec::Detached | ArmSpec::Command(_) => None,
        }
    }
}

/// An arm made ready for a measurement: an object is loaded, its programs off their hooks.
pub enum Arm {
    Detached,
    /// The reaper (dropped first: it joins its threads, so no link outlives the object), the
    /// object, and, when its links are closed on the reaper's threads, the held tracepoints that
    /// tell when its programs are off them (every one of its programs is on one).
    Object(Reaper, Attached, Option<Arc<Anchors>>),
    /// An object's arm between an unload and the next load; the tracepoints it holds stay held.
    Unloaded(Option<Arc<Anchors>>),
    Command(Loader),
}

/// Hold the tracepoints both arms' objects attach (anchor.rs) for as long as the returned
/// value lives, and, when they cover every program of both arms, close each round's links on
/// helper threads from now on — both arms or neither: a teardown overlapping the rounds of one
/// arm only would bias the difference.
pub fn overlap_teardowns(base: &mut Arm, treat: &mut Arm) -> Result<Arc<Anchors>> {
    let (b, t) = (base.attached_sections(), treat.attached_sections());
    let anchors = match super::anchor::hold(&super::anchor::common(&b, &t)) {
        Ok(a) => Arc::new(a),
        Err(e) => {
            crate::out::say(format!(
                "warning: cannot hold the tracepoints both objects attach ({e:#}): detaching in place, each round waits for its teardown"
            ));
            return Ok(Arc::new(Anchors::none()));
        }
    };
    if anchors.cover(&b)
        && anchors.cover(&t)
        && base.overlap_with(&anchors)
        && treat.overlap_with(&anchors)
    {
        crate::out::say(format!(
            "holding {} registered for the whole measurement (both objects attach it): each round starts once the other arm's programs are off it, while their teardown goes on",
            anchors.names().join(", ")
        ));
    }
    Ok(anchors)
}

/// Drops detached links on threads of their own — one per round, as each teardown waits for
/// grace periods and a queue would make the next round's links wait behind it — and joins
/// them all when dropped, so no link outlives the object.
#[derive(Default)]
pub struct Reaper {
    threads: std::cell::RefCell<Vec<JoinHandle<()>>>,
}

impl Reaper {
    /// Drop `links` on a new thread (here, if no thread can be started).
    fn drop_later(&self, links: Vec<Attachment>) {
        let mut threads = self.threads.borrow_mut();
        threads.retain(|t| !t.is_finished());
        let spawned = std::thread::Builder::new()
            .name("ebpf-prof-detach".into())
            .spawn(move || drop(links));
        if let Ok(t) = spawned {
            threads.push(t);
        }
    }
}

impl Drop for Reaper {
    fn drop(&mut self) {
        for t in self.threads.get_mut().drain(..) {
            let _ = t.join();
        }
    }
}

impl Arm {
    /// The object of `source` loaded, its programs off their hooks.
    fn loaded(source: ObjectSource<'_>) -> Result<Arm> {
        let mut a = bpf::attach(source)?;
        a.detach();
        Ok(Arm::Object(Reaper::default(), a, None))
    }

    /// Make `spec` ready: load its object (checking it attaches), or just keep the loader's
    /// argv. Its links are dropped in place until [`Arm::overlap_with`].
    pub fn prepare(spec: &ArmSpec) -> Result<Arm> {
        match spec {
            ArmSpec::Detached => Ok(Arm::Detached),
            ArmSpec::InMemory(object) => Arm::loaded(object.source()),
            ArmSpec::Command(loader) => Ok(Arm::Command(loader.clone())),
        }
    }

    /// Whether the arm loads an object (and can be loaded afresh).
    pub fn loads_object(&self) -> bool {
        matches!(self, Arm::Object(..) | Arm::Unloaded(_))
    }

    /// Unload the arm's object and check its programs are gone; the other arms have nothing
    /// to unload.
    pub fn unload(&mut self) -> Result<()> {
        let Arm::Object(_, _, held) = self else {
            return Ok(());
        };
        let held = held.take();
        let ids = self.program_ids();
        // The old value drops here: the reaper joins its threads, then the object unloads.
        *self = Arm::Unloaded(held);
        ensure_gone(&ids)
    }

    /// Load an unloaded object's arm afresh from `spec`, keeping the tracepoints it holds.
    pub fn load(&mut self, spec: &ArmSpec) -> Result<()> {
        let Arm::Unloaded(held) = self else {
            return Ok(());
        };
        let held = held.take();
        let mut fresh = Arm::prepare(spec)?;
        if let Arm::Object(_, _, slot) = &mut fresh {
            *slot = held;
        }
        *self = fresh;
        crate::failpoint::hit("overhead:reloaded");
        Ok(())
    }

    /// Close the object's links on helper threads from now on, when `anchors` hold every
    /// tracepoint its programs attach to (see the module docs); whether they do.
    pub fn overlap_with(&mut self, anchors: &Arc<Anchors>) -> bool {
        let sections = self.attached_sections();
        match self {
            Arm::Object(_, _, held) if anchors.cover(&sections) => {
                *held = Some(Arc::clone(anchors));
                true
            }
            _ => false,
        }
    }

    /// The sections of the programs the arm attaches (an object's; none for the others).
    pub fn attached_sections(&self) -> Vec<String> {
        match self {
            Arm::Object(_, a, _) => a
                .programs()
                .iter()
                .filter(|p| p.attached)
                .map(|p| p.section.clone())
                .collect(),
            _ => Vec::new(),
        }
    }

    /// The kernel ids of the loaded object's programs (none for the other arms).
    pub fn program_ids(&self) -> Vec<u32> {
        match self {
            Arm::Object(_, a, _) => a.program_ids(),
            _ => Vec::new(),
        }
    }

    /// Full program names by id (the kernel keeps only 15 characters of a name).
    pub fn program_names(&self) -> Vec<(u32, String)> {
        match self {
            Arm::Object(_, a, _) => a
                .programs()
                .iter()
                .map(|p| (p.id, p.name.clone()))
                .collect(),
            _ => Vec::new(),
        }
    }

    /// Bring the arm about for one round.
    pub fn engage(&mut self) -> Result<Engaged<'_>> {
        match self {
            Arm::Detached => Ok(Engaged::Nothing),
            Arm::Object(reaper, attached, held) => {
                attached.attach_again()?;
                Ok(Engaged::Object {
                    attached,
                    reaper,
                    held: held.as_deref(),
                })
            }
            Arm::Command(loader) => start_command(loader),
            Arm::Unloaded(_) => Err(anyhow::anyhow!(
                "internal error: a round of an arm whose object is not loaded"
            )),
        }
    }

    /// A user's loader started and its programs waited for, to keep across a block of rounds
    /// (see [`Arm::engage`] for one round); `None` for the other arms.
    pub fn start_loader(&self) -> Result<Option<Engaged<'static>>> {
        match self {
            Arm::Command(loader) => start_command(loader).map(Some),
            _ => Ok(None),
        }
    }

    /// Unload the object and check its programs are gone (dropping does the first half).
    pub fn finish(self) -> Result<()> {
        let ids = self.program_ids();
        drop(self);
        ensure_gone(&ids)
    }
}

/// An arm brought about for one round; [`Engaged::disengage`] undoes it and checks, and
/// dropping it undoes it too (on an error or a panic in the round).
pub enum Engaged<'a> {
    Nothing,
    Object {
        attached: &'a mut Attached,
        reaper: &'a Reaper,
        held: Option<&'a Anchors>,
    },
    Command {
        child: Option<Child>,
        line: String,
        programs: Vec<LoadedProgram>,
    },
}

impl Engaged<'_> {
    /// The kernel ids of the programs this arm has on its hooks.
    pub fn program_ids(&self) -> Vec<u32> {
        match self {
            Engaged::Nothing => Vec::new(),
            Engaged::Object { attached, .. } => attached.program_ids(),
            Engaged::Command { programs, .. } => programs.iter().map(|p| p.id).collect(),
        }
    }

    /// The maps of this arm's programs (or of the object).
    pub fn map_ids(&self) -> Vec<u32> {
        match self {
            Engaged::Nothing => Vec::new(),
            Engaged::Object { attached, .. } => attached.map_ids(),
            Engaged::Command { programs, .. } => {
                let mut v: Vec<u32> = programs
                    .iter()
                    .flat_map(|p| p.map_ids.iter().copied())
                    .collect();
                v.sort_unstable();
                v.dedup();
                v
            }
        }
    }

    /// Full program names by id (the kernel keeps only 15 characters of a name).
    pub fn program_names(&self) -> Vec<(u32, String)> {
        match self {
            Engaged::Nothing => Vec::new(),
            Engaged::Object { attached, .. } => attached
                .programs()
                .iter()
                .map(|p| (p.id, p.name.clone()))
                .collect(),
            // Someone else's loader: the names from the programs' BTF, as bpftool shows them
            // (opensnoop's four programs share one 15-byte kernel name).
            Engaged::Command { programs, .. } => programs
                .iter()
                .map(|p| {
                    (
                        p.id,
                        bpf::full_name(p.id).unwrap_or_else(|| bpf::marked_if_cut(&p.name)),
                    )
                })
                .collect(),
        }
    }

    /// Undo the arm and check it is undone: an object's programs off their hooks, a loader
    /// stopped and its programs unloaded.
    pub fn disengage(mut self) -> Result<()> {
        match &mut self {
            Engaged::Nothing => Ok(()),
            Engaged::Object {
                attached,
                reaper,
                held,
            } => {
                let ids = attached.program_ids();
                let links = attached.take_links();
                match held {
                    Some(anchors) => {
                        reaper.drop_later(links);
                        anchors.wait_off(&ids)?;
                    }
                    None => drop(links),
                }
                ensure_unlinked(&ids)
            }
            Engaged::Command {
                child,
                line,
                programs,
            } => {
                let ids: Vec<u32> = programs.iter().map(|p| p.id).collect();
                if let Some(mut c) = child.take() {
                    stop_child(&mut c, line)?;
                }
                ensure_gone(&ids)
            }
        }
    }
}

impl Drop for Engaged<'_> {
    fn drop(&mut self) {
        match self {
            Engaged::Nothing => {}
            Engaged::Object { attached, .. } => attached.detach(),
            Engaged::Command { child, line, .. } => {
                if let Some(mut c) = child.take() {
                    let _ = stop_child(&mut c, line);
                }
            }
        }
    }
}

fn start_command(loader: &Loader) -> Result<Engaged<'static>> {
    let (mut child, waited) = loader.start()?;
    let line = loader.line();
    match waited {
        Ok(programs) => Ok(Engaged::Command {
            child: Some(child),
            line,
            programs,
        }),
        Err(e) => {
            let _ = stop_child(&mut child, &line);
            Err(e.context(format!("--attach-cmd {line}")))
        }
    }
}

/// Stop the loader we started and its whole process group (see [`super::loader::stop`]); an
/// error when it had exited on its own meanwhile.
fn stop_child(child: &mut Child, line: &str) -> Result<()> {
    match super::loader::stop(child).context("cannot stop the --attach-cmd process group")? {
        super::loader::Stopped::Ended => Ok(()),
        super::loader::Stopped::HadExited => Err(child_err(line)),
    }
}

fn child_err(line: &str) -> anyhow::Error {
    child(format!(
        "--attach-cmd {line} exited during the round: its programs may have gone with it"
    ))
}

/// How long links and programs may take to go once they are closed: their teardown waits for
/// RCU grace periods, which a busy machine stretches.
const UNDONE_WITHIN: Duration = Duration::from_secs(5);

/// Poll `still_there` every `every` for up to [`UNDONE_WITHIN`] until it lists nothing; fail
/// with `what`.
fn wait_until_none(
    every: Duration,
    still_there: impl Fn() -> Result<Vec<u32>>,
    what: impl Fn(&[u32]) -> String,
) -> Result<()> {
    let deadline = Instant::now() + UNDONE_WITHIN;
    loop {
        let left = still_there()?;
        if left.is_empty() {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(child(what(&left)));
        }
        std::thread::sleep(every);
    }
}

/// Fail when a kernel link still attaches any of `ids` (the detached arm must be detached).
pub fn ensure_unlinked(ids: &[u32]) -> Result<()> {
    if ids.is_empty() {
        return Ok(());
    }
    // Links closed in place are gone; a link closed on a reaper thread gives up its id
    // before its program comes off the hook (`bpf_link_free`), which is why those rounds wait
    // on the tracepoint's own program array first (anchor.rs): this finds a link that someone
    // else holds.
    wait_until_none(
        Duration::from_micros(100),
        || bpf::links_to(ids),
        |left| {
            format!("BPF links {left:?} still attach the programs after detaching: is something else holding them (a pin, bpftool link)?")
        },
    )
}

/// Fail when any of `ids` is still loaded. Program teardown is asynchronous (RCU): the poll
/// gives the kernel a moment.
pub fn ensure_gone(ids: &[u32]) -> Result<()> {
    if ids.is_empty() {
        return Ok(());
    }
    wait_until_none(
        Duration::from_millis(20),
        || {
            let loaded: BTreeSet<u32> = bpf::loaded_programs()?.iter().map(|p| p.id).collect();
            Ok(ids.iter().copied().filter(|i| loaded.contains(i)).collect())
        },
        |left| {
            format!("programs {left:?} are still loaded after detaching: is something else holding them (a pin, another process)?")
        },
    )
}
