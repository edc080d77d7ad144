//! The parsers on replies recorded from a real kernel (fixtures/netlink/README.md says how
//! they were made and what they hold), and on replies cut or lying about their lengths.

use super::*;

fn fixture(name: &str) -> Vec<u8> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures/netlink")
        .join(name);
    std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[test]
fn interfaces_and_their_xdp_programs_are_read_from_a_recorded_dump() {
    let links = parse_links(&fixture("getlink.bin")).unwrap();
    type Seen<'a> = (u32, &'a str, &'a [(XdpMode, u32)]);
    let seen: Vec<Seen> = links
        .iter()
        .map(|l| (l.index, l.name.as_str(), l.xdp.as_slice()))
        .collect();
    assert_eq!(
        seen,
        [
            (1, "lo", &[][..]),
            (2, "vb0", &[(XdpMode::Generic, 16997)][..]),
            (3, "va0", &[(XdpMode::Native, 16992)][..]),
        ]
    );
}

#[test]
fn qdiscs_are_read_with_their_kind_and_handle() {
    let qdiscs = parse_qdiscs(&fixture("getqdisc.bin")).unwrap();
    let seen: Vec<(u32, u32, &str)> = qdiscs
        .iter()
        .map(|q| (q.ifindex, q.handle, q.kind.as_str()))
        .collect();
    assert_eq!(
        seen,
        [
            (2, 0, "noqueue"),
            (2, 0xffff_0000, "ingress"),
            (3, 0, "noqueue"),
            (3, 0xffff_0000, "clsact"),
        ]
    );
}

#[test]
fn bpf_filters_are_read_with_their_program_and_direct_action_flag() {
    let cases = [
        ("tfilter-ingress.bin", 17001, FilterAction::DirectAction),
        ("tfilter-egress.bin", 17005, FilterAction::Classifier),
        (
            "tfilter-ingress-qdisc.bin",
            17057,
            FilterAction::DirectAction,
        ),
    ];
    for (file, prog_id, action) in cases {
        // The first entry of each reply only announces the priority's chain: it is left out.
        let filters = parse_filters(&fixture(file)).unwrap();
        assert_eq!(filters, [BpfFilter { prog_id, action }], "{file}");
    }
}

/// The offsets where the messages of `reply` start, and its end.
fn boundaries(reply: &[u8]) -> Vec<usize> {
    let mut at = 0;
    let mut all = vec![0];
    while let Some(len) = u32_at(reply, at) {
        at += aligned(len as usize);
        all.push(at);
    }
    all
}

#[test]
fn a_reply_cut_inside_a_message_is_an_error_at_every_length() {
    for file in ["getlink.bin", "getqdisc.bin", "tfilter-ingress.bin"] {
        let whole = fixture(file);
        let whole_messages = boundaries(&whole);
        for cut in 1..whole.len() {
            let part = &whole[..cut];
            // A cut between two messages is a shorter dump; anywhere else it is an error.
            // No cut may panic or read past the end.
            let between = whole_messages.contains(&cut);
            assert_eq!(parse_links(part).is_ok(), between, "{file} cut at {cut}");
            assert_eq!(parse_qdiscs(part).is_ok(), between, "{file} cut at {cut}");
            assert_eq!(parse_filters(part).is_ok(), between, "{file} cut at {cut}");
        }
        let mut lying = whole.clone();
        lying[0..4].copy_from_slice(&(whole.len() as u32 + 4).to_ne_bytes());
        assert_eq!(
            parse_qdiscs(&lying).unwrap_err(),
            NetlinkError::Truncated,
            "{file}"
        );
    }
}

#[test]
fn an_attribute_longer_than_its_message_is_an_error() {
    let mut bytes = Vec::new();
    bytes.extend_from_slice(&200u16.to_ne_bytes());
    bytes.extend_from_slice(&IFLA_IFNAME.to_ne_bytes());
    bytes.extend_from_slice(b"eth0");
    assert_eq!(attributes(&bytes).unwrap_err(), NetlinkError::Truncated);
    assert!(attributes(&[]).unwrap().is_empty());
}

#[test]
fn a_kernel_error_is_returned_as_its_errno() {
    let mut reply = Vec::new();
    reply.extend_from_slice(&36u32.to_ne_bytes());
    reply.extend_from_slice(&NLMSG_ERROR.to_ne_bytes());
    reply.extend_from_slice(&[0u8; 10]);
    reply.extend_from_slice(&(-libc::EPERM).to_ne_bytes());
    reply.extend_from_slice(&[0u8; 16]);
    assert_eq!(
        parse_links(&reply).unwrap_err(),
        NetlinkError::Kernel(libc::EPERM)
    );
    assert!(ends_dump(&reply));
}

#[test]
fn an_old_kernel_s_single_xdp_id_is_read_with_its_mode() {
    let attached = [XDP_ATTACHED_SKB];
    let id = 42u32.to_ne_bytes();
    let nest = [
        (IFLA_XDP_ATTACHED, &attached[..]),
        (IFLA_XDP_PROG_ID, &id[..]),
    ];
    assert_eq!(xdp_programs(&nest), [(XdpMode::Generic, 42)]);
    let none = [0u8];
    assert!(xdp_programs(&[(IFLA_XDP_ATTACHED, &none[..])]).is_empty());
}

#[test]
fn requests_have_the_layout_the_kernel_reads() {
    let link = link_request();
    assert_eq!(link.len(), IFINFOMSG_LEN + 8);
    assert_eq!(u16_at(&link, IFINFOMSG_LEN + 2), Some(IFLA_EXT_MASK));
    let tc = tc_request(3, 0xffff_fff2);
    assert_eq!(tc.len(), TCMSG_LEN);
    assert_eq!(u32_at(&tc, 4), Some(3));
    assert_eq!(u32_at(&tc, 12), Some(0xffff_fff2));
}
