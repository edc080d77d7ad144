//! What a perf build can do, from `perf version --build-options` (perf 4.x and later print one
//! `name: [ on  ]` or `name: [ OFF ]` line per feature). The one that matters here: annotating
//! BPF programs (`perf annotate` of a `bpf_prog_*` symbol) disassembles the JIT-ed code with
//! libbfd/libopcodes; a perf built without them (Debian's: `libbfd: [ OFF ]`) says "Please link
//! with binutils's libopcode" instead. Recording and flame graphs do not need them.

use std::path::Path;

/// Whether this build can disassemble BPF programs, and what told us.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Annotate {
    /// `Some(true)`: libbfd on (libopcodes comes with it); `Some(false)`: off; `None`: unknown.
    pub can: Option<bool>,
    /// The feature lines read (`libbfd: OFF`), for the message.
    pub evidence: String,
}

/// The state of feature `name` in `--build-options` output.
fn feature(text: &str, name: &str) -> Option<bool> {
    text.lines().find_map(|line| {
        let (key, rest) = line.split_once(':')?;
        if key.trim() != name {
            return None;
        }
        let state = rest
            .split(']')
            .next()?
            .trim_start()
            .trim_start_matches('[')
            .trim();
        match state.to_ascii_lowercase().as_str() {
            "on" => Some(true),
            "off" => Some(false),
            _ => None,
        }
    })
}

/// Read `perf version --build-options` output. `libbfd` (perf ≤ 6.x) or `libopcodes`/
/// `libbfd-buildid`-era names: any of the disassembly libraries on means it can annotate.
pub(crate) fn parse_annotate(text: &str) -> Annotate {
    let names = ["libbfd", "libopcodes", "libcapstone", "libllvm"];
    let seen: Vec<(&str, bool)> = names
        .iter()
        .filter_map(|n| feature(text, n).map(|on| (*n, on)))
        .collect();
    let evidence = seen
        .iter()
        .map(|(n, on)| format!("{n}: {}", if *on { "on" } else { "OFF" }))
        .collect::<Vec<_>>()
        .join(", ");
    let can = if seen.is_empty() {
        None
    } else {
        Some(seen.iter().any(|(_, on)| *on))
    };
    Annotate { can, evidence }
}

/// Run `perf version --build-options` and read it.
pub fn annotate(perf: &Path) -> Annotate {
    let out = duct::cmd!(perf, "version", "--build-options")
        .before_spawn(|cmd| {
            super::without_caller_config(cmd);
            Ok(())
        })
        .stdin_null()
        .stderr_null()
        .unchecked()
        .read()
        .unwrap_or_default();
    parse_annotate(&out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debian_perf_6_1_cannot_annotate() {
        let text = "perf version 6.1.192\n                 dwarf: [ on  ]  # HAVE_DWARF_SUPPORT\n                libbfd: [ OFF ]  # HAVE_LIBBFD_SUPPORT\n                libelf: [ on  ]  # HAVE_LIBELF_SUPPORT\n";
        let a = parse_annotate(text);
        assert_eq!(a.can, Some(false));
        assert_eq!(a.evidence, "libbfd: OFF");
    }

    #[test]
    fn table() {
        // (build options, can annotate)
        let cases = [
            ("libbfd: [ on  ]  # HAVE_LIBBFD_SUPPORT", Some(true)),
            ("libbfd: [ OFF ]\nlibcapstone: [ on  ]", Some(true)),
            ("libbfd: [ OFF ]\nlibopcodes: [ OFF ]", Some(false)),
            ("perf version 4.9\n", None),
            ("libbfdx: [ on ]", None),
        ];
        for (text, want) in cases {
            assert_eq!(parse_annotate(text).can, want, "{text}");
        }
    }
}
