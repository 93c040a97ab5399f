#!/usr/bin/env python3
"""A Scapy gNB and data network for the live UPF test (control/tests/live_upf.rs).

Run inside the gNB network namespace (`ip netns exec GNB python3 gnb_dn.py ...`); it opens
its data-network sockets after entering the DN namespace with setns(2), so one process sees
both sides of the UPF. It reads the sessions the SMF simulator established (its first JSON
line) and:

* uplink: per session, G-PDUs (TS 29.281 5.1) to the allocated TEID with a UL PDU Session
  Container (TS 38.415 5.5.2.2, QFI) carrying an inner UDP packet; sniffed decapsulated in dn;
* downlink: inner UDP packets from dn to the UE, sniffed encapsulated in gnb;
* GTP-U Echo Request (v4 and v6 outer) and a G-PDU to an unknown TEID (Error Indication);
* for a session whose uplink PDR matches a QFI, uplink with another QFI (must not pass).

Both directions are captured with AF_PACKET sockets (frames we send ourselves are skipped).
UDP sockets are bound on GTP-U port 2152 in gnb and on the DN port in dn, so the kernels in
the namespaces take the packets quietly instead of answering ICMP port unreachable.

The result is one JSON object of observations on stdout; the Rust test holds the
expectations. Written with Scapy only, independently of Peregrine's codecs.
"""
import argparse
import json
import select
import socket
import sys
import time

from live_netns import DN_PORT, ETH_P_ALL, UE_PORT, setns

try:
    from scapy.all import Ether, IP, IPv6, UDP, Raw
    from scapy.contrib.gtp import (GTP_U_Header, GTPPDUSessionContainer, GTPEchoRequest,
                                   IE_TEIDI, IE_GSNAddress, IE_Recovery)
    from scapy.layers.inet import in4_chksum
    from scapy.layers.inet6 import in6_chksum
    from scapy.utils import checksum
except ImportError as e:
    print(f"Scapy is missing: {e}", file=sys.stderr)
    sys.exit(3)

UNKNOWN_TEID = 0xDEADBEEF


def raw_socket(ifname):
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
    s.bind((ifname, 0))
    return s


def quiet_udp(port):
    """UDP sockets on `port` (v4 and v6) so the kernel does not answer port unreachable."""
    out = []
    for fam, addr in ((socket.AF_INET, "0.0.0.0"), (socket.AF_INET6, "::")):
        u = socket.socket(fam, socket.SOCK_DGRAM)
        if fam == socket.AF_INET6:
            u.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
        u.bind((addr, port))
        u.setblocking(False)
        out.append(u)
    return out


def inner_matches(sent, got):
    """`got` is `sent` with TTL / hop limit one less (and, IPv4, the header checksum
    updated and valid); anything else differing is a mismatch."""
    if len(sent) != len(got) or not sent:
        return False
    if sent[0] >> 4 == 4:
        ihl = (sent[0] & 15) * 4
        if got[8] != sent[8] - 1 or checksum(bytes(got[:ihl])) != 0:
            return False
        return sent[:8] + sent[9:10] + sent[12:] == got[:8] + got[9:10] + got[12:]
    return got[7] == sent[7] - 1 and sent[:7] + sent[8:] == got[:7] + got[8:]


def inner_packet(family, src, dst, sport, dport, payload):
    ip = IPv6(src=src, dst=dst, hlim=64) if family == 6 else IP(src=src, dst=dst, ttl=64, id=0x4242)
    return bytes(ip / UDP(sport=sport, dport=dport) / Raw(payload))


def outer_l3(src, dst):
    return IPv6(src=src, dst=dst) if ":" in dst else IP(src=src, dst=dst)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sessions", required=True, help="the SMF simulator's JSON line (file)")
    ap.add_argument("--dn-netns", required=True, help="path of the DN namespace, /run/netns/NAME")
    ap.add_argument("--gnb-if", required=True)
    ap.add_argument("--dn-if", required=True)
    ap.add_argument("--gnb-mac", required=True)
    ap.add_argument("--dn-mac", required=True)
    ap.add_argument("--n3-mac", required=True)
    ap.add_argument("--n6-mac", required=True)
    ap.add_argument("--n3", required=True, help="UPF N3 IPv4")
    ap.add_argument("--n3-v6", required=True, help="UPF N3 IPv6")
    ap.add_argument("--gnb", required=True)
    ap.add_argument("--gnb6", required=True)
    ap.add_argument("--dn-host", required=True)
    ap.add_argument("--dn-host6", required=True)
    ap.add_argument("--count", type=int, default=5, help="packets per session and direction")
    ap.add_argument("--wait", type=float, default=1.0, help="seconds to sniff after sending")
    a = ap.parse_args()
    sessions = json.load(open(a.sessions))["sessions"]

    gnb_raw = raw_socket(a.gnb_if)
    keep = quiet_udp(2152)
    setns(a.dn_netns)
    dn_raw = raw_socket(a.dn_if)
    keep += quiet_udp(DN_PORT)

    sent_ul = {}  # payload -> (session name, inner bytes)
    sent_dl = {}
    obs = {"sessions": {}, "echo": {}, "error_indication": [], "unexpected": []}
    frames = []  # (socket, frame) sent in order

    for s in sessions:
        name, fam = s["name"], 6 if ":" in s["ue"] else 4
        o = obs["sessions"][name] = {
            "ul_sent": 0, "ul_bytes_sent": 0, "ul_got": 0, "ul_inner_ok": 0, "ul_eth_ok": 0,
            "dl_sent": 0, "dl_bytes_sent": 0, "dl_got": 0, "dl_inner_ok": 0, "dl_teids": [],
            "dl_outer_src": [], "dl_outer_dst": [], "dl_qfis": [], "dl_psc_types": [],
            "dl_udp_csum_ok": 0, "dl_eth_ok": 0, "ul_wrong_qfi_sent": 0, "ul_wrong_qfi_got": 0}
        n3 = s["n3_v6"] if fam == 6 and s.get("n3_v6") else s["n3"]
        gnb = a.gnb6 if fam == 6 else a.gnb
        dn = a.dn_host6 if fam == 6 else a.dn_host
        qfis = [(s["qfi"], "ul")]
        if s.get("pdi_qfi") or s["name"] == "qfi":
            qfis.append(((s["qfi"] + 1) % 64 or 1, "wrong"))
        for qfi, kind in qfis:
            for i in range(a.count if kind == "ul" else 2):
                pl = f"{kind} {name} {i} ".encode() + bytes(range(40 + 13 * i))
                inner = inner_packet(fam, s["ue"], dn, UE_PORT, DN_PORT, pl)
                f = (Ether(src=a.gnb_mac, dst=a.n3_mac) / outer_l3(gnb, n3)
                     / UDP(sport=2152, dport=2152)
                     / GTP_U_Header(teid=s["teid"], gtp_type=255, E=1, next_ex=0x85)
                     / GTPPDUSessionContainer(type=1, QFI=qfi, NextExtHdr=0) / Raw(inner))
                frames.append((gnb_raw, bytes(f)))
                sent_ul[pl] = (name, inner, kind)
                if kind == "ul":
                    o["ul_sent"] += 1
                    o["ul_bytes_sent"] += len(inner)
                else:
                    o["ul_wrong_qfi_sent"] += 1
        for i in range(a.count):
            pl = f"dl {name} {i} ".encode() + bytes(range(30 + 17 * i))
            inner = inner_packet(fam, dn, s["ue"], DN_PORT, UE_PORT, pl)
            frames.append((dn_raw, bytes(Ether(src=a.dn_mac, dst=a.n6_mac, type=0x86DD if fam == 6 else 0x0800)
                                         / Raw(inner))))
            sent_dl[pl] = (name, inner)
            o["dl_sent"] += 1
            o["dl_bytes_sent"] += len(inner)
    for fam, src, dst in ((4, a.gnb, a.n3), (6, a.gnb6, a.n3_v6)):
        frames.append((gnb_raw, bytes(Ether(src=a.gnb_mac, dst=a.n3_mac) / outer_l3(src, dst)
                                      / UDP(sport=2152, dport=2152)
                                      / GTP_U_Header(gtp_type=1, teid=0, S=1, seq=0x1230 + fam)
                                      / GTPEchoRequest())))
        obs["echo"][str(fam)] = {"got": 0, "seq": None, "recovery_ie": False, "src": None}
    pl = b"unknown teid"
    frames.append((gnb_raw, bytes(
        Ether(src=a.gnb_mac, dst=a.n3_mac) / IP(src=a.gnb, dst=a.n3) / UDP(sport=2152, dport=2152)
        / GTP_U_Header(teid=UNKNOWN_TEID, gtp_type=255)
        / Raw(inner_packet(4, "10.99.0.1", a.dn_host, UE_PORT, DN_PORT, pl)))))

    t0 = time.time()
    for sock, f in frames:
        sock.send(f)
        time.sleep(0.002)  # a gentle pace: the veth and AF_PACKET rings are small

    end = time.time() + a.wait
    got = []
    while time.time() < end:
        r, _, _ = select.select([gnb_raw, dn_raw] + keep, [], [], max(0.0, end - time.time()))
        for sock in r:
            if sock in keep:
                sock.recv(65535)
                continue
            f, addr = sock.recvfrom(65535)
            if addr[2] == socket.PACKET_OUTGOING:
                continue
            got.append(("gnb" if sock is gnb_raw else "dn", f))
    obs["send_s"] = round(time.time() - t0 - a.wait, 3)

    for side, f in got:
        e = Ether(f)
        l3 = e.payload
        if side == "dn":
            if not isinstance(l3, (IP, IPv6)):
                continue  # IPv6 ND / MLD from the kernel
            inner = f[14:14 + (l3.len if isinstance(l3, IP) else 40 + l3.plen)]
            key = next((k for k in sent_ul if k in inner), None)
            if key is None:
                if UDP in l3 and l3[UDP].dport == DN_PORT:
                    obs["unexpected"].append("dn: " + inner.hex())
                continue
            name, s_inner, kind = sent_ul[key]
            o = obs["sessions"][name]
            if kind == "wrong":
                o["ul_wrong_qfi_got"] += 1
                continue
            o["ul_got"] += 1
            o["ul_inner_ok"] += inner_matches(s_inner, inner)
            o["ul_eth_ok"] += e.dst == a.dn_mac and e.src == a.n6_mac
            continue
        if not isinstance(l3, (IP, IPv6)) or UDP not in l3 or l3[UDP].dport != 2152:
            continue
        udp = l3[UDP]
        # The received bytes, not Scapy's re-serialisation of them.
        uoff = 14 + (l3.ihl * 4 if isinstance(l3, IP) else 40)
        raw_udp = f[uoff:uoff + udp.len]
        g = GTP_U_Header(raw_udp[8:])
        if g.gtp_type == 2:
            fam = "6" if isinstance(l3, IPv6) else "4"
            ec = obs["echo"][fam]
            ec["got"] += 1
            ec["seq"] = g.seq
            ec["src"] = l3.src
            ec["recovery_ie"] = any(isinstance(ie, IE_Recovery)
                                    for ie in getattr(g.payload, "IE_list", []) or [])
            continue
        if g.gtp_type == 26:
            ies = getattr(g.payload, "IE_list", []) or []
            teidi = next((ie.TEIDI for ie in ies if isinstance(ie, IE_TEIDI)), None)
            gsn = next((ie.ipv4_address if hasattr(ie, "ipv4_address") else getattr(ie, "address", None)
                        for ie in ies if isinstance(ie, IE_GSNAddress)), None)
            obs["error_indication"].append({"teid_data_i": teidi, "gsn": gsn, "src": l3.src,
                                            "dst": l3.dst, "udp_dport": udp.dport})
            continue
        if g.gtp_type != 255:
            obs["unexpected"].append(f"gnb: GTP-U type {g.gtp_type}")
            continue
        psc = g.getlayer(GTPPDUSessionContainer)
        inner = raw_udp[len(raw_udp) - len(bytes(psc.payload if psc is not None else g.payload)):]
        key = next((k for k in sent_dl if k in inner), None)
        if key is None:
            obs["unexpected"].append("gnb: G-PDU " + bytes(l3).hex())
            continue
        name, s_inner = sent_dl[key]
        o = obs["sessions"][name]
        o["dl_got"] += 1
        o["dl_inner_ok"] += inner_matches(s_inner, inner)
        o["dl_teids"].append(g.teid)
        o["dl_outer_src"].append(l3.src)
        o["dl_outer_dst"].append(l3.dst)
        o["dl_qfis"].append(psc.QFI if psc is not None else None)
        o["dl_psc_types"].append(psc.type if psc is not None else None)
        o["dl_eth_ok"] += e.dst == a.gnb_mac and e.src == a.n3_mac
        # The UDP checksum, computed here over the bytes as received (RFC 8200 8.1: it
        # is mandatory over IPv6; over IPv4, 0 means none).
        ub = bytearray(raw_udp)
        recv_ck = int.from_bytes(ub[6:8], "big")
        ub[6:8] = b"\0\0"
        if isinstance(l3, IPv6):
            ck = in6_chksum(17, l3, bytes(ub)) or 0xFFFF
            o["dl_udp_csum_ok"] += recv_ck == ck
        else:
            ck = in4_chksum(17, l3, bytes(ub)) or 0xFFFF
            o["dl_udp_csum_ok"] += recv_ck == 0 or recv_ck == ck
    for o in obs["sessions"].values():
        for k in ("dl_teids", "dl_outer_src", "dl_outer_dst", "dl_qfis", "dl_psc_types"):
            o[k] = sorted(set(o[k]), key=str)
    print(json.dumps(obs))


if __name__ == "__main__":
    main()
