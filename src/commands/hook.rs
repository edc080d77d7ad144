//! `sudo ebpf-prof hook`: load a BPF object (the bundled sample hook by default), hold it
//! attached until Ctrl-C/SIGTERM (or `--seconds`), then detach. The programs are attached
//! through links owned by this process, so they go away with it whatever the exit, SIGKILL
//! included. A packet program (XDP, tc, tcx, cgroup_skb, socket filter) is attached to the
//! private network `overhead` would make for it (a namespace, a veth pair and a cgroup, removed
//! at the end, and by the next start after a SIGKILL), and the line after the programs says
//! where packets reach it.

use crate::netpath::PacketNetwork;
use crate::out::say;
use crate::recording::{attach_object, describe};
use crate::signals::Interrupts;
use anyhow::Result;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// What `hook` takes.
#[derive(Debug, Clone)]
pub struct HookOptions {
    pub load: Option<PathBuf>,
    pub seconds: Option<u64>,
    /// Write the example objects into this directory instead of loading anything.
    pub write_objects: Option<PathBuf>,
}

/// Write every example object into `dir` (made when missing; as root, checked as `demo --dir`
/// is). A file already there that holds the same bytes is left as it is; any other file of the
/// same name is refused, never replaced.
fn write_objects(dir: &std::path::Path) -> Result<()> {
    use crate::runfiles::{Contents, Existing, OutputDir, Owner};
    let out = OutputDir::open(dir, Owner::from_sudo_env(), Contents::Any)?;
    let objects = crate::bpf::EXAMPLE_OBJECTS;
    // Checked for all first, so that a refusal leaves nothing half written.
    if let Some((name, _)) = objects
        .iter()
        .find(|(name, bytes)| out.holds(name) && !out.holds_exactly(name, bytes))
    {
        return Err(crate::error::usage(format!(
            "{} exists and is not the object this ebpf-prof bundles: move it away, or give another --write-objects DIR",
            out.shown().join(name).display()
        )));
    }
    for (name, bytes) in objects {
        if !out.holds_exactly(name, bytes) {
            out.write(name, bytes, Existing::KeepWithoutForce)?;
        }
    }
    let names: Vec<&str> = crate::bpf::EXAMPLE_OBJECTS
        .iter()
        .map(|(n, _)| *n)
        .collect();
    say(format!(
        "wrote {} example objects to {}: {}",
        names.len(),
        dir.display(),
        names.join(", ")
    ));
    Ok(())
}

/// Run `hook`. As root it loads under the run lock (it waits for a `record`, `overhead` or
/// `demo` in progress, whose rounds its programs would disturb), then releases the lock while
/// it holds the programs: `record` in another terminal is how a hook is profiled.
pub fn run(opts: &HookOptions, lock: Option<crate::host::lock::RunLock>) -> Result<()> {
    if let Some(dir) = &opts.write_objects {
        return write_objects(dir);
    }
    let ints = Interrupts::install()?;
    // A packet program gets the private network `overhead` and `record` would make for it, to
    // be attached there; it goes when the programs have been detached (dropped after them).
    let network = match &opts.load {
        Some(path) => PacketNetwork::for_object(crate::bpf::ObjectSource::Path(path))?,
        None => None,
    };
    let a = attach_object(opts.load.as_deref())?;
    describe(&a);
    if let Some(net) = &network {
        say(net.reach_line());
    }
    drop(lock);
    let host = crate::host::Host::live();
    let ks = "net.core.bpf_jit_kallsyms";
    if let Ok(v) = crate::host::sysctl::read(&host, ks) {
        if v != "1" {
            say(format!("warning: {ks} is {v}: the programs run, but /proc/kallsyms does not list them, so a perf you run by hand shows bare addresses (sudo sysctl -w {ks}=1; ebpf-prof record sets it for its run and restores it)"));
        }
    }
    let until = opts
        .seconds
        .map(|s| Instant::now() + Duration::from_secs(s));
    match until {
        Some(_) => say("holding; detaching when the time is up or on Ctrl-C"),
        None => say("holding until Ctrl-C (or SIGTERM)"),
    }
    while ints.count() == 0 && until.is_none_or(|t| Instant::now() < t) {
        std::thread::sleep(Duration::from_millis(50));
    }
    drop(a);
    drop(network);
    say("detached");
    Ok(())
}
