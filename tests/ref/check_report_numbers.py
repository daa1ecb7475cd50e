#!/usr/bin/env python3
"""Independent check of the report stage's numbers against results.json.

usage: check_report_numbers.py RESULTS.json RESULTS.csv SERIES.json

- results.csv has one row per configuration; measured rows come first in the ranking order
  (recipe.ranking where given, else median flip rate then KL mean), refused/failed rows after;
  every summary value equals results.json's; kv_bytes_at_context = kv_bytes_per_token x the
  context length (the baseline's ctx_size, else the workload's n_tokens); text fields round-trip;
  `replay` is the configuration's. Under replay = "both" the served twins' rows follow, unranked, in
  the same order rule and checked the same way against results["served"].
- SERIES.json ({config: {field: [[index, value], ...]}}, as the report computed them) holds, for
  every window, the median over repeats of that window's field, recomputed here with numpy.
Exit status 0 when everything matches, 1 with one line per mismatch.
"""
import csv
import json
import math
import sys

import numpy as np


def close(a, b):
    if a is None or b is None:
        return a is None and b is None
    return math.isclose(a, b, rel_tol=1e-12, abs_tol=1e-300)


def num(text):
    return None if text == "" else float(text)


def check_rows(doc, rows, ranked_doc, bad):
    """The CSV rows of one results document (the experiment's, or its served twins' with no rank)."""
    configs = {c["name"]: c for c in doc.get("configs", [])}
    summary = {s["config"]: s for s in doc.get("summary", [])}
    base = doc.get("baseline", "baseline")
    ctx = configs.get(base, {}).get("knobs", {}).get("ctx_size") or doc.get("workload", {}).get("n_tokens")

    # Expected order: measured configurations by the given ranking, then by fidelity; the rest after.
    given = [r if isinstance(r, str) else r.get("config") for r in doc.get("recipe", {}).get("ranking", [])]
    measured = [n for n in summary if configs.get(n, {}).get("status", "ok") == "ok"]
    ranked = [n for n in given if n in measured]
    ranked += sorted((n for n in measured if n not in ranked),
                     key=lambda n: (summary[n]["median_flip_rate"], summary[n]["kl_mean"]))
    rest = [n for n in configs if n not in ranked]
    expected = ranked + rest
    got = [r["config"] for r in rows]
    if got != expected:
        bad.append("csv order %s, expected %s" % (got, expected))

    for row in rows:
        name = row["config"]
        c, s = configs.get(name, {}), summary.get(name)
        rank = ranked.index(name) + 1 if name in ranked and ranked_doc else None
        if (num(row["rank"]) if row["rank"] else None) != rank:
            bad.append("%s: rank %r, expected %r" % (name, row["rank"], rank))
        for key in ("status", "reason", "description", "flags"):
            want = c.get(key, "ok" if key == "status" else "")
            if row[key] != want:
                bad.append("%s: %s %r, expected %r" % (name, key, row[key], want))
        if s:
            for key in ("median_flip_rate", "flips", "probes", "confident_flips", "kl_mean", "kl_p99", "kl_max",
                        "bit_identical", "bit_identical_of"):
                if not close(num(row[key]), float(s[key])):
                    bad.append("%s: %s %s, expected %s" % (name, key, row[key], s[key]))
            lo, hi = s["flip_rate_ci"]
            if not (close(num(row["flip_rate_ci_lo"]), lo) and close(num(row["flip_rate_ci_hi"]), hi)):
                bad.append("%s: flip_rate_ci %s..%s, expected %s..%s" % (name, row["flip_rate_ci_lo"],
                                                                         row["flip_rate_ci_hi"], lo, hi))
            if row["above_floor"] != ("true" if s["above_floor"] else "false"):
                bad.append("%s: above_floor %s" % (name, row["above_floor"]))
        kv = c.get("kv_bytes_per_token")
        if kv is not None:
            if not close(num(row["kv_bytes_per_token"]), kv):
                bad.append("%s: kv_bytes_per_token %s, expected %s" % (name, row["kv_bytes_per_token"], kv))
            if ctx and not close(num(row["kv_bytes_at_context"]), kv * ctx):
                bad.append("%s: kv_bytes_at_context %s, expected %s" % (name, row["kv_bytes_at_context"], kv * ctx))
        replay = c.get("knobs", {}).get("replay") or "prefill"
        if row["replay"] != replay:
            bad.append("%s: replay %s, expected %s" % (name, row["replay"], replay))
        want_base = "true" if name == base else "false"
        if row["baseline"] != want_base:
            bad.append("%s: baseline %s" % (name, row["baseline"]))



def main():
    results = json.load(open(sys.argv[1], encoding="utf-8"))
    with open(sys.argv[2], newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    series = json.load(open(sys.argv[3], encoding="utf-8"))
    bad = []

    configs = {c["name"]: c for c in results.get("configs", [])}
    # Under replay = "both" the served twins follow, unranked, checked against results["served"].
    served = results.get("served")
    n = len(configs)
    check_rows(results, rows[:n], True, bad)
    if isinstance(served, dict):
        check_rows(served, rows[n:], False, bad)
    elif rows[n:]:
        bad.append("csv has %d rows beyond the configurations" % len(rows[n:]))

    # Window medians over repeats.
    for name in configs:
        cmps = [x["compare"] for x in results.get("comparisons", []) if x["config"] == name]
        for field in ("flip_rate", "kl_mean", "flip_rate_ci_lo", "flip_rate_ci_hi"):
            per_window = {}
            for cmp in cmps:
                for w in cmp.get("windows", []):
                    v = w["flip_rate_ci"][0 if field.endswith("lo") else 1] if field.startswith("flip_rate_ci") \
                        else w.get(field)
                    if v is not None:
                        per_window.setdefault(w["index"], []).append(v)
            want = {i: float(np.median(v)) for i, v in per_window.items()}
            have = {int(i): v for i, v in series.get(name, {}).get(field, [])}
            if set(want) != set(have):
                bad.append("%s %s: windows %s, expected %s" % (name, field, sorted(have), sorted(want)))
                continue
            for i in want:
                if not close(have[i], want[i]):
                    bad.append("%s %s window %d: %r, expected %r" % (name, field, i, have[i], want[i]))

    for b in bad:
        print("check_report_numbers: " + b)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
