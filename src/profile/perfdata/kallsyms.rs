//! Kernel symbols from a kallsyms snapshot, chosen exactly as perf 6.1 chooses them with
//! `perf script --kallsyms=FILE`: types T/W/D/B in either case (`symbol_type__filter`), ends
//! fixed up across kernel and module symbols, one symbol per address, module symbols moved
//! to their module's map or dropped (`[bpf]` ones always are), and the whole table shifted
//! when the snapshot's `_text` differs from the one recorded.
//!
//! Source: `tools/lib/symbol/kallsyms.c: kallsyms__parse()`, `tools/perf/util/symbol.c:
//! map__process_kallsym_symbol()`, `__dso__load_kallsyms()`, `maps__split_kallsyms()`,
//! `tools/perf/util/event.c: kallsyms__get_function_start()`.

use super::symtab::{SymTab, GLOBAL, LOCAL, WEAK};
use std::collections::HashMap;

/// `KSYM_NAME_LEN + 1`: the longest name perf reads.
const MAX_NAME: usize = 513;

/// One parsed line: address, type letter, name (with `\t[module]` when a module's).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Line<'a> {
    pub start: u64,
    pub kind: u8,
    pub name: &'a [u8],
}

/// Parse one line as `kallsyms__parse` does: hex digits then a space, a type byte, a space,
/// and the rest of the line as the name.
fn parse_line(line: &[u8]) -> Option<Line<'_>> {
    let digits = line.iter().take_while(|b| b.is_ascii_hexdigit()).count();
    if digits == 0 || line.get(digits) != Some(&b' ') {
        return None;
    }
    let start = line[..digits].iter().fold(0u64, |acc, &b| {
        let d = (b as char).to_digit(16).unwrap_or(0);
        acc.wrapping_shl(4) | u64::from(d)
    });
    let kind = *line.get(digits + 1)?;
    if line.get(digits + 2) != Some(&b' ') {
        return None;
    }
    let name = line.get(digits + 3..).unwrap_or_default();
    Some(Line {
        start,
        kind,
        name: &name[..name.len().min(MAX_NAME)],
    })
}

/// Every well-formed line of a kallsyms text.
pub(crate) fn lines(text: &[u8]) -> impl Iterator<Item = Line<'_>> {
    text.split(|&b| b == b'\n').filter_map(parse_line)
}

/// `kallsyms2elf_binding`.
fn binding(kind: u8) -> u8 {
    match kind {
        b'W' => WEAK,
        k if k.is_ascii_uppercase() => GLOBAL,
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

/// Load a snapshot. `reloc` is the recorded name and address of the symbol the kernel map
/// is relocated by, `_text` from the kernel MMAP's pgoff. `Err` says why perf would have no
/// kernel symbols.
pub(crate) fn load(
    text: &[u8],
    reloc: Option<(&str, u64)>,
    modules: &[ModuleMap],
) -> Result<KernelSymbols, String> {
    let delta = match reloc {
        Some((name, addr)) => function_start(text, name)
            .map(|a| a.wrapping_sub(addr))
            .ok_or_else(|| format!("the kallsyms snapshot has no `{name}`"))?,
        None => 0,
    };
    let mut all = SymTab::default();
    for l in lines(text) {
        if matches!(l.kind.to_ascii_uppercase(), b'T' | b'W' | b'D' | b'B')
            && l.name.first() != Some(&b'$')
        {
            all.push(
                l.start,
                0,
                binding(l.kind),
                &String::from_utf8_lossy(l.name),
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
    let function = |k: u8| matches!(k.to_ascii_uppercase(), b'T' | b'W') || k == b'A';
    lines(text)
        .find(|l| function(l.kind) && l.name == name.as_bytes())
        .map(|l| l.start)
}

/// `maps__split_kallsyms`: module symbols go to their module (or are dropped), the x86-64
/// entry trampoline is dropped, kernel symbols are shifted by `delta`.
fn split(all: SymTab, delta: u64, modules: &[ModuleMap]) -> KernelSymbols {
    let mut out = KernelSymbols::default();
    for s in all.syms() {
        let name = all.name(s);
        if let Some((sym, module)) = name.split_once('\t') {
            let Some(m) = modules.iter().find(|m| m.name == module) else {
                continue;
            };
            let len = s.end.wrapping_sub(s.start);
            out.modules.entry(m.name.clone()).or_default().push(
                s.start.wrapping_sub(m.start),
                len,
                s.binding,
                sym,
            );
        } else if name != "__entry_SYSCALL_64_trampoline" {
            out.kernel
                .push(s.start, s.end.wrapping_sub(s.start), s.binding, name);
        }
    }
    out.kernel.shift_down(delta);
    for t in out.modules.values_mut() {
        t.sort();
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

    fn names(t: &SymTab) -> Vec<(u64, u64, String)> {
        t.syms()
            .iter()
            .map(|s| (s.start, s.end, t.name(s).to_string()))
            .collect()
    }

    #[test]
    fn parses_like_kallsyms_parse() {
        let l: Vec<_> = lines(SNAP.as_bytes()).collect();
        assert_eq!(l.len(), 11, "3 malformed lines skipped");
        assert_eq!(
            l[8].name,
            b"bpf_prog_01d3040eaf485f66_path_check_callback\t[bpf]"
        );
        assert_eq!(
            parse_line(b"1 t "),
            Some(Line {
                start: 1,
                kind: b't',
                name: b""
            })
        );
        assert_eq!(parse_line(b"1 t"), None);
    }

    #[test]
    fn kernel_symbols_as_perf_keeps_them() {
        let k = load(SNAP.as_bytes(), Some(("_text", 0xffff_ffff_8100_0000)), &[]).unwrap();
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
        let k = load(SNAP.as_bytes(), Some(("_text", 0xffff_ffff_9000_0000)), &[]).unwrap();
        assert_eq!(k.kernel.syms()[0].start, 0xffff_ffff_9000_0000);
        let e = load(SNAP.as_bytes(), Some(("_no_such", 1)), &[]).unwrap_err();
        assert!(e.contains("_no_such"), "{e}");
        assert!(load(b"", None, &[]).unwrap().kernel.len() == 0);
    }
}
