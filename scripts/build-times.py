#!/usr/bin/env python3
"""Where a build's time went, from ninja's log: the slowest translation units and the totals.

    build-times.py [BUILD_DIR] [--top N]

Reads BUILD_DIR/.ninja_log (default: build), keeps the last entry of each output (a rebuilt
object replaces the earlier one), and prints the N slowest objects (default 10), then the
compiler time summed over every object, the link time, and the build's span (first start to
last end). Informational: times taken on a loaded machine are longer, and objects ccache served
take milliseconds. Exits 1 with one line when the log is missing or unreadable.
"""
import argparse
import os
import sys


def read_log(path):
    """Each output's (start_ms, end_ms) from a ninja log (format v5 or later), the last run of each."""
    entries = {}
    with open(path, encoding="utf-8", errors="replace") as f:
        header = f.readline()
        if not header.startswith("# ninja log v"):
            raise ValueError("not a ninja log (no '# ninja log vN' header)")
        for n, line in enumerate(f, start=2):
            parts = line.rstrip("\n").split("\t")
            if len(parts) < 4:
                raise ValueError(f"line {n}: expected 5 tab-separated fields")
            start, end, output = int(parts[0]), int(parts[1]), parts[3]
            entries[output] = (start, end)
    return entries


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("build", nargs="?", default="build")
    ap.add_argument("--top", type=int, default=10)
    args = ap.parse_args()
    log = os.path.join(args.build, ".ninja_log")
    try:
        entries = read_log(log)
    except (OSError, ValueError) as e:
        print(f"build-times: {log}: {e}", file=sys.stderr)
        return 1
    objects = {o: e - s for o, (s, e) in entries.items() if o.endswith(".o")}
    links = {o: e - s for o, (s, e) in entries.items() if not o.endswith(".o") and not o.endswith(".gch")}
    if not entries:
        print(f"build-times: {log}: no entries")
        return 0
    span = max(e for _, e in entries.values()) - min(s for s, _ in entries.values())
    print(f"build-times: the {min(args.top, len(objects))} slowest of {len(objects)} objects ({log})")
    for o, ms in sorted(objects.items(), key=lambda kv: -kv[1])[: args.top]:
        print(f"  {ms / 1000:7.1f} s  {o}")
    print(f"  compile {sum(objects.values()) / 1000:.0f} s over {len(objects)} objects, "
          f"link and other steps {sum(links.values()) / 1000:.0f} s over {len(links)}, span {span / 1000:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
