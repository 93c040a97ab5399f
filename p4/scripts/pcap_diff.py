#!/usr/bin/env python3
"""Compare the packets of pcap files pairwise (software output vs simple_switch output), as
multisets per port: order across flows may differ between the two; bytes may not, except for
Ethernet padding behind the IP packet (a v1model limit, p4/README.md). Standard library only.

    pcap_diff.py SOFT_A TWIN_A [SOFT_B TWIN_B ...]
    pcap_diff.py --empty FILE     (write an empty pcap)
"""
import struct
import sys
from collections import Counter

def read(path):
    with open(path, "rb") as f:
        data = f.read()
    if len(data) < 24:
        return []
    magic = struct.unpack("<I", data[:4])[0]
    end = "<" if magic in (0xA1B2C3D4, 0xA1B23C4D) else ">"
    pos, out = 24, []
    while pos + 16 <= len(data):
        _, _, incl, _ = struct.unpack(end + "IIII", data[pos:pos + 16])
        out.append(strip_padding(data[pos + 16:pos + 16 + incl]))
        pos += 16 + incl
    return out

def strip_padding(f):
    """Cut an Ethernet frame after its IP packet (IPv4 total length / IPv6 payload + 40)."""
    if len(f) < 14:
        return f
    et = struct.unpack(">H", f[12:14])[0]
    if et == 0x0800 and len(f) >= 18:
        return f[:14 + struct.unpack(">H", f[16:18])[0]]
    if et == 0x86DD and len(f) >= 20:
        return f[:14 + 40 + struct.unpack(">H", f[18:20])[0]]
    return f

def main(argv):
    if argv[:1] == ["--empty"]:
        with open(argv[1], "wb") as f:
            f.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1))
        return 0
    bad = 0
    for soft, twin in zip(argv[0::2], argv[1::2]):
        a, b = Counter(read(soft)), Counter(read(twin))
        only_soft, only_twin = a - b, b - a
        n_a, n_b = sum(only_soft.values()), sum(only_twin.values())
        print(f"{soft} vs {twin}: {sum(a.values())} / {sum(b.values())} packets, "
              f"{n_a} only in software, {n_b} only in the twin")
        for p in list(only_soft)[:3]:
            print("  software only:", p.hex()[:160])
        for p in list(only_twin)[:3]:
            print("  twin only:    ", p.hex()[:160])
        bad += n_a + n_b
    return 1 if bad else 0

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
