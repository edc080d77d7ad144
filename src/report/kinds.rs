//! What the time inside BPF is spent on, by pattern, and the one-line hint each pattern earns.
//!
//! Every sample inside a BPF program falls in one category, told by the kernel frames below the
//! program's code (first match wins, in this order):
//! - map element allocation: an allocator frame (`alloc_htab_elem`, `free_htab_elem`,
//!   `bpf_mem_*`, `unit_alloc`/`unit_free`, `check_and_free_fields`, `kmalloc`/`kfree`, `pcpu_*`,
//!   …) below a map update or delete: a hash map without preallocation (`BPF_F_NO_PREALLOC`)
//!   allocates an element on every new key and frees it on delete. Not when the sample passes
//!   through a preallocated map's free list (`pcpu_freelist_push`, `__pcpu_freelist_pop`):
//!   its elements are recycled, nothing is allocated, and "preallocate" would be wrong advice
//!   (libbpf-tools' `opensnoop` shows `htab_map_delete_elem → free_htab_elem →
//!   pcpu_freelist_push` on its preallocated `start` map): that is map access;
//! - map hashing: `htab_map_hash`, `jhash*` (a hash-map look-up hashing its key);
//! - map access: any other map function (`__htab_map_lookup_elem`, `lookup_nulls_elem_raw`,
//!   `bpf_map_*`, `*array_map*`, `trie_*`, …);
//! - probe reads: `bpf_probe_read_*`, `copy_from_{kernel,user}_nofault*`, `strncpy_from_*`;
//! - output: sending events to user space, `bpf_perf_event_output`, `perf_event_output`,
//!   `bpf_ringbuf_output`/`_reserve`/`_submit`, and the reader's wake-up under them
//!   (`irq_work_queue`, which raises a self-IPI: `native_write_msr` on x86 with x2APIC) — first
//!   of all, since a sample under an output helper is output whatever it calls;
//! - other kernel: any other helper and what it calls (and interrupts landing there);
//! - own code: the sample is in the JIT-ed code of a program or sub-function;
//! - glue: in a trampoline, dispatcher or unresolved frame above the programs.
//!
//! Hints are ranked by what the user can act on, as the reference (README.md, "The reference")
//! reads its profile ("fewer probe reads or a cache in front of the map, not micro-tuning the
//! instruction count"): first the categories with a concrete change behind them — probe reads,
//! output, element allocation, map hashing, map access, in that order — each from [`ACTION_SHARE`]
//! percent of the time inside BPF (the write-up acts on htab_map_hash at 5.5% of it); then own
//! code, from [`HINT_SHARE`] percent, and only as far as the evidence goes: with the hottest source
//! line when line information is at hand, else a pointer to `ebpf-prof annotate`, last. Glue and
//! other kernel time get no hint: there is no single advice that fits them.

use serde::Serialize;

/// Own code takes at least this share (%) of the time inside BPF to earn a hint.
pub const HINT_SHARE: f64 = 25.0;

/// A category with a concrete change behind it (probe reads, allocation, hashing, map
/// access) takes at least this share (%) of the time inside BPF to earn a hint.
pub const ACTION_SHARE: f64 = 5.0;

/// What a sample inside BPF is doing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Category {
    /// In a program's own JIT-ed instructions.
    OwnCode,
    /// In a probe read helper or the copy under it.
    ProbeRead,
    /// Sending an event to user space (perf buffer or ring buffer) and waking its reader.
    Output,
    /// Allocating or freeing a map element under a map update or delete.
    Alloc,
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
            Category::Output => "output to user space",
            Category::Alloc => "map element allocation",
            Category::MapHash => "map hashing",
            Category::MapAccess => "map access",
            Category::Glue => "trampoline/glue",
            Category::OtherKernel => "other kernel",
        }
    }
}

/// The category of a kernel function by its own (bare) name, if it belongs to one.
pub fn of_function(name: &str) -> Option<Category> {
    if is_output(name) || is_wakeup(name) {
        Some(Category::Output)
    } else if is_alloc(name) {
        Some(Category::Alloc)
    } else if is_map_hash(name) {
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
    if any(is_output) {
        Category::Output
    } else if any(is_map_change) && any(is_alloc) && !any(is_prealloc_pool) {
        Category::Alloc
    } else if any(is_map_hash) {
        Category::MapHash
    } else if any(is_map_access) {
        Category::MapAccess
    } else if any(is_probe_read) {
        Category::ProbeRead
    } else {
        Category::OtherKernel
    }
}

/// A map update or delete: what allocates or frees an element.
fn is_map_change(n: &str) -> bool {
    n.contains("_map_update_elem") || n.contains("_map_delete_elem")
}

/// The allocator under map element updates and deletes (bpf_mem_alloc's caches and what they
/// call, the slab and per-CPU allocators).
fn is_alloc(n: &str) -> bool {
    if is_prealloc_pool(n) {
        return false;
    }
    const PREFIXES: [&str; 16] = [
        "alloc_htab_elem",
        "free_htab_elem",
        "htab_elem_free",
        "bpf_mem_",
        "unit_alloc",
        "unit_free",
        "check_and_free_fields",
        "bpf_obj_free_fields",
        "percpu_counter_add",
        "kmalloc",
        "__kmalloc",
        "kfree",
        "kmem_cache_",
        "pcpu_",
        "bpf_map_kmalloc",
        "bpf_map_kzalloc",
    ];
    PREFIXES.iter().any(|p| n.starts_with(p))
}

/// A preallocated hash map's free list, where its elements return on delete and come from on
/// insert (`kernel/bpf/percpu_freelist.c`): not an allocation.
fn is_prealloc_pool(n: &str) -> bool {
    n.contains("pcpu_freelist")
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

/// A helper that sends an event to user space, or what it calls to write the record.
fn is_output(n: &str) -> bool {
    const PREFIXES: [&str; 7] = [
        "bpf_perf_event_output",
        "perf_event_output",
        "__perf_event_output",
        "perf_output_",
        "bpf_event_output",
        "bpf_ringbuf_",
        "__bpf_ringbuf_",
    ];
    PREFIXES.iter().any(|p| n.starts_with(p))
}

/// The wake-up of an output's reader: an irq_work queued, and the self-IPI that raises it.
pub fn is_wakeup(n: &str) -> bool {
    const PREFIXES: [&str; 7] = [
        "irq_work_queue",
        "__irq_work_queue",
        "irq_work_claim",
        "arch_irq_work_raise",
        "native_write_msr",
        "x2apic_send_IPI",
        "default_send_IPI",
    ];
    PREFIXES.iter().any(|p| n.starts_with(p))
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

/// Where the hint for own code gets its evidence.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum OwnCodeEvidence<'a> {
    /// The hottest source line, as `ebpf-prof annotate` finds it.
    Line(&'a str),
    /// No line information at hand (folded stacks, perf script text).
    None,
}

/// The hint for `cat` at `share` percent of the time inside BPF, naming `heaviest` (the
/// function, or for own code the program, that weighs most in it); `None` below the
/// category's threshold ([`ACTION_SHARE`], [`HINT_SHARE`] for own code) or for categories
/// without advice.
pub fn hint(
    cat: Category,
    share: f64,
    heaviest: Option<&str>,
    evidence: OwnCodeEvidence<'_>,
) -> Option<Hint> {
    let threshold = if cat == Category::OwnCode {
        HINT_SHARE
    } else {
        ACTION_SHARE
    };
    if share < threshold {
        return None;
    }
    let who = heaviest.map_or_else(String::new, |h| format!(", {h} most"));
    let text = match cat {
        Category::ProbeRead => format!(
            "probe reads take {share:.0}% of the time in BPF{who}: make fewer probe reads — one larger read instead of several, only the fields needed — or cache what was read in a map"
        ),
        Category::Alloc => format!(
            "allocating and freeing map elements takes {share:.0}% of the time in BPF{who} (more hides in the update's own time where the allocator is inlined): preallocate the map (drop BPF_F_NO_PREALLOC), use a per-CPU or array map where the key allows, or update and delete less often (keep the entry)"
        ),
        Category::MapHash => format!(
            "hashing map keys takes {share:.0}% of the time in BPF{who}: look up less often — a cache in front of the map (a per-CPU array slot holding the last key and its value) — hash fewer bytes (a smaller key), or use a map that does not hash (an array indexed by a small integer)"
        ),
        Category::MapAccess => format!(
            "map look-ups and updates (hashing aside) take {share:.0}% of the time in BPF{who}: fewer look-ups per event — a cache in front of the map — or another map type (an array or per-CPU array where the key allows)"
        ),
        Category::Output => output_text(share, &who, None),
        Category::OwnCode => match evidence {
            OwnCodeEvidence::Line(line) => format!(
                "the programs' own instructions take {share:.0}% of the time in BPF{who}; the hottest line: {line}"
            ),
            OwnCodeEvidence::None => format!(
                "the programs' own instructions take {share:.0}% of the time in BPF{who}; which lines, `ebpf-prof annotate` on the perf.data says"
            ),
        },
        Category::Glue | Category::OtherKernel => return None,
    };
    Some(Hint {
        category: cat,
        share_of_bpf: share,
        text,
    })
}

/// The output hint: what sending events to user space costs, the wake-up under it when its
/// frames are there (`wakeup`: the heaviest wake-up function and its share of the time in BPF),
/// and the cure.
fn output_text(share: f64, who: &str, wakeup: Option<(&str, f64)>) -> String {
    let woken = wakeup.map_or_else(String::new, |(f, w)| {
        format!(" — {w:.0}% of it waking the reader up ({f}: irq_work_queue raises a self-IPI for every event)")
    });
    format!(
        "sending events to user space takes {share:.0}% of the time in BPF{who}{woken}: use a ring buffer (BPF_MAP_TYPE_RINGBUF, bpf_ringbuf_reserve/submit) rather than a perf buffer, submit with BPF_RB_NO_WAKEUP and wake the reader only every N events (BPF_RB_FORCE_WAKEUP) or let it poll on a timer, and batch several events into one record"
    )
}

/// The output hint with the wake-up under it named (see [`output_text`]); `None` below
/// [`ACTION_SHARE`].
pub fn output_hint(
    share: f64,
    heaviest: Option<&str>,
    wakeup: Option<(&str, f64)>,
) -> Option<Hint> {
    if share < ACTION_SHARE {
        return None;
    }
    let who = heaviest.map_or_else(String::new, |h| format!(", {h} most"));
    Some(Hint {
        category: Category::Output,
        share_of_bpf: share,
        text: output_text(share, &who, wakeup),
    })
}

/// The order hints are given in, the write-up's: fewer probe reads first, then the map —
/// its element allocation (one flag away: preallocate), its hashing, its access — and own
/// code last.
pub fn rank(hints: &mut [Hint]) {
    let order = |c: Category| match c {
        Category::ProbeRead => 0,
        Category::Output => 1,
        Category::Alloc => 2,
        Category::MapHash => 3,
        Category::MapAccess => 4,
        _ => 5,
    };
    hints.sort_by_key(|h| order(h.category));
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
    fn allocation_under_a_map_update_is_its_own_category() {
        assert_eq!(
            sample(&["htab_map_delete_elem", "free_htab_elem", "unit_free"]),
            Category::Alloc
        );
        assert_eq!(
            sample(&[
                "htab_map_update_elem",
                "alloc_htab_elem",
                "bpf_mem_cache_alloc"
            ]),
            Category::Alloc
        );
        assert_eq!(
            sample(&["bpf_get_current_task_btf", "kmalloc"]),
            Category::OtherKernel,
            "an allocation outside map updates is not the map's"
        );
        assert_eq!(sample(&["htab_map_update_elem"]), Category::MapAccess);
        assert_eq!(of_function("free_htab_elem"), Some(Category::Alloc));
    }

    #[test]
    fn a_preallocated_maps_free_list_is_map_access_not_allocation() {
        // opensnoop's preallocated `start` map, deleted on every sys_exit_openat.
        assert_eq!(
            sample(&[
                "htab_map_delete_elem",
                "free_htab_elem",
                "pcpu_freelist_push"
            ]),
            Category::MapAccess
        );
        assert_eq!(
            sample(&[
                "htab_map_update_elem",
                "alloc_htab_elem",
                "__pcpu_freelist_pop"
            ]),
            Category::MapAccess
        );
        for f in [
            "pcpu_freelist_push",
            "__pcpu_freelist_pop",
            "___pcpu_freelist_pop",
        ] {
            assert_ne!(of_function(f), Some(Category::Alloc), "{f}");
        }
        assert_eq!(of_function("pcpu_alloc_noprof"), Some(Category::Alloc));
    }

    #[test]
    fn regression_the_output_path_and_its_wake_up_are_named_with_the_cure() {
        // opensnoop's perf buffer: 63% of a recording in native_write_msr under the output.
        let under_output = [
            "bpf_perf_event_output",
            "perf_event_output",
            "perf_output_end",
            "irq_work_queue",
            "native_write_msr",
        ];
        assert_eq!(sample(&under_output), Category::Output);
        assert_eq!(
            sample(&["bpf_ringbuf_output", "htab_map_hash"]),
            Category::Output,
            "whatever the output calls is output"
        );
        assert_eq!(of_function("native_write_msr"), Some(Category::Output));
        let h = output_hint(
            70.0,
            Some("bpf_perf_event_output"),
            Some(("native_write_msr", 63.0)),
        )
        .unwrap();
        for part in [
            "sending events to user space takes 70% of the time in BPF, bpf_perf_event_output most",
            "63% of it waking the reader up (native_write_msr",
            "BPF_MAP_TYPE_RINGBUF",
            "BPF_RB_NO_WAKEUP",
            "batch",
        ] {
            assert!(h.text.contains(part), "{part}: {}", h.text);
        }
        assert!(output_hint(4.0, None, None).is_none());
    }

    #[test]
    fn ranked_by_what_can_be_acted_on() {
        let none = OwnCodeEvidence::None;
        let mut h = vec![
            hint(Category::Output, 10.0, None, none).unwrap(),
            hint(Category::OwnCode, 60.0, Some("p"), none).unwrap(),
            hint(Category::MapAccess, 70.0, None, none).unwrap(),
            hint(Category::MapHash, 5.5, None, none).unwrap(),
            hint(Category::Alloc, 10.0, None, none).unwrap(),
            hint(Category::ProbeRead, 30.0, None, none).unwrap(),
        ];
        rank(&mut h);
        let order: Vec<Category> = h.iter().map(|h| h.category).collect();
        assert_eq!(
            order,
            [
                Category::ProbeRead,
                Category::Output,
                Category::Alloc,
                Category::MapHash,
                Category::MapAccess,
                Category::OwnCode
            ]
        );
        assert!(h[5].text.contains("ebpf-prof annotate"), "{}", h[5].text);
        let line = hint(
            Category::OwnCode,
            60.0,
            None,
            OwnCodeEvidence::Line("line 44 of hook.bpf.c"),
        )
        .unwrap();
        assert!(line.text.contains("line 44 of hook.bpf.c"), "{}", line.text);
        assert!(hint(Category::OwnCode, 24.0, None, none).is_none());
        assert!(hint(Category::MapAccess, 4.9, None, none).is_none());
    }

    #[test]
    fn hints_only_above_the_threshold_and_only_with_advice() {
        let none = OwnCodeEvidence::None;
        assert!(hint(Category::ProbeRead, 4.9, None, none).is_none());
        let h = hint(
            Category::ProbeRead,
            36.1,
            Some("bpf_probe_read_kernel"),
            none,
        )
        .unwrap();
        assert!(
            h.text
                .starts_with("probe reads take 36% of the time in BPF, bpf_probe_read_kernel most"),
            "{}",
            h.text
        );
        assert!(hint(Category::MapHash, 30.0, None, none)
            .unwrap()
            .text
            .contains("a cache in front of the map"));
        assert!(hint(Category::OtherKernel, 90.0, None, none).is_none());
        assert!(hint(Category::Glue, 90.0, None, none).is_none());
    }
}
