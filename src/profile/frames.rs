//! The one classifier of folded frames, for every reader: `flame` colours by it and `report`
//! attributes by it. A frame is a BPF program's function, BPF glue such as a trampoline or a
//! dispatcher, a kernel function, an unresolved address, or anything else, which is user
//! space or the command name.
//!
//! Unresolved frames come in several spellings, depending on who folded the stacks. inferno
//! writes `[unknown]` where perf script printed `ffffffffc0288c18 [unknown] ([unknown])`, and
//! `[unknown <ffffffffc0288c18>]` with `--addrs`. A kernel address perf could not name is
//! `[kernel.kallsyms]_[k]`. perf report's call graphs print `0xffffffffc0288c18`, as in the
//! profile of *Profiling eBPF Code*, the write-up this tool automates. Some tools print a bare
//! hex address. Only the last three forms carry an address to look up in a kallsyms snapshot.

use crate::host::kallsyms::ProgSymbol;
use crate::profile::folded::bare;

/// Whether a (bare) frame name is BPF JIT code: a program, a trampoline or a dispatcher.
pub fn is_bpf(name: &str) -> bool {
    ProgSymbol::parse(name).is_some()
        || name.starts_with("bpf_trampoline_")
        || name.starts_with("bpf_dispatcher_")
}

/// What a frame is, for attribution.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A JIT-ed BPF program or sub-function: `bpf_prog_<tag>_<name>`.
    Program,
    /// BPF glue: `bpf_trampoline_*`, `bpf_dispatcher_*`.
    Glue,
    /// A named kernel function (annotated `_[k]` by the collapser).
    Kernel,
    /// An address nobody could name.
    Unresolved,
    /// User space, the command name, anything unannotated.
    Other,
}

/// The kind of a folded frame.
pub fn kind(frame: &str) -> Kind {
    let name = bare(frame);
    if frame == UNNAMED_KERNEL_FOLDED || name == UNNAMED_KERNEL {
        // Kernel text nobody could name: perf placed it in the kernel's map.
        Kind::Kernel
    } else if is_bpf(name) {
        if name.starts_with("bpf_prog_") {
            Kind::Program
        } else {
            Kind::Glue
        }
    } else if is_unresolved(name) {
        Kind::Unresolved
    } else if frame.ends_with("_[k]") {
        Kind::Kernel
    } else {
        Kind::Other
    }
}

/// How inferno's collapser writes a kernel frame perf printed as `[unknown]`: the module's
/// name in brackets, `[[kernel.kallsyms]]_[k]`. It is kernel text (perf placed it in the
/// kernel's map), unnamed because no kallsyms of the recording's kernel build was found.
pub(crate) const UNNAMED_KERNEL: &str = "[[kernel.kallsyms]]";

/// The same frame as every output of this tool writes it: as perf prints it, `[unknown]`,
/// with the `_[k]` of kernel frames (inferno draws it as `[unknown]`, in kernel colours).
pub(crate) const UNNAMED_KERNEL_FOLDED: &str = "[unknown]_[k]";

/// A frame as the profile keeps it: inferno's unnamed kernel frame renamed
/// [`UNNAMED_KERNEL_FOLDED`], every other frame as it is.
pub(crate) fn canonical(frame: &str) -> std::borrow::Cow<'_, str> {
    if bare(frame) == UNNAMED_KERNEL {
        std::borrow::Cow::Borrowed(UNNAMED_KERNEL_FOLDED)
    } else {
        std::borrow::Cow::Borrowed(frame)
    }
}

/// Whether a bare frame name is an address perf (or whoever folded) could not name.
pub(crate) fn is_unresolved(name: &str) -> bool {
    name == "[unknown]"
        || name == "[kernel.kallsyms]"
        || name.starts_with("[unknown <")
        || name.starts_with("[kernel.kallsyms <")
        || parse_hex(name).is_some()
}

/// The address an unresolved frame carries, if any.
pub fn address(frame: &str) -> Option<u64> {
    let name = bare(frame);
    if let Some(inner) = name.strip_prefix('[').and_then(|n| n.strip_suffix(">]")) {
        let (_, addr) = inner.rsplit_once('<')?;
        return u64::from_str_radix(addr.trim_start_matches("0x"), 16).ok();
    }
    parse_hex(name)
}

/// `0x…` with at least one digit, or a bare run of at least 12 hex digits (a kernel address;
/// shorter runs such as `deadbeef` or `add` may well be names).
fn parse_hex(name: &str) -> Option<u64> {
    let digits = match name.strip_prefix("0x") {
        Some(hex) if !hex.is_empty() => hex,
        Some(_) => return None,
        None if name.len() >= 12 => name,
        None => return None,
    };
    if digits.len() > 16 || !digits.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    u64::from_str_radix(digits, 16).ok()
}

/// The name a person reads: a program's or sub-function's own name (the tag dropped: perf and
/// /proc/kallsyms may tag the same function differently), else the bare frame.
pub fn display(frame: &str) -> String {
    let name = bare(frame);
    match ProgSymbol::parse(name) {
        Some(symbol) => symbol.name.to_string(),
        _ if name == UNNAMED_KERNEL => "[unknown]".to_string(),
        _ => name.to_string(),
    }
}

/// The tag of a `bpf_prog_<tag>_<name>` frame.
pub fn tag(frame: &str) -> Option<String> {
    ProgSymbol::parse(bare(frame)).map(|symbol| symbol.tag.to_string())
}

/// Kernel functions that run BPF programs or sit right above them: an unresolved frame right
/// under one of these is most likely a program perf could not name.
const RUNNERS: [&str; 12] = [
    "trace_call_bpf",
    "__bpf_trace_run",
    "bpf_trace_run",
    "bpf_prog_run",
    "__bpf_prog_run",
    "__cgroup_bpf_run",
    "bpf_lsm_",
    "bpf_dispatcher_",
    "bpf_trampoline_",
    "bpf_struct_ops",
    "sk_filter",
    "bpf_test_run",
];

/// Whether a bare kernel function name is one that calls into BPF programs.
pub(crate) fn is_runner(name: &str) -> bool {
    RUNNERS.iter().any(|r| name.starts_with(r))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_of_real_frames() {
        assert_eq!(
            kind("bpf_prog_01d3040eaf485f66_path_check_callback"),
            Kind::Program
        );
        assert_eq!(kind("bpf_trampoline_6442491220"), Kind::Glue);
        assert_eq!(kind("bpf_dispatcher_xdp"), Kind::Glue);
        assert_eq!(kind("htab_map_hash_[k]"), Kind::Kernel);
        assert_eq!(kind("bpf_prog_run_array_[k]"), Kind::Kernel);
        assert_eq!(kind("[unknown]"), Kind::Unresolved);
        assert_eq!(kind("[kernel.kallsyms]_[k]"), Kind::Unresolved);
        assert_eq!(
            kind("[[kernel.kallsyms]]_[k]"),
            Kind::Kernel,
            "kernel text, unnamed"
        );
        assert_eq!(kind(UNNAMED_KERNEL_FOLDED), Kind::Kernel);
        assert_eq!(canonical("[[kernel.kallsyms]]_[k]"), UNNAMED_KERNEL_FOLDED);
        assert_eq!(canonical("do_syscall_64_[k]"), "do_syscall_64_[k]");
        assert_eq!(kind("0xffffffffc0288c18"), Kind::Unresolved);
        assert_eq!(kind("[unknown <ffffffffc0025cd2>]"), Kind::Unresolved);
        assert_eq!(kind("std::rt::lang_start"), Kind::Other);
        assert_eq!(kind("ebpf-prof"), Kind::Other);
        assert_eq!(kind("deadbeef"), Kind::Other, "short hex is a name");
    }

    #[test]
    fn addresses_in_each_spelling() {
        assert_eq!(address("0xffffffffc0288c18"), Some(0xffffffffc0288c18));
        assert_eq!(address("ffffffffc0288c18"), Some(0xffffffffc0288c18));
        assert_eq!(
            address("[unknown <ffffffffc0025cd2>]"),
            Some(0xffffffffc0025cd2)
        );
        assert_eq!(
            address("[kernel.kallsyms <ffffffff8151b231>]_[k]"),
            Some(0xffffffff8151b231)
        );
        assert_eq!(address("[unknown]"), None);
        assert_eq!(address("0x"), None);
        assert_eq!(address("0x1ffffffffc0288c18"), None, "too long");
    }

    #[test]
    fn display_drops_tags_only_from_programs() {
        assert_eq!(
            display("bpf_prog_e03e9930c8521773_enforce_access_policy"),
            "enforce_access_policy"
        );
        assert_eq!(display("htab_map_hash_[k]"), "htab_map_hash");
        assert_eq!(display("[[kernel.kallsyms]]_[k]"), "[unknown]");
        assert_eq!(display(UNNAMED_KERNEL_FOLDED), "[unknown]");
        assert_eq!(
            display("bpf_trampoline_6442491220"),
            "bpf_trampoline_6442491220"
        );
        assert_eq!(
            tag("bpf_prog_e03e9930c8521773_enforce_access_policy").as_deref(),
            Some("e03e9930c8521773")
        );
        assert!(is_runner("trace_call_bpf") && is_runner("bpf_lsm_file_open"));
        assert!(!is_runner("do_dentry_open"));
    }
}
