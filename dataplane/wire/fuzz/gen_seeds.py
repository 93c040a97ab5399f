#!/usr/bin/env python3
"""Write the seed corpora in seeds/<target>/ for the peregrine-wire fuzz targets.

Seeds are real packets: the Scapy reference frames of tests/oracle/scapy_build.py, a few
extra Scapy frames for paths the oracle does not cover (QinQ, IPv4 options, TCP options,
GTP-U sequence/N-PDU numbers, chained GTP-U extensions, DL PDU Session Container optional
fields), and the hand-checked vectors from the wire modules' unit tests. Each target gets
the slice of every frame that its parser expects (e.g. `udp` gets UDP datagrams, `pdu_session`
gets container contents); `packet` gets whole frames and `all` gets everything.

Run from anywhere:  python3 dataplane/wire/fuzz/gen_seeds.py
It removes and rewrites seeds/; the output is deterministic.
"""

import hashlib
import os
import shutil
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "oracle"))

import scapy_build  # noqa: E402
from scapy_build import (  # noqa: E402
    ARP,
    GTP_U_Header,
    GTPPDUSessionContainer,
    ICMP,
    IP,
    IPv6,
    IPv6ExtHdrHopByHop,
    Dot1Q,
    Ether,
    Raw,
    TCP,
    UDP,
    ICMPv6EchoRequest,
    ICMPv6PacketTooBig,
)
from scapy.contrib.gtp import GTP_UDPPort_ExtensionHeader  # noqa: E402
from scapy.layers.inet import IPOption_Router_Alert  # noqa: E402

TARGETS = [
    "ethernet", "vlan", "arp", "ipv4", "ipv6", "ipv6ext", "ipv6option", "icmpv4", "icmpv6",
    "udp", "tcp", "gtpu", "pdu_session", "gtpu_msg", "packet", "all",
]

# Vectors from the unit tests (src/<module>.rs), as hex, keyed by the target they seed.
UNIT_VECTORS = {
    "ethernet": ["ffffffffffff" "525400123456" "0806" "00010800"],
    "vlan": ["020000000001" "020000000002" "88a8a064" "8100100a" "0800" "45000054",
             "a064" "8100" "100a" "0800" "45000054"],
    "arp": ["0001080006040001" "525400123456" "0a00020f" "000000000000" "0a000202" + "00" * 18],
    "ipv4": ["45000073" "00004000" "4011b861" "c0a80001" "c0a800c7" + bytes(range(0x73 - 20)).hex()],
    "ipv6": ["6b812345000c3a40" "fe80" + "00" * 12 + "0001" "ff02" + "00" * 12 + "0001"
             "80000000" "12340001" "deadbeef"],
    "ipv6ext": ["00" "2b0001001e02aabb" "2c02040000000000" "20010db8" + "00" * 10 + "0002"
                "1100000112345678" "04d20868000c0000" "deadbeef"],
    "ipv6option": ["00" "0101" "00" "1e02aabb" "05020000" "310400000000" "0100"],
    "udp": ["c8220035000ca0f5" "61626364", "08680868000c918d" "00010203"],
    "tcp": ["9c400050" "12345678" "00000000" "a002faf0" "00000000"
            "020405b4" "0402" "080a0001020300000000" "01" "030307",
            "1f90c350" "00000001" "00000002" "501801f5" "2ba80000" "68656c6c6f"],
    "gtpu": ["34ff0054" "00000001" "00000085" "01000900" "4500004c" + "00" * 72,
             "30ff0004" "12345678" "deadbeef",
             "33ff0005" "00000007" "abcd4200" "99",
             "34ff000d" "00000001" "00000040" "01086885" "01100500" "aa"],
    "pdu_session": ["0009", "1001", "00c9a0000000", "0c05" "0102030405060708" "000102" "00"],
    "gtpu_msg": ["32010004" "00000000" "00010000",
                 "32020006" "00000000" "00010000" "0e00",
                 "321a0010" "00000000" "00000000" "100000002a" "850004c0a80001",
                 "30fe0000" "0000002a"],
}


def extra_frames():
    """Scapy frames that exercise paths the oracle packets do not."""
    eth = Ether(src=scapy_build.MAC_A, dst=scapy_build.MAC_B)
    inner = IP(src="10.45.0.9", dst="1.1.1.1") / ICMP(type=8, id=1, seq=1) / Raw(b"ping")
    return [
        eth / Dot1Q(vlan=100, prio=5, type=0x8100) / Dot1Q(vlan=10, id=1)
        / IP(src="10.0.0.1", dst="10.0.0.2") / UDP(sport=1, dport=2) / Raw(b"qinq"),
        eth / IP(src="10.0.0.1", dst="224.0.0.22", options=[IPOption_Router_Alert()], proto=2)
        / Raw(b"\x22\x00\xea\x03\x00\x00\x00\x00"),
        eth / IP(src="192.168.0.2", dst="192.168.0.1")
        / TCP(sport=40000, dport=80, flags="S", seq=1,
              options=[("MSS", 1460), ("SAckOK", b""), ("Timestamp", (1, 0)), ("NOP", None), ("WScale", 7)]),
        scapy_build.udp_gtp(False, GTP_U_Header(teid=7, S=1, PN=1, seq=0xABCD, npdu=0x42) / inner),
        scapy_build.udp_gtp(
            False,
            GTP_U_Header(teid=8, E=1, next_ex=0x40)
            / GTP_UDPPort_ExtensionHeader(udp_port=2152, next_ex=0x85)
            / GTPPDUSessionContainer(type=1, QFI=5)
            / inner,
        ),
        scapy_build.udp_gtp(
            True,
            GTP_U_Header(teid=9, E=1, next_ex=0x85)
            / GTPPDUSessionContainer(type=0, QMP=1, SNP=1, QFI=3, dlSendTime=0x0102030405060708, dlQFISeqNum=0x10203)
            / inner,
        ),
        eth / IPv6(src="2001:db8::1", dst="ff02::1") / IPv6ExtHdrHopByHop(options=[])
        / ICMPv6EchoRequest(id=1, seq=2),
        eth / IPv6(src="2001:db8::1", dst="2001:db8::2") / IPv6(src="2001:db8::3", dst="2001:db8::4")
        / UDP(sport=3, dport=4),
        eth / ARP(op=3),
    ]


def slices(frame):
    """{target: [bytes]} for one frame, by dissecting it with Scapy."""
    p = Ether(frame)
    out = {t: [] for t in TARGETS}
    out["ethernet"].append(frame)
    out["packet"].append(frame)
    out["vlan"].append(frame)
    layer = p
    while layer:
        b = bytes(layer)
        if isinstance(layer, Dot1Q):
            out["vlan"].append(b)  # TCI, inner EtherType, payload: the `Tag` view
        elif isinstance(layer, ARP):
            out["arp"].append(b)
        elif isinstance(layer, IP):
            out["ipv4"].append(b)
        elif isinstance(layer, IPv6):
            out["ipv6"].append(b)
            out["ipv6ext"].append(bytes([layer.nh]) + bytes(layer.payload))
        elif isinstance(layer, IPv6ExtHdrHopByHop):
            out["ipv6option"].append(b[2:(layer.len + 1) * 8])
        elif isinstance(layer, ICMP):
            out["icmpv4"].append(b)
        elif isinstance(layer, (ICMPv6EchoRequest, ICMPv6PacketTooBig)):
            out["icmpv6"].append(b)
        elif isinstance(layer, UDP):
            out["udp"].append(b)
        elif isinstance(layer, TCP):
            out["tcp"].append(b)
        elif isinstance(layer, GTP_U_Header):
            out["gtpu"].append(b)
            out["gtpu_msg"].append(b)
        elif isinstance(layer, GTPPDUSessionContainer):
            out["pdu_session"].append(b[1:b[0] * 4 - 1])
        if isinstance(layer, ICMPv6PacketTooBig):
            break  # the quoted packet is data, not layers we parse
        layer = layer.payload
    return out


def main():
    seeds = {t: {} for t in TARGETS}

    def add(target, name, data):
        seeds[target][name] = data
        seeds["all"][f"{target}-{name}"] = data

    frames = [(name, raw) for name, raw, _ in scapy_build.packets()]
    frames += [(f"extra{i}", bytes(f)) for i, f in enumerate(extra_frames())]
    for name, raw in frames:
        for target, blobs in slices(raw).items():
            for i, b in enumerate(blobs):
                if target != "all" and b:
                    add(target, f"scapy-{name}-{i}", b)
    for target, hexes in UNIT_VECTORS.items():
        for i, h in enumerate(hexes):
            add(target, f"unit-{i}", bytes.fromhex(h.replace(" ", "")))

    root = os.path.join(HERE, "seeds")
    shutil.rmtree(root, ignore_errors=True)
    total = 0
    for target, files in seeds.items():
        d = os.path.join(root, target)
        os.makedirs(d)
        seen = set()
        for name, data in sorted(files.items()):
            digest = hashlib.sha1(data).hexdigest()
            if digest in seen:
                continue
            seen.add(digest)
            with open(os.path.join(d, name), "wb") as f:
                f.write(data)
            total += 1
    print(f"wrote {total} seed files under {root}")


if __name__ == "__main__":
    main()
