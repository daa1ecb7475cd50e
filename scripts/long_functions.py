#!/usr/bin/env python3
"""Functions longer than a limit (default 60 lines, the project's rule) in src/'s non-test C++
files, longest first, and files over a line limit (default 400).

    scripts/long_functions.py [--max-lines 60] [--max-file 400]

A function is a definition that opens at the start of a line (namespace scope, clang-format's
layout) or a member defined in a class body, from its first line to its closing brace. Exits 1
when any is over the limit.
"""
import argparse
import pathlib
import re
import sys

# A definition's first line: a name and "(" at namespace scope or inside a class (indented by 2),
# not a control statement, ending where its body opens.
START = re.compile(r"^(?:  )?(?!(?:if|for|while|switch|return|else|do|case)\b)[A-Za-z_~][\w:<>,*&\s~\[\]]*\(")


def functions(path):
    lines = path.read_text(errors="replace").split("\n")
    i = 0
    while i < len(lines):
        line = lines[i]
        if START.match(line) and not line.rstrip().endswith(";") and "=" not in line.split("(")[0]:
            # Find the body's opening brace within a few lines (a wrapped signature).
            j = i
            while j < len(lines) and j < i + 8 and "{" not in lines[j] and not lines[j].rstrip().endswith(";"):
                j += 1
            if j < len(lines) and "{" in lines[j]:
                depth, k = 0, j
                while k < len(lines):
                    depth += lines[k].count("{") - lines[k].count("}")
                    if depth <= 0:
                        break
                    k += 1
                name = re.search(r"([~\w:]+)\s*\(", line)
                yield (name.group(1) if name else line.strip()), i + 1, k - i + 1
                i = k + 1
                continue
        i += 1


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--src", default=str(pathlib.Path(__file__).resolve().parent.parent / "src"))
    ap.add_argument("--max-lines", type=int, default=60)
    ap.add_argument("--max-file", type=int, default=400)
    a = ap.parse_args()
    src = pathlib.Path(a.src)
    long_fns, long_files = [], []
    for path in sorted(src.rglob("*")):
        if path.suffix not in (".cpp", ".h") or "_test" in path.stem or "test_util" in path.stem:
            continue
        n = path.read_text(errors="replace").count("\n")
        if n > a.max_file:
            long_files.append((n, str(path.relative_to(src))))
        for name, line, length in functions(path):
            if length > a.max_lines:
                long_fns.append((length, f"{path.relative_to(src)}:{line}", name))
    for length, where, name in sorted(long_fns, reverse=True):
        print(f"{length:4} lines  {name}  ({where})")
    for n, where in sorted(long_files, reverse=True):
        print(f"{n:4} lines  file {where}")
    print(f"{len(long_fns)} functions over {a.max_lines} lines, {len(long_files)} files over {a.max_file} lines")
    return 1 if long_fns or long_files else 0


if __name__ == "__main__":
    sys.exit(main())
