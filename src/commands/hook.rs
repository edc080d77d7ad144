//! `sudo ebpf-prof hook`: load a BPF object (the bundled sample hook by default), hold it
//! attached until Ctrl-C/SIGTERM (or `--seconds`), then detach. The programs are attached
//! through links owned by this process, so they go away with it whatever the exit, SIGKILL
//! included.

use super::say;
use crate::bpf::{self, Attached, ObjectSource};
use crate::signals::Interrupts;
use anyhow::Result;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// What `hook` takes.
#[derive(Debug, Clone)]
pub struct HookOptions {
    pub load: Option<PathBuf>,
    pub seconds: Option<u64>,
}

/// Load `load`, or the sample hook this kernel can run.
pub fn attach(load: Option<&std::path::Path>) -> Result<Attached> {
    match load {
        Some(p) => bpf::attach(ObjectSource::Path(p)),
        None => {
            let (name, bytes) = bpf::sample_hook_for_this_kernel();
            bpf::attach(ObjectSource::Bytes { name, bytes })
        }
    }
}

/// Print the programs of an attached object.
pub fn describe(a: &Attached) {
    for p in a.programs() {
        let state = if p.attached {
            "attached"
        } else {
            "loaded (tail-call target or no attach point)"
        };
        say(format!(
            "  id {:<6} bpf_prog_{}_{} [{}] {state}",
            p.id, p.tag, p.name, p.section
        ));
    }
}

/// Run `hook`.
pub fn run(opts: &HookOptions) -> Result<()> {
    let ints = Interrupts::install()?;
    let a = attach(opts.load.as_deref())?;
    say(format!("{} loaded:", a.name()));
    describe(&a);
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
    say("detached");
    Ok(())
}
