#!/usr/bin/env python3
"""Recomputes a suite's pooled figures (OUTDIR/suite.json, docs/experiment.md "Suites") from the
sessions' captures with numpy, independently of flipscope, and checks them.

For every configuration measured in every session: its median repeat's capture (the session's
results.json) against the session baseline's first capture, probe by probe (compare_ref.py's
FP64 metrics); per session the flips, probes, flip rate and KL mean; pooled, each session's probes
counted `weight` times: the flip rate and KL mean, the rate and KL per kind of text (the
predicted token's innermost span) and per window of token depth. The repeat floor the same way.

usage: suite_check.py OUTDIR      prints one JSON line of what it checked; exit 1 with one line
                                  per mismatch
"""
import json
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import compare_ref  # noqa: E402

RANK = {"literal": 2, "message": 0}


def text_kind(spans, pos):
    """The kind of text at pos: the innermost span (shortest; literal, then tool call/result, then message)."""
    best = None
    for s in spans:
        if s["begin"] <= pos < s["end"]:
            key = (s["end"] - s["begin"], -RANK.get(s["kind"], 1))
            if best is None or key < best[0]:
                best = (key, s)
    if best is None:
        return "template"
    s = best[1]
    kind = {"literal": "literal", "tool_call": "tool-call arguments", "tool_result": "tool result"}.get(s["kind"])
    if kind:
        return kind
    return {"system": "system", "user": "user", "assistant": "assistant prose", "tool": "tool result"}.get(
        s.get("role", ""), "template")


def probes_of(base_path, cand_path):
    """[(position, flip, kl(base||cand), kind)] over the probes both captures hold."""
    tb, mb, bf_b = compare_ref.load(base_path)
    tc, _, bf_c = compare_ref.load(cand_path)
    spans = (mb.get("workload") or {}).get("spans") or []
    index_c = {p: j for j, p in enumerate(tc["positions"].tolist())}
    out = []
    for i, p in enumerate(tb["positions"].tolist()):
        if p not in index_c:
            continue
        j = index_c[p]
        kl = compare_ref.probe(compare_ref.side(tb, bf_b, i), compare_ref.side(tc, bf_c, j))[0]
        out.append((p, int(tb["argmax"][i]) != int(tc["argmax"][j]), kl, text_kind(spans, p + 1)))
    return out


def close(a, b, rel=1e-9, abs_=1e-12):
    return abs(a - b) <= max(abs_, rel * max(abs(a), abs(b)))


def main():
    outdir = sys.argv[1]
    suite = json.load(open(os.path.join(outdir, "suite.json")))
    fails, checked = [], {"sessions": len(suite["sessions"]), "configs": [], "kind_rows": 0, "depth_rows": 0}
    weight = {s["name"]: s["weight"] for s in suite["sessions"]}
    window = suite["window"]
    series = {}  # (config, session) -> probes
    for s in suite["sessions"]:
        res = json.load(open(os.path.join(s["outdir"], "results.json")))
        configs = {c["name"]: c for c in res["configs"]}
        summary = {r["config"]: r for r in res.get("summary", [])}
        base = configs[res["baseline"]]["captures"][0]
        for name, c in configs.items():
            if c.get("status") != "ok":
                continue
            if name == res["baseline"]:
                if len(c["captures"]) >= 2:
                    series[("floor", s["name"])] = probes_of(base, c["captures"][1])
                continue
            r = summary.get(name, {}).get("median_repeat") or 0
            series[(name, s["name"])] = probes_of(base, c["captures"][r])

    def pooled(config, rows_of):
        per = {n: series[(config, n)] for n in weight if (config, n) in series}
        wp = sum(weight[n] * len(p) for n, p in per.items())
        wf = sum(weight[n] * sum(x[1] for x in p) for n, p in per.items())
        wk = sum(weight[n] * sum(x[2] for x in p) for n, p in per.items())
        return per, wf / wp, wk / wp

    for c in suite["configs"]:
        if c["config"] == suite["baseline"] or c["status"] != "ok":
            continue
        name = c["config"]
        per, rate, kl = pooled(name, None)
        checked["configs"].append(name)
        for row in c["sessions"]:
            p = per[row["session"]]
            flips = sum(x[1] for x in p)
            if row["probes"] != len(p) or row["flips"] != flips:
                fails.append(f"{name}/{row['session']}: {row['flips']} of {row['probes']}, numpy {flips} of {len(p)}")
            if not close(row["kl_mean"], sum(x[2] for x in p) / len(p), rel=1e-6):
                fails.append(f"{name}/{row['session']}: KL mean {row['kl_mean']}, numpy {sum(x[2] for x in p) / len(p)}")
        if not close(c["flip_rate"]["value"], rate):
            fails.append(f"{name}: pooled flip rate {c['flip_rate']['value']}, numpy {rate}")
        if not close(c["kl_mean"]["value"], kl, rel=1e-6):
            fails.append(f"{name}: pooled KL {c['kl_mean']['value']}, numpy {kl}")
        lo, hi = c["flip_rate"]["ci"]
        if not lo <= rate <= hi:
            fails.append(f"{name}: pooled flip rate {rate} outside its interval [{lo}, {hi}]")
        # Kinds and depth windows, per session and pooled (weighted).
        for table, key in (("kinds", lambda x: x[3]), ("depth", lambda x: x[0] // window)):
            want = {}
            for n, p in per.items():
                for x in p:
                    for sess, w in ((n, 1.0), ("", weight[n])):
                        acc = want.setdefault((key(x), sess), [0.0, 0.0, 0.0])
                        acc[0] += w
                        acc[1] += w * x[1]
                        acc[2] += w * x[2]
            got = {}
            for row in c[table]:
                k = row["kind"] if table == "kinds" else row["begin"] // window
                got[(k, row["session"])] = row
            if set(got) != set(want):
                fails.append(f"{name}: {table} rows {sorted(got)}, numpy {sorted(want)}")
                continue
            for k, (wp, wf, wk) in want.items():
                row = got[k]
                if not close(row["flip_rate"], wf / wp) or not close(row["kl_mean"], wk / wp, rel=1e-6):
                    fails.append(f"{name}: {table} {k}: {row['flip_rate']}, {row['kl_mean']}; numpy {wf / wp}, {wk / wp}")
                if row["probes"] != round(wp) or row["flips"] != round(wf):
                    fails.append(f"{name}: {table} {k}: {row['flips']} of {row['probes']}; numpy {wf} of {wp}")
                checked["kind_rows" if table == "kinds" else "depth_rows"] += 1
    if suite.get("floor") and any(k[0] == "floor" for k in series):
        _, rate, _ = pooled("floor", None)
        if not close(suite["floor"]["value"], rate):
            fails.append(f"floor: pooled {suite['floor']['value']}, numpy {rate}")
    for f in fails:
        print("suite_check: " + f)
    print(json.dumps(checked))
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
