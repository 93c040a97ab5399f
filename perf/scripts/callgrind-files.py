#!/usr/bin/env python3
"""Two callgrind profiles side by side, per source file, in instructions per packet.

    perf/scripts/callgrind-files.py A.cg PACKETS_A B.cg PACKETS_B

PACKETS: what the counts are divided by (640000 for `pg-upf --stage <case> --batches 20000`;
the packets received, the 4th number of `pg-upf --case` output, for the worker's copy). Files
are named by their base name (all `mod.rs` together). Used in round 19a to compare the two
compiled copies of `Upf::process` (DPDK mbufs, `OwnedBuf`) and a change's effect on each.
"""
import re
import subprocess
import sys


def load(cg, n):
    out = subprocess.run(
        ["callgrind_annotate", "--threshold=100", "--auto=no", cg],
        capture_output=True, text=True, check=True,
    ).stdout
    d = {}
    for line in out.splitlines():
        m = re.match(r"\s*([\d,]+) \([^)]*\)\s+(\S+?):", line)
        if m and "PROGRAM" not in line:
            f = m.group(2).split("/")[-1]
            d[f] = d.get(f, 0) + int(m.group(1).replace(",", "")) / n
    return d


a = load(sys.argv[1], int(sys.argv[2]))
b = load(sys.argv[3], int(sys.argv[4]))
for k in sorted(set(a) | set(b), key=lambda k: -(a.get(k, 0) + b.get(k, 0))):
    print(f"{k:30s} {a.get(k, 0):8.2f} {b.get(k, 0):8.2f} {b.get(k, 0) - a.get(k, 0):+7.2f}")
print(f"{'total':30s} {sum(a.values()):8.2f} {sum(b.values()):8.2f}")
