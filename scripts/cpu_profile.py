#!/usr/bin/env python3
"""Runs a command and says where its CPU time went: the CPU time (user + sys, its children
included) between the status lines it prints, read from /proc every half second.

    python3 scripts/cpu_profile.py -o profile.json -- build/bin/flipscope run examples/demo.toml -o out/demo

Each line of the command's output starts a phase; a phase's CPU is the CPU used until the next
line. The totals, the wall time and the load average at the start and end are printed last.
"""
import argparse
import json
import os
import subprocess
import sys
import threading
import time

TICK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid):
    """user + sys of pid and of its waited-for children, in seconds; None once it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return sum(int(fields[i]) for i in (11, 12, 13, 14)) / TICK


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-o", "--output", required=True, help="JSON file for the phases")
    ap.add_argument("command", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    cmd = a.command[1:] if a.command[:1] == ["--"] else a.command
    load0 = os.getloadavg()
    t0 = time.time()
    usage0 = os.times()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1)
    last = {"cpu": 0.0}
    stop = threading.Event()

    def poll():  # the latest reading, so a phase ending at exit is not lost
        while not stop.wait(0.5):
            c = cpu_seconds(proc.pid)
            if c is not None:
                last["cpu"] = c

    threading.Thread(target=poll, daemon=True).start()
    phases = [{"line": "(start)", "t": 0.0, "cpu": 0.0}]
    for line in proc.stdout:
        sys.stdout.write(line)
        c = cpu_seconds(proc.pid)
        if c is not None:
            last["cpu"] = c
        phases.append({"line": line.rstrip(), "t": time.time() - t0, "cpu": last["cpu"]})
    rc = proc.wait()
    stop.set()
    wall = time.time() - t0
    usage = os.times()
    total = (usage.children_user - usage0.children_user) + (usage.children_system - usage0.children_system)
    user = usage.children_user - usage0.children_user
    ends = phases[1:] + [{"t": wall, "cpu": total}]
    out = [{"line": p["line"], "wall_s": round(e["t"] - p["t"], 2), "cpu_s": round(e["cpu"] - p["cpu"], 2)}
           for p, e in zip(phases, ends)]
    summary = {"command": cmd, "rc": rc, "wall_s": round(wall, 1), "cpu_s": round(total, 1), "user_s": round(user, 1),
               "sys_s": round(total - user, 1), "load_start": load0, "load_end": os.getloadavg(), "phases": out}
    with open(a.output, "w") as f:
        json.dump(summary, f, indent=1)
    print(f"wall {wall:.0f} s, CPU {total:.0f} s (user {user:.0f} s, sys {total - user:.0f} s), "
          f"load average {load0[0]:.1f} at the start, {os.getloadavg()[0]:.1f} at the end", file=sys.stderr)
    return rc


if __name__ == "__main__":
    sys.exit(main())
