//! What inferno's perf collapser (0.12, the version ebpf-prof renders with) makes of the
//! lines `perf script` would print, so folded output is byte-identical to
//! `perf script | inferno-collapse-perf --annotate-kernel --annotate-jit`. The lines are
//! rebuilt as perf prints them and run through a port of inferno's parsing, quirks included:
//! bytes ≥ 0x80 become `?` (ebpf-prof's `AsciiOnly`), the comm stops at the first all-digit
//! word, `[unknown]` in a known DSO becomes `[dso basename]`, `;` becomes `:`, names are cut
//! at a top-level `(`, Rust hashes are stripped, and `_[k]` / `_[j]` / `_[i]` are appended.
//!
//! Source: `jonhoo/inferno` 0.12.8 `src/collapse/perf.rs` (`event_line_parts`,
//! `stack_line_parts`, `on_stack_line`, `with_module_fallback`, `tidy_generic`, `tidy_java`),
//! `src/collapse/matcher.rs` (`is_kernel`), `src/collapse/common.rs`
//! (`fix_partially_demangled_rust_symbol`); perf 6.1 `builtin-script.c:
//! perf_sample__fprintf_start()` and `util/evsel_fprintf.c: sample__fprintf_callchain()`.

use std::borrow::Cow;

/// Bytes ≥ 0x80 as `?`, the rest as is.
pub(crate) fn ascii_only(bytes: &[u8]) -> String {
    bytes
        .iter()
        .map(|&byte| if byte >= 0x80 { '?' } else { byte as char })
        .collect()
}

/// The root frame inferno takes from perf's event line `COMM TID …`: the text before the
/// first all-digit word, trimmed, spaces as `_`. `None` when inferno would not read the line.
pub(crate) fn comm_frame(comm: &[u8], tid: i32) -> Option<String> {
    let comm = ascii_only(comm);
    if comm.starts_with('#') || comm.contains('\n') {
        return None; // inferno skips the line as a comment, or it splits in two
    }
    let line = format!("{comm} {tid:5} ");
    match event_line_comm(&line) {
        Some(found) => Some(found.replace(' ', "_")),
        None => Some(comm.trim().replace(' ', "_")),
    }
}

/// inferno's `event_line_parts`, comm only. `None` where it finds no all-digit word or the
/// word starts the line (inferno would slice at -1 and panic).
fn event_line_comm(line: &str) -> Option<&str> {
    let mut word_start: usize = 0;
    let mut all_digits = false;
    let mut last_was_space = false;
    for (idx, character) in line.char_indices() {
        if character == ' ' {
            if all_digits && !last_was_space {
                return Some(line.get(..word_start.checked_sub(1)?)?.trim());
            }
            word_start = idx + 1;
            all_digits = true;
        } else if !(character == '/' || character.is_ascii_digit()) {
            all_digits = false;
        }
        last_was_space = character == ' ';
    }
    None
}

/// The folded frame(s) for one callchain entry perf prints as `SYM+0xOFF (DSO)` (or
/// `[unknown]`), `;`-joined when inferno splits it (`->`); `None` when inferno drops it.
/// `java` is whether the comm frame starts with `java` (inferno's `tidy_java`).
pub(crate) fn frame_text(sym: Option<&[u8]>, dso: Option<&[u8]>, java: bool) -> Option<String> {
    let sym = match sym {
        Some(symbol) => format!("{}+0x0", ascii_only(symbol)),
        None => "[unknown]".to_string(),
    };
    let dso = dso.map_or_else(|| "[unknown]".to_string(), ascii_only);
    if sym.contains('\n') || dso.contains('\n') {
        return None;
    }
    let line = format!("\t{:>16} {sym} ({dso})", 0);
    stack_line(line.trim_end(), java)
}

/// inferno's `stack_line_parts`: pc, raw function, module.
fn stack_line_parts(line: &str) -> Option<(&str, &str, &str)> {
    let mut line = line.trim_start().splitn(2, ' ');
    let pc = line.next()?.trim_end();
    let mut line = line.next()?.rsplitn(2, ' ');
    let module = line.next()?;
    let module = module.strip_prefix('(')?.strip_suffix(')')?;
    let rawfunc = match line.next()?.trim() {
        "" => " ",
        other => other,
    };
    Some((pc, rawfunc, module))
}

/// inferno's `on_stack_line` for one line, returning the frames it pushes (`;`-joined).
fn stack_line(line: &str, java: bool) -> Option<String> {
    let (_pc, mut rawfunc, module) = stack_line_parts(line)?;
    if let Some(offset) = rawfunc.rfind("+0x") {
        let end = &rawfunc[offset + 3..];
        if end.chars().all(|c| c.is_ascii_hexdigit()) {
            rawfunc = &rawfunc[..offset];
        }
    }
    if rawfunc.starts_with('(') {
        return None;
    }
    let rawfunc = fix_partially_demangled_rust_symbol(rawfunc);
    let mut out: Vec<String> = Vec::new();
    for func in rawfunc.split("->") {
        let mut func = tidy_generic(with_module_fallback(module, func));
        if java {
            func = tidy_java(func);
        }
        if !out.is_empty() {
            if !func.contains("_[i]") {
                func.push_str("_[i]");
            }
        } else if is_kernel(module) {
            func.push_str("_[k]");
        } else if ((module.starts_with("/tmp/perf-") && module.ends_with(".map"))
            || (module.contains("/jitted-") && module.ends_with(".so")))
            && !func.contains("_[j]")
        {
            func.push_str("_[j]");
        }
        out.push(func);
    }
    Some(out.join(";"))
}

/// inferno's `with_module_fallback` without addresses.
fn with_module_fallback(module: &str, func: &str) -> String {
    if func != "[unknown]" || module == "[unknown]" {
        return func.to_string();
    }
    let base = &module[module.rfind('/').map_or(0, |i| i + 1)..];
    format!("[{base}]")
}

/// inferno's `tidy_generic`: `;` → `:`, and the argument list cut at the first top-level `(`
/// (not Go's `.(` nor `(anonymous namespace)`).
fn tidy_generic(func: String) -> String {
    let mut func = func.replace(';', ":");
    let mut depth: i64 = 0;
    let mut last_dot = None;
    let mut keep = func.len();
    for (idx, character) in func.char_indices() {
        match character {
            '<' | '{' | '[' => depth += 1,
            '>' | '}' | ']' | ')' => depth -= 1,
            '(' => {
                if depth == 0 {
                    let go = last_dot == Some(idx);
                    let anon = func[idx..].starts_with("(anonymous namespace)");
                    if !go && !anon {
                        keep = idx;
                        break;
                    }
                }
                depth += 1;
            }
            '.' => last_dot = Some(idx + 1),
            _ => {}
        }
    }
    func.truncate(keep);
    func
}

/// inferno's `tidy_java`.
fn tidy_java(mut func: String) -> String {
    if func.starts_with('L') && func.contains('/') {
        func.remove(0);
    }
    func
}

/// inferno's `is_kernel` (`matcher.rs`).
fn is_kernel(module: &str) -> bool {
    (module.starts_with('[') || module.ends_with(".ko") || is_vmlinux(module))
        && module != "[unknown]"
}

/// inferno's `is_vmlinux`: from the last `vmlinux` on, only alphanumerics and `-._`.
fn is_vmlinux(module: &str) -> bool {
    module.rfind("vmlinux").is_some_and(|at| {
        module[at..].chars().all(|character| {
            character.is_ascii_alphanumeric() || matches!(character, '-' | '.' | '_')
        })
    })
}

/// inferno's `fix_partially_demangled_rust_symbol`.
fn fix_partially_demangled_rust_symbol(symbol: &str) -> Cow<'_, str> {
    const HASH: usize = 17;
    let is_hash = |text: &str| {
        text.starts_with('h')
            && text[1..]
                .chars()
                .all(|character| character.is_ascii_hexdigit())
    };
    if symbol.len() < HASH
        || !symbol.is_char_boundary(symbol.len() - HASH)
        || !is_hash(&symbol[symbol.len() - HASH..])
    {
        return Cow::Borrowed(symbol);
    }
    let mut rest = &symbol[..symbol.len() - HASH];
    rest = rest.strip_suffix("::").unwrap_or(rest);
    if rest.starts_with("_$") {
        rest = &rest[1..];
    }
    let mut out = String::new();
    while !rest.is_empty() {
        if let Some(after) = rest.strip_prefix("..") {
            out.push_str("::");
            rest = after;
        } else if let Some(after) = rest.strip_prefix('.') {
            out.push('.');
            rest = after;
        } else if rest.starts_with('$') {
            match ESCAPES
                .iter()
                .find(|(pattern, _)| rest.starts_with(pattern))
            {
                Some((pattern, decoded)) => {
                    out.push_str(decoded);
                    rest = &rest[pattern.len()..];
                }
                None => {
                    out.push_str(rest);
                    break;
                }
            }
        } else {
            let end = rest.find(['$', '.']).unwrap_or(rest.len());
            out.push_str(&rest[..end]);
            rest = &rest[end..];
        }
    }
    Cow::Owned(out)
}

const ESCAPES: [(&str, &str); 20] = [
    ("$SP$", "@"),
    ("$BP$", "*"),
    ("$RF$", "&"),
    ("$LT$", "<"),
    ("$GT$", ">"),
    ("$LP$", "("),
    ("$RP$", ")"),
    ("$C$", ","),
    ("$u7e$", "~"),
    ("$u20$", " "),
    ("$u27$", "'"),
    ("$u3d$", "="),
    ("$u5b$", "["),
    ("$u5d$", "]"),
    ("$u7b$", "{"),
    ("$u7d$", "}"),
    ("$u3b$", ";"),
    ("$u2b$", "+"),
    ("$u21$", "!"),
    ("$u22$", "\""),
];

#[cfg(test)]
mod tests {
    use super::*;

    fn f(sym: Option<&str>, dso: Option<&str>) -> Option<String> {
        frame_text(sym.map(str::as_bytes), dso.map(str::as_bytes), false)
    }

    #[test]
    fn frames_as_inferno_folds_perf_script_lines() {
        let k = Some("[kernel.kallsyms]");
        let table: [(Option<&str>, Option<&str>, Option<&str>); 14] = [
            (Some("do_syscall_64"), k, Some("do_syscall_64_[k]")),
            (None, k, Some("[[kernel.kallsyms]]_[k]")),
            (
                Some("bpf_prog_01d3_path_check"),
                Some("bpf_prog_01d3_path_check"),
                Some("bpf_prog_01d3_path_check"),
            ),
            (None, None, Some("[unknown]")),
            (
                None,
                Some("/usr/lib/x86_64-linux-gnu/libc.so.6"),
                Some("[libc.so.6]"),
            ),
            (
                Some("__GI___open64_nocancel"),
                Some("/usr/lib/ld.so"),
                Some("__GI___open64_nocancel"),
            ),
            (
                Some("__vdso_clock_gettime"),
                Some("[vdso]"),
                Some("__vdso_clock_gettime_[k]"),
            ),
            (None, Some("[vdso]"), Some("[[vdso]]_[k]")),
            (Some("a;b"), None, Some("a:b")),
            (Some("foo(int, char)"), None, Some("foo")),
            (Some("(anonymous namespace)::f()"), None, None),
            (
                Some("std::sys::fs::open::hb90e1c1c787080f0"),
                None,
                Some("std::sys::fs::open"),
            ),
            (None, Some("/tmp/perf-42.map"), Some("[perf-42.map]_[j]")),
            (Some("a->b"), None, Some("a;b_[i]")),
        ];
        for (sym, dso, want) in table {
            assert_eq!(f(sym, dso).as_deref(), want, "{sym:?} ({dso:?})");
            if let Some(want) = want {
                assert_eq!(real_inferno(sym, dso), format!("bench;{want} 1"), "{sym:?}");
            }
        }
    }

    /// What inferno's collapser, with the options the `perf script` path gives it, makes of
    /// the line perf would print.
    fn real_inferno(sym: Option<&str>, dso: Option<&str>) -> String {
        let sym = sym.map_or("[unknown]".to_string(), |s| format!("{s}+0x10"));
        let text = format!(
            "bench 12 1.000000: 1 cpu-clock:k:\n\tffffffff81000010 {sym} ({})\n\n",
            dso.unwrap_or("[unknown]")
        );
        let mut options = inferno::collapse::perf::Options::default();
        options.annotate_kernel = true;
        options.annotate_jit = true;
        let mut out = Vec::new();
        inferno::collapse::Collapse::collapse(
            &mut inferno::collapse::perf::Folder::from(options),
            text.as_bytes(),
            &mut out,
        )
        .unwrap();
        String::from_utf8(out).unwrap().trim_end().to_string()
    }

    #[test]
    fn regression_dso_with_a_space_is_what_inferno_makes_of_it() {
        // perf prints `(/lib/x.so (deleted))`; inferno takes `(deleted))` as the module.
        assert_eq!(
            f(None, Some("/lib/x.so (deleted)")).as_deref(),
            Some("[unknown] ")
        );
        assert_eq!(
            f(Some("é"), None).as_deref(),
            Some("??"),
            "non-ASCII bytes are ?"
        );
    }

    #[test]
    fn comm_frames_table() {
        let table = [
            ("ebpf-prof", 3603, Some("ebpf-prof")),
            ("Web Content", 12, Some("Web_Content")),
            ("foo 12 bar", 5, Some("foo")),
            (":3603", 3603, Some(":3603")),
            ("", 3603, Some("")),
            ("#hash", 1, None),
            ("1234", 1, Some("1234")),
            ("caf\u{e9}", 1, Some("caf??")),
        ];
        for (comm, tid, want) in table {
            assert_eq!(
                comm_frame(comm.as_bytes(), tid).as_deref(),
                want,
                "{comm:?}"
            );
        }
        assert_eq!(comm_frame(b"x", -1).as_deref(), Some("x"));
    }

    #[test]
    fn java_frames_lose_their_l() {
        let got = frame_text(
            Some(b"Ljava/lang/Thread;::run"),
            Some(b"/tmp/perf-1.map"),
            true,
        );
        assert_eq!(got.as_deref(), Some("java/lang/Thread:::run_[j]"));
    }
}
