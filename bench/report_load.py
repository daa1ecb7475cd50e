#!/usr/bin/env python3
"""How long headless Chromium takes to load a flipscope report.html and lay it out.

Opens the page from disk over the DevTools protocol (tests/ref/check_report_chromium.py's client,
offline flags), --runs times in a fresh tab each, and prints one JSON line: the file's size, and
per run the navigation's wall time to the load event, the page's own navigation timing (DOM
content loaded, load event end) and a forced full layout (scrollHeight after the load) measured
inside the page. The figure the target applies to is `ready_s`: navigation start to the end of
that layout. `cpu_s` is the CPU time (user + system) Chromium's processes spent from the
navigation to the end of that layout: on a machine shared with other work the wall times stretch,
the CPU time much less.

  bench/report_load.py REPORT.html [--runs 3] [--chromium PATH]
"""
import argparse
import json
import os
import pathlib
import shutil
import statistics
import sys
import tempfile
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent / "tests" / "ref"))
from check_report_chromium import DevTools  # noqa: E402

LAYOUT = r"""
(() => {
  const t0 = performance.now();
  const h = document.documentElement.scrollHeight;
  document.body.getBoundingClientRect();
  const t1 = performance.now();
  const nav = performance.getEntriesByType("navigation")[0];
  return JSON.stringify({height: h, layout_ms: t1 - t0, dom_content_loaded_ms: nav.domContentLoadedEventEnd,
                         load_end_ms: nav.loadEventEnd, ready_ms: t1});
})()
"""


def tree_cpu_s(root):
    """User + system seconds of root and its live descendants (their reaped children included)."""
    tick = os.sysconf("SC_CLK_TCK")
    parent, cpu = {}, {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        parent[int(d)] = int(fields[1])
        cpu[int(d)] = sum(int(x) for x in fields[11:15]) / tick  # utime stime cutime cstime
    total = 0.0
    for pid in cpu:
        p = pid
        while p not in (0, 1, root) and p in parent:
            p = parent[p]
        if p == root:
            total += cpu[pid]
    return total


def one_run(cdp, url, timeout):
    target = cdp.call("Target.createTarget", {"url": "about:blank"})["targetId"]
    session = cdp.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
    cdp.call("Page.enable", {}, session)
    cdp.events.clear()
    c0 = tree_cpu_s(cdp.proc.pid)
    t0 = time.monotonic()
    cdp.call("Page.navigate", {"url": url}, session)
    if not cdp.wait_event("Page.loadEventFired", timeout):
        raise RuntimeError("the page never finished loading")
    wall = time.monotonic() - t0
    res = cdp.call("Runtime.evaluate", {"expression": LAYOUT, "returnByValue": True}, session)
    m = json.loads(res["result"]["value"])
    cpu = tree_cpu_s(cdp.proc.pid) - c0
    cdp.call("Target.closeTarget", {"targetId": target})
    return {"load_wall_s": round(wall, 3), "ready_s": round(m["ready_ms"] / 1000, 3),
            "dom_content_loaded_s": round(m["dom_content_loaded_ms"] / 1000, 3),
            "layout_s": round(m["layout_ms"] / 1000, 3), "cpu_s": round(cpu, 2), "height_px": m["height"]}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("html")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--chromium", default=shutil.which("chromium") or "chromium")
    ap.add_argument("--timeout", type=float, default=120)
    a = ap.parse_args()
    path = pathlib.Path(a.html).resolve()
    profile = tempfile.mkdtemp(prefix="fs-chromium-")
    args = ["--headless", "--disable-gpu", "--no-first-run", "--disable-extensions", "--disable-background-networking",
            "--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE localhost", "--proxy-server=http://127.0.0.1:9",
            "--user-data-dir=" + profile, "--window-size=1280,1600", "about:blank"]
    if os.geteuid() == 0:
        args.insert(0, "--no-sandbox")
    cdp = DevTools(a.chromium, args, time.monotonic() + a.timeout * (a.runs + 1), os.path.join(profile, "log"))
    try:
        runs = [one_run(cdp, path.as_uri(), a.timeout) for _ in range(a.runs)]
    finally:
        cdp.close()
        shutil.rmtree(profile, ignore_errors=True)
    print(json.dumps({"file": path.name, "bytes": path.stat().st_size,
                      "ready_s_median": statistics.median(r["ready_s"] for r in runs),
                      "ready_s_min": min(r["ready_s"] for r in runs),
                      "cpu_s_median": statistics.median(r["cpu_s"] for r in runs), "runs": runs}))


if __name__ == "__main__":
    main()
