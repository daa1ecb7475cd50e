#!/usr/bin/env python3
"""Checks that two results.json files are identical apart from timestamps and timings.

Usage: same_results.py A/results.json B/results.json

A refactoring that changes no behaviour must leave an experiment's results.json as it was: the
same captures compared, the same figures, the same recipe. What legitimately differs between two
runs is ignored:
  - when it ran: "created" and every "*_created" key;
  - how long it took: "timings", "seconds", "capture_seconds", "tokens_per_s", every "*_s" key
    (load_s, prefill_s, total_s, ...) and every "*_seconds" key;
  - where it ran: each file's own folder, written out in capture paths, is replaced by "<out>".
Everything else is compared exactly (numbers included). Prints each difference with its JSON path
and exits 1 when there is any; exits 0 when the two agree.
"""
import json
import os
import sys

TIMING_KEYS = {"created", "timings", "seconds", "capture_seconds", "tokens_per_s", "wall_s"}


def ignored(key):
    return key in TIMING_KEYS or key.endswith("_created") or key.endswith("_s") or key.endswith("_seconds")


def normalize(value, folder):
    """The document with ignored keys dropped and the results folder written as <out>."""
    if isinstance(value, dict):
        return {k: normalize(v, folder) for k, v in value.items() if not ignored(k)}
    if isinstance(value, list):
        return [normalize(v, folder) for v in value]
    if isinstance(value, str) and folder:
        return value.replace(folder, "<out>")
    return value


def differences(a, b, path="$"):
    """Yields 'path: a vs b' for every place the two normalized documents differ."""
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(set(a) | set(b)):
            if k not in a:
                yield f"{path}.{k}: only in the second"
            elif k not in b:
                yield f"{path}.{k}: only in the first"
            else:
                yield from differences(a[k], b[k], f"{path}.{k}")
    elif isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            yield f"{path}: {len(a)} entries vs {len(b)}"
        for i, (x, y) in enumerate(zip(a, b)):
            yield from differences(x, y, f"{path}[{i}]")
    elif a != b or type(a) is not type(b):
        yield f"{path}: {json.dumps(a)[:200]} vs {json.dumps(b)[:200]}"


def load(path):
    with open(path, encoding="utf-8") as f:
        doc = json.load(f)
    return normalize(doc, os.path.dirname(os.path.abspath(path)))


def main(argv):
    if len(argv) != 3:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    diffs = list(differences(load(argv[1]), load(argv[2])))
    for d in diffs[:50]:
        print(d)
    if len(diffs) > 50:
        print(f"... and {len(diffs) - 50} more")
    print(f"{len(diffs)} difference(s) apart from timestamps and timings" if diffs else
          "identical apart from timestamps and timings")
    return 1 if diffs else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
