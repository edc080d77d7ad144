//! Names for the targets of the calls in JIT-ed BPF code (`annotate --asm`). The x86-64 JIT
//! turns a helper call, a kfunc call and a BPF-to-BPF call alike into `call rel32` to the
//! callee's address: the kernel function of a helper or kfunc (named by the kallsyms of the
//! recording's boot), or the JIT-ed start of a sub-program (named from the perf.data's
//! `bpf_prog_info`, its `jited_ksyms`). The JIT-ed image is what is disassembled, so the helper
//! ids and kfunc BTF ids of the instructions the verifier saw are not needed: the address is.
//!
//! Only an address where a symbol starts is named. A call into the middle of a symbol, or to
//! an address no symbol of the right boot starts at, is "(unknown target)": a kallsyms of
//! another boot (KASLR moves the kernel per boot) would give wrong names.

use std::collections::HashMap;

use crate::host::kallsyms::Symbol;

/// What a call goes to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CallTarget {
    /// A kernel function: a helper's or kfunc's implementation, or what the JIT calls itself.
    Kernel(String),
    /// A BPF function: a sub-program, or another program's function.
    Bpf(String),
    /// Nothing known starts there.
    Unknown,
}

impl CallTarget {
    /// How the instruction's text ends: `<bpf_get_current_comm>`, `<bpf path_check_callback>`,
    /// `(unknown target)`.
    pub fn label(&self) -> String {
        match self {
            CallTarget::Kernel(name) => format!("<{name}>"),
            CallTarget::Bpf(name) => format!("<bpf {name}>"),
            CallTarget::Unknown => "(unknown target)".to_string(),
        }
    }

    /// The name alone, for JSON; `None` when unknown.
    pub fn name(&self) -> Option<&str> {
        match self {
            CallTarget::Kernel(name) | CallTarget::Bpf(name) => Some(name),
            CallTarget::Unknown => None,
        }
    }
}

/// The symbols call targets are named from.
#[derive(Debug, Clone, Default)]
pub struct CallNames {
    /// Kernel text symbols by start address; empty without a kallsyms of the recording's boot.
    kernel: HashMap<u64, String>,
    /// BPF functions by JIT-ed start address, under the names `annotate` shows them by.
    bpf: HashMap<u64, String>,
}

/// Whether a kallsyms line's type is text (`T`, `t`, and weak `W`, `w`).
fn is_text(kind: char) -> bool {
    matches!(kind, 'T' | 't' | 'W' | 'w')
}

impl CallNames {
    /// From the kernel's text symbols (of the recording's boot: `None` otherwise) and the BPF
    /// functions' start addresses with their shown names.
    pub fn new(kernel: Option<&[Symbol]>, bpf: HashMap<u64, String>) -> CallNames {
        let mut starts = HashMap::new();
        for symbol in kernel.into_iter().flatten() {
            // The `__pfx_` padding before a function starts where no call lands.
            if is_text(symbol.kind) && !symbol.name.starts_with("__pfx_") {
                starts
                    .entry(symbol.addr)
                    .or_insert_with(|| symbol.name.clone());
            }
        }
        CallNames {
            kernel: starts,
            bpf,
        }
    }

    /// Whether kernel functions can be named at all.
    pub fn knows_kernel(&self) -> bool {
        !self.kernel.is_empty()
    }

    /// What a call to `target` goes to.
    pub fn target(&self, target: u64) -> CallTarget {
        if let Some(name) = self.bpf.get(&target) {
            return CallTarget::Bpf(name.clone());
        }
        match self.kernel.get(&target) {
            Some(name) => CallTarget::Kernel(name.clone()),
            None => CallTarget::Unknown,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::host::kallsyms;

    #[test]
    fn calls_are_named_only_where_a_symbol_starts() {
        let syms = kallsyms::parse(
            "ffffffff81521b60 t __pfx_bpf_get_current_comm\n\
             ffffffff81521b70 T bpf_get_current_comm\n\
             ffffffff81531500 t __htab_map_lookup_elem\n\
             ffffffff82000000 d some_data\n",
        );
        let bpf = HashMap::from([(0xffffffffc0027530, "path_check_callback".to_string())]);
        let names = CallNames::new(Some(&syms), bpf);
        assert!(names.knows_kernel());
        assert_eq!(
            names.target(0xffffffff81521b70).label(),
            "<bpf_get_current_comm>"
        );
        assert_eq!(
            names.target(0xffffffffc0027530).label(),
            "<bpf path_check_callback>"
        );
        assert_eq!(names.target(0xffffffff81521b74), CallTarget::Unknown);
        assert_eq!(names.target(0xffffffff81521b60), CallTarget::Unknown);
        assert_eq!(
            names.target(0xffffffff82000000),
            CallTarget::Unknown,
            "data"
        );
        assert_eq!(CallTarget::Unknown.label(), "(unknown target)");
        assert_eq!(CallTarget::Unknown.name(), None);
        let blind = CallNames::new(None, HashMap::new());
        assert!(!blind.knows_kernel());
        assert_eq!(blind.target(0xffffffff81521b70), CallTarget::Unknown);
    }
}
