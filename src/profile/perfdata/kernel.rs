//! The kernel's address space as perf models it: the `[kernel.kallsyms]` map from the
//! synthesized kernel MMAP, module maps, and one map per KSYMBOL (JIT-ed BPF programs,
//! trampolines, dispatchers), registered and unregistered as the records come, and tagged
//! with their BPF program's id by the PERF_RECORD_BPF_EVENT that follows them
//! (`machine__process_bpf_event_load()`, with the program's function addresses from the
//! header's BPF_PROG_INFO, which the caller gives).
//!
//! Source: `tools/perf/util/machine.c: machine__process_kernel_mmap_event()`,
//! `machine__process_ksymbol_register()` / `_unregister()`, `machine__set_kernel_mmap()`;
//! `tools/perf/util/symbol.c: dso__load_kernel_sym()` (the map takes its symbols' bounds once
//! loaded: `map__fixup_start` / `map__fixup_end`); `tools/perf/util/dso.c: __kmod_path__parse()`.

use super::kallsyms::{self, KernelSymbols, ModuleMap, Relocation};
use std::collections::BTreeMap;

/// perf's name for the kernel image map and its DSO.
pub(crate) const KERNEL_DSO: &str = "[kernel.kallsyms]";

/// The kernel text map.
#[derive(Debug, Clone, PartialEq, Eq)]
struct TextMap {
    start: u64,
    end: u64,
    /// The symbol the map is relocated by and its recorded address (`_text`, pgoff).
    reloc: Option<Relocation>,
}

/// A module's map: where it starts and ends, and its name (`[nf_conntrack]`).
#[derive(Debug, Clone, PartialEq, Eq)]
struct ModuleSpan {
    start: u64,
    end: u64,
    name: String,
}

/// A KSYMBOL's map and the symbols perf added to its DSO (offsets from the map's start).
#[derive(Debug, Clone, PartialEq, Eq)]
struct KsymMap {
    end: u64,
    dso: String,
    bpf: bool,
    syms: Vec<(u64, u64, String)>,
    /// The BPF program whose function this is, once its PERF_RECORD_BPF_EVENT named it.
    prog: Option<u32>,
}

/// Where a kernel-mode address landed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum KernelHit {
    /// In the kernel image or a module: symbol (name, absolute start), DSO name.
    Kernel(Option<(String, u64)>, String),
    /// In a KSYMBOL's map: symbol (name, absolute start), the map's DSO name, whether BPF,
    /// and the id of the BPF program it is a function of, when known ([`KernelMaps::bpf_loaded`]).
    Ksym(Option<(String, u64)>, String, bool, Option<u32>),
    /// In no kernel map.
    None,
}

/// Whether the kernel symbols were read.
#[derive(Debug)]
enum SymbolsState {
    /// Not read yet.
    Pending,
    /// Read (possibly empty).
    Loaded(Box<KernelSymbols>),
    /// perf would have none: why.
    Failed(String),
}

/// The kernel maps of the recording.
#[derive(Debug)]
pub(crate) struct KernelMaps {
    text: Option<TextMap>,
    modules: Vec<ModuleSpan>,
    ksyms: BTreeMap<u64, KsymMap>,
    symbols: SymbolsState,
    kallsyms: Option<Vec<u8>>,
    /// Bumped on every change, so callers can drop cached lookups.
    pub generation: u64,
}

/// `__kmod_path__parse`'s module name: `/lib/…/nf-nat.ko.xz` → `[nf_nat]`.
pub(crate) fn module_name(filename: &str) -> String {
    let base = filename.rsplit('/').next().unwrap_or(filename);
    if base.starts_with('[') {
        return base.to_string();
    }
    let mut stem = base;
    for ext in [".gz", ".xz", ".zst"] {
        stem = stem.strip_suffix(ext).unwrap_or(stem);
    }
    match stem.strip_suffix(".ko") {
        Some(module) => format!("[{}]", module.replace('-', "_")),
        None => base.replace('-', "_"),
    }
}

impl KernelMaps {
    /// Empty maps; `kallsyms` is the snapshot's text (read when the first kernel address is
    /// resolved), `None` when there is none.
    pub fn new(kallsyms: Option<Vec<u8>>) -> KernelMaps {
        KernelMaps {
            text: None,
            modules: Vec::new(),
            ksyms: BTreeMap::new(),
            symbols: SymbolsState::Pending,
            kallsyms,
            generation: 0,
        }
    }

    /// Why kernel symbols are missing, once it is known.
    pub fn failure(&self) -> Option<&str> {
        match &self.symbols {
            SymbolsState::Failed(why) => Some(why),
            _ => None,
        }
    }

    /// A kernel MMAP/MMAP2 (`machine__process_kernel_mmap_event`).
    pub fn mmap(&mut self, filename: &str, start: u64, len: u64, pgoff: u64) {
        self.generation += 1;
        let end = start.wrapping_add(len);
        let is_kernel = filename.starts_with(&KERNEL_DSO[..KERNEL_DSO.len() - 1]);
        if filename.starts_with('/') || (!is_kernel && filename.starts_with('[')) {
            self.modules.retain(|module| module.start != start);
            self.modules.push(ModuleSpan {
                start,
                end,
                name: module_name(filename),
            });
        } else if is_kernel {
            let name = filename.get(KERNEL_DSO.len()..).unwrap_or_default();
            self.text = Some(TextMap {
                start,
                end: if start == 0 && end == 0 {
                    u64::MAX
                } else {
                    end
                },
                reloc: (pgoff != 0).then(|| Relocation {
                    symbol: name.to_string(),
                    addr: pgoff,
                }),
            });
        }
    }

    /// A KSYMBOL register or unregister.
    pub fn ksymbol(&mut self, addr: u64, len: u32, bpf: bool, unregister: bool, name: &str) {
        self.generation += 1;
        let covering = self.ksym_at(addr);
        if unregister {
            if let Some(start) = covering {
                self.ksyms.remove(&start);
            } else if let Some(index) = self.module_at(addr) {
                self.modules.remove(index);
            }
            return;
        }
        let len = u64::from(len);
        match covering {
            // perf adds the symbol to the covering map's DSO at the map's own start.
            Some(start) => {
                if let Some(map) = self.ksyms.get_mut(&start) {
                    map.syms.push((0, len, name.to_string()));
                }
            }
            None if self.module_at(addr).is_some() || self.in_text(addr) => {}
            None => {
                self.ksyms.insert(
                    addr,
                    KsymMap {
                        end: addr.wrapping_add(len),
                        dso: name.to_string(),
                        bpf,
                        syms: vec![(0, len, name.to_string())],
                        prog: None,
                    },
                );
            }
        }
    }

    /// A PERF_RECORD_BPF_EVENT of type PROG_LOAD for program `id`, whose functions start at
    /// `funcs` (its `jited_ksyms` in the header's BPF_PROG_INFO): the KSYMBOL maps at those
    /// addresses, registered just before, are that program's. This is perf's own pairing
    /// (`machine__process_bpf_event_load` looks the maps up at the header's addresses). It
    /// tells two loads of one object apart when the second is JIT-ed over the first's place.
    pub fn bpf_loaded(&mut self, id: u32, funcs: &[u64]) {
        self.generation += 1;
        for addr in funcs {
            if let Some(map) = self.ksyms.get_mut(addr).filter(|map| map.bpf) {
                map.prog = Some(id);
            }
        }
    }

    fn ksym_at(&self, addr: u64) -> Option<u64> {
        self.ksyms
            .range(..=addr)
            .rev()
            .take(8)
            .find(|(_, m)| addr < m.end)
            .map(|(s, _)| *s)
    }

    fn module_at(&self, addr: u64) -> Option<usize> {
        self.modules
            .iter()
            .position(|module| module.start <= addr && addr < module.end)
    }

    fn in_text(&self, addr: u64) -> bool {
        self.text
            .as_ref()
            .is_some_and(|t| t.start <= addr && addr < t.end)
    }

    /// Resolve a kernel-mode address (`thread__find_map` on the kernel maps, then
    /// `map__find_symbol`).
    pub fn resolve(&mut self, addr: u64) -> KernelHit {
        if let Some(start) = self.ksym_at(addr) {
            return self.in_ksym(start, addr);
        }
        if let Some(index) = self.module_at(addr) {
            let ModuleSpan { start, name, .. } = self.modules[index].clone();
            self.load();
            let sym = match &self.symbols {
                SymbolsState::Loaded(loaded) => loaded.modules.get(&name).and_then(|table| {
                    table.find(addr - start).map(|found| {
                        (
                            table.name(found).to_string(),
                            start.wrapping_add(found.start),
                        )
                    })
                }),
                _ => None,
            };
            return KernelHit::Kernel(sym, name);
        }
        if !self.in_text(addr) {
            return KernelHit::None;
        }
        self.load();
        let sym = match &self.symbols {
            SymbolsState::Loaded(loaded) => {
                let table = &loaded.kernel;
                table
                    .find(addr)
                    .map(|found| (table.name(found).to_string(), found.start))
            }
            _ => None,
        };
        KernelHit::Kernel(sym, KERNEL_DSO.to_string())
    }

    fn in_ksym(&self, start: u64, addr: u64) -> KernelHit {
        let Some(map) = self.ksyms.get(&start) else {
            return KernelHit::None;
        };
        let off = addr - start;
        let sym = map
            .syms
            .iter()
            .find(|(s, len, _)| *s <= off && (off < s + len || (off == *s && *len == 0)))
            .map(|(s, _, n)| (n.clone(), start + s));
        KernelHit::Ksym(sym, map.dso.clone(), map.bpf, map.prog)
    }

    /// Load the kernel symbols once (`map__load` of the kernel map); on success the map takes
    /// the bounds of its first and last symbol, as perf's `map__fixup_start/end` do.
    fn load(&mut self) {
        if !matches!(self.symbols, SymbolsState::Pending) {
            return;
        }
        self.generation += 1;
        let Some(text) = self.kallsyms.take() else {
            self.symbols = SymbolsState::Failed("no kallsyms snapshot".into());
            return;
        };
        let reloc = self
            .text
            .as_ref()
            .and_then(|text_map| text_map.reloc.clone());
        let modules: Vec<ModuleMap> = self
            .modules
            .iter()
            .map(|module| ModuleMap {
                name: module.name.clone(),
                start: module.start,
            })
            .collect();
        let loaded = kallsyms::load(&text, reloc.as_ref(), &modules);
        match loaded {
            Ok(symbols) => {
                if let (Some(text_map), Some(first), Some(last)) = (
                    self.text.as_mut(),
                    symbols.kernel.syms().first(),
                    symbols.kernel.syms().last(),
                ) {
                    text_map.start = first.start;
                    text_map.end = last.end;
                }
                self.symbols = SymbolsState::Loaded(Box::new(symbols));
            }
            Err(why) => self.symbols = SymbolsState::Failed(why),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SNAP: &[u8] =
        b"ffffffff81000000 T _text\nffffffff81000100 T do_syscall_64\nffffffff81000200 T last\n";

    fn maps() -> KernelMaps {
        let mut k = KernelMaps::new(Some(SNAP.to_vec()));
        k.mmap(
            "[kernel.kallsyms]_text",
            0xffff_ffff_8100_0000,
            0x1000,
            0xffff_ffff_8100_0000,
        );
        k
    }

    fn name(h: &KernelHit) -> String {
        match h {
            KernelHit::Kernel(Some((n, _)), d) | KernelHit::Ksym(Some((n, _)), d, ..) => {
                format!("{n} ({d})")
            }
            KernelHit::Kernel(None, d) | KernelHit::Ksym(None, d, ..) => format!("[unknown] ({d})"),
            KernelHit::None => "[unknown] ([unknown])".into(),
        }
    }

    #[test]
    fn kernel_bpf_and_unmapped_addresses() {
        let mut k = maps();
        k.ksymbol(0xffff_ffff_c000_0800, 0x100, true, false, "bpf_prog_aa_x");
        let table = [
            (0xffff_ffff_8100_0105, "do_syscall_64 ([kernel.kallsyms])"),
            (0xffff_ffff_c000_0850, "bpf_prog_aa_x (bpf_prog_aa_x)"),
            (0xffff_ffff_c000_0900, "[unknown] ([unknown])"),
            // Past the recorded map's end, but inside it once loaded: the map then spans
            // _text .. the last symbol's end, a page past its start (as perf's fixups do).
            (0xffff_ffff_8100_1500, "last ([kernel.kallsyms])"),
            (0xffff_ffff_8100_2000, "[unknown] ([unknown])"),
        ];
        for (addr, want) in table {
            assert_eq!(name(&k.resolve(addr)), want, "{addr:#x}");
        }
    }

    fn prog_of(h: &KernelHit) -> Option<u32> {
        match h {
            KernelHit::Ksym(_, _, _, prog) => *prog,
            _ => None,
        }
    }

    /// Measured on kernel 6.18 (prog_pack): `every_syscall` unloaded and loaded again while
    /// recording, `count_syscall` (87 bytes) went from 0xffffffffc000078c (id 25860) to
    /// 0xffffffffc000079c (id 25867): the same name, and addresses 0x79c..0x7e3 held by both.
    #[test]
    fn regression_a_reload_over_the_same_place_is_told_apart_by_its_bpf_event() {
        let mut k = maps();
        let name = "bpf_prog_82e94bc63e3c5de2_count_syscall";
        let first = 0xffff_ffff_c000_078c;
        let second = 0xffff_ffff_c000_079c;
        k.ksymbol(first, 87, true, false, name);
        k.bpf_loaded(25860, &[first]);
        let ip = 0xffff_ffff_c000_07a0;
        assert_eq!(prog_of(&k.resolve(ip)), Some(25860));
        k.ksymbol(first, 87, true, true, name);
        k.ksymbol(second, 87, true, false, name);
        assert_eq!(
            prog_of(&k.resolve(ip)),
            None,
            "not named before its BPF_EVENT"
        );
        let g = k.generation;
        k.bpf_loaded(25867, &[second]);
        assert!(k.generation > g, "lookups cached before must be dropped");
        assert_eq!(prog_of(&k.resolve(ip)), Some(25867));
        // An id whose functions are elsewhere names nothing here.
        k.bpf_loaded(1, &[first]);
        assert_eq!(prog_of(&k.resolve(ip)), Some(25867));
    }

    #[test]
    fn regression_unregistered_program_becomes_unknown() {
        let mut k = maps();
        k.ksymbol(0xffff_ffff_c000_0800, 0x100, true, false, "bpf_prog_aa_x");
        let g = k.generation;
        k.ksymbol(0xffff_ffff_c000_0800, 0x100, true, true, "bpf_prog_aa_x");
        assert!(k.generation > g, "lookups cached before must be dropped");
        assert_eq!(
            name(&k.resolve(0xffff_ffff_c000_0850)),
            "[unknown] ([unknown])"
        );
    }

    #[test]
    fn no_snapshot_or_no_reference_symbol_means_no_kernel_names() {
        let mut k = KernelMaps::new(None);
        k.mmap(
            "[kernel.kallsyms]_text",
            0xffff_ffff_8100_0000,
            0x1000,
            0xffff_ffff_8100_0000,
        );
        assert_eq!(
            name(&k.resolve(0xffff_ffff_8100_0105)),
            "[unknown] ([kernel.kallsyms])"
        );
        assert!(k.failure().is_some());
        let mut r = KernelMaps::new(Some(SNAP.to_vec()));
        r.mmap(
            "[kernel.kallsyms]_stext_missing",
            0xffff_ffff_8100_0000,
            0x1000,
            1,
        );
        assert_eq!(
            name(&r.resolve(0xffff_ffff_8100_0105)),
            "[unknown] ([kernel.kallsyms])"
        );
    }

    #[test]
    fn module_names_follow_kmod_path_parse() {
        let table = [
            ("/lib/modules/6.1/kernel/net/nf-nat.ko.xz", "[nf_nat]"),
            ("/lib/modules/6.1/kernel/fs/ext4.ko", "[ext4]"),
            ("[nf_conntrack]", "[nf_conntrack]"),
        ];
        for (path, want) in table {
            assert_eq!(module_name(path), want);
        }
    }
}
