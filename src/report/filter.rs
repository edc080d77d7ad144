//! `flame --bpf-only`: keep the stacks that pass through a BPF program, cut so that each starts
//! at its attach point, for profiles where the hook is a sliver of the picture.

use super::walk::{glue_frames, segment};
use crate::profile::folded::{Folded, Stack};
use crate::profile::frames::{kind, Kind};
use std::collections::BTreeMap;

/// The stacks through BPF code (programs, trampolines, dispatchers, or unresolved frames right
/// above them), each starting at the kernel frame above its BPF part — or at the BPF part itself
/// when the kernel call chain stopped there (a sample in a program's prologue, whose caller is
/// lost: the frame above is user space). Identical cut stacks are merged.
pub(crate) fn bpf_only(folded: &Folded) -> Folded {
    let glue = glue_frames(&folded.stacks);
    let mut merged: BTreeMap<Vec<String>, u64> = BTreeMap::new();
    for stack in &folded.stacks {
        if let Some(seg) = segment(&stack.frames, &glue) {
            let attach = seg.start.checked_sub(1);
            let from = attach
                .filter(|&i| kind(&stack.frames[i]) == Kind::Kernel)
                .unwrap_or(seg.start);
            crate::report::add(
                merged.entry(stack.frames[from..].to_vec()).or_default(),
                stack.count,
            );
        }
    }
    Folded {
        stacks: merged
            .into_iter()
            .map(|(frames, count)| Stack { frames, count })
            .collect(),
        skipped: folded.skipped,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_bpf_stacks_from_the_attach_point() {
        let f = Folded::parse(
            "bench;do_syscall_64_[k];trace_call_bpf_[k];bpf_prog_0123456789abcdef_a 5\n\
             bench;do_syscall_64_[k];trace_call_bpf_[k];bpf_prog_0123456789abcdef_a;htab_map_hash_[k] 2\n\
             other;do_syscall_64_[k];trace_call_bpf_[k];bpf_prog_0123456789abcdef_a 1\n\
             bench;do_syscall_64_[k];vfs_open_[k] 9\n\
             bench;bpf_lsm_file_open_[k];0xffffffffc0288c18;bpf_prog_0123456789abcdef_b 4\n\
             bench;bpf_lsm_file_open_[k];0xffffffffc0288c18 1\n\
             bench;syscall;bpf_prog_0123456789abcdef_a 3\n",
        );
        let out = bpf_only(&f).to_text();
        assert_eq!(
            out,
            "bpf_lsm_file_open_[k];0xffffffffc0288c18 1\n\
             bpf_lsm_file_open_[k];0xffffffffc0288c18;bpf_prog_0123456789abcdef_b 4\n\
             bpf_prog_0123456789abcdef_a 3\n\
             trace_call_bpf_[k];bpf_prog_0123456789abcdef_a 6\n\
             trace_call_bpf_[k];bpf_prog_0123456789abcdef_a;htab_map_hash_[k] 2\n"
        );
    }

    #[test]
    fn nothing_without_bpf() {
        let f = Folded::parse("bench;do_syscall_64_[k];vfs_open_[k] 9\n");
        assert!(bpf_only(&f).stacks.is_empty());
    }
}
