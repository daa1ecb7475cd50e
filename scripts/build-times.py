#!/usr/bin/env python3
"""Where a build's time went, from ninja's log: the slowest translation units and the totals.

    build-times.py [BUILD_DIR] [--top N] [--cpu LOG]

Reads BUILD_DIR/.ninja_log (default: build), keeps the last entry of each output (a rebuilt
object replaces the earlier one), and prints the N slowest objects (default 10), then the
compiler time summed over every object, the link time (a step with several outputs, such as a
test executable and its list of tests, counted once), the number of executables linked, and the
build's span (first start to last end). A unity batch's object (Unity/unity_N_cxx.cxx.o) is named
by the files it holds, read from its generated source. Informational: times taken on a loaded machine are
longer, and objects ccache served take milliseconds.
With --cpu LOG (written by scripts/timed-launcher.sh) it also prints the CPU seconds (user +
system) of the compiles and links, which other work on the machine does not inflate.
Exits 1 with one line when a log is missing or unreadable.
"""
import argparse
import os
import sys


def read_log(path):
    """Each output's (start_ms, end_ms, command hash) from a ninja log (format v5 or later), the
    last run of each."""
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
            entries[output] = (start, end, parts[4] if len(parts) > 4 else output)
    return entries


def unity_name(build, output):
    """`output` with the files a unity batch includes, '(a.cpp b.cpp ...)', when it is one."""
    if "/Unity/" not in output or not output.endswith(".o"):
        return output
    try:
        with open(os.path.join(build, output[:-2]), encoding="utf-8", errors="replace") as f:
            files = [os.path.basename(line.split('"')[1]) for line in f if line.startswith("#include")]
    except (OSError, IndexError):
        return output
    return f"{output} ({' '.join(files)})" if files else output


def read_cpu_log(path):
    """Each output's CPU seconds (user + system) from timed-launcher.sh's log, the last run of each."""
    cpu = {}
    with open(path, encoding="utf-8", errors="replace") as f:
        for n, line in enumerate(f, start=1):
            parts = line.split(maxsplit=3)
            if len(parts) != 4:
                continue  # a line of the compiler's own (time prints a failed command's status)
            try:
                cpu[parts[3].strip()] = float(parts[0]) + float(parts[1])
            except ValueError:
                continue
    return cpu


def cpu_summary(cpu, top, build):
    """Lines: the `top` most expensive compiles by CPU, then the compile and link totals."""
    objects = {o: s for o, s in cpu.items() if o.endswith(".o")}
    links = {o: s for o, s in cpu.items() if not o.endswith(".o")}
    lines = [f"build-times: CPU (user + system) of the {min(top, len(objects))} most expensive of {len(objects)} compiles"]
    lines += [f"  {s:7.1f} s  {unity_name(build, o)}" for o, s in sorted(objects.items(), key=lambda kv: -kv[1])[:top]]
    lines.append(f"  CPU: compile {sum(objects.values()):.0f} s over {len(objects)} objects, "
                 f"link {sum(links.values()):.0f} s over {len(links)} steps")
    return lines


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("build", nargs="?", default="build")
    ap.add_argument("--top", type=int, default=10)
    ap.add_argument("--cpu", metavar="LOG", help="timed-launcher.sh's log of the same build")
    args = ap.parse_args()
    log = os.path.join(args.build, ".ninja_log")
    try:
        entries = read_log(log)
    except (OSError, ValueError) as e:
        print(f"build-times: {log}: {e}", file=sys.stderr)
        return 1
    cpu = None
    if args.cpu:
        try:
            cpu = read_cpu_log(args.cpu)
        except OSError as e:
            print(f"build-times: {args.cpu}: {e}", file=sys.stderr)
            return 1
    objects = {o: e - s for o, (s, e, _) in entries.items() if o.endswith(".o")}
    # One step may write several outputs (an executable and its test list): count it once.
    steps = {}
    for o, (s, e, h) in entries.items():
        if not o.endswith(".o") and not o.endswith(".gch"):
            steps.setdefault((s, e, h), []).append(o)
    links = {min(outs, key=len): e - s for (s, e, _), outs in steps.items()}
    executables = [o for o in links if o.startswith("bin/") or "/" in o and "." not in os.path.basename(o)]
    if not entries:
        print(f"build-times: {log}: no entries")
        return 0
    span = max(e for _, e, _ in entries.values()) - min(s for s, _, _ in entries.values())
    print(f"build-times: the {min(args.top, len(objects))} slowest of {len(objects)} objects ({log})")
    for o, ms in sorted(objects.items(), key=lambda kv: -kv[1])[: args.top]:
        print(f"  {ms / 1000:7.1f} s  {unity_name(args.build, o)}")
    print(f"  compile {sum(objects.values()) / 1000:.0f} s over {len(objects)} objects, "
          f"link and other steps {sum(links.values()) / 1000:.0f} s over {len(links)} "
          f"({len(executables)} executables), span {span / 1000:.0f} s")
    if cpu is not None:
        print("\n".join(cpu_summary(cpu, args.top, args.build)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
