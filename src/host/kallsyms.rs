//! /proc/kallsyms: parsing, the JIT-ed BPF program symbols in it, and whether addresses are real.
//!
//! With `net.core.bpf_jit_kallsyms=1` each JIT-ed program (and each of its sub-functions) gets a
//! line `ADDR t bpf_prog_<tag>_<name>\t[bpf]`; trampolines and dispatchers appear as
//! `bpf_trampoline_<key>` / `bpf_dispatcher_<name>` in `[bpf]` too. See
//! `grep '\[bpf\]' /proc/kallsyms`.

use super::Host;
use anyhow::{Context, Result};
use regex::Regex;
use std::path::PathBuf;
use std::sync::LazyLock;

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

static BPF_PROG: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^bpf_prog_([0-9a-f]{16})_?(.*)$").expect("static regex"));

/// Parse one kallsyms line; `None` for lines that are not `ADDR TYPE NAME [MODULE]`.
pub fn parse_line(line: &str) -> Option<Symbol> {
    let mut it = line.split_whitespace();
    let addr = u64::from_str_radix(it.next()?, 16).ok()?;
    let kind = it.next()?.chars().next()?;
    let name = it.next()?.to_string();
    let module = it
        .next()
        .map(|m| m.trim_start_matches('[').trim_end_matches(']').to_string());
    Some(Symbol {
        addr,
        kind,
        name,
        module,
    })
}

/// Parse a whole kallsyms text, skipping malformed lines.
pub fn parse(text: &str) -> Vec<Symbol> {
    text.lines().filter_map(parse_line).collect()
}

/// Split a `bpf_prog_<tag>_<name>` symbol into tag and name.
pub fn split_bpf_symbol(symbol: &str) -> Option<(String, String)> {
    let c = BPF_PROG.captures(symbol)?;
    Some((c[1].to_string(), c[2].to_string()))
}

/// The BPF program symbols among `syms` (module `[bpf]`, name `bpf_prog_<tag>_<name>`).
pub fn bpf_programs(syms: &[Symbol]) -> Vec<BpfSymbol> {
    syms.iter()
        .filter(|s| s.module.as_deref() == Some("bpf"))
        .filter_map(|s| {
            let (tag, name) = split_bpf_symbol(&s.name)?;
            Some(BpfSymbol {
                addr: s.addr,
                tag,
                name,
                symbol: s.name.clone(),
            })
        })
        .collect()
}

/// True when every address is zero: kptr_restrict hides them from this reader.
pub fn addresses_hidden(syms: &[Symbol]) -> bool {
    !syms.is_empty() && syms.iter().all(|s| s.addr == 0)
}

/// The environment variable that makes profile readers take another file for the running
/// kernel's /proc/kallsyms. The test suite points it at an empty file to show that every
/// fixture carries the kernel symbols it is read with; nothing else should set it.
pub const LIVE_KALLSYMS_VAR: &str = "EBPF_PROF_TEST_LIVE_KALLSYMS";

/// The running kernel's kallsyms as profile readers see it: the host's /proc/kallsyms, or
/// the file [`LIVE_KALLSYMS_VAR`] names.
pub fn live_path(host: &Host) -> PathBuf {
    match std::env::var_os(LIVE_KALLSYMS_VAR) {
        Some(path) if host.is_live() => PathBuf::from(path),
        _ => host.path("proc/kallsyms"),
    }
}

/// Whether a kallsyms text shows any real address. Read by a user while kptr_restrict hides
/// them, every address is zero, and such a file would name every kernel frame after the
/// first symbol in it.
pub fn shows_addresses(text: &[u8]) -> bool {
    text.split(|&b| b == b'\n').any(|line| {
        let digits = line.iter().take_while(|b| b.is_ascii_hexdigit()).count();
        digits > 0 && line[..digits].iter().any(|&b| b != b'0')
    })
}

/// Read and parse the host's /proc/kallsyms.
pub fn read(host: &Host) -> Result<Vec<Symbol>> {
    Ok(parse(&read_text(host)?))
}

/// The raw text of the host's /proc/kallsyms.
pub fn read_text(host: &Host) -> Result<String> {
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
        let s = parse_line("ffffffffc0288c18 t bpf_trampoline_6442491220\t[bpf]").unwrap();
        assert_eq!(s.module.as_deref(), Some("bpf"));
        assert_eq!(s.addr, 0xffffffffc0288c18);
    }
}
