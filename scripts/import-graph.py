#!/usr/bin/env python3
"""Module import graph of a crate's src/ directory, from its `crate::` paths.

Usage: scripts/import-graph.py control/src [dataplane/src/upf --root upf]

Reads every .rs file, drops `#[cfg(test)] mod tests { ... }` blocks, out-of-line test modules
(files named `tests.rs`, declared `#[cfg(test)] mod tests;`) and comments, and records
an edge A -> B for each `crate::B` path in module A (submodules of a directory count as the
directory's module when --depth 1). Prints the edges and exits 1 if the graph has a cycle
(printing it). `cargo modules dependencies --acyclic` does the same check on the compiler's
view, at the price of building rust-analyzer; this reads text, so a path built by a macro
is not seen.
"""
import os
import re
import sys


def module_of(root, path, prefix):
    rel = os.path.relpath(path, root)[:-3]
    parts = rel.split(os.sep)
    if parts[-1] == "mod":
        parts = parts[:-1]
    if parts in ([], ["lib"], ["main"]):
        return None
    return ".".join(([prefix] if prefix else []) + parts[:1])


def strip(text):
    text = re.sub(r"//[^\n]*", "", text)
    out, i = [], 0
    for m in re.finditer(r"#\[cfg\(test\)\]\s*mod\s+\w+\s*\{", text):
        if m.start() < i:
            continue
        out.append(text[i:m.start()])
        depth, j = 1, m.end()
        while depth and j < len(text):
            depth += {"{": 1, "}": -1}.get(text[j], 0)
            j += 1
        i = j
    out.append(text[i:])
    return "".join(out)


def graph(root, prefix=None, crate_prefix=None):
    edges = set()
    for d, _, files in os.walk(root):
        for f in files:
            if not f.endswith(".rs") or f == "tests.rs":
                continue
            p = os.path.join(d, f)
            a = module_of(root, p, prefix)
            if a is None:
                continue
            text = strip(open(p).read())
            base = r"crate::" + (re.escape(crate_prefix) + r"::" if crate_prefix else "")
            names = [m.group(1) for m in re.finditer(base + r"(\w+)", text)]
            # Grouped imports: `use crate::{a::X, b};`.
            for g in re.finditer(base + r"\{([^}]*)\}", text):
                names += re.findall(r"(?:^|,)\s*(\w+)", g.group(1))
            # A file directly under a module directory names its siblings with `super::`.
            if crate_prefix and os.path.dirname(p) == root:
                names += [m.group(1) for m in re.finditer(r"\bsuper::(\w+)", text)]
            for n in names:
                b = ".".join(([prefix] if prefix else []) + [n])
                if b != a and n not in ("self", "super") and n[:1].islower():
                    edges.add((a, b))
    return edges


def cycle(edges):
    adj = {}
    for a, b in edges:
        adj.setdefault(a, []).append(b)
    state, stack = {}, []

    def dfs(n):
        state[n] = 1
        stack.append(n)
        for m in adj.get(n, []):
            if state.get(m) == 1:
                return stack[stack.index(m):] + [m]
            if not state.get(m):
                c = dfs(m)
                if c:
                    return c
        stack.pop()
        state[n] = 2
        return None

    for n in list(adj):
        if not state.get(n):
            c = dfs(n)
            if c:
                return c
    return None


def main(argv):
    root = argv[1]
    crate_prefix = None
    if "--root" in argv:
        crate_prefix = argv[argv.index("--root") + 1]
    edges = graph(root, crate_prefix=crate_prefix)
    by = {}
    for a, b in sorted(edges):
        by.setdefault(a, []).append(b)
    mods = sorted({m for e in edges for m in e})
    for m in mods:
        print(f"{m} -> {', '.join(by.get(m, [])) or '(none)'}")
    c = cycle(edges)
    if c:
        print("cycle: " + " -> ".join(c))
        return 1
    print("acyclic")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
