//! A small rtnetlink client: just what finding XDP and tc programs needs. Three dumps are asked
//! for (`RTM_GETLINK` for every interface and its XDP programs, `RTM_GETQDISC` for the qdiscs
//! that can hold filters, `RTM_GETTFILTER` for the filters under one qdisc) and their replies
//! are read with bounds-checked parsers that take the reply's bytes, so they are tested on
//! replies recorded from a real kernel (fixtures/netlink).
//!
//! The layouts are those of the kernel's uapi headers: `linux/netlink.h` (`nlmsghdr`,
//! `nlattr`), `linux/rtnetlink.h` (`ifinfomsg`, `tcmsg`), `linux/if_link.h` (`IFLA_XDP_*`) and
//! `linux/pkt_cls.h` (`TCA_BPF_*`). A message or attribute whose length does not fit the bytes
//! left is an error, never a read past the end.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// `nlmsghdr` is 16 bytes: length, type, flags, sequence number, port id.
const HEADER_LEN: usize = 16;
/// `ifinfomsg`: family, pad, type, index, flags, change.
const IFINFOMSG_LEN: usize = 16;
/// `tcmsg`: family, pads, ifindex, handle, parent, info.
const TCMSG_LEN: usize = 20;
/// `nlattr` is 4 bytes: length, type.
const ATTR_HEADER_LEN: usize = 4;

const NLMSG_ERROR: u16 = 2;
const NLMSG_DONE: u16 = 3;
const NLM_F_REQUEST: u16 = 0x1;
const NLM_F_DUMP: u16 = 0x300;
/// The two top bits of an attribute's type are flags (`NLA_F_NESTED`, `NLA_F_NET_BYTEORDER`).
const NLA_TYPE_MASK: u16 = 0x3fff;

pub(super) const RTM_GETLINK: u16 = 18;
pub(super) const RTM_GETQDISC: u16 = 38;
pub(super) const RTM_GETTFILTER: u16 = 46;
const RTM_NEWLINK: u16 = 16;
const RTM_NEWQDISC: u16 = 36;
const RTM_NEWTFILTER: u16 = 44;

const IFLA_IFNAME: u16 = 3;
const IFLA_EXT_MASK: u16 = 29;
const IFLA_XDP: u16 = 43;
/// Leaves the statistics out of each interface's reply, which are most of its bytes.
const RTEXT_FILTER_SKIP_STATS: u32 = 1 << 3;
const IFLA_XDP_ATTACHED: u16 = 2;
const IFLA_XDP_PROG_ID: u16 = 4;
const IFLA_XDP_DRV_PROG_ID: u16 = 5;
const IFLA_XDP_SKB_PROG_ID: u16 = 6;
const IFLA_XDP_HW_PROG_ID: u16 = 7;
const XDP_ATTACHED_DRV: u8 = 1;
const XDP_ATTACHED_SKB: u8 = 2;
const XDP_ATTACHED_HW: u8 = 3;

const TCA_KIND: u16 = 1;
const TCA_OPTIONS: u16 = 2;
const TCA_BPF_FLAGS: u16 = 8;
const TCA_BPF_ID: u16 = 11;
const TCA_BPF_FLAG_ACT_DIRECT: u32 = 1;

/// The most bytes one dump may reply with: a host with thousands of interfaces fits.
const MAX_REPLY: usize = 64 << 20;
/// One receive: larger than any single netlink message the kernel sends in a dump.
const RECEIVE_BUFFER: usize = 64 << 10;

/// Where an XDP program runs on its interface (`XDP_ATTACHED_*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum XdpMode {
    /// In the driver (`xdpdrv`, native).
    Native,
    /// On the skb, after the driver (`xdpgeneric`).
    Generic,
    /// On the NIC (`xdpoffload`).
    Offloaded,
}

/// Whether a cls_bpf filter's return value is its action (`da`, `direct-action`) or a class.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum FilterAction {
    DirectAction,
    Classifier,
}

/// One interface of a `RTM_GETLINK` reply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct LinkEntry {
    pub index: u32,
    pub name: String,
    /// Each XDP program on it with its mode (one per mode: native, generic and offloaded can
    /// be there together).
    pub xdp: Vec<(XdpMode, u32)>,
}

/// One qdisc of a `RTM_GETQDISC` reply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct QdiscEntry {
    pub ifindex: u32,
    pub handle: u32,
    pub kind: String,
}

/// One cls_bpf filter of a `RTM_GETTFILTER` reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct BpfFilter {
    pub prog_id: u32,
    pub action: FilterAction,
}

/// A reply that is not what netlink promises, or a kernel error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum NetlinkError {
    /// The bytes end inside a message or an attribute.
    Truncated,
    /// The kernel answered with this errno.
    Kernel(i32),
}

/// One message: its type and the bytes after its header.
struct Message<'a> {
    kind: u16,
    payload: &'a [u8],
}

fn u16_at(bytes: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_ne_bytes(bytes.get(at..at + 2)?.try_into().ok()?))
}

fn u32_at(bytes: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_ne_bytes(bytes.get(at..at + 4)?.try_into().ok()?))
}

fn aligned(len: usize) -> usize {
    (len + 3) & !3
}

/// The messages of `reply`, up to `NLMSG_DONE`; a kernel error in an `NLMSG_ERROR` (or in a
/// dump's `NLMSG_DONE`) is returned as such.
fn messages(reply: &[u8]) -> Result<Vec<Message<'_>>, NetlinkError> {
    let mut found = Vec::new();
    let mut at = 0;
    while at < reply.len() {
        let len = u32_at(reply, at).ok_or(NetlinkError::Truncated)? as usize;
        let kind = u16_at(reply, at + 4).ok_or(NetlinkError::Truncated)?;
        if len < HEADER_LEN || at + len > reply.len() {
            return Err(NetlinkError::Truncated);
        }
        let payload = &reply[at + HEADER_LEN..at + len];
        if kind == NLMSG_ERROR || kind == NLMSG_DONE {
            // Both carry an int: 0 for an acknowledgement or a clean end, else minus an errno.
            let code = u32_at(payload, 0).map_or(0, |raw| raw as i32);
            if code < 0 {
                return Err(NetlinkError::Kernel(-code));
            }
            if kind == NLMSG_DONE {
                break;
            }
        } else {
            found.push(Message { kind, payload });
        }
        at += aligned(len);
    }
    Ok(found)
}

/// The attributes in `bytes` (type without its flag bits, value), in order.
fn attributes(bytes: &[u8]) -> Result<Vec<(u16, &[u8])>, NetlinkError> {
    let mut found = Vec::new();
    let mut at = 0;
    while at + ATTR_HEADER_LEN <= bytes.len() {
        let len = u16_at(bytes, at).ok_or(NetlinkError::Truncated)? as usize;
        let kind = u16_at(bytes, at + 2).ok_or(NetlinkError::Truncated)? & NLA_TYPE_MASK;
        if len < ATTR_HEADER_LEN || at + len > bytes.len() {
            return Err(NetlinkError::Truncated);
        }
        found.push((kind, &bytes[at + ATTR_HEADER_LEN..at + len]));
        at += aligned(len);
    }
    Ok(found)
}

fn attribute<'a>(all: &[(u16, &'a [u8])], kind: u16) -> Option<&'a [u8]> {
    all.iter()
        .find(|(k, _)| *k == kind)
        .map(|(_, value)| *value)
}

/// A NUL-terminated string attribute.
fn text(value: &[u8]) -> String {
    let end = value.iter().position(|b| *b == 0).unwrap_or(value.len());
    String::from_utf8_lossy(&value[..end]).into_owned()
}

/// The interfaces of a `RTM_GETLINK` dump's reply, with their XDP programs.
pub(super) fn parse_links(reply: &[u8]) -> Result<Vec<LinkEntry>, NetlinkError> {
    let mut links = Vec::new();
    for message in messages(reply)?.iter().filter(|m| m.kind == RTM_NEWLINK) {
        let index = u32_at(message.payload, 4).ok_or(NetlinkError::Truncated)?;
        let body = message
            .payload
            .get(IFINFOMSG_LEN..)
            .ok_or(NetlinkError::Truncated)?;
        let attrs = attributes(body)?;
        let xdp = match attribute(&attrs, IFLA_XDP) {
            Some(nested) => xdp_programs(&attributes(nested)?),
            None => Vec::new(),
        };
        links.push(LinkEntry {
            index,
            name: attribute(&attrs, IFLA_IFNAME).map(text).unwrap_or_default(),
            xdp,
        });
    }
    Ok(links)
}

/// The programs of an `IFLA_XDP` nest: one id per mode. Kernels before 4.19 give only the mode
/// and one id (`IFLA_XDP_ATTACHED`, `IFLA_XDP_PROG_ID`).
fn xdp_programs(nest: &[(u16, &[u8])]) -> Vec<(XdpMode, u32)> {
    let id = |kind| attribute(nest, kind).and_then(|v| u32_at(v, 0));
    let per_mode: Vec<(XdpMode, u32)> = [
        (XdpMode::Native, IFLA_XDP_DRV_PROG_ID),
        (XdpMode::Generic, IFLA_XDP_SKB_PROG_ID),
        (XdpMode::Offloaded, IFLA_XDP_HW_PROG_ID),
    ]
    .into_iter()
    .filter_map(|(mode, kind)| Some((mode, id(kind)?)))
    .filter(|(_, prog_id)| *prog_id != 0)
    .collect();
    if !per_mode.is_empty() {
        return per_mode;
    }
    let mode = match attribute(nest, IFLA_XDP_ATTACHED).and_then(|v| v.first()) {
        Some(&XDP_ATTACHED_DRV) => XdpMode::Native,
        Some(&XDP_ATTACHED_SKB) => XdpMode::Generic,
        Some(&XDP_ATTACHED_HW) => XdpMode::Offloaded,
        _ => return Vec::new(),
    };
    id(IFLA_XDP_PROG_ID)
        .filter(|prog_id| *prog_id != 0)
        .map(|prog_id| vec![(mode, prog_id)])
        .unwrap_or_default()
}

/// The qdiscs of a `RTM_GETQDISC` dump's reply.
pub(super) fn parse_qdiscs(reply: &[u8]) -> Result<Vec<QdiscEntry>, NetlinkError> {
    let mut qdiscs = Vec::new();
    for message in messages(reply)?.iter().filter(|m| m.kind == RTM_NEWQDISC) {
        let ifindex = u32_at(message.payload, 4).ok_or(NetlinkError::Truncated)?;
        let handle = u32_at(message.payload, 8).ok_or(NetlinkError::Truncated)?;
        let body = message
            .payload
            .get(TCMSG_LEN..)
            .ok_or(NetlinkError::Truncated)?;
        let attrs = attributes(body)?;
        qdiscs.push(QdiscEntry {
            ifindex,
            handle,
            kind: attribute(&attrs, TCA_KIND).map(text).unwrap_or_default(),
        });
    }
    Ok(qdiscs)
}

/// The cls_bpf filters of a `RTM_GETTFILTER` dump's reply (other kinds of filter, and the
/// entries that only announce a chain or a priority, are left out).
pub(super) fn parse_filters(reply: &[u8]) -> Result<Vec<BpfFilter>, NetlinkError> {
    let mut filters = Vec::new();
    for message in messages(reply)?.iter().filter(|m| m.kind == RTM_NEWTFILTER) {
        let body = message
            .payload
            .get(TCMSG_LEN..)
            .ok_or(NetlinkError::Truncated)?;
        let attrs = attributes(body)?;
        if attribute(&attrs, TCA_KIND).map(text).as_deref() != Some("bpf") {
            continue;
        }
        let Some(options) = attribute(&attrs, TCA_OPTIONS) else {
            continue;
        };
        let options = attributes(options)?;
        let Some(prog_id) = attribute(&options, TCA_BPF_ID).and_then(|v| u32_at(v, 0)) else {
            continue;
        };
        let flags = attribute(&options, TCA_BPF_FLAGS)
            .and_then(|v| u32_at(v, 0))
            .unwrap_or(0);
        let action = match flags & TCA_BPF_FLAG_ACT_DIRECT {
            0 => FilterAction::Classifier,
            _ => FilterAction::DirectAction,
        };
        filters.push(BpfFilter { prog_id, action });
    }
    Ok(filters)
}

/// The body of a `RTM_GETLINK` dump request: an empty `ifinfomsg`, and a mask that leaves the
/// statistics out.
pub(super) fn link_request() -> Vec<u8> {
    let mut body = vec![0u8; IFINFOMSG_LEN];
    body.extend_from_slice(&8u16.to_ne_bytes());
    body.extend_from_slice(&IFLA_EXT_MASK.to_ne_bytes());
    body.extend_from_slice(&RTEXT_FILTER_SKIP_STATS.to_ne_bytes());
    body
}

/// The body of a `RTM_GETQDISC` or `RTM_GETTFILTER` dump request: a `tcmsg` for interface
/// `ifindex` (0: all) and `parent` (0 for qdiscs).
pub(super) fn tc_request(ifindex: u32, parent: u32) -> Vec<u8> {
    let mut body = vec![0u8; TCMSG_LEN];
    body[4..8].copy_from_slice(&ifindex.to_ne_bytes());
    body[12..16].copy_from_slice(&parent.to_ne_bytes());
    body
}

/// A `NETLINK_ROUTE` socket, in the network namespace of the thread that opened it.
pub(super) struct RouteSocket {
    fd: OwnedFd,
}

impl RouteSocket {
    /// A socket in this thread's network namespace.
    pub(super) fn open() -> std::io::Result<RouteSocket> {
        // SAFETY: a plain socket call; a non-negative return is a new fd nothing else owns.
        let fd = unsafe {
            libc::socket(
                libc::AF_NETLINK,
                libc::SOCK_RAW | libc::SOCK_CLOEXEC,
                libc::NETLINK_ROUTE,
            )
        };
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: `fd` was just made and is owned here alone.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        Ok(RouteSocket { fd })
    }

    /// Send a dump request of `kind` with `body` and return every byte of the reply, up to
    /// and with its `NLMSG_DONE`.
    pub(super) fn dump(&self, kind: u16, body: &[u8]) -> std::io::Result<Vec<u8>> {
        self.send(kind, body)?;
        let mut reply = Vec::new();
        let mut buffer = vec![0u8; RECEIVE_BUFFER];
        loop {
            // SAFETY: receiving into a buffer we own, of the length given.
            let got = unsafe {
                libc::recv(
                    self.fd.as_raw_fd(),
                    buffer.as_mut_ptr().cast(),
                    buffer.len(),
                    0,
                )
            };
            if got < 0 {
                return Err(std::io::Error::last_os_error());
            }
            let got = got as usize;
            reply.extend_from_slice(&buffer[..got]);
            if got == 0 || ends_dump(&buffer[..got]) || reply.len() > MAX_REPLY {
                return Ok(reply);
            }
        }
    }

    fn send(&self, kind: u16, body: &[u8]) -> std::io::Result<()> {
        let len = HEADER_LEN + body.len();
        let mut request = Vec::with_capacity(len);
        request.extend_from_slice(&(len as u32).to_ne_bytes());
        request.extend_from_slice(&kind.to_ne_bytes());
        request.extend_from_slice(&(NLM_F_REQUEST | NLM_F_DUMP).to_ne_bytes());
        request.extend_from_slice(&1u32.to_ne_bytes());
        request.extend_from_slice(&0u32.to_ne_bytes());
        request.extend_from_slice(body);
        // SAFETY: sending a buffer we own, of the length given, to the kernel (the default
        // destination of an unconnected netlink socket).
        let sent = unsafe {
            libc::send(
                self.fd.as_raw_fd(),
                request.as_ptr().cast(),
                request.len(),
                0,
            )
        };
        match sent {
            n if n < 0 => Err(std::io::Error::last_os_error()),
            _ => Ok(()),
        }
    }
}

/// Whether one received datagram holds the end of a dump (`NLMSG_DONE`) or an error.
fn ends_dump(datagram: &[u8]) -> bool {
    let mut at = 0;
    while let (Some(len), Some(kind)) = (u32_at(datagram, at), u16_at(datagram, at + 4)) {
        if kind == NLMSG_DONE || kind == NLMSG_ERROR {
            return true;
        }
        if (len as usize) < HEADER_LEN {
            return true;
        }
        at += aligned(len as usize);
    }
    false
}

#[cfg(test)]
#[path = "netlink_tests.rs"]
mod tests;
