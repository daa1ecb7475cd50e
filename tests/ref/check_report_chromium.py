#!/usr/bin/env python3
"""Opens a flipscope report.html from disk in headless Chromium and checks that it renders
offline: the DOM holds the ranking table and the SVG charts, the page logged no console error
or exception, and it attempted no network request (every name resolves to nothing and the
proxy is a closed port, so an attempt also fails loudly). Optionally saves a screenshot.

Talks to Chromium over the DevTools protocol on --remote-debugging-pipe (fds 3 and 4), Python
standard library only. Exit status 0 when every check passes, 1 with one line per failure.

With --page history the page is flipscope history's history.html: its step table
(table.history-steps) and sections instead of the experiment report's ranking and sections; with
--page suite a suite's report.html: its per-session tables (table.suite-sessions), kinds tables,
recipe and depth charts.

usage: check_report_chromium.py REPORT.html [--page report|history|suite] [--screenshot OUT.png]
                                [--screenshot-height N] [--chromium PATH]
                                [--timeout S]
"""
import argparse
import base64
import fcntl
import json
import os
import pathlib
import select
import shutil
import subprocess
import sys
import tempfile
import time

# What the page is checked for, evaluated inside it after the load event.
DOM_PROBE = r"""
(() => {
  const q = (s) => document.querySelectorAll(s);
  const charts = Array.from(q("svg.chart")).map((s) => {
    const r = s.getBoundingClientRect();
    return {width: r.width, height: r.height, series: s.querySelectorAll("g.series").length,
            band: s.querySelectorAll("path.band").length};
  });
  const external = Array.from(q("[src], link[href], object[data], iframe, embed"))
      .map((e) => e.outerHTML.slice(0, 120));
  const css_urls = Array.from(document.styleSheets).flatMap((s) => Array.from(s.cssRules))
      .map((r) => r.cssText).filter((t) => /url\(|@import/.test(t));
  return JSON.stringify({
    title: document.title,
    ranking_rows: q("table.ranking tbody tr").length,
    history_rows: q("table.history-steps tbody tr").length,
    exact_rows: q("table.history-exact tbody tr").length,
    // The order as a reader sees it: each row's "#" cell, name, tie group and tie badge.
    ranking: Array.from(q("table.ranking tbody.tie-group tr")).map((r) => ({
      rank: r.cells[0].textContent, config: (r.cells[1].querySelector("strong") || {}).textContent,
      group: r.parentElement.dataset.tieGroup,
      tie: Array.from(r.cells[1].querySelectorAll(".badge")).some((b) => b.textContent === "tie")})),
    ranking_key: (document.querySelector("p.ranking-key") || {}).textContent || "",
    tie_notes: Array.from(q("p.tie-note")).map((p) => p.textContent),
    headline: (document.querySelector("#headline") || {}).textContent || "",
    refused_rows: Array.from(q("table.ranking tr.refused")).map((r) => r.textContent),
    charts: charts,
    sections: Array.from(q("main section[id]")).map((s) => s.id),
    branches: q("article.branch").length,
    diff_marks: q("article.branch mark.diff").length,
    masked_marks: Array.from(q("article.branch mark.masked")).map((m) => {
      const r = m.getBoundingClientRect();
      return {title: m.title, text: m.textContent, visible: r.width > 0 && r.height > 0,
              background: getComputedStyle(m).backgroundColor};
    }),
    scripts: q("script").length,
    external: external,
    css_urls: css_urls,
    resources: performance.getEntriesByType("resource").map((e) => e.name),
    text_has_raw_script_tag: document.body.innerText.includes("</script>"),
    body_height: document.documentElement.scrollHeight,
    // A suite's page: each per-session table's sessions, each kinds table's kinds, the matrix line.
    suite_session_rows: q("table.suite-sessions tbody tr:not(:first-child)").length,
    suite_sessions: Array.from(q("table.suite-sessions")).map((t) =>
        Array.from(t.querySelectorAll("tbody tr:not(:first-child)")).map((r) => r.cells[0].textContent)),
    suite_kinds: Array.from(new Set(Array.from(q("table.suite-kinds tbody tr:not(:first-child)"))
        .map((r) => r.cells[0].textContent))),
    suite_recipe: (document.querySelector("#recipe pre") || {}).textContent || "",
    suite_matrix: (document.querySelector("#matrix") || {}).textContent || "",
  });
})()
"""

REQUIRED_SECTIONS = {"report": ["headline", "ranking", "charts", "flips", "branches", "recipe", "disclosure"],
                     "history": ["versions", "steps", "windows", "exact", "forks"],
                     "suite": ["recipe", "pooled", "depth"]}
# The table whose rows the page must have, per page.
REQUIRED_ROWS = {"report": ("ranking_rows", "table.ranking"), "history": ("history_rows", "table.history-steps"),
                 "suite": ("suite_session_rows", "table.suite-sessions")}


class DevTools:
    """A minimal DevTools protocol client over Chromium's debugging pipe (NUL-framed JSON)."""

    def __init__(self, chromium, args, deadline, log_path):
        to_child_r, self.to_child_w = os.pipe()
        self.from_child_r, from_child_w = os.pipe()
        # Copy the child's ends to fds >= 10 so dup2 onto 3 and 4 cannot clobber one another.
        hi_r = fcntl.fcntl(to_child_r, fcntl.F_DUPFD_CLOEXEC, 10)
        hi_w = fcntl.fcntl(from_child_w, fcntl.F_DUPFD_CLOEXEC, 10)

        def child_fds():
            os.dup2(hi_r, 3)
            os.dup2(hi_w, 4)

        # Chromium's own stderr goes to a file: an unread pipe would fill up and stall it.
        with open(log_path, "wb") as log:
            self.proc = subprocess.Popen([chromium, "--remote-debugging-pipe"] + args, stdin=subprocess.DEVNULL,
                                         stdout=log, stderr=log, preexec_fn=child_fds, close_fds=False)
        for fd in (to_child_r, from_child_w, hi_r, hi_w):
            os.close(fd)
        self.deadline = deadline
        self.buffer = b""
        self.next_id = 0
        self.events = []

    def send(self, method, params=None, session=None):
        self.next_id += 1
        msg = {"id": self.next_id, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        os.write(self.to_child_w, json.dumps(msg).encode() + b"\0")
        return self.next_id

    def _read(self, timeout):
        """Reads whatever arrives within timeout; returns the complete messages."""
        ready, _, _ = select.select([self.from_child_r], [], [], max(0.0, timeout))
        if ready:
            chunk = os.read(self.from_child_r, 1 << 20)
            if not chunk:
                raise RuntimeError("chromium closed the debugging pipe (exit code %s)" % self.proc.poll())
            self.buffer += chunk
        messages = []
        while b"\0" in self.buffer:
            raw, self.buffer = self.buffer.split(b"\0", 1)
            messages.append(json.loads(raw))
        return messages

    def call(self, method, params=None, session=None):
        want = self.send(method, params, session)
        while True:
            left = self.deadline - time.monotonic()
            if left <= 0:
                raise RuntimeError("timed out waiting for %s" % method)
            for m in self._read(left):
                if m.get("id") == want:
                    if "error" in m:
                        raise RuntimeError("%s failed: %s" % (method, m["error"]))
                    return m.get("result", {})
                if "method" in m:
                    self.events.append(m)

    def wait_event(self, method, seconds):
        end = min(self.deadline, time.monotonic() + seconds)
        while time.monotonic() < end:
            if any(e["method"] == method for e in self.events):
                return True
            for m in self._read(end - time.monotonic()):
                if "method" in m:
                    self.events.append(m)
        return any(e["method"] == method for e in self.events)

    def settle(self, seconds):
        """Collects events for a while (late requests, timers)."""
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            for m in self._read(end - time.monotonic()):
                if "method" in m:
                    self.events.append(m)

    def close(self):
        try:
            self.send("Browser.close")
            self.proc.wait(timeout=10)
        except Exception:  # noqa: BLE001 - whatever happened, the browser must not outlive us
            self.proc.kill()
            self.proc.wait()
        for fd in (self.to_child_w, self.from_child_r):
            try:
                os.close(fd)
            except OSError:
                pass


def problems_in_events(events, document_url):
    """Console errors, exceptions, error log entries and any request other than the document."""
    out = []
    for e in events:
        method, p = e["method"], e.get("params", {})
        if method == "Runtime.consoleAPICalled" and p.get("type") in ("error", "warning", "assert"):
            text = " ".join(str(a.get("value", a.get("description", ""))) for a in p.get("args", []))
            out.append("console %s: %s" % (p["type"], text))
        elif method == "Runtime.exceptionThrown":
            d = p.get("exceptionDetails", {})
            out.append("exception: %s" % d.get("exception", {}).get("description", d.get("text", "?")))
        elif method == "Log.entryAdded" and p.get("entry", {}).get("level") in ("error", "warning"):
            entry = p["entry"]
            out.append("log %s: %s %s" % (entry["level"], entry.get("text", ""), entry.get("url", "")))
        elif method == "Network.requestWillBeSent" and p.get("request", {}).get("url") != document_url:
            out.append("network request attempted: %s" % p["request"]["url"])
        elif method == "Network.loadingFailed" and p.get("type") != "Document":
            out.append("network load failed: %s" % p.get("errorText", "?"))
    return out


def problems_in_dom(dom, page="report"):
    out = []
    rows, table = REQUIRED_ROWS[page]
    if dom[rows] < 1:
        out.append("DOM: no rows in " + table)
    if len(dom["charts"]) < 2:
        out.append("DOM: %d svg.chart elements, expected 2" % len(dom["charts"]))
    for i, c in enumerate(dom["charts"]):
        if c["width"] < 100 or c["height"] < 50:
            out.append("DOM: chart %d is not laid out (%.0fx%.0f)" % (i, c["width"], c["height"]))
        if c["series"] < 1:
            out.append("DOM: chart %d has no series" % i)
    missing = [s for s in REQUIRED_SECTIONS[page] if s not in dom["sections"]]
    if missing:
        out.append("DOM: missing sections %s" % ", ".join(missing))
    if dom["external"]:
        out.append("DOM: elements that load resources: %s" % "; ".join(dom["external"]))
    if dom["css_urls"]:
        out.append("DOM: CSS that loads resources: %s" % "; ".join(dom["css_urls"]))
    if dom["resources"]:
        out.append("DOM: resources fetched: %s" % ", ".join(dom["resources"]))
    for m in dom["masked_marks"]:
        if not m["visible"] or not m["title"].startswith("first masked"):
            out.append("DOM: a first-masked mark is hidden or untitled: %s" % m)
    if dom["scripts"] > 1:
        out.append("DOM: %d script elements, expected at most 1 (data must never become a script)" % dom["scripts"])
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("html")
    ap.add_argument("--page", choices=sorted(REQUIRED_SECTIONS), default="report")
    ap.add_argument("--screenshot")
    ap.add_argument("--screenshot-height", type=int, default=0,
                    help="the top N pixels only (0: the whole page, at most 8000)")
    ap.add_argument("--chromium", default=shutil.which("chromium") or "chromium")
    ap.add_argument("--timeout", type=float, default=60)
    a = ap.parse_args()
    path = pathlib.Path(a.html).resolve()
    if not path.is_file():
        print("check_report_chromium: %s: no such file" % path)
        return 1
    url = path.as_uri()
    profile = tempfile.mkdtemp(prefix="fs-chromium-")
    args = ["--headless", "--disable-gpu", "--no-first-run", "--no-default-browser-check", "--disable-extensions",
            "--disable-background-networking", "--disable-sync", "--disable-component-update",
            "--disable-features=Translate,MediaRouter,OptimizationHints",
            # No name resolves and every connection goes to a closed proxy port: nothing leaves.
            '--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE localhost', "--proxy-server=http://127.0.0.1:9",
            "--proxy-bypass-list=<-loopback>", "--user-data-dir=" + profile, "--window-size=1280,1600",
            "--hide-scrollbars", "about:blank"]
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        args.insert(0, "--no-sandbox")  # Chromium refuses to run as root with its sandbox
    deadline = time.monotonic() + a.timeout
    log_path = os.path.join(profile, "chromium.log")
    try:
        cdp = DevTools(a.chromium, args, deadline, log_path)
    except OSError as e:
        print("check_report_chromium: cannot start %s (scripts/setup.sh installs Debian's chromium): %s"
              % (a.chromium, e))
        shutil.rmtree(profile, ignore_errors=True)
        return 1
    failures = []
    try:
        target = cdp.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = cdp.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        for domain in ("Runtime", "Log", "Network", "Page"):
            cdp.call(domain + ".enable", {}, session)
        cdp.events.clear()  # only what the report itself does counts
        nav = cdp.call("Page.navigate", {"url": url}, session)
        if nav.get("errorText"):
            failures.append("navigation failed: %s" % nav["errorText"])
        if not cdp.wait_event("Page.loadEventFired", a.timeout):
            failures.append("the page never finished loading")
        cdp.settle(1.0)
        res = cdp.call("Runtime.evaluate", {"expression": DOM_PROBE, "returnByValue": True}, session)
        if "exceptionDetails" in res:
            failures.append("DOM probe failed: %s" % res["exceptionDetails"].get("text"))
            dom = None
        else:
            dom = json.loads(res["result"]["value"])
            failures += problems_in_dom(dom, a.page)
        # Printing must work too (the page opens <details> for print from its one script).
        pdf = cdp.call("Page.printToPDF", {"printBackground": False}, session)
        pdf_bytes = len(base64.b64decode(pdf.get("data", "")))
        if pdf_bytes < 1000:
            failures.append("print to PDF produced %d bytes" % pdf_bytes)
        if a.screenshot and dom:
            height = min(int(dom["body_height"]), 8000)
            if a.screenshot_height > 0:
                height = min(height, a.screenshot_height)
            cdp.call("Emulation.setDeviceMetricsOverride",
                     {"width": 1280, "height": height, "deviceScaleFactor": 1, "mobile": False}, session)
            shot = cdp.call("Page.captureScreenshot", {"format": "png"}, session)
            pathlib.Path(a.screenshot).write_bytes(base64.b64decode(shot["data"]))
        cdp.settle(0.3)
        failures += problems_in_events(cdp.events, url)
        if dom:
            print(json.dumps({k: dom[k] for k in ("title", "ranking_rows", "history_rows", "exact_rows", "charts", "sections", "branches", "masked_marks",
                                                  "ranking", "ranking_key", "tie_notes", "headline", "suite_sessions",
                                                  "suite_kinds", "suite_recipe", "suite_matrix")}))
    except (RuntimeError, OSError) as e:  # a protocol error, a timeout, or the browser gone (broken pipe)
        failures.append("%s: %s" % (type(e).__name__, e))
        with open(log_path, "rb") as log:  # the browser's last words explain most start-up failures
            failures += ["chromium: " + line for line in log.read().decode(errors="replace").splitlines()[-5:]]
    finally:
        cdp.close()
        shutil.rmtree(profile, ignore_errors=True)
    for f in failures:
        print("check_report_chromium: %s: %s" % (path.name, f))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
