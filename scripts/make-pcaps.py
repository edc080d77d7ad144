#!/usr/bin/env python3
"""Writes the packet captures under fixtures/pcap/ that `overhead --test-run --pcap` is tested
and measured with (no download: every byte is made here, checksums computed independently of
the Rust code that reads them).

classifier.pcap / classifier.pcapng: the same 40 Ethernet frames, each class of the XDP and tc
classifiers in fixtures/hooks/ several times with different source ports and payloads:
UDP to port 53 (IPv4 and IPv6), TCP SYN to ports 80 and 443, UDP to port 9999, and one ARP
request (not IP). The broken ones, for the bad-input tests: truncated.pcap (the last record cut),
truncated.pcapng (the last block cut), raw-ip.pcap (link type 101), empty.pcap (a header and no
packet), not-a-capture.pcap (text).

Run from the repository root: python3 scripts/make-pcaps.py
"""
import pathlib
import struct

OUT = pathlib.Path("fixtures/pcap")
SRC_MAC = bytes.fromhex("020000000001")
DST_MAC = bytes.fromhex("020000000002")


def csum(data):
    if len(data) % 2:
        data += b"\0"
    total = sum(struct.unpack(f"!{len(data) // 2}H", data))
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return ~total & 0xFFFF


def ip4(text):
    return bytes(int(x) for x in text.split("."))


def ip6(last):
    return bytes.fromhex("fd00" + "00" * 13) + bytes([last])


def transport(proto, sport, dport, payload, seq=1):
    if proto == 17:
        return struct.pack("!HHHH", sport, dport, 8 + len(payload), 0) + payload
    # A TCP SYN with the MSS option.
    return struct.pack("!HHIIBBHHH", sport, dport, seq, 0, 6 << 4, 0x02, 64240, 0, 0) + bytes(
        [2, 4, 5, 0xB4]
    ) + payload


def fill_checksum(proto, segment, pseudo):
    at = 6 if proto == 17 else 16
    value = csum(pseudo + segment)
    if value == 0 and proto == 17:
        value = 0xFFFF
    return segment[:at] + struct.pack("!H", value) + segment[at + 2 :]


def frame_v4(proto, sport, dport, payload, seq=1):
    src, dst = ip4("10.0.0.1"), ip4("10.0.0.2")
    seg = transport(proto, sport, dport, payload, seq)
    pseudo = src + dst + struct.pack("!BBH", 0, proto, len(seg))
    seg = fill_checksum(proto, seg, pseudo)
    hdr = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(seg), 0x1C46, 0x4000, 64, proto, 0, src, dst)
    hdr = hdr[:10] + struct.pack("!H", csum(hdr)) + hdr[12:]
    return DST_MAC + SRC_MAC + b"\x08\x00" + hdr + seg


def frame_v6(proto, sport, dport, payload, seq=1):
    src, dst = ip6(1), ip6(2)
    seg = transport(proto, sport, dport, payload, seq)
    pseudo = src + dst + struct.pack("!IxxxB", len(seg), proto)
    seg = fill_checksum(proto, seg, pseudo)
    hdr = struct.pack("!IHBB16s16s", 6 << 28, len(seg), proto, 64, src, dst)
    return DST_MAC + SRC_MAC + b"\x86\xdd" + hdr + seg


def arp_request():
    body = struct.pack("!HHBBH6s4s6s4s", 1, 0x0800, 6, 4, 1, SRC_MAC, ip4("10.0.0.1"), b"\0" * 6, ip4("10.0.0.2"))
    return b"\xff" * 6 + SRC_MAC + b"\x08\x06" + body + b"\0" * 18


DNS = bytes.fromhex("123401000001000000000000") + b"\x07example\x03com\x00\x00\x01\x00\x01"


def frames():
    out = []
    for i in range(8):
        sport = 41000 + i
        out.append(frame_v4(17, sport, 53, DNS + b"\0" * (i % 3)))
        out.append(frame_v4(6, sport, 80, b"", seq=1000 + i))
        out.append(frame_v4(6, sport, 443, b"", seq=2000 + i))
        out.append(frame_v4(17, sport, 9999, bytes(range(16 + 4 * i))))
        if i % 2 == 0:
            out.append(frame_v6(17, sport, 53, DNS))
    while len(out) < 39:
        out.append(frame_v6(6, 42000 + len(out), 443, b"", seq=len(out)))
    out.append(arp_request())
    return out


def pcap(packets, linktype=1):
    data = struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, linktype)
    for i, p in enumerate(packets):
        data += struct.pack("<IIII", 1700000000 + i, 1000 * i, len(p), len(p)) + p
    return data


def pcapng(packets):
    def block(kind, body):
        body += b"\0" * (-len(body) % 4)
        length = len(body) + 12
        return struct.pack("<II", kind, length) + body + struct.pack("<I", length)

    shb = block(0x0A0D0D0A, struct.pack("<IHHq", 0x1A2B3C4D, 1, 0, -1))
    idb = block(1, struct.pack("<HHI", 1, 0, 65535))
    # A name-resolution block (type 4) the reader skips.
    nrb = block(4, struct.pack("<HH", 0, 0))
    data = shb + idb + nrb
    for i, p in enumerate(packets):
        ts = 1700000000_000000 + i
        data += block(6, struct.pack("<IIIII", 0, ts >> 32, ts & 0xFFFFFFFF, len(p), len(p)) + p)
    return data


def main():
    OUT.mkdir(parents=True, exist_ok=True)
    packets = frames()
    assert all(len(p) >= 54 for p in packets), "every frame is at least 54 bytes"
    (OUT / "classifier.pcap").write_bytes(pcap(packets))
    (OUT / "classifier.pcapng").write_bytes(pcapng(packets))
    whole = pcap(packets[:3])
    (OUT / "truncated.pcap").write_bytes(whole[:-10])
    whole_ng = pcapng(packets[:3])
    (OUT / "truncated.pcapng").write_bytes(whole_ng[:-10])
    (OUT / "raw-ip.pcap").write_bytes(pcap([p[14:] for p in packets[:3]], linktype=101))
    (OUT / "empty.pcap").write_bytes(pcap([]))
    (OUT / "not-a-capture.pcap").write_bytes(b"this is not a packet capture\n")
    print(f"wrote {len(packets)} frames to {OUT}/classifier.pcap and .pcapng, and the broken ones")


if __name__ == "__main__":
    main()
