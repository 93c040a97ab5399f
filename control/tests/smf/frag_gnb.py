#!/usr/bin/env python3
"""Fragments made by kernels, through the live UPF (control/tests/live_frag.rs).

Run inside the gNB network namespace; the data-network sockets are opened after setns(2)
into the DN namespace, so one process sees both sides of the UPF.

* uplink: a full-size G-PDU (1500-byte inner IPv4 UDP packet, TS 29.281 5.1 with a UL PDU
  Session Container) sent with ordinary kernel UDP sockets to the UPF's N3 addresses over
  IPv4 and over IPv6; the 1500-byte veth makes the kernel fragment the outer packet. An
  AF_PACKET socket on the veth counts the fragments that left; a UDP socket in dn receives
  the inner datagram, which must be the bytes sent.
* downlink: a kernel UDP socket in dn sends 1472 bytes without DF to the UE (a 1500-byte
  inner packet, too big for the N3 MTU once encapsulated); the gNB's UDP socket on 2152
  receives G-PDUs, and Scapy's `defragment` reassembles their inner packets.

Prints one JSON object of observations; the Rust test holds the expectations. Written with
Scapy and the socket module only, independently of Peregrine's codecs.
"""
import argparse
import json
import socket
import sys
import time

from live_netns import DN_PORT, ETH_P_ALL, UE_PORT, setns

try:
    from scapy.all import IP, UDP, Raw, defragment
    from scapy.contrib.gtp import GTP_U_Header, GTPPDUSessionContainer
except ImportError as e:
    print(f"Scapy is missing: {e}", file=sys.stderr)
    sys.exit(3)

IP_MTU_DISCOVER = 10
IP_PMTUDISC_DONT = 0
IPV6_MTU_DISCOVER = 23
IPV6_PMTUDISC_DONT = 0


def payload(tag, n):
    return bytes([tag]) + bytes((i * 7 + tag) & 0xFF for i in range(n - 1))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--gnb-ns", required=True)
    ap.add_argument("--dn-ns", required=True)
    ap.add_argument("--dev", required=True, help="the gNB's veth")
    ap.add_argument("--gnb4", required=True)
    ap.add_argument("--gnb6", required=True)
    ap.add_argument("--n3v4", required=True)
    ap.add_argument("--n3v6", required=True)
    ap.add_argument("--ue", required=True)
    ap.add_argument("--dn", required=True)
    ap.add_argument("--ul-teid", type=int, required=True)
    ap.add_argument("--qfi", type=int, required=True)
    a = ap.parse_args()
    out = {}

    # gNB side (we start in its namespace).
    sniff = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
    sniff.bind((a.dev, 0))
    sniff.settimeout(0.2)
    g4 = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    g4.setsockopt(socket.IPPROTO_IP, IP_MTU_DISCOVER, IP_PMTUDISC_DONT)
    g4.bind((a.gnb4, 2152))
    g4.settimeout(3)
    g6 = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
    g6.setsockopt(socket.IPPROTO_IPV6, IPV6_MTU_DISCOVER, IPV6_PMTUDISC_DONT)
    g6.bind((a.gnb6, 2152))

    # Data-network side.
    setns(a.dn_ns)
    d = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    d.setsockopt(socket.IPPROTO_IP, IP_MTU_DISCOVER, IP_PMTUDISC_DONT)
    d.bind((a.dn, DN_PORT))
    d.settimeout(3)
    setns(a.gnb_ns)

    # Uplink: one full-size G-PDU per outer family, fragmented by the kernel.
    sent = {}
    for fam, sock, dst in (("v4", g4, a.n3v4), ("v6", g6, a.n3v6)):
        data = payload(4 if fam == "v4" else 6, 1472)
        inner = IP(src=a.ue, dst=a.dn, ttl=64, flags=0) / UDP(sport=UE_PORT, dport=DN_PORT) / Raw(data)
        gpdu = bytes(GTP_U_Header(teid=a.ul_teid, next_ex=0x85)
                     / GTPPDUSessionContainer(type=1, QFI=a.qfi) / inner)
        sock.sendto(gpdu, (dst, 2152))
        sent[data[0]] = (fam, data)
        time.sleep(0.2)
    # Fragments that left the gNB (frames it sent to the UPF's MAC).
    frags = {"v4": 0, "v6": 0}
    t_end = time.time() + 0.5
    while time.time() < t_end:
        try:
            f = sniff.recv(4096)
        except socket.timeout:
            continue
        et = int.from_bytes(f[12:14], "big")
        if et == 0x0800 and f[26:30] == socket.inet_aton(a.gnb4):
            flags_off = int.from_bytes(f[20:22], "big")
            if flags_off & 0x3FFF:
                frags["v4"] += 1
        elif et == 0x86DD and f[22:38] == socket.inet_pton(socket.AF_INET6, a.gnb6) and f[20] == 44:
            frags["v6"] += 1
    out["fragments_sent"] = frags
    got = {}
    setns(a.dn_ns)
    for _ in range(2):
        try:
            data, src = d.recvfrom(4096)
        except socket.timeout:
            break
        fam, want = sent.get(data[0], ("?", b""))
        got[fam] = {"len": len(data), "intact": data == want, "from": src[0]}
    out["uplink"] = got

    # Downlink: 1472 bytes without DF from dn to the UE.
    dl = payload(9, 1472)
    d.sendto(dl, (a.ue, UE_PORT))
    setns(a.gnb_ns)
    inners = []
    gpdus = []
    t_end = time.time() + 3
    while time.time() < t_end and len(inners) < 8:
        try:
            b, src = g4.recvfrom(4096)
        except socket.timeout:
            break
        g = GTP_U_Header(b)
        ip = g[IP]
        gpdus.append({"len": len(b), "teid": g.teid})
        inners.append(ip)
        if not ip.flags.MF:
            break
    out["downlink_gpdus"] = gpdus
    whole = defragment(inners)
    ok = len(whole) == 1 and UDP in whole[0] and bytes(whole[0][UDP].payload) == dl
    out["downlink"] = {
        "pieces": len(inners),
        "reassembled_by_scapy": ok,
        "len": len(bytes(whole[0])) if whole else 0,
    }
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
