//! Naming unresolved addresses from the run's kallsyms snapshot (`perf.data.kallsyms`).
//!
//! perf names BPF programs from its own records, not from `--kallsyms`: a program it has no
//! record of (it recorded without the rights to read BPF program info, or the program came and
//! went) stays `ffffffffc0025cd2 [unknown]` even when the snapshot has
//! `ffffffffc0025c60 t bpf_prog_…_enforce_access_policy [bpf]`. Trampolines and dispatchers made
//! before the recording are never in perf's records. Such a trampoline is the one unresolved
//! frame in the profile of *Profiling eBPF Code*, the write-up this tool automates.
//!
//! /proc/kallsyms gives start addresses only, so where a symbol ends is inferred:
//! - kernel and module text is dense: a symbol ends where the next one starts;
//! - a trampoline or dispatcher image is one page (4096 bytes);
//! - a BPF program ends at the latest where the next `[bpf]` symbol starts; past the last one
//!   its end is unknown (a program loaded after the snapshot may sit there), so the address is
//!   left unresolved and only the nearest symbol below it is reported.

use crate::host::kallsyms::Symbol;
use crate::profile::stacks::{FrameId, Stack, Stacks};
use std::collections::{BTreeMap, HashMap};

/// Size of a trampoline or dispatcher image (one page on x86-64).
const GLUE_IMAGE: u64 = 4096;

#[derive(Debug, Clone)]
struct Sym {
    addr: u64,
    name: String,
    bpf: bool,
}

/// What an address is, per the snapshot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Lookup {
    /// Inside this symbol (a frame name: `_[k]` added for kernel functions).
    Inside(String),
    /// Past the last known BPF symbol: this one is the nearest below, `offset` bytes lower.
    Nearest { name: String, offset: u64 },
    /// Nothing below it, or the snapshot hides addresses.
    Nothing,
}

/// Text symbols of a kallsyms snapshot, sorted by address.
#[derive(Debug, Clone, Default)]
pub(crate) struct Resolver {
    syms: Vec<Sym>,
}

impl Resolver {
    /// Build from parsed kallsyms lines; data symbols and zero (hidden) addresses are dropped.
    pub fn new(symbols: &[Symbol]) -> Resolver {
        let mut syms: Vec<Sym> = symbols
            .iter()
            .filter(|sym| sym.addr != 0 && matches!(sym.kind, 't' | 'T' | 'w' | 'W'))
            .map(|sym| Sym {
                addr: sym.addr,
                name: sym.name.clone(),
                bpf: sym.module.as_deref() == Some("bpf"),
            })
            .collect();
        syms.sort_by_key(|sym| sym.addr);
        syms.dedup_by_key(|sym| sym.addr);
        Resolver { syms }
    }

    /// Look an address up.
    pub fn lookup(&self, addr: u64) -> Lookup {
        let index = self.syms.partition_point(|s| s.addr <= addr);
        let Some(sym) = index.checked_sub(1).map(|j| &self.syms[j]) else {
            return Lookup::Nothing;
        };
        let end = self.end_of(index - 1);
        match end {
            Some(end) if addr < end => Lookup::Inside(frame_name(sym)),
            Some(_) => Lookup::Nothing,
            None => Lookup::Nearest {
                name: frame_name(sym),
                offset: addr - sym.addr,
            },
        }
    }

    /// Where symbol `i` ends, when that can be told (see the module docs).
    fn end_of(&self, index: usize) -> Option<u64> {
        let sym = &self.syms[index];
        let rest = &self.syms[index + 1..];
        if !sym.bpf {
            return rest.first().map(|n| n.addr);
        }
        let next_bpf = rest.iter().find(|n| n.bpf).map(|n| n.addr);
        if sym.name.starts_with("bpf_prog_") {
            return next_bpf;
        }
        let page = sym.addr.saturating_add(GLUE_IMAGE);
        Some(next_bpf.map_or(page, |n| n.min(page)))
    }
}

/// The frame name for a symbol: BPF symbols as perf prints them, kernel ones annotated `_[k]`.
fn frame_name(sym: &Sym) -> String {
    if sym.bpf {
        sym.name.clone()
    } else {
        format!("{}_[k]", sym.name)
    }
}

/// One unresolved frame name and what became of it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Outcome {
    /// The frame as it was.
    pub frame: String,
    /// The symbol it was renamed to.
    pub symbol: Option<String>,
    /// Left unresolved: the nearest symbol below it and how far (`name+0x6c`).
    pub nearest: Option<String>,
}

/// Rename every unresolved frame that carries an address the snapshot places inside a symbol.
/// Returns the renamed stacks and what happened to each distinct unresolved frame name. Each
/// distinct frame is looked up once.
pub(crate) fn resolve(stacks: &Stacks, resolver: &Resolver) -> (Stacks, Vec<Outcome>) {
    let mut seen: BTreeMap<String, Outcome> = BTreeMap::new();
    let mut out = Stacks::default();
    out.skipped = stacks.skipped;
    let mut renamed: HashMap<FrameId, FrameId> = HashMap::new();
    for stack in &stacks.stacks {
        let frames = stack
            .frames
            .iter()
            .map(|&id| {
                *renamed.entry(id).or_insert_with(|| {
                    out.intern(&rename(&stacks.frame(id).name, resolver, &mut seen))
                })
            })
            .collect();
        out.stacks.push(Stack {
            frames,
            count: stack.count,
        });
    }
    (out, seen.into_values().collect())
}

fn rename(frame: &str, resolver: &Resolver, seen: &mut BTreeMap<String, Outcome>) -> String {
    let Some(addr) = crate::profile::frames::address(frame) else {
        return frame.to_string();
    };
    let outcome = seen.entry(frame.to_string()).or_insert_with(|| {
        let (symbol, nearest) = match resolver.lookup(addr) {
            Lookup::Inside(name) => (Some(name), None),
            Lookup::Nearest { name, offset } => (None, Some(format!("{name}+{offset:#x}"))),
            Lookup::Nothing => (None, None),
        };
        Outcome {
            frame: frame.to_string(),
            symbol,
            nearest,
        }
    });
    outcome.symbol.clone().unwrap_or_else(|| frame.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::host::kallsyms::parse;

    const SNAP: &str = "\
ffffffff814bc950 T trace_call_bpf
ffffffff814bcb00 T bpf_probe_read_user_str
ffffffffc0025c60 t bpf_prog_ced0c9407c526ed9_enforce_access_policy\t[bpf]
ffffffffc0025d28 t bpf_prog_01d3040eaf485f66_path_check_callback\t[bpf]
ffffffffc0025f7c t bpf_prog_1307ade3162da109_tail_call_security_check\t[bpf]
ffffffffc0288c18 t bpf_trampoline_6442491220\t[bpf]
ffffffffc1000000 t some_module_fn\t[some_mod]
";

    #[test]
    fn places_addresses_by_kind_of_symbol() {
        let r = Resolver::new(&parse(SNAP));
        let inside = |s: &str| Lookup::Inside(s.to_string());
        assert_eq!(r.lookup(0xffffffff814bca8e), inside("trace_call_bpf_[k]"));
        assert_eq!(
            r.lookup(0xffffffffc0025cd2),
            inside("bpf_prog_ced0c9407c526ed9_enforce_access_policy")
        );
        assert_eq!(
            r.lookup(0xffffffffc0288c18),
            inside("bpf_trampoline_6442491220")
        );
        assert_eq!(
            r.lookup(0xffffffffc0288d00),
            inside("bpf_trampoline_6442491220")
        );
        assert_eq!(
            r.lookup(0xffffffffc028a000),
            Lookup::Nothing,
            "past the page"
        );
        assert_eq!(r.lookup(0x1000), Lookup::Nothing);
    }

    #[test]
    fn past_the_last_program_is_only_a_guess() {
        let snap = "ffffffffc0025f7c t bpf_prog_1307ade3162da109_tail_call_security_check\t[bpf]\nffffffffc1000000 t m\t[mod]\n";
        let r = Resolver::new(&parse(snap));
        assert_eq!(
            r.lookup(0xffffffffc0025fe8),
            Lookup::Nearest {
                name: "bpf_prog_1307ade3162da109_tail_call_security_check".into(),
                offset: 0x6c
            }
        );
    }

    #[test]
    fn hidden_addresses_resolve_nothing() {
        let r = Resolver::new(&parse(
            "0000000000000000 T trace_call_bpf\n0000000000000000 t bpf_prog_0123456789abcdef_x\t[bpf]\n",
        ));
        assert_eq!(r.lookup(0xffffffffc0025cd2), Lookup::Nothing);
    }

    #[test]
    fn renames_frames_in_stacks() {
        let f = Stacks::parse(
            "bench;trace_call_bpf_[k];[unknown <ffffffffc0025cd2>];[unknown <ffffffffc0025ec0>] 3\nbench;[unknown] 1\n",
        )
        .unwrap();
        let (out, outcomes) = resolve(&f, &Resolver::new(&parse(SNAP)));
        let names = |stack: usize| -> Vec<String> {
            let frames = out.frames_of(&out.stacks[stack]);
            frames.iter().map(|frame| frame.name.clone()).collect()
        };
        assert_eq!(
            names(0)[2..],
            [
                "bpf_prog_ced0c9407c526ed9_enforce_access_policy",
                "bpf_prog_01d3040eaf485f66_path_check_callback"
            ]
        );
        assert_eq!(names(1)[1], "[unknown]");
        assert_eq!(outcomes.len(), 2);
        assert!(outcomes.iter().all(|o| o.symbol.is_some()));
    }
}
