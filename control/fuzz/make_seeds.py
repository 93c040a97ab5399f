#!/usr/bin/env python3
"""Write seed inputs for the `kestrel_export` target into seeds/kestrel_export/.

A minimal CBOR encoder (RFC 8949: unsigned/negative ints, text, arrays, maps, bools), so no
module is needed. Messages follow docs/kestrel.md "Export" with a small layout (2 QIDs, 2 rows,
width 4) so the fuzzer's mutations reach the collector. Inputs hold several messages separated
by b"\\n--\\n" (the target's framing)."""
import os
import struct

def head(major, n):
    if n < 24:
        return bytes([major << 5 | n])
    for ai, fmt in ((24, ">B"), (25, ">H"), (26, ">I"), (27, ">Q")):
        if n < 1 << (8 * struct.calcsize(fmt)):
            return bytes([major << 5 | ai]) + struct.pack(fmt, n)
    raise ValueError(n)

def enc(v):
    if isinstance(v, bool):
        return b"\xf5" if v else b"\xf4"
    if isinstance(v, int):
        return head(0, v) if v >= 0 else head(1, -1 - v)
    if isinstance(v, str):
        b = v.encode()
        return head(3, len(b)) + b
    if isinstance(v, list):
        return head(4, len(v)) + b"".join(enc(x) for x in v)
    if isinstance(v, dict):
        return head(5, len(v)) + b"".join(enc(k) + enc(x) for k, x in v.items())
    raise TypeError(v)

def header(kind, seq, late=False, sources=(0,)):
    return {"v": 1, "kind": kind, "seq": seq, "window_ns": 100_000_000, "workers": 1,
            "sources": list(sources), "late": late}

ROWS, WIDTH, QIDS = 2, 4, 2

def sketch(dir_, qid, base):
    n = ROWS * WIDTH
    return {"dir": dir_, "qid": qid,
            "packets": [base + i for i in range(n)], "bytes": [100 * (base + i) for i in range(n)],
            "green": [base] * n, "yellow": [i % 2 for i in range(n)], "red": [0] * n,
            "lat": [i % 3 for i in range(8 * n)], "iat": [i % 5 for i in range(8 * n)]}

def kestrel(seq, late=False, sources=(0,), sketches=None, big=False):
    m = header("kestrel", seq, late, sources)
    m.update({
        "layout": {"qids": QIDS, "rows": ROWS, "width": WIDTH,
                   "seeds": [0x9E3779B97F4A7C15, 7], "hash": "splitmix64-xor-v1"},
        "edges_version": [1],
        "edges": [{"qid": q, "lat": [1000 * (i + 1) for i in range(7)],
                   "iat": [2000 * (i + 1) for i in range(7)]} for q in range(QIDS)],
        "packets": 2**64 - 1 if big else 42, "skipped": 0,
        "sketches": sketches if sketches is not None else [sketch(0, 0, 1), sketch(1, 1, 3)],
    })
    return enc(m)

def pm(seq):
    m = header("pm", seq)
    m["qfis"] = [{"dir": 0, "qfi": 9, "packets": 10, "bytes": 1000, "mean_delay_ns": 5000},
                 {"dir": 1, "qfi": 5, "packets": 3, "bytes": 300, "mean_delay_ns": 70}]
    return enc(m)

def postcards(seq):
    m = header("postcards", seq)
    m.update({"t_ns": [1, 2], "teid": [0x10, 0x11], "qfi": [9, 5], "qid": [0, 1], "dir": [0, 1],
              "colour": [0, 2], "sojourn_ns": [100, 200], "iat_ns": [0, 50], "len": [64, 1400]})
    return enc(m)

SEP = b"\n--\n"
seeds = {
    "sketch": kestrel(1),
    "pm": pm(1),
    "postcards": postcards(1),
    "window_and_late_part": SEP.join([kestrel(5), kestrel(5, late=True, sources=(1,)), pm(5)]),
    "late_part_with_huge_counts": SEP.join([
        kestrel(6, big=True),
        kestrel(6, late=True, big=True, sources=(1,),
                sketches=[dict(sketch(0, 0, 1), packets=[2**64 - 1] * (ROWS * WIDTH))])]),
    "sequence": kestrel(2) + pm(2) + postcards(2),
    "empty_sketches": kestrel(3, sketches=[]),
}
out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "seeds", "kestrel_export")
os.makedirs(out, exist_ok=True)
for name, data in seeds.items():
    with open(os.path.join(out, name + ".bin"), "wb") as f:
        f.write(data)
print(f"{len(seeds)} seeds in {out}")

# Target `codesign_window`: gate window exports (docs/codesign.md "Export").
def gate_window(start, flows, unit="packets", v=1):
    return enc({"v": v, "node_id": 1, "worker": 0, "start_ns": start, "window_ns": 2_000_000_000,
                "unit": unit, "large": 32, "small": 16, "packets": 1000, "overflow": 0,
                "lost": 0, "flows": flows})

gate_seeds = {
    "one_window": gate_window(0, [[7, 32, 100], [9, 0, 5]]),
    "two_windows": SEP.join([gate_window(0, [[7, 32, 100]]), gate_window(2_000_000_000, [[7, 0, 40]])]),
    "huge_counts": gate_window(0, [[2**32 - 1, 0, 2**32 - 1]] * 4),
    "unit_mismatch": SEP.join([gate_window(0, []), gate_window(1, [[1, 2, 3]], unit="bytes")]),
    "bad": SEP.join([gate_window(0, [[1, 5, 4]]), gate_window(0, [], v=2)]),
}
out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "seeds", "codesign_window")
os.makedirs(out, exist_ok=True)
for name, data in gate_seeds.items():
    with open(os.path.join(out, name + ".bin"), "wb") as f:
        f.write(data)
print(f"{len(gate_seeds)} seeds in {out}")
