#!/usr/bin/env python3
"""An independent RDMA responder for the DTA translator's RoCEv2 output (tests only).

Usage: rdma_apply.py FRAMES.pcap IMAGE BASE_VA QPN RKEY

Reads every frame of the pcap, keeps the RoCEv2 requests (UDP 4791), and applies them to
the memory image IMAGE (a file: the collector's region as registered, its first byte at
BASE_VA), as a responder's NIC would:

- the ICRC must verify (Scapy's `BTH.compute_icrc`, its own IBA A17.3.3 implementation);
- BTH destination QP and the RETH / AtomicETH R_Key must be ours, PSNs consecutive
  (24-bit, wrapping) from the first request;
- RC RDMA WRITE Only (0x0a): RETH (VA u64, R_Key u32, DMA length u32, big-endian), then
  DMA-length bytes copied to IMAGE[VA - BASE_VA ...];
- RC FETCH_ADD (0x14): AtomicETH (VA, R_Key, add u64, compare u64); the 8 bytes at VA
  (little-endian, as the host reads them) += add, modulo 2^64.

Any other opcode, an address outside the image or a bad ICRC is an error (exit 1).
Prints a JSON summary: {"writes": n, "fetch_adds": n, "bytes": n}.
"""
import json
import logging
import struct
import sys

logging.getLogger("scapy.runtime").setLevel(logging.ERROR)
from scapy.contrib.roce import BTH  # noqa: E402
from scapy.layers.l2 import Ether  # noqa: E402
from scapy.utils import rdpcap  # noqa: E402


def fail(msg):
    print(msg, file=sys.stderr)
    sys.exit(1)


def main():
    path, image, base, qpn, rkey = sys.argv[1:6]
    base, qpn, rkey = int(base), int(qpn), int(rkey)
    mem = bytearray(open(image, "rb").read())
    writes = adds = nbytes = 0
    psn = None
    for i, raw in enumerate(rdpcap(path)):
        p = Ether(bytes(raw))
        if BTH not in p:
            continue
        b = p[BTH]
        if b.compute_icrc(None) != bytes(p)[-4:]:
            fail(f"frame {i}: ICRC does not verify")
        if b.dqpn != qpn:
            fail(f"frame {i}: QP {b.dqpn}, want {qpn}")
        if psn is not None and b.psn != (psn + 1) & 0xFFFFFF:
            fail(f"frame {i}: PSN {b.psn} after {psn}")
        psn = b.psn
        ext = bytes(b.payload)  # Scapy keeps the ICRC (last 4 bytes) in `icrc`
        if b.opcode == 0x0A:
            va, key, length = struct.unpack(">QII", ext[:16])
            data = ext[16 : 16 + length]
            if len(data) != length or len(ext) - 16 != length + b.padcount:
                fail(f"frame {i}: DMA length {length} but {len(ext) - 16} bytes follow")
            off = va - base
            writes += 1
            nbytes += length
        elif b.opcode == 0x14:
            va, key, add, _cmp = struct.unpack(">QIQQ", ext[:28])
            off = va - base
            length = 8
            old = struct.unpack("<Q", bytes(mem[off : off + 8]))[0] if 0 <= off else 0
            data = struct.pack("<Q", (old + add) & 0xFFFFFFFFFFFFFFFF)
            adds += 1
        else:
            fail(f"frame {i}: opcode {b.opcode:#x} is not one we accept")
        if key != rkey:
            fail(f"frame {i}: R_Key {key}, want {rkey}")
        if off < 0 or off + length > len(mem):
            fail(f"frame {i}: VA {va:#x} + {length} outside the registered image")
        mem[off : off + length] = data
    with open(image, "wb") as f:
        f.write(mem)
    print(json.dumps({"writes": writes, "fetch_adds": adds, "bytes": nbytes}))


if __name__ == "__main__":
    main()
