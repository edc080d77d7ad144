//! What the time inside BPF is spent on, by pattern, and the one-line hint each pattern earns.
//!
//! Every sample inside a BPF program falls in one category, told by the kernel frames below the
//! program's code (first match wins, in this order):
//! - map hashing: `htab_map_hash`, `jhash*` (a hash-map look-up hashing its key);
//! - map access: any other map function (`__htab_map_lookup_elem`, `lookup_nulls_elem_raw`,
//!   `bpf_map_*`, `*array_map*`, `trie_*`, …);
//! - probe reads: `bpf_probe_read_*`, `copy_from_{kernel,user}_nofault*`, `strncpy_from_*`;
//! - other kernel: any other helper and what it calls (and interrupts landing there);
//! - own code: the sample is in the JIT-ed code of a program or sub-function;
//! - glue: in a trampoline, dispatcher or unresolved frame above the programs.
//!
//! A hint is printed for a category when it takes at least [`HINT_SHARE`] percent of the time
//! inside BPF — about a quarter: enough that acting on it changes the hook's cost visibly.
//! Below that no category dominates and nothing is said. Glue and other kernel time get no hint:
//! there is no single advice that fits them.

use serde::Serialize;

/// A category takes at least this share (%) of the time inside BPF to earn a hint.
pub const HINT_SHARE: f64 = 25.0;

/// What a sample inside BPF is doing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Category {
    /// In a program's own JIT-ed instructions.
    OwnCode,
    /// In a probe read helper or the copy under it.
    ProbeRead,
    /// Hashing a hash map's key.
    MapHash,
    /// Any other map work: look-up, compare, update.
    MapAccess,
    /// Trampolines, dispatchers, unresolved frames above the programs.
    Glue,
    /// Any other kernel function called from a program.
    OtherKernel,
}

impl Category {
    /// How the text report names it.
    pub fn label(self) -> &'static str {
        match self {
            Category::OwnCode => "own code",
            Category::ProbeRead => "probe reads",
            Category::MapHash => "map hashing",
            Category::MapAccess => "map access",
            Category::Glue => "trampoline/glue",
            Category::OtherKernel => "other kernel",
        }
    }
}

/// The category of a kernel function by its own (bare) name, if it belongs to one.
pub fn of_function(name: &str) -> Option<Category> {
    if is_map_hash(name) {
        Some(Category::MapHash)
    } else if is_map_access(name) {
        Some(Category::MapAccess)
    } else if is_probe_read(name) {
        Some(Category::ProbeRead)
    } else {
        None
    }
}

/// The category of a sample whose frames below the programs' code are `below` (bare names,
/// outermost first); empty when the sample is in the code itself.
pub fn of_sample<'a>(below: impl Iterator<Item = &'a str> + Clone, in_program: bool) -> Category {
    let mut names = below.peekable();
    if names.peek().is_none() {
        return if in_program {
            Category::OwnCode
        } else {
            Category::Glue
        };
    }
    let any = |f: fn(&str) -> bool| names.clone().any(f);
    if any(is_map_hash) {
        Category::MapHash
    } else if any(is_map_access) {
        Category::MapAccess
    } else if any(is_probe_read) {
        Category::ProbeRead
    } else {
        Category::OtherKernel
    }
}

fn is_map_hash(n: &str) -> bool {
    n == "htab_map_hash" || n.starts_with("jhash") || n.starts_with("__jhash")
}

fn is_map_access(n: &str) -> bool {
    n.starts_with("bpf_map_")
        || n.contains("htab_")
        || n.contains("array_map")
        || n.starts_with("lookup_nulls_elem_raw")
        || n.starts_with("lookup_elem_raw")
        || n.starts_with("trie_")
        || n.starts_with("alloc_htab_elem")
        || n.contains("_map_lookup_elem")
        || n.contains("_map_update_elem")
        || n.contains("_map_delete_elem")
}

fn is_probe_read(n: &str) -> bool {
    n.starts_with("bpf_probe_read")
        || n.starts_with("copy_from_kernel_nofault")
        || n.starts_with("copy_from_user_nofault")
        || n.starts_with("strncpy_from_user")
        || n.starts_with("strncpy_from_kernel_nofault")
        || n.starts_with("bpf_copy_from_user")
}

/// A pattern's hint.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Hint {
    pub category: Category,
    /// The category's share of the time inside BPF (%).
    pub share_of_bpf: f64,
    pub text: String,
}

/// The hint for `cat` at `share` percent of the time inside BPF, naming `heaviest` (the
/// function, or for own code the program, that weighs most in it); `None` below
/// [`HINT_SHARE`] or for categories without advice.
pub fn hint(cat: Category, share: f64, heaviest: Option<&str>) -> Option<Hint> {
    if share < HINT_SHARE {
        return None;
    }
    let who = heaviest.map_or_else(String::new, |h| format!(", {h} most"));
    let text = match cat {
        Category::ProbeRead => format!(
            "probe reads take {share:.0}% of the time in BPF{who}: read less often — one larger read instead of several, only the fields needed — or cache what was read in a map"
        ),
        Category::MapHash => format!(
            "hashing map keys takes {share:.0}% of the time in BPF{who}: hash fewer bytes (a smaller key), look up less often, or use a map that does not hash (an array indexed by a small integer)"
        ),
        Category::MapAccess => format!(
            "map look-ups and updates (hashing aside) take {share:.0}% of the time in BPF{who}: fewer look-ups per event, or another map type (an array or per-CPU array where the key allows)"
        ),
        Category::OwnCode => format!(
            "the programs' own instructions take {share:.0}% of the time in BPF{who}: the cost is in the JIT-ed code itself (loops, copies, many small steps), not in helpers; read it with `bpftool prog dump jited name <program>`"
        ),
        Category::Glue | Category::OtherKernel => return None,
    };
    Some(Hint {
        category: cat,
        share_of_bpf: share,
        text,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(frames: &[&str]) -> Category {
        of_sample(frames.iter().copied(), true)
    }

    #[test]
    fn samples_fall_in_the_first_matching_category() {
        assert_eq!(sample(&[]), Category::OwnCode);
        assert_eq!(of_sample([].into_iter(), false), Category::Glue);
        assert_eq!(
            sample(&["__htab_map_lookup_elem", "htab_map_hash"]),
            Category::MapHash
        );
        assert_eq!(
            sample(&["lookup_nulls_elem_raw", "memcmp"]),
            Category::MapAccess
        );
        assert_eq!(
            sample(&[
                "bpf_probe_read_user_str",
                "strncpy_from_user_nofault",
                "strncpy_from_user"
            ]),
            Category::ProbeRead
        );
        assert_eq!(
            sample(&["bpf_get_current_comm", "sized_strscpy"]),
            Category::OtherKernel
        );
    }

    #[test]
    fn functions_by_name() {
        assert_eq!(of_function("htab_map_hash"), Some(Category::MapHash));
        assert_eq!(
            of_function("copy_from_kernel_nofault_allowed"),
            Some(Category::ProbeRead)
        );
        assert_eq!(
            of_function("htab_map_update_elem"),
            Some(Category::MapAccess)
        );
        assert_eq!(of_function("memcmp"), None);
    }

    #[test]
    fn hints_only_above_the_threshold_and_only_with_advice() {
        assert!(hint(Category::ProbeRead, 24.9, None).is_none());
        let h = hint(Category::ProbeRead, 36.1, Some("bpf_probe_read_kernel")).unwrap();
        assert!(
            h.text
                .starts_with("probe reads take 36% of the time in BPF, bpf_probe_read_kernel most"),
            "{}",
            h.text
        );
        assert!(hint(Category::MapHash, 30.0, None)
            .unwrap()
            .text
            .contains("smaller key"));
        assert!(hint(Category::OtherKernel, 90.0, None).is_none());
        assert!(hint(Category::Glue, 90.0, None).is_none());
    }
}
