//! Symbol demangling as Debian's perf 6.1 does it, with libiberty's `cplus_demangle` and no
//! options, so without parameter lists. libiberty tries Rust first, both the legacy
//! `_ZN…17h<hash>E` and the v0 `_R…` forms, and prints Rust names without their hash. C++
//! names are demangled by the `cpp_demangle` crate, which may print a long template otherwise
//! than libiberty does. OCaml and Java names stay mangled, as perf 6.1 leaves them.
//!
//! Source: `tools/perf/util/symbol-elf.c: demangle_sym()`; libiberty `cplus-dem.c`,
//! `rust-demangle.c`.

/// The demangled form of `name`, or `None` to keep it as it is.
pub(crate) fn demangle(name: &str) -> Option<String> {
    if name.starts_with("_Z") && !is_legacy_rust(name) {
        return demangle_cpp(name);
    }
    if !(name.starts_with("_R") || is_legacy_rust(name)) {
        return None;
    }
    rustc_demangle::try_demangle(name)
        .ok()
        .map(|d| format!("{d:#}"))
}

/// A C++ (Itanium ABI) name without parameters, as libiberty's `cplus_demangle` without
/// options prints it (inferno then cuts any argument list anyway); a clone suffix
/// (`.cold`, `.isra.0`) is dropped.
fn demangle_cpp(name: &str) -> Option<String> {
    let base = name.split('.').next().unwrap_or(name);
    let sym = cpp_demangle::Symbol::new(base.as_bytes()).ok()?;
    let opts = cpp_demangle::DemangleOptions::new()
        .no_params()
        .no_return_type();
    sym.demangle_with_options(&opts).ok()
}

/// A legacy Rust symbol: Itanium-style `_ZN…E` whose last path component is `17h` followed
/// by 16 hex digits (libiberty only takes it as Rust then), optionally with `.llvm.` suffix.
fn is_legacy_rust(name: &str) -> bool {
    let Some(body) = name.strip_prefix("_ZN") else {
        return false;
    };
    let body = body.split(".llvm.").next().unwrap_or(body);
    let Some(body) = body.strip_suffix('E') else {
        return false;
    };
    body.len() >= 19
        && body
            .get(body.len() - 19..)
            .and_then(|h| h.strip_prefix("17h"))
            .is_some_and(|h| h.bytes().all(|b| b.is_ascii_hexdigit()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rust_and_other_names_table() {
        let table = [
            (
                "_ZN9ebpf_prof5bench8one_loop17h0123456789abcdefE",
                Some("ebpf_prof::bench::one_loop"),
            ),
            (
                "_ZN111_$LT$alloc..vec..Vec$LT$T$GT$$u20$as$u20$alloc..vec..spec_from_iter_nested..SpecFromIterNested$LT$T$C$I$GT$$GT$9from_iter17h21c1b3d1d2c9e3a4E",
                Some("<alloc::vec::Vec<T> as alloc::vec::spec_from_iter_nested::SpecFromIterNested<T,I>>::from_iter"),
            ),
            ("_ZN3foo3barE", Some("foo::bar")),
            ("_ZN3foo3barEv", Some("foo::bar")),
            ("_ZN4llvm15MachineFunction22finalizeDebugInstrRefsEv.warm", Some("llvm::MachineFunction::finalizeDebugInstrRefs")),
            ("__GI___open64_nocancel", None),
            ("main", None),
            ("_RNvCs1234_7mycrate3foo", Some("mycrate::foo")),
        ];
        for (mangled, want) in table {
            assert_eq!(demangle(mangled).as_deref(), want, "{mangled}");
        }
    }
}
