#!/usr/bin/env python3
"""Build reference packets with Scapy for the `oracle_scapy` test (and fuzz seeds).

Prints one JSON line per packet: {"name": ..., "hex": <whole Ethernet frame>, "expect":
{field: value}}. Every expected value is read back from Scapy's own dissection of the built
bytes (so checksums and lengths are the ones Scapy computed), never from our code. The Rust
side parses the hex with peregrine-wire and must find the same values.

Field names are `<layer>.<field>`; fields of the packet inside a GTP-U G-PDU are prefixed
with `inner.`. Addresses are strings (RFC 5952 for IPv6, lowercase colon MACs), flags are
booleans, everything else is an integer. `<layer>.checksum_ok: true` means our code must
verify the checksum Scapy computed.

Imported by `dataplane/wire/fuzz/gen_seeds.py` for `packets()`.
"""

import ipaddress
import json
import logging
import sys

logging.getLogger("scapy.runtime").setLevel(logging.ERROR)

from scapy.layers.inet import ICMP, IP, TCP, UDP  # noqa: E402
from scapy.layers.inet6 import (  # noqa: E402
    HBHOptUnknown,
    ICMPv6EchoRequest,
    ICMPv6PacketTooBig,
    IPv6,
    IPv6ExtHdrFragment,
    IPv6ExtHdrHopByHop,
    IPv6ExtHdrRouting,
    Pad1,
    PadN,
)
from scapy.layers.l2 import ARP, Dot1Q, Ether  # noqa: E402
from scapy.packet import Raw  # noqa: E402
from scapy.contrib.gtp import (  # noqa: E402
    GTP_U_Header,
    GTPEchoRequest,
    GTPEchoResponse,
    GTPErrorIndication,
    GTPPDUSessionContainer,
    GTP_PDCP_PDU_ExtensionHeader,
    GTP_UDPPort_ExtensionHeader,
    IE_GSNAddress,
    IE_Recovery,
    IE_TEIDI,
)

MAC_A = "02:00:5e:10:00:0a"
MAC_B = "02:00:5e:10:00:0b"
GNB4, UPF4 = "192.0.2.10", "192.0.2.1"
GNB6, UPF6 = "2001:db8:1::10", "2001:db8:1::1"
UE4, DN4 = "10.45.0.7", "198.51.100.20"
UE6, DN6 = "2001:db8:45::7", "2001:db8:ffff::20"
GTPU_PORT = 2152


def v6(a):
    return str(ipaddress.IPv6Address(a))


def eth_fields(p, e):
    e["eth.dst"] = p[Ether].dst
    e["eth.src"] = p[Ether].src
    e["eth.type"] = p[Ether].type


def ip_fields(ip, e, pre=""):
    """IPv4 or IPv6 header fields of `ip` (a Scapy layer), under prefix `pre`."""
    if isinstance(ip, IP):
        e[pre + "ip.src"] = ip.src
        e[pre + "ip.dst"] = ip.dst
        e[pre + "ip.ttl"] = ip.ttl
        e[pre + "ip.proto"] = ip.proto
        e[pre + "ip.id"] = ip.id
        e[pre + "ip.tos"] = ip.tos
        e[pre + "ip.len"] = ip.len
        e[pre + "ip.df"] = bool(ip.flags.DF)
        e[pre + "ip.checksum"] = ip.chksum
        e[pre + "ip.checksum_ok"] = True
    else:
        e[pre + "ipv6.src"] = v6(ip.src)
        e[pre + "ipv6.dst"] = v6(ip.dst)
        e[pre + "ipv6.hlim"] = ip.hlim
        e[pre + "ipv6.nh"] = ip.nh
        e[pre + "ipv6.tc"] = ip.tc
        e[pre + "ipv6.fl"] = ip.fl
        e[pre + "ipv6.plen"] = ip.plen


def l4_fields(l4, e, pre=""):
    if isinstance(l4, UDP):
        e[pre + "udp.sport"] = l4.sport
        e[pre + "udp.dport"] = l4.dport
        e[pre + "udp.len"] = l4.len
        e[pre + "udp.checksum"] = l4.chksum
        e[pre + "udp.checksum_ok"] = True
    elif isinstance(l4, TCP):
        e[pre + "tcp.sport"] = l4.sport
        e[pre + "tcp.dport"] = l4.dport
        e[pre + "tcp.seq"] = l4.seq
        e[pre + "tcp.ack"] = l4.ack
        e[pre + "tcp.flags"] = int(l4.flags)
        e[pre + "tcp.window"] = l4.window
        e[pre + "tcp.checksum"] = l4.chksum
        e[pre + "tcp.checksum_ok"] = True


def payload_of(layer):
    return bytes(layer.payload)


def ext_fields(p, e):
    """IPv6 extension headers, in order, with their Scapy-decoded contents."""
    chain = []
    layer = p[IPv6].payload
    while True:
        if isinstance(layer, IPv6ExtHdrHopByHop):
            chain.append(0)
            opts = []
            for o in layer.options:
                if isinstance(o, Pad1):
                    opts.append([0, ""])
                else:
                    opts.append([o.otype, bytes(o.optdata).hex()])
            e["hbh.options"] = opts
            e["hbh.nh"] = layer.nh
            e["hbh.len"] = layer.len
        elif isinstance(layer, IPv6ExtHdrRouting):
            chain.append(43)
            e["rt.type"] = layer.type
            e["rt.segleft"] = layer.segleft
            e["rt.len"] = layer.len
            e["rt.nh"] = layer.nh
        elif isinstance(layer, IPv6ExtHdrFragment):
            chain.append(44)
            e["frag.offset"] = layer.offset * 8
            e["frag.m"] = bool(layer.m)
            e["frag.id"] = layer.id
            e["frag.nh"] = layer.nh
        else:
            break
        layer = layer.payload
    e["ipv6.ext"] = chain


def gtp_fields(p, e):
    g = p[GTP_U_Header]
    e["gtp.type"] = g.gtp_type
    e["gtp.teid"] = g.teid
    e["gtp.len"] = g.length
    if g.S:
        e["gtp.seq"] = g.seq
    if g.PN:
        e["gtp.npdu"] = g.npdu
    # Extension header types in chain order, following each dissected header's next type.
    exts, nxt, layer = [], g.next_ex if g.E else 0, g.payload
    while nxt:
        exts.append(nxt)
        if isinstance(layer, GTPPDUSessionContainer):
            nxt = layer.NextExtHdr
        elif isinstance(layer, (GTP_UDPPort_ExtensionHeader, GTP_PDCP_PDU_ExtensionHeader)):
            nxt = layer.next_ex
        else:
            break
        if isinstance(layer, GTP_UDPPort_ExtensionHeader):
            e["gtp.udp_port"] = layer.udp_port
        layer = layer.payload
    e["gtp.exts"] = exts
    if GTPPDUSessionContainer in p:
        c = p[GTPPDUSessionContainer]
        e["pdu.type"] = c.type
        e["pdu.qfi"] = c.QFI
        e["pdu.qmp"] = bool(c.QMP)
        if c.type == 0:
            e["pdu.rqi"] = bool(c.RQI)
            e["pdu.ppp"] = bool(c.PPP)
            e["pdu.snp"] = bool(c.SNP)
            if c.PPP:
                e["pdu.ppi"] = c.PPI
            if c.QMP:
                e["pdu.dl_send_time"] = c.dlSendTime
            if c.SNP:
                e["pdu.dl_qfi_seq"] = c.dlQFISeqNum
    if GTPEchoResponse in p:
        e["gtpmsg.recovery"] = p[IE_Recovery].restart_counter
    if GTPErrorIndication in p:
        e["gtpmsg.teid_data"] = p[IE_TEIDI].TEIDI
        a = p[IE_GSNAddress]
        e["gtpmsg.peer"] = a.ipv4_address if a.length == 4 else v6(a.ipv6_address)


def expect(p):
    """Everything Scapy decodes from frame `p` that our parsers should agree with."""
    e = {}
    eth_fields(p, e)
    if Dot1Q in p:
        t = p[Dot1Q]
        e["vlan.vid"] = t.vlan
        e["vlan.pcp"] = t.prio
        e["vlan.dei"] = bool(t.id)
        e["vlan.type"] = t.type
    if ARP in p:
        a = p[ARP]
        e["arp.op"] = a.op
        e["arp.hwsrc"] = a.hwsrc
        e["arp.psrc"] = a.psrc
        e["arp.hwdst"] = a.hwdst
        e["arp.pdst"] = a.pdst
        return e
    outer = p[Ether].payload
    if isinstance(outer, Dot1Q):
        outer = outer.payload
    ip_fields(outer, e)
    if isinstance(outer, IPv6):
        ext_fields(p, e)
    if ICMP in p:
        m = p[ICMP]
        e["icmp.type"] = m.type
        e["icmp.code"] = m.code
        e["icmp.id"] = m.id
        e["icmp.seq"] = m.seq
        e["icmp.checksum"] = m.chksum
        e["icmp.checksum_ok"] = True
        e["icmp.data"] = payload_of(m).hex()
        return e
    if ICMPv6EchoRequest in p:
        m = p[ICMPv6EchoRequest]
        e["icmpv6.type"] = m.type
        e["icmpv6.code"] = m.code
        e["icmpv6.id"] = m.id
        e["icmpv6.seq"] = m.seq
        e["icmpv6.checksum"] = m.cksum
        e["icmpv6.checksum_ok"] = True
        e["icmpv6.data"] = bytes(m.data).hex()
        return e
    if ICMPv6PacketTooBig in p:
        m = p[ICMPv6PacketTooBig]
        e["icmpv6.type"] = m.type
        e["icmpv6.code"] = m.code
        e["icmpv6.mtu"] = m.mtu
        e["icmpv6.checksum"] = m.cksum
        e["icmpv6.checksum_ok"] = True
        e["icmpv6.data"] = payload_of(m).hex()
        return e
    if e.get("frag.offset", 0) != 0:
        return e  # a later fragment: no upper-layer header
    l4 = outer.payload
    while isinstance(l4, (IPv6ExtHdrHopByHop, IPv6ExtHdrRouting, IPv6ExtHdrFragment)):
        l4 = l4.payload
    l4_fields(l4, e)
    if GTP_U_Header in p:
        gtp_fields(p, e)
        inner = p[GTP_U_Header].payload
        while isinstance(inner, GTPPDUSessionContainer):
            inner = inner.payload
        if isinstance(inner, (IP, IPv6)):
            ip_fields(inner, e, "inner.")
            l4_fields(inner.payload, e, "inner.")
    return e


def udp_gtp(outer_v6, gtp):
    """Ethernet / outer IP / UDP 2152 / `gtp`."""
    if outer_v6:
        ip = IPv6(src=GNB6, dst=UPF6, hlim=61, tc=0x48, fl=0x2A2A)
    else:
        ip = IP(src=GNB4, dst=UPF4, ttl=61, tos=0x48, id=0x4242, flags="DF")
    return Ether(src=MAC_A, dst=MAC_B) / ip / UDP(sport=GTPU_PORT, dport=GTPU_PORT) / gtp


def inner_packet(v6_inner):
    if v6_inner:
        return (
            IPv6(src=UE6, dst=DN6, hlim=64, tc=0x20, fl=0x54321)
            / TCP(sport=43210, dport=44321, seq=1000, ack=2000, flags="A", window=512)
            / Raw(b"inner tcp over v6")
        )
    return IP(src=UE4, dst=DN4, ttl=64, id=7, tos=0) / UDP(sport=41000, dport=42000) / Raw(b"inner dns")


def build():
    """The reference frames, as (name, Scapy packet) pairs."""
    eth = Ether(src=MAC_A, dst=MAC_B)
    pkts = [
        (
            "eth_ipv4_udp",
            eth
            / IP(src="192.168.1.10", dst="8.8.8.8", ttl=63, id=0x1234, tos=0xB8, flags="DF")
            / UDP(sport=40001, dport=40002)
            / Raw(b"hello peregrine"),
        ),
        (
            "eth_vlan_ipv4_tcp",
            eth
            / Dot1Q(vlan=100, prio=5, id=0)
            / IP(src="10.1.0.1", dst="10.1.0.2", ttl=128, id=0xBEEF)
            / TCP(sport=40000, dport=45000, seq=0x12345678, ack=0x9ABCDEF0, flags="PA", window=64240)
            / Raw(b"tagged tcp data"),
        ),
        (
            "ipv6_hbh_padn_unknown",
            eth
            / IPv6(src="2001:db8::1", dst="2001:db8::2", hlim=64, tc=0xB8, fl=0x12345)
            / IPv6ExtHdrHopByHop(
                options=[PadN(optdata=b"\x00\x00"), HBHOptUnknown(otype=0x1E, optdata=b"\xaa\xbb\xcc\xdd")]
            )
            / UDP(sport=1000, dport=2000)
            / Raw(b"hbh"),
        ),
        (
            "ipv6_routing_fragment",
            eth
            / IPv6(src="2001:db8::1", dst="2001:db8::2", hlim=17)
            / IPv6ExtHdrRouting(type=0, addresses=["2001:db8::99"], segleft=1)
            / IPv6ExtHdrFragment(offset=0, m=1, id=0xDEADBEEF)
            / UDP(sport=40011, dport=40012)
            / Raw(b"first fragment"),
        ),
        (
            "ipv6_later_fragment",
            eth
            / IPv6(src="2001:db8::1", dst="2001:db8::2", hlim=17)
            / IPv6ExtHdrFragment(nh=17, offset=1232 // 8, m=0, id=0xDEADBEEF)
            / Raw(b"\x55" * 24),
        ),
        (
            "icmpv4_echo",
            eth / IP(src="10.0.2.15", dst="10.0.2.2", ttl=64) / ICMP(type=8, id=0xF703, seq=9) / Raw(bytes(range(32))),
        ),
        (
            "icmpv6_echo",
            eth
            / IPv6(src="2003::2", dst="2003::1", hlim=64)
            / ICMPv6EchoRequest(id=0xD2AB, seq=256, data=b"peregrine-echo"),
        ),
        (
            "icmpv6_packet_too_big",
            eth
            / IPv6(src="2001:db8::fe", dst="2001:db8::1", hlim=255)
            / ICMPv6PacketTooBig(mtu=1400)
            / IPv6(src="2001:db8::1", dst="2001:db8::2", hlim=63)
            / UDP(sport=40007, dport=40009)
            / Raw(b"x" * 32),
        ),
        (
            "arp_request",
            Ether(src=MAC_A, dst="ff:ff:ff:ff:ff:ff")
            / ARP(op=1, hwsrc=MAC_A, psrc="10.0.2.15", hwdst="00:00:00:00:00:00", pdst="10.0.2.2"),
        ),
        (
            "arp_reply",
            Ether(src=MAC_B, dst=MAC_A) / ARP(op=2, hwsrc=MAC_B, psrc="10.0.2.2", hwdst=MAC_A, pdst="10.0.2.15"),
        ),
    ]
    dl = dict(type=0, QFI=9, RQI=1, PPP=1, PPI=5)
    ul = dict(type=1, QFI=5)
    for outer_v6, psc, inner_v6, name in [
        (False, dl, False, "gtpu_v4_dl_inner_v4"),
        (False, ul, True, "gtpu_v4_ul_inner_v6"),
        (True, dl, True, "gtpu_v6_dl_inner_v6"),
        (True, ul, False, "gtpu_v6_ul_inner_v4"),
    ]:
        gtp = (
            GTP_U_Header(teid=0x1000_0000 + len(pkts), E=1, next_ex=0x85)
            / GTPPDUSessionContainer(**psc)
            / inner_packet(inner_v6)
        )
        pkts.append((name, udp_gtp(outer_v6, gtp)))
    pkts += [
        ("gtpu_echo_request", udp_gtp(False, GTP_U_Header(S=1, seq=0x1234) / GTPEchoRequest())),
        (
            "gtpu_echo_response",
            udp_gtp(False, GTP_U_Header(S=1, seq=0x1234) / GTPEchoResponse(IE_list=[IE_Recovery(restart_counter=7)])),
        ),
        (
            "gtpu_error_indication_v4",
            udp_gtp(
                False,
                GTP_U_Header(S=1, seq=0)
                / GTPErrorIndication(IE_list=[IE_TEIDI(TEIDI=0x0BADC0DE), IE_GSNAddress(length=4, ipv4_address=GNB4)]),
            ),
        ),
        (
            "gtpu_error_indication_v6",
            udp_gtp(
                True,
                GTP_U_Header(S=1, seq=0)
                / GTPErrorIndication(IE_list=[IE_TEIDI(TEIDI=0x0BADC0DE), IE_GSNAddress(length=16, ipv6_address=GNB6)]),
            ),
        ),
        ("gtpu_end_marker", udp_gtp(False, GTP_U_Header(teid=0x2A, gtp_type=254))),
        # Beyond the emit-side list: DL container optional fields, and S/PN flags with a
        # UDP Port extension header chained before the container.
        (
            "gtpu_v6_dl_qmp_snp",
            udp_gtp(
                True,
                GTP_U_Header(teid=0x99, E=1, next_ex=0x85)
                / GTPPDUSessionContainer(
                    type=0, QMP=1, SNP=1, QFI=3, dlSendTime=0x0102030405060708, dlQFISeqNum=0x010203
                )
                / inner_packet(False),
            ),
        ),
        (
            "gtpu_v4_seq_npdu_udp_port_ext",
            udp_gtp(
                False,
                GTP_U_Header(teid=0x98, gtp_type=255, E=1, S=1, PN=1, seq=0xABCD, npdu=0x42, next_ex=0x40)
                / GTP_UDPPort_ExtensionHeader(udp_port=2152, next_ex=0x85)
                / GTPPDUSessionContainer(type=1, QFI=5)
                / inner_packet(True),
            ),
        ),
    ]
    return pkts


def packets():
    """[(name, frame bytes, expected fields)] with fields from Scapy's re-dissection."""
    out = []
    for name, pkt in build():
        raw = bytes(pkt)
        out.append((name, raw, expect(Ether(raw))))
    return out


def main():
    for name, raw, e in packets():
        sys.stdout.write(json.dumps({"name": name, "hex": raw.hex(), "expect": e}) + "\n")


if __name__ == "__main__":
    main()
