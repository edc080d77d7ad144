//! `flame --bpf-only`: keep the stacks that pass through a BPF program, cut so that each starts
//! at its attach point, for profiles where the hook is a sliver of the picture.

use super::walk::{glue_frames, segment};
use crate::profile::frames::Kind;
use crate::profile::stacks::{FrameId, Stack, Stacks};
use std::collections::HashMap;

/// The stacks through BPF code (programs, trampolines, dispatchers, or unresolved frames right
/// above them), each starting at the kernel frame above its BPF part — or at the BPF part itself
/// when the kernel call chain stopped there (a sample in a program's prologue, whose caller is
/// lost: the frame above is user space). Identical cut stacks are merged, and ordered by their
/// frames' names.
pub(crate) fn bpf_only(stacks: &Stacks) -> Stacks {
    let glue = glue_frames(stacks);
    let mut merged: HashMap<&[FrameId], u64> = HashMap::new();
    for stack in &stacks.stacks {
        let frames = stacks.frames_of(stack);
        if let Some(seg) = segment(&frames, &glue) {
            let attach = seg.start.checked_sub(1);
            let from = attach
                .filter(|&index| frames[index].kind == Kind::Kernel)
                .unwrap_or(seg.start);
            crate::report::add(
                merged.entry(&stack.frames[from..]).or_default(),
                stack.count,
            );
        }
    }
    let names = |ids: &[FrameId]| -> Vec<&str> {
        ids.iter()
            .map(|&id| stacks.frame(id).name.as_str())
            .collect()
    };
    let mut cut: Vec<(Vec<&str>, &[FrameId], u64)> = merged
        .into_iter()
        .map(|(ids, count)| (names(ids), ids, count))
        .collect();
    cut.sort_unstable_by(|left, right| left.0.cmp(&right.0));
    stacks.with_stacks(
        cut.into_iter()
            .map(|(_, ids, count)| Stack {
                frames: ids.to_vec(),
                count,
            })
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_bpf_stacks_from_the_attach_point() {
        let f = Stacks::parse(
            "bench;do_syscall_64_[k];trace_call_bpf_[k];bpf_prog_0123456789abcdef_a 5\n\
             bench;do_syscall_64_[k];trace_call_bpf_[k];bpf_prog_0123456789abcdef_a;htab_map_hash_[k] 2\n\
             other;do_syscall_64_[k];trace_call_bpf_[k];bpf_prog_0123456789abcdef_a 1\n\
             bench;do_syscall_64_[k];vfs_open_[k] 9\n\
             bench;bpf_lsm_file_open_[k];0xffffffffc0288c18;bpf_prog_0123456789abcdef_b 4\n\
             bench;bpf_lsm_file_open_[k];0xffffffffc0288c18 1\n\
             bench;syscall;bpf_prog_0123456789abcdef_a 3\n",
        )
        .unwrap();
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
        let f = Stacks::parse("bench;do_syscall_64_[k];vfs_open_[k] 9\n").unwrap();
        assert!(bpf_only(&f).stacks.is_empty());
    }
}
