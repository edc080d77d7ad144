//! Hints for packet programs' idioms, given when the programs were entered from a packet hook
//! ([`super::hooks`]) and the time inside BPF shows the idiom: copying packet bytes with
//! `bpf_skb_load_bytes` where direct packet access reads them in place, and moving an XDP
//! packet's bounds (`bpf_xdp_adjust_*`) on every packet. The map hints, which speak of look-ups
//! per event, say per packet there ([`word_for_packets`]).

use super::kinds::{Category, Hint};
use super::{KernelFunction, PacketHookShare};

/// A kernel function takes at least this share (%) of the time inside BPF to earn a hint.
const IDIOM_SHARE: f64 = 5.0;

/// The functions that copy packet bytes out of an skb for a program.
const SKB_COPIES: [&str; 3] = [
    "bpf_skb_load_bytes",
    "bpf_skb_load_bytes_relative",
    "skb_copy_bits",
];

/// The helpers that move an XDP packet's bounds.
const XDP_ADJUSTS: [&str; 3] = [
    "bpf_xdp_adjust_head",
    "bpf_xdp_adjust_tail",
    "bpf_xdp_adjust_meta",
];

/// The heaviest of `names` among `kfuncs`, with its share of the time inside BPF (%), when
/// at least [`IDIOM_SHARE`].
fn heaviest<'a>(
    kfuncs: &'a [KernelFunction],
    names: &[&str],
    bpf_percent: f64,
) -> Option<(&'a str, f64)> {
    kfuncs
        .iter()
        .filter(|k| names.contains(&k.name.as_str()))
        .map(|k| (k.name.as_str(), 100.0 * k.percent / bpf_percent))
        .filter(|(_, share)| *share >= IDIOM_SHARE)
        .max_by(|a, b| a.1.total_cmp(&b.1))
}

/// The packet idioms' hints for a profile whose programs hang under `hooks`, `bpf_percent` of
/// all samples inside BPF.
pub fn hints(hooks: &[PacketHookShare], kfuncs: &[KernelFunction], bpf_percent: f64) -> Vec<Hint> {
    if hooks.is_empty() || bpf_percent <= 0.0 {
        return Vec::new();
    }
    let mut v = Vec::new();
    if let Some((name, share)) = heaviest(kfuncs, &SKB_COPIES, bpf_percent) {
        v.push(Hint {
            category: Category::OtherKernel,
            share_of_bpf: share,
            text: format!("{name} copies packet bytes for {share:.0}% of the time inside BPF: read the headers in place by direct packet access (skb->data to skb->data_end, one bounds check covering every header read, not one per header) instead of copying them"),
        });
    }
    if let Some((name, share)) = heaviest(kfuncs, &XDP_ADJUSTS, bpf_percent) {
        v.push(Hint {
            category: Category::OtherKernel,
            share_of_bpf: share,
            text: format!("{name} takes {share:.0}% of the time inside BPF: it moves the packet's bounds on every call; adjust once per packet, only for the packets that need it, and re-read data and data_end after it instead of re-parsing the packet"),
        });
    }
    v
}

/// The general hints of a profile whose programs hang under `hooks`, worded for packets: on
/// the packet path the event a map is looked up for is a packet.
pub fn word_for_packets(hooks: &[PacketHookShare], hints: &mut [Hint]) {
    if hooks.is_empty() {
        return;
    }
    for hint in hints
        .iter_mut()
        .filter(|h| matches!(h.category, Category::MapAccess | Category::MapHash))
    {
        hint.text = hint
            .text
            .replace(
                "look-ups per event",
                "look-ups per packet (one per flow, not one per rule or header)",
            )
            .replace(
                "look up less often",
                "look up less often (once per packet at most)",
            );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::hooks::PacketHook;

    fn kfunc(name: &str, percent: f64) -> KernelFunction {
        KernelFunction {
            name: name.into(),
            percent,
            self_percent: percent,
            category: Some(Category::OtherKernel),
            called_from: Vec::new(),
        }
    }

    fn tc_hook() -> Vec<PacketHookShare> {
        vec![PacketHookShare {
            hook: PacketHook::TcIngress,
            what: PacketHook::TcIngress.describe().into(),
            bpf_percent: 10.0,
            attach_points: vec!["cls_bpf_classify".into()],
        }]
    }

    #[test]
    fn skb_copies_and_xdp_adjusts_earn_a_hint_from_five_percent() {
        let kfuncs = [
            kfunc("skb_copy_bits", 1.0),
            kfunc("bpf_skb_load_bytes", 2.0),
        ];
        let v = hints(&tc_hook(), &kfuncs, 10.0);
        assert_eq!(v.len(), 1, "{v:?}");
        assert!(
            v[0].text
                .starts_with("bpf_skb_load_bytes copies packet bytes for 20%"),
            "{v:?}"
        );
        assert!(v[0].text.contains("direct packet access"), "{v:?}");
        let adjust = [kfunc("bpf_xdp_adjust_head", 0.6)];
        let v = hints(&tc_hook(), &adjust, 10.0);
        assert!(
            v[0].text.starts_with("bpf_xdp_adjust_head takes 6%"),
            "{v:?}"
        );
        // Under the threshold: nothing.
        assert!(hints(&tc_hook(), &[kfunc("skb_copy_bits", 0.4)], 10.0).is_empty());
    }

    #[test]
    fn map_hints_speak_of_packets_on_the_packet_path_only() {
        let general = || {
            vec![
                super::super::kinds::hint(
                    Category::MapAccess,
                    40.0,
                    None,
                    crate::report::kinds::OwnCodeEvidence::None,
                )
                .unwrap(),
                super::super::kinds::hint(
                    Category::MapHash,
                    20.0,
                    None,
                    crate::report::kinds::OwnCodeEvidence::None,
                )
                .unwrap(),
            ]
        };
        let mut on_path = general();
        word_for_packets(&tc_hook(), &mut on_path);
        assert!(
            on_path[0]
                .text
                .contains("fewer look-ups per packet (one per flow"),
            "{on_path:?}"
        );
        assert!(
            on_path[1]
                .text
                .contains("look up less often (once per packet at most)"),
            "{on_path:?}"
        );
        let mut off_path = general();
        word_for_packets(&[], &mut off_path);
        assert_eq!(off_path, general());
    }

    #[test]
    fn no_hint_off_the_packet_path() {
        let kfuncs = [kfunc("bpf_skb_load_bytes", 5.0)];
        assert!(hints(&[], &kfuncs, 10.0).is_empty());
    }
}
