#!/usr/bin/env python3
"""The include graph of src/ between folders (stages): its levels, and the two rules
docs/architecture.md states: no cycle between folders, and a folder includes only folders below
it (so a level is the longest chain of includes under a folder). Also lists the headers that
include each other in a cycle. Test files (*_test.cpp) count apart: they may include test helpers.

    scripts/include_graph.py [--tests] [--dot FILE]

Prints each folder's level and what it includes, then "ok" or each violation; exits 1 on one.
"""
import argparse
import pathlib
import re
import sys
from collections import defaultdict

INCLUDE = re.compile(r'^\s*#\s*include\s+"([a-z_0-9]+)/([^"]+)"', re.M)


def scan(src, with_tests):
    """folder -> {included folder: [(file, header)]}, and file -> [included files] for headers."""
    folders = defaultdict(lambda: defaultdict(list))
    files = defaultdict(list)
    for path in sorted(src.rglob("*")):
        if path.suffix not in (".h", ".cpp") or not path.is_file():
            continue
        if not with_tests and (path.stem.endswith("_test") or "test_util" in path.stem):
            continue
        rel = path.relative_to(src)
        folder = rel.parts[0]
        folders[folder]  # a folder that includes nothing is still one
        for dep, header in INCLUDE.findall(path.read_text(errors="replace")):
            if not (src / dep / header).exists():
                continue  # another project's header spelled the same way
            files[str(rel)].append(f"{dep}/{header}")
            if dep != folder:
                folders[folder][dep].append((str(rel), f"{dep}/{header}"))
    return folders, files


def cycles(graph):
    """Strongly connected components of more than one node (Tarjan), each sorted."""
    index, low, on, stack, out, counter = {}, {}, set(), [], [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1 or v in graph.get(v, ()):
                out.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in list(graph):
        if v not in index:
            visit(v)
    return out


def levels(graph):
    """Level 0: includes no other folder; else 1 + the highest level it includes (cycles: None)."""
    memo = {}

    def level(v, seen=()):
        if v in memo:
            return memo[v]
        if v in seen:
            return None
        below = [level(w, seen + (v,)) for w in graph.get(v, ())]
        if any(b is None for b in below):
            return None
        memo[v] = 1 + max(below) if below else 0
        return memo[v]

    return {v: level(v) for v in graph}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--src", default=str(pathlib.Path(__file__).resolve().parent.parent / "src"))
    ap.add_argument("--tests", action="store_true", help="count *_test.cpp and test helpers too")
    ap.add_argument("--dot", help="also write the folder graph as Graphviz dot")
    a = ap.parse_args()
    folders, files = scan(pathlib.Path(a.src), a.tests)
    graph = {f: set(deps) for f, deps in folders.items()}
    bad = 0
    folder_cycles = cycles(graph)
    lv = levels(graph)
    n_levels = 1 + max((v for v in lv.values() if v is not None), default=0)
    print(f"{len(graph)} folders on {n_levels} levels")
    for f in sorted(graph, key=lambda f: (lv[f] is None, lv[f] or 0, f)):
        print(f"  {lv[f] if lv[f] is not None else '?':>2}  {f:<12} -> {', '.join(sorted(graph[f])) or '-'}")
    for c in folder_cycles:
        bad += 1
        print("cycle between folders: " + " <-> ".join(c))
        for f in c:
            for dep in graph[f]:
                if dep in c:
                    print(f"  {f} -> {dep}: " + ", ".join(sorted({x for x, _ in folders[f][dep]})))
    for c in cycles({k: set(v) for k, v in files.items()}):
        bad += 1
        print("headers that include each other: " + " <-> ".join(c))
    # Upward: a folder including one at its own level or above (only possible through a cycle,
    # which is reported above; kept as its own check so a level rule change cannot hide one).
    for f, deps in graph.items():
        for d in deps:
            if lv[f] is not None and lv[d] is not None and lv[d] >= lv[f]:
                bad += 1
                print(f"upward include: {f} (level {lv[f]}) -> {d} (level {lv[d]})")
    if a.dot:
        with open(a.dot, "w") as out:
            out.write("digraph includes {\n  rankdir=BT;\n")
            for f in sorted(graph):
                for d in sorted(graph[f]):
                    out.write(f'  "{f}" -> "{d}";\n')
            out.write("}\n")
    print("ok: no cycle, no upward include" if bad == 0 else f"{bad} violation(s)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
