//! What one entry of the catalogue of operations says (operation.rs holds the entries): its
//! name, what one timed call is, how heavy it is, what it works on, whether it needs the private
//! network, the hook points it reaches inside the span and the calls its loop makes outside it,
//! and how its timed body is made. The `catalogue!` macro turns the entries into the
//! [`super::Operation`] enum and everything derived from it (`--op` names, help, `--op auto`'s
//! reach, the docs table, and the dispatch to each timed body), so that adding an operation is
//! one entry there plus its timed body (a type implementing [`Op`]).

use super::op::Op;
use crate::error::usage;
use anyhow::Result;
use std::path::{Path, PathBuf};

/// What an operation reaches inside its timed span, and the system calls its loop makes outside
/// it.
#[derive(Debug)]
pub struct Reach {
    /// The system call timed: its `syscalls/sys_enter_<name>` and `sys_exit_<name>` tracepoints.
    pub syscall: &'static str,
    /// Other tracepoints (bare names: `sched_process_fork`), also as raw tracepoints.
    pub tracepoints: &'static [&'static str],
    /// LSM hooks (`file_open`, as `SEC("lsm/file_open")` names them).
    pub lsm: &'static [&'static str],
    /// Kernel functions, for fentry, fexit, kprobe and kretprobe programs.
    pub functions: &'static [&'static str],
    /// cgroup attach points (`connect4` as in `SEC("cgroup/connect4")`), `sockops`, and the
    /// packet hooks (`xdp`, `tc`, `tcx`, `skb`, `socket`) the packet operations send past.
    pub sockets: &'static [&'static str],
    /// System calls the loop makes outside the span (set-up and clean-up).
    pub outside: &'static [&'static str],
}

/// How long one call takes, roughly.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Weight {
    /// About an openat or less.
    Light,
    /// It builds and tears down a process, a TCP connection or a file, or sends a packet through
    /// two network stacks: several µs to tens of µs, five to fifteen times an openat.
    Heavy,
}

/// What the user gives an operation to work on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operand {
    /// Nothing: the bench makes what it needs.
    Nothing,
    /// The file `--path` names.
    Path,
    /// `--path`, or a working set of files (`--paths N`, `--dir D`) cycled over.
    PathOrWorkingSet,
}

/// What an operation needs from the machine besides the bench itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Network {
    /// Nothing: loopback at most.
    Nothing,
    /// A cgroup of the run's that the bench runs in, for the cgroup programs it fires: the run
    /// that attaches them makes the private network, whose cgroup it is; the bench runs without.
    Cgroup,
    /// A private network namespace and a veth pair into it, made by the command that runs the
    /// bench (as root), and the cgroup the bench sends from.
    Veth,
}

/// One entry of the catalogue, less its timed body.
#[derive(Debug)]
pub struct Entry {
    /// The name `--op` takes (and the JSON's).
    pub name: &'static str,
    /// Timed operations in the plural, for "2000 execves".
    pub plural: &'static str,
    /// What one timed operation is, in a few words.
    pub what: &'static str,
    pub weight: Weight,
    pub operand: Operand,
    pub network: Network,
    pub reach: Reach,
}

impl Entry {
    /// Its row of the table of operations in docs/commands.md.
    pub fn doc_row(&self) -> String {
        let r = &self.reach;
        let code = |v: &[&str]| {
            v.iter()
                .map(|w| format!("`{w}`"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let mut reached = vec![format!("`syscalls/sys_{{enter,exit}}_{}`", r.syscall)];
        for (what, list) in [
            ("tracepoints", r.tracepoints),
            ("LSM", r.lsm),
            ("kernel", r.functions),
            ("sockets", r.sockets),
        ] {
            if !list.is_empty() {
                reached.push(format!("{what} {}", code(list)));
            }
        }
        let outside = if r.outside.is_empty() {
            "—".to_string()
        } else {
            code(r.outside)
        };
        format!(
            "| `{}` | {} | {} | {outside} |",
            self.name,
            self.what,
            reached.join("; ")
        )
    }
}

/// What a timed body is made from, outside the span: the operation's file or working set, where
/// a worker starts in it, and the private namespace of a packet operation.
#[derive(Debug)]
pub struct Setup<'a> {
    /// The operation's name, for its errors.
    pub name: &'static str,
    /// `--path`, or the working set's files; empty for an operation that takes none.
    pub paths: &'a [PathBuf],
    /// The index in `paths` this worker starts at.
    pub start: usize,
    /// The private network namespace, once the command running the bench has made it.
    pub netns: Option<&'a str>,
}

impl Setup<'_> {
    /// The files, refused when there are none.
    pub fn paths(&self) -> Result<&[PathBuf]> {
        match self.paths.is_empty() {
            true => Err(usage(format!("--op {} needs a --path", self.name))),
            false => Ok(self.paths),
        }
    }

    /// The one file.
    pub fn path(&self) -> Result<&Path> {
        Ok(&self.paths()?[0])
    }

    /// The private namespace, refused when the bench was started without one.
    pub fn netns(&self) -> Result<&str> {
        self.netns.ok_or_else(|| {
            usage(format!(
                "--op {} needs the private network namespace ebpf-prof makes: run it as root through ebpf-prof bench, overhead or record",
                self.name
            ))
        })
    }
}

/// What runs a timed body once it is made, as its own type: the loop is monomorphised, no
/// indirect call in the span.
pub trait Timer {
    type Output;
    fn time<O: Op>(self, op: O) -> Self::Output;
}

/// The catalogue: each entry is `Variant { name, plural, what, weight, operand, network, reach,
/// make: |setup| <an expression giving Result<impl Op>> }`, in the order `--op auto` prefers
/// them on a tie. It makes the `Operation` enum, its facts ([`Entry`]), `ALL`, the JSON and
/// display names, and the dispatch from an operation to its timed body.
macro_rules! catalogue {
    ($(
        $(#[$attr:meta])*
        $variant:ident {
            name: $name:literal,
            plural: $plural:literal,
            what: $what:literal,
            weight: $weight:ident,
            operand: $operand:ident,
            network: $network:ident,
            reach: $reach:expr,
            make: |$setup:ident| $make:expr $(,)?
        }
    ),+ $(,)?) => {
        /// An operation the harness times, by name: one entry of the catalogue.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum Operation {
            $($(#[$attr])* $variant,)+
        }

        impl Operation {
            /// Every operation, in the order `--op auto` prefers them on a tie.
            pub const ALL: [Operation; [$(stringify!($variant)),+].len()] =
                [$(Operation::$variant),+];

            /// Everything the catalogue says about it.
            pub fn entry(self) -> &'static $crate::bench::entry::Entry {
                use $crate::bench::entry::{Entry, Network, Operand, Reach, Weight};
                match self {
                    $(Operation::$variant => {
                        const ENTRY: Entry = Entry {
                            name: $name,
                            plural: $plural,
                            what: $what,
                            weight: Weight::$weight,
                            operand: Operand::$operand,
                            network: Network::$network,
                            reach: $reach,
                        };
                        &ENTRY
                    })+
                }
            }

            /// Make its timed body from `setup` (outside the span) and hand it to `timer`.
            pub fn time_with<T: $crate::bench::entry::Timer>(
                self,
                setup: &$crate::bench::entry::Setup<'_>,
                timer: T,
            ) -> anyhow::Result<T::Output> {
                match self {
                    $(Operation::$variant => {
                        #[allow(unused_variables)]
                        let $setup = setup;
                        Ok(timer.time($make?))
                    })+
                }
            }
        }
    };
}
pub(super) use catalogue;
