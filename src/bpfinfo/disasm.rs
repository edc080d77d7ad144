//! Disassembly of JIT-ed BPF code for `annotate --asm`, with `iced-x86` (decoder and Intel
//! formatter only). perf's own BPF annotate needs libbfd, which Debian's perf 6.1 lacks;
//! bpftool's `prog dump jited` needs libbfd or LLVM. The bytes and their addresses come from
//! `jited_prog_insns` ([`super::ProgInfo::func_code`]).

use iced_x86::{Decoder, DecoderOptions, Formatter, Instruction, IntelFormatter, Mnemonic, OpKind};

use super::BpfInfoError;

/// One decoded machine instruction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Insn {
    /// Its address.
    pub addr: u64,
    /// Its length in bytes.
    pub len: usize,
    /// Intel syntax, e.g. `mov rdi,[rbp-8]`; `(bad)` for bytes that do not decode.
    pub text: String,
    /// The address a direct call goes to (`call rel32`: a helper, a kfunc, a BPF sub-program);
    /// `None` for every other instruction, indirect calls included.
    pub call_target: Option<u64>,
}

/// The target of a direct near call.
fn direct_call_target(insn: &Instruction) -> Option<u64> {
    let direct = insn.mnemonic() == Mnemonic::Call
        && matches!(
            insn.op0_kind(),
            OpKind::NearBranch64 | OpKind::NearBranch32 | OpKind::NearBranch16
        );
    direct.then(|| insn.near_branch_target())
}

/// Decodes `code`, which starts at address `base`, for `arch` as perf's header (`HEADER_ARCH`)
/// or `uname -m` names it. Only `x86_64` is supported; other architectures are an error.
pub fn disassemble(code: &[u8], base: u64, arch: &str) -> Result<Vec<Insn>, BpfInfoError> {
    if !matches!(arch, "x86_64" | "amd64" | "x86-64") {
        return Err(BpfInfoError::UnsupportedArch {
            arch: arch.to_string(),
        });
    }
    let mut decoder = Decoder::with_ip(64, code, base, DecoderOptions::NONE);
    let mut formatter = IntelFormatter::new();
    let mut insn = Instruction::default();
    let mut out = Vec::new();
    while decoder.can_decode() {
        decoder.decode_out(&mut insn);
        let mut text = String::new();
        if insn.is_invalid() {
            text.push_str("(bad)");
        } else {
            formatter.format(&insn, &mut text);
        }
        out.push(Insn {
            addr: insn.ip(),
            len: insn.len(),
            text,
            call_target: direct_call_target(&insn),
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_a_bpf_prologue() {
        // endbr64; nop dword [rax+rax]; xchg ax,ax; push rbp; mov rbp,rsp (the x86 JIT prologue)
        let code = [
            0xf3, 0x0f, 0x1e, 0xfa, 0x0f, 0x1f, 0x44, 0x00, 0x00, 0x66, 0x90, 0x55, 0x48, 0x89,
            0xe5,
        ];
        let insns = disassemble(&code, 0xffff_ffff_c000_0000, "x86_64").unwrap();
        let got: Vec<_> = insns
            .iter()
            .map(|i| (i.addr & 0xff, i.len, i.text.as_str()))
            .collect();
        assert_eq!(
            got,
            [
                (0, 4, "endbr64"),
                (4, 5, "nop [rax+rax]"),
                (9, 2, "xchg ax,ax"),
                (11, 1, "push rbp"),
                (12, 3, "mov rbp,rsp"),
            ]
        );
    }

    #[test]
    fn direct_calls_carry_their_target() {
        // call rel32 (+0x10 from the next instruction); call rax; jmp rel32.
        let code = [
            0xe8, 0x10, 0x00, 0x00, 0x00, 0xff, 0xd0, 0xe9, 0x00, 0x00, 0x00, 0x00,
        ];
        let insns = disassemble(&code, 0x1000, "x86_64").unwrap();
        let targets: Vec<_> = insns.iter().map(|i| i.call_target).collect();
        assert_eq!(targets, [Some(0x1015), None, None]);
    }

    #[test]
    fn truncated_bytes_are_bad_not_a_panic() {
        let insns = disassemble(&[0x48, 0x89], 0x1000, "x86_64").unwrap();
        assert_eq!(insns.len(), 1);
        assert_eq!(insns[0].text, "(bad)");
    }

    #[test]
    fn other_arches_are_refused() {
        let err = disassemble(&[0; 4], 0, "aarch64").unwrap_err();
        assert_eq!(
            err.to_string(),
            "disassembling JIT-ed BPF code of aarch64 is not supported (x86_64 only)"
        );
    }
}
