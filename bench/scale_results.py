#!/usr/bin/env python3
"""Stretches an experiment's results.json to a longer session, for measuring the report at scale.

The source document's session is laid end to end `--tokens / n_tokens` times (rounded up): every
comparison's windows, flips and the branch groups' records and teacher-forced flips are repeated
with their positions and window indexes shifted by one session length per copy, and every count
that follows from them (overall flips, probes, flip rate and its Wilson interval, confident and
uncertain flips, the summary rows, the floor, branch points and records) is recomputed from the
copies, so the document stays consistent. Texts, probabilities and futures are the source's own:
a stretched demo reads like a real long run. `--records N` cycles each branch group's records to N
(the worst case: every fork followed). Deterministic.

  bench/scale_results.py SRC.json --tokens 100000 [--records N] -o OUT.json
"""
import argparse
import copy
import json
import math


def wilson(k, n, z=1.959963984540054):
    if n == 0:
        return [0.0, 0.0]
    p = k / n
    d = 1 + z * z / n
    c = (p + z * z / (2 * n)) / d
    h = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / d
    return [max(0.0, c - h), min(1.0, c + h)]


def shifted(item, offset, window_offset):
    out = copy.deepcopy(item)
    if isinstance(out.get("position"), (int, float)):
        out["position"] = out["position"] + offset
    if isinstance(out.get("window"), int):
        out["window"] = out["window"] + window_offset
    return out


def stretch_compare(cmp, copies, n_tokens):
    windows = cmp.get("windows") or []
    per_copy = len(windows)
    new_windows, flips = [], []
    for c in range(copies):
        off = c * n_tokens
        for w in windows:
            w2 = copy.deepcopy(w)
            w2["index"] = w["index"] + c * per_copy
            w2["begin"] = w["begin"] + off
            w2["end"] = w["end"] + off
            new_windows.append(w2)
        flips += [shifted(f, off, c * per_copy) for f in cmp.get("flips") or []]
    cmp["windows"], cmp["flips"] = new_windows, flips
    o = cmp.get("overall", {})
    probes = sum(w.get("probes", 0) for w in new_windows)
    k = sum(w.get("flips", 0) for w in new_windows)
    o.update({"probes": probes, "flips": k, "flip_rate": k / probes if probes else 0.0,
              "flip_rate_ci": wilson(k, probes)})
    for cls in ("confident", "uncertain"):
        if f"{cls}_flips" in o:
            o[f"{cls}_flips"] = sum(1 for f in flips if f.get("class") == cls)
    for key in ("probes_compared", "bit_identical"):
        if isinstance(cmp.get(key), int):
            cmp[key] *= copies
    return cmp


def stretch_branches(group, copies, n_tokens, records):
    src = group.get("records") or []
    out = []
    for c in range(copies):
        out += [shifted(r, c * n_tokens, 0) for r in src]
    if records is not None and src:
        # Cycle the stretched records (positions keep growing) up to the asked number.
        while len(out) < records:
            c = len(out) // len(src)
            out.append(shifted(src[len(out) % len(src)], c * n_tokens, 0))
        out = out[:records]
    group["records"] = out
    cfg = group.get("branch_config", {})
    tf = cfg.get("teacher_forced_only")
    if isinstance(tf, list):
        cfg["teacher_forced_only"] = [shifted(t, c * n_tokens, 0) for c in range(copies) for t in tf]
    factor = len(out) / len(src) if src else copies
    counts = group.get("counts", {})
    for key, v in list(counts.items()):
        if isinstance(v, int) and key != "branch_points":
            counts[key] = round(v * factor)
    if isinstance(counts.get("branch_points"), int):
        counts["branch_points"] = max(counts["branch_points"] * copies, len(out))
    for key in ("n_branches", "max_branches"):
        if isinstance(cfg.get(key), int):
            cfg[key] = len(out)
    return group


def recompute_summary(r):
    for s in r.get("summary") or []:
        cmps = [c["compare"] for c in r.get("comparisons", []) if c.get("config") == s.get("config")]
        if not cmps:
            continue
        cmps.sort(key=lambda c: c["overall"]["flip_rate"])
        med = cmps[(len(cmps) - 1) // 2]["overall"]
        s.update({"median_flip_rate": med["flip_rate"], "flip_rate_ci": med["flip_rate_ci"],
                  "flips": med["flips"], "probes": med["probes"]})
        if "confident_flips" in med:
            s["confident_flips"] = med["confident_flips"]
        if isinstance(s.get("bit_identical"), int):
            s["bit_identical"] = sum(c.get("bit_identical", 0) for c in cmps)
            s["bit_identical_of"] = sum(c.get("probes_compared", 0) for c in cmps)
    floor = r.get("floor")
    base = [c["compare"] for c in r.get("comparisons", []) if c.get("config") == r.get("baseline")]
    if isinstance(floor, dict) and base and "flips" in floor:
        floor["flips"] = sum(c["overall"]["flips"] for c in base)
        floor["probes"] = sum(c["overall"]["probes"] for c in base)
        floor["flip_rate"] = floor["flips"] / floor["probes"] if floor["probes"] else 0.0
        floor["flip_rate_ci"] = wilson(floor["flips"], floor["probes"])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("src")
    ap.add_argument("--tokens", type=int, default=100000)
    ap.add_argument("--records", type=int, default=None, help="branch records per group (default: copies x source's)")
    ap.add_argument("-o", "--out", required=True)
    a = ap.parse_args()
    with open(a.src, encoding="utf-8") as f:
        r = json.load(f)
    n_tokens = int(r["workload"]["n_tokens"])
    copies = max(1, math.ceil(a.tokens / n_tokens))
    for c in r.get("comparisons", []):
        stretch_compare(c["compare"], copies, n_tokens)
    for c in (r.get("reference") or {}).get("comparisons", []):
        stretch_compare(c["compare"], copies, n_tokens)
    for g in r.get("branches") or []:
        stretch_branches(g, copies, n_tokens, a.records)
    recompute_summary(r)
    r["workload"]["n_tokens"] = n_tokens * copies
    if isinstance(r.get("probe_plan", {}).get("n_probes"), int):
        r["probe_plan"]["n_probes"] *= copies
    with open(a.out, "w", encoding="utf-8") as f:
        json.dump(r, f, ensure_ascii=False)
    print(json.dumps({"copies": copies, "n_tokens": n_tokens * copies,
                      "flips": sum(len(c["compare"].get("flips") or []) for c in r.get("comparisons", [])),
                      "records": sum(len(g.get("records") or []) for g in r.get("branches") or [])}))


if __name__ == "__main__":
    main()
