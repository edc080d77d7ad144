//! /proc/kallsyms: its lines, the JIT-ed BPF program symbols in them, and whether addresses
//! are real. This is the one parser of kallsyms lines and of `bpf_prog_<tag>_<name>` symbols;
//! the perf.data reader applies perf's rules for which symbols to keep on top of [`lines`].
//!
//! With `net.core.bpf_jit_kallsyms=1` each JIT-ed program, and each of its sub-functions, gets a
//! line `ADDR t bpf_prog_<tag>_<name>\t[bpf]`. Trampolines and dispatchers appear as
//! `bpf_trampoline_<key>` and `bpf_dispatcher_<name>` in `[bpf]` too. See
//! `grep '\[bpf\]' /proc/kallsyms`.

use super::notes::hex;
use super::Host;
use anyhow::{Context, Result};
use std::path::PathBuf;

/// One line of /proc/kallsyms.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Symbol {
    pub addr: u64,
    pub kind: char,
    pub name: String,
    pub module: Option<String>,
}

/// A JIT-ed BPF program (or sub-function) symbol.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct BpfSymbol {
    pub addr: u64,
    /// The 16-hex-digit tag; note perf may print another tag for the same function.
    pub tag: String,
    /// The program's (or sub-function's) name.
    pub name: String,
    /// The whole symbol, `bpf_prog_<tag>_<name>`.
    pub symbol: String,
}

/// One line of a kallsyms text, split as perf's `kallsyms__parse` in
/// `tools/lib/symbol/kallsyms.c` splits it: hex digits and a space, a type byte and a space,
/// and the rest of the line. The rest is the symbol's name, followed by `\t[module]` when the
/// symbol is a module's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Line<'a> {
    pub addr: u64,
    pub kind: u8,
    pub rest: &'a [u8],
}

/// The address a kallsyms line starts with, and how many hex digits it takes.
fn leading_address(line: &[u8]) -> Option<(u64, usize)> {
    let digits = line
        .iter()
        .take_while(|byte| byte.is_ascii_hexdigit())
        .count();
    let value = line[..digits].iter().fold(0u64, |acc, &byte| {
        let digit = (byte as char).to_digit(16).unwrap_or(0);
        acc.wrapping_shl(4) | u64::from(digit)
    });
    (digits > 0).then_some((value, digits))
}

/// Split one line; `None` for a line that is not `ADDR TYPE REST`, each part one space apart.
pub(crate) fn split_line(line: &[u8]) -> Option<Line<'_>> {
    let (addr, digits) = leading_address(line)?;
    if line.get(digits) != Some(&b' ') || line.get(digits + 2) != Some(&b' ') {
        return None;
    }
    Some(Line {
        addr,
        kind: *line.get(digits + 1)?,
        rest: line.get(digits + 3..).unwrap_or_default(),
    })
}

/// Every well-formed line of a kallsyms text.
pub fn lines(text: &[u8]) -> impl Iterator<Item = Line<'_>> {
    text.split(|&byte| byte == b'\n').filter_map(split_line)
}

/// Parse one kallsyms line; `None` for a line that is not `ADDR TYPE NAME[\t[MODULE]]`.
pub(crate) fn parse_line(line: &str) -> Option<Symbol> {
    let parts = split_line(line.as_bytes())?;
    // The rest starts after three ASCII parts, so it is a whole part of `line`.
    let rest = std::str::from_utf8(parts.rest).ok()?;
    let (name, module) = match rest.split_once('\t') {
        Some((name, module)) => (name, Some(module)),
        None => (rest, None),
    };
    if name.is_empty() || !parts.kind.is_ascii_graphic() {
        return None;
    }
    Some(Symbol {
        addr: parts.addr,
        kind: char::from(parts.kind),
        name: name.to_string(),
        module: module.map(|m| m.trim_start_matches('[').trim_end_matches(']').to_string()),
    })
}

/// Parse a whole kallsyms text, skipping malformed lines.
pub fn parse(text: &str) -> Vec<Symbol> {
    text.lines().filter_map(parse_line).collect()
}

/// A `bpf_prog_<tag>_<name>` symbol taken apart. The kernel names a program without a name
/// `bpf_prog_<tag>`, so the name may be empty.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ProgSymbol<'a> {
    /// The tag, 16 lower-case hex digits.
    pub tag: &'a str,
    /// The program's or sub-function's name.
    pub name: &'a str,
}

impl<'a> ProgSymbol<'a> {
    /// The parts of `symbol`, if it is a BPF program's symbol.
    pub fn parse(symbol: &'a str) -> Option<ProgSymbol<'a>> {
        let rest = symbol.strip_prefix("bpf_prog_")?;
        let tag = rest.get(..16)?;
        if !tag
            .bytes()
            .all(|byte| matches!(byte, b'0'..=b'9' | b'a'..=b'f'))
        {
            return None;
        }
        let name = &rest[16..];
        let name = name.strip_prefix('_').unwrap_or(name);
        if name.contains('\n') {
            return None;
        }
        Some(ProgSymbol { tag, name })
    }

    /// The tag as the 8 bytes it is written from.
    pub fn tag_bytes(&self) -> Option<[u8; 8]> {
        let mut tag = [0u8; 8];
        for (index, byte) in tag.iter_mut().enumerate() {
            *byte = u8::from_str_radix(self.tag.get(2 * index..2 * index + 2)?, 16).ok()?;
        }
        Some(tag)
    }
}

/// The symbol the kernel gives a JIT-ed program or sub-function, `bpf_prog_<tag>_<name>`, or
/// `bpf_prog_<tag>` without a name.
pub(crate) fn prog_symbol(tag: &[u8; 8], name: Option<&str>) -> String {
    match name {
        Some(name) => format!("bpf_prog_{}_{name}", hex(tag)),
        None => format!("bpf_prog_{}", hex(tag)),
    }
}

/// Split a `bpf_prog_<tag>_<name>` symbol into tag and name.
pub fn split_bpf_symbol(symbol: &str) -> Option<(String, String)> {
    ProgSymbol::parse(symbol).map(|parts| (parts.tag.to_string(), parts.name.to_string()))
}

/// The BPF program symbols among `syms` (module `[bpf]`, name `bpf_prog_<tag>_<name>`).
pub fn bpf_programs(syms: &[Symbol]) -> Vec<BpfSymbol> {
    syms.iter()
        .filter(|sym| sym.module.as_deref() == Some("bpf"))
        .filter_map(|sym| {
            let parts = ProgSymbol::parse(&sym.name)?;
            Some(BpfSymbol {
                addr: sym.addr,
                tag: parts.tag.to_string(),
                name: parts.name.to_string(),
                symbol: sym.name.clone(),
            })
        })
        .collect()
}

/// True when every address is zero: kptr_restrict hides them from this reader.
pub fn addresses_hidden(syms: &[Symbol]) -> bool {
    !syms.is_empty() && syms.iter().all(|sym| sym.addr == 0)
}

/// The environment variable that makes profile readers take another file for the running
/// kernel's /proc/kallsyms. The test suite points it at an empty file to show that every
/// fixture carries the kernel symbols it is read with; nothing else should set it.
pub(crate) const LIVE_KALLSYMS_VAR: &str = "EBPF_PROF_TEST_LIVE_KALLSYMS";

/// The running kernel's kallsyms as profile readers see it: the host's /proc/kallsyms, or
/// the file [`LIVE_KALLSYMS_VAR`] names.
pub(crate) fn live_path(host: &Host) -> PathBuf {
    match std::env::var_os(LIVE_KALLSYMS_VAR) {
        Some(path) if host.is_live() => PathBuf::from(path),
        _ => host.path("proc/kallsyms"),
    }
}

/// Whether a kallsyms text shows any real address. Read by a user while kptr_restrict hides
/// them, every address is zero, and such a file would name every kernel frame after the
/// first symbol in it.
pub(crate) fn shows_addresses(text: &[u8]) -> bool {
    text.split(|&byte| byte == b'\n')
        .any(|line| leading_address(line).is_some_and(|(addr, _)| addr != 0))
}

/// Read and parse the host's /proc/kallsyms.
pub fn read(host: &Host) -> Result<Vec<Symbol>> {
    Ok(parse(&read_text(host)?))
}

/// The raw text of the host's /proc/kallsyms.
pub(crate) fn read_text(host: &Host) -> Result<String> {
    let path = host.path("proc/kallsyms");
    std::fs::read_to_string(&path).with_context(|| format!("cannot read {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    const EXCERPT: &str = include_str!("../../fixtures/kallsyms/bpf-excerpt.txt");

    #[test]
    fn finds_programs_and_subfunctions() {
        let syms = parse(EXCERPT);
        let progs = bpf_programs(&syms);
        let names: Vec<&str> = progs.iter().map(|p| p.name.as_str()).collect();
        assert!(names.contains(&"tail_call_security_check"), "{names:?}");
        assert!(names.contains(&"path_check_callback"), "{names:?}");
        assert!(!names.iter().any(|n| n.starts_with("trampoline")));
        assert!(progs.iter().all(|p| p.tag.len() == 16));
        assert!(!addresses_hidden(&syms));
    }

    #[test]
    fn kernel_functions_named_bpf_prog_are_not_programs() {
        let syms = parse("ffffffff81234560 T bpf_prog_run_array\nffffffff81234570 T bpf_prog_0123456789abcdef_x\n");
        assert!(bpf_programs(&syms).is_empty());
    }

    #[test]
    fn zero_addresses_are_hidden() {
        let syms = parse("0000000000000000 T do_syscall_64\n0000000000000000 t bpf_prog_0123456789abcdef_x\t[bpf]\n");
        assert!(addresses_hidden(&syms));
        assert_eq!(bpf_programs(&syms)[0].name, "x");
    }

    #[test]
    fn a_text_of_zero_addresses_shows_none() {
        assert!(!shows_addresses(
            b"0000000000000000 T _text\n0000000000000000 t x\n"
        ));
        assert!(!shows_addresses(b""));
        assert!(shows_addresses(
            b"0000000000000000 A fixed_percpu_data\nffffffff81000000 T _text\n"
        ));
    }

    #[test]
    fn malformed_lines_are_skipped() {
        assert_eq!(parse("zzz T foo\n\nffff\nffff T\n").len(), 0);
        let sym = parse_line("ffffffffc0288c18 t bpf_trampoline_6442491220\t[bpf]").unwrap();
        assert_eq!(sym.module.as_deref(), Some("bpf"));
        assert_eq!(sym.addr, 0xffffffffc0288c18);
        assert_eq!(
            split_line(b"1 t "),
            Some(Line {
                addr: 1,
                kind: b't',
                rest: b""
            })
        );
        assert_eq!(split_line(b"1 t"), None);
        assert_eq!(parse_line("1 t "), None, "no name");
    }

    #[test]
    fn program_symbols_come_apart_and_together() {
        let parts = ProgSymbol::parse("bpf_prog_e03e9930c8521773_enforce_access_policy").unwrap();
        assert_eq!(parts.tag, "e03e9930c8521773");
        assert_eq!(parts.name, "enforce_access_policy");
        let tag = parts.tag_bytes().unwrap();
        assert_eq!(tag, [0xe0, 0x3e, 0x99, 0x30, 0xc8, 0x52, 0x17, 0x73]);
        assert_eq!(
            prog_symbol(&tag, Some("enforce_access_policy")),
            "bpf_prog_e03e9930c8521773_enforce_access_policy"
        );
        assert_eq!(prog_symbol(&tag, None), "bpf_prog_e03e9930c8521773");
        assert_eq!(
            ProgSymbol::parse("bpf_prog_e03e9930c8521773").unwrap().name,
            ""
        );
        assert_eq!(ProgSymbol::parse("bpf_prog_run_array"), None);
        assert_eq!(ProgSymbol::parse("bpf_prog_E03E9930C8521773_x"), None);
    }
}
