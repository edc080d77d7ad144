//! Kernel symbols from a kallsyms snapshot, chosen exactly as perf 6.1 chooses them with
//! `perf script --kallsyms=FILE`: types T/W/D/B in either case (`symbol_type__filter`), ends
//! fixed up across kernel and module symbols, one symbol per address, module symbols moved
//! to their module's map or dropped (`[bpf]` ones always are), and the whole table shifted
//! when the snapshot's `_text` differs from the one recorded.
//!
//! Source: `tools/lib/symbol/kallsyms.c: kallsyms__parse()`, `tools/perf/util/symbol.c:
//! map__process_kallsym_symbol()`, `__dso__load_kallsyms()`, `maps__split_kallsyms()`,
//! `tools/perf/util/event.c: kallsyms__get_function_start()`. The lines are split by
//! `crate::host::kallsyms`, the one parser of kallsyms lines.

use super::symtab::{SymTab, GLOBAL, LOCAL, WEAK};
use crate::host::kallsyms::{lines, Line};
use std::collections::HashMap;

/// `KSYM_NAME_LEN + 1`: the longest name perf reads.
const MAX_NAME: usize = 513;

/// A line's name as perf reads it, with `\t[module]` when a module's, cut to [`MAX_NAME`].
fn name<'a>(line: &Line<'a>) -> &'a [u8] {
    &line.rest[..line.rest.len().min(MAX_NAME)]
}

/// `kallsyms2elf_binding`.
fn binding(kind: u8) -> u8 {
    match kind {
        b'W' => WEAK,
        letter if letter.is_ascii_uppercase() => GLOBAL,
        _ => LOCAL,
    }
}

/// A module map known when the symbols are split: its name (`[nf_conntrack]`) and start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ModuleMap {
    pub name: String,
    pub start: u64,
}

/// The kernel's symbols, and each mapped module's (relative to the module map's start).
#[derive(Debug, Clone, Default)]
pub(crate) struct KernelSymbols {
    pub kernel: SymTab,
    pub modules: HashMap<String, SymTab>,
}

/// The symbol a kernel map is relocated by and the address the recording gives it: `_text`
/// and the kernel MMAP's pgoff.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Relocation {
    pub symbol: String,
    pub addr: u64,
}

/// Load a snapshot, its kernel symbols shifted by `reloc` when the recording has one. `Err`
/// says why perf would have no kernel symbols.
pub(crate) fn load(
    text: &[u8],
    reloc: Option<&Relocation>,
    modules: &[ModuleMap],
) -> Result<KernelSymbols, String> {
    let delta = match reloc {
        Some(reloc) => function_start(text, &reloc.symbol)
            .map(|start| start.wrapping_sub(reloc.addr))
            .ok_or_else(|| format!("the kallsyms snapshot has no `{}`", reloc.symbol))?,
        None => 0,
    };
    let mut all = SymTab::default();
    for line in lines(text) {
        if matches!(line.kind.to_ascii_uppercase(), b'T' | b'W' | b'D' | b'B')
            && name(&line).first() != Some(&b'$')
        {
            all.push(
                line.addr,
                0,
                binding(line.kind),
                &String::from_utf8_lossy(name(&line)),
            );
        }
    }
    all.sort();
    all.fixup_end(true);
    all.dedup();
    Ok(split(all, delta, modules))
}

/// `kallsyms__get_function_start`: the first T/W (either case) or A symbol named `name`.
fn function_start(text: &[u8], name: &str) -> Option<u64> {
    let function = |kind: u8| matches!(kind.to_ascii_uppercase(), b'T' | b'W') || kind == b'A';
    lines(text)
        .find(|line| function(line.kind) && self::name(line) == name.as_bytes())
        .map(|line| line.addr)
}

/// `maps__split_kallsyms`: module symbols go to their module (or are dropped), the x86-64
/// entry trampoline is dropped, kernel symbols are shifted by `delta`.
fn split(all: SymTab, delta: u64, modules: &[ModuleMap]) -> KernelSymbols {
    let mut out = KernelSymbols::default();
    for entry in all.syms() {
        let name = all.name(entry);
        if let Some((sym, module_name)) = name.split_once('\t') {
            let Some(map) = modules.iter().find(|map| map.name == module_name) else {
                continue;
            };
            let len = entry.end.wrapping_sub(entry.start);
            out.modules.entry(map.name.clone()).or_default().push(
                entry.start.wrapping_sub(map.start),
                len,
                entry.binding,
                sym,
            );
        } else if name != "__entry_SYSCALL_64_trampoline" {
            out.kernel.push(
                entry.start,
                entry.end.wrapping_sub(entry.start),
                entry.binding,
                name,
            );
        }
    }
    out.kernel.shift_down(delta);
    for table in out.modules.values_mut() {
        table.sort();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const SNAP: &str = "\
ffffffff81000000 T srso_alias_untrain_ret
ffffffff81000000 T _stext
ffffffff81000000 T _text
ffffffff81000010 t small_helper
ffffffff81000040 W weak_thing
ffffffff81000080 r rodata_is_skipped
ffffffff810000c0 T last_text
ffffffff810000f0 T __entry_SYSCALL_64_trampoline
ffffffffc0000800 t bpf_prog_01d3040eaf485f66_path_check_callback\t[bpf]
ffffffffc0001000 t mod_func\t[nf_conntrack]
ffffffffc0001100 t mod_func2\t[nf_conntrack]
garbage line
zzzz T no_hex
ffffffff8100 Tmissing_space
";

    fn text_at(addr: u64) -> Relocation {
        Relocation {
            symbol: "_text".into(),
            addr,
        }
    }

    fn names(t: &SymTab) -> Vec<(u64, u64, String)> {
        t.syms()
            .iter()
            .map(|s| (s.start, s.end, t.name(s).to_string()))
            .collect()
    }

    #[test]
    fn parses_like_kallsyms_parse() {
        let all: Vec<_> = lines(SNAP.as_bytes()).collect();
        assert_eq!(all.len(), 11, "3 malformed lines skipped");
        assert_eq!(
            name(&all[8]),
            b"bpf_prog_01d3040eaf485f66_path_check_callback\t[bpf]"
        );
        let long = format!("1 t {}", "x".repeat(600));
        let cut = lines(long.as_bytes()).next().unwrap();
        assert_eq!(name(&cut).len(), MAX_NAME);
    }

    #[test]
    fn kernel_symbols_as_perf_keeps_them() {
        let k = load(SNAP.as_bytes(), Some(&text_at(0xffff_ffff_8100_0000)), &[]).unwrap();
        let got = names(&k.kernel);
        let want: Vec<(u64, u64, String)> = vec![
            (0xffff_ffff_8100_0000, 0xffff_ffff_8100_0010, "_text".into()),
            (
                0xffff_ffff_8100_0010,
                0xffff_ffff_8100_0040,
                "small_helper".into(),
            ),
            (
                0xffff_ffff_8100_0040,
                0xffff_ffff_8100_00c0,
                "weak_thing".into(),
            ),
            (
                0xffff_ffff_8100_00c0,
                0xffff_ffff_8100_00f0,
                "last_text".into(),
            ),
        ];
        assert_eq!(
            got, want,
            "r skipped, duplicates reduced, trampoline and [bpf] dropped"
        );
        assert!(
            k.modules.is_empty(),
            "no module map: module symbols dropped"
        );
    }

    #[test]
    fn module_symbols_go_to_mapped_modules() {
        let m = [ModuleMap {
            name: "[nf_conntrack]".into(),
            start: 0xffff_ffff_c000_1000,
        }];
        let k = load(SNAP.as_bytes(), None, &m).unwrap();
        let t = &k.modules["[nf_conntrack]"];
        assert_eq!(names(t)[0], (0, 0x100, "mod_func".to_string()));
        assert_eq!(names(t)[1].2, "mod_func2");
    }

    #[test]
    fn regression_relocated_snapshot_is_shifted_or_refused() {
        let k = load(SNAP.as_bytes(), Some(&text_at(0xffff_ffff_9000_0000)), &[]).unwrap();
        assert_eq!(k.kernel.syms()[0].start, 0xffff_ffff_9000_0000);
        let missing = Relocation {
            symbol: "_no_such".into(),
            addr: 1,
        };
        let e = load(SNAP.as_bytes(), Some(&missing), &[]).unwrap_err();
        assert!(e.contains("_no_such"), "{e}");
        assert!(load(b"", None, &[]).unwrap().kernel.len() == 0);
    }
}
