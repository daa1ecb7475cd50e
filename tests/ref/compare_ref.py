#!/usr/bin/env python3
"""Independent numpy FP64 implementation of `flipscope compare`'s metrics (docs/compare.md).

usage: compare_ref.py BASE CAND [--window W] [--confident C] [--uncertain U] [--probes]

Reads both captures with the safetensors library (BF16 logits, which numpy cannot hold, are
widened from their raw bits), computes every metric row by row in float64 and prints one JSON
object: the same keys as flipscope's contract for the parts it checks, plus, with --probes, the
per-probe values. Also the straightforward baseline the compare benchmark times.
"""
import argparse
import json
import math
import sys

import numpy as np
from safetensors import safe_open
from safetensors.numpy import load_file

MANIFEST_KEY = "flipscope.manifest"
PERCENTILES = [99.9, 99.0, 95.0, 90.0, 50.0, 10.0, 5.0, 1.0, 0.1]
TAIL_FLOOR = 1e-12
Z95 = 1.959963984540054


def load(path):
    """Tensors as numpy arrays (logits may stay a raw uint16 BF16 array) and the manifest."""
    with safe_open(path, framework="np") as f:
        meta = f.metadata() or {}
        keys = list(f.keys())
        bf16 = "logits" in keys and f.get_slice("logits").get_dtype() == "BF16"
    if not bf16:
        tensors = load_file(path)
    else:
        tensors = {}
        with safe_open(path, framework="np") as f:
            for k in keys:
                if k != "logits":
                    tensors[k] = f.get_tensor(k)
        tensors["logits"] = raw_bf16(path)
    return tensors, json.loads(meta.get(MANIFEST_KEY, "{}")), bf16


def raw_bf16(path):
    with open(path, "rb") as f:
        n = int.from_bytes(f.read(8), "little")
        header = json.loads(f.read(n))
    info = header["logits"]
    begin = info["data_offsets"][0]
    return np.memmap(path, dtype="<u2", mode="r", offset=8 + n + begin, shape=tuple(info["shape"]))


def row_f64(t, bf16, i):
    r = t["logits"][i]
    if bf16:
        r = (np.asarray(r).astype(np.uint32) << 16).view(np.float32)
    return np.asarray(r, dtype=np.float64)


def log_softmax(x):
    m = x.max()
    return x - m - np.log(np.sum(np.exp(x - m)))


def topk_set(x, k):
    """The k largest entries, ties to the lowest id (by threshold, O(n))."""
    if len(x) < k:
        return None
    t = np.partition(x, len(x) - k)[len(x) - k]
    gt = np.flatnonzero(x > t)
    eq = np.flatnonzero(x == t)[: k - len(gt)]
    return set(gt.tolist()) | set(eq.tolist())


def overlap(a, b, k):
    if a is None or b is None:
        return math.nan
    return len(a & b) / k


class Full:
    def __init__(self, x):
        self.x = x
        self.lp = log_softmax(x)
        self.p = np.exp(self.lp)

    def logprob(self, v):
        return float(self.lp[v])

    def top(self, k):
        return topk_set(self.x, k)

    def entropy(self):
        with np.errstate(invalid="ignore"):
            return float(-np.sum(np.where(self.p > 0, self.p * self.lp, 0.0)))

    def margin(self, a):
        others = np.delete(self.lp, a)
        return float(self.lp[a] - others.max()) if len(others) else math.nan


class Truncated:
    def __init__(self, ids, lps):
        self.ids = [int(v) for v in ids]
        self.known = {}
        for v, lp in zip(self.ids, lps):
            self.known.setdefault(v, float(lp))

    def logprob(self, v):
        return self.known.get(int(v), math.nan)

    def top(self, k):
        return set(self.ids[:k]) if len(self.ids) >= k else None

    def entropy(self):
        ps = [math.exp(lp) for lp in self.known.values()]
        h = -sum(p * lp for p, lp in zip(ps, self.known.values()) if p > 0)
        rest = max(1.0 - sum(ps), 0.0)
        return h - rest * math.log(rest) if rest > 0 else h

    def margin(self, a):
        if a not in self.known:
            return math.nan
        others = [lp for v, lp in self.known.items() if v != a]
        return self.known[a] - max(others) if others else math.nan


def divergences(pb, lb, pc, lc):
    """KL both ways and JS over matching cells (arrays), 0 log 0 = 0. A JS term where pb == pc is
    exactly 0; a sum that rounds below 0 is reported as 0 (divergences are never negative)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        kl_bc = np.sum(np.where(pb > 0, pb * (lb - lc), 0.0))
        kl_cb = np.sum(np.where(pc > 0, pc * (lc - lb), 0.0))
        m = 0.5 * (pb + pc)
        lm = np.log(np.where(m > 0, m, 1.0))
        terms = np.where(pb > 0, pb * (lb - lm), 0.0) + np.where(pc > 0, pc * (lc - lm), 0.0)
        js = 0.5 * np.sum(np.where(pb != pc, terms, 0.0))
    return max(float(kl_bc), 0.0), max(float(kl_cb), 0.0), max(float(js), 0.0)


def side(t, bf16, i):
    if "logits" in t:
        return Full(row_f64(t, bf16, i))
    return Truncated(t["topk_ids"][i], t["topk_logprobs"][i])


def probe(b, c):
    if isinstance(b, Full) and isinstance(c, Full):
        return divergences(b.p, b.lp, c.p, c.lp)
    lister = c if isinstance(b, Full) else b
    cells = [(b.logprob(v), c.logprob(v)) for v in sorted(lister.known)]
    cells = [(lb, lc) for lb, lc in cells if not (math.isnan(lb) or math.isnan(lc))]
    lb = np.array([x for x, _ in cells], dtype=np.float64)
    lc = np.array([y for _, y in cells], dtype=np.float64)
    pb, pc = np.exp(lb), np.exp(lc)
    rb, rc = max(1.0 - float(np.sum(pb)), TAIL_FLOOR), max(1.0 - float(np.sum(pc)), TAIL_FLOOR)
    return divergences(np.append(pb, rb), np.append(lb, math.log(rb)), np.append(pc, rc), np.append(lc, math.log(rc)))


def wilson(k, n):
    if n == 0:
        return [0.0, 1.0]
    p = k / n
    centre = (p + Z95**2 / (2 * n)) / (1 + Z95**2 / n)
    half = Z95 * math.sqrt(p * (1 - p) / n + Z95**2 / (4 * n * n)) / (1 + Z95**2 / n)
    return [max(0.0, centre - half), min(1.0, centre + half)]


def kl_stats(v):
    v = np.asarray(v, dtype=np.float64)
    return {"mean": float(np.mean(v)), "median": float(np.percentile(v, 50)), "p99": float(np.percentile(v, 99)),
            "max": float(np.max(v)), "min": float(np.min(v)),
            "percentiles": {f"{q:.1f}": float(np.percentile(v, q)) for q in PERCENTILES}}


def span_at(manifest, pos):
    """The innermost span holding pos: shortest; on equal lengths literal > tool call/result > message."""
    workload = manifest.get("workload")
    spans = workload.get("spans") if isinstance(workload, dict) else None
    rank = {"literal": 2, "message": 0}
    best = None
    for s in spans if isinstance(spans, list) else []:
        if not s["begin"] <= pos < s["end"]:
            continue
        key = (s["end"] - s["begin"], -rank.get(s["kind"], 1))
        if best is None or key < best[0]:
            best = (key, s)
    if best is None:
        return None
    s = best[1]
    label = f"literal {s.get('subkind', '')} {s.get('label', '')}" if s["kind"] == "literal" else s.get("label", "")
    return label or f"{s['kind']} #{s.get('index', 0)}"


def no_nan(v):
    """NaN (a value a truncated capture cannot give) becomes null, as in flipscope's JSON."""
    if isinstance(v, float) and math.isnan(v):
        return None
    if isinstance(v, dict):
        return {k: no_nan(x) for k, x in v.items()}
    if isinstance(v, list):
        return [no_nan(x) for x in v]
    return v


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("base")
    ap.add_argument("cand")
    ap.add_argument("--window", type=int, default=8192)
    ap.add_argument("--confident", type=float, default=0.9)
    ap.add_argument("--uncertain", type=float, default=0.5)
    ap.add_argument("--probes", action="store_true", help="also print per-probe values")
    a = ap.parse_args()
    tb, mb, bf_b = load(a.base)
    tc, _, bf_c = load(a.cand)
    if not np.array_equal(tb["tokens"], tc["tokens"]):
        sys.exit(f"{a.base} and {a.cand} hold different tokens")
    pos_b, pos_c = tb["positions"].tolist(), tc["positions"].tolist()
    index_c = {p: j for j, p in enumerate(pos_c)}
    pairs = [(i, index_c[p]) for i, p in enumerate(pos_b) if p in index_c]

    probes = []
    for i, j in pairs:
        b, c = side(tb, bf_b, i), side(tc, bf_c, j)
        ab, ac = int(tb["argmax"][i]), int(tc["argmax"][j])
        kl_bc, kl_cb, js = probe(b, c)
        same_rows = ("logits" in tb) == ("logits" in tc) and (
            np.array_equal(np.asarray(tb["logits"][i]).view(np.uint8), np.asarray(tc["logits"][j]).view(np.uint8))
            if "logits" in tb else
            np.array_equal(tb["topk_ids"][i], tc["topk_ids"][j])
            and np.array_equal(tb["topk_logprobs"][i].view(np.uint32), tc["topk_logprobs"][j].view(np.uint32)))
        probes.append({
            "position": int(pos_b[i]), "base_token": ab, "cand_token": ac, "flip": ab != ac,
            "identical": bool(same_rows and tb["digest"][i] == tc["digest"][j] and ab == ac),
            "kl_base_cand": kl_bc, "kl_cand_base": kl_cb, "js": js,
            "top5": overlap(b.top(5), c.top(5), 5), "top10": overlap(b.top(10), c.top(10), 10),
            "base_prob": math.exp(b.logprob(ab)), "base_margin": b.margin(ab), "base_entropy": b.entropy(),
            "cand_prob": math.exp(c.logprob(ac)), "cand_prob_of_base": math.exp(c.logprob(ab))})

    def klass(p):
        return "confident" if p >= a.confident else "uncertain" if p < a.uncertain else "moderate"

    n = len(probes)
    flips = [p for p in probes if p["flip"]]
    kl = [p["kl_base_cand"] for p in probes]
    windows = []
    for w in sorted({p["position"] // a.window for p in probes}):
        ps = [p for p in probes if p["position"] // a.window == w]
        k = sum(p["flip"] for p in ps)
        wk = [p["kl_base_cand"] for p in ps]
        windows.append({"index": w, "begin": w * a.window, "end": min((w + 1) * a.window, len(tb["tokens"])),
                        "probes": len(ps), "flips": k, "flip_rate": k / len(ps), "flip_rate_ci": wilson(k, len(ps)),
                        "kl_mean": float(np.mean(wk)), "kl_median": float(np.percentile(wk, 50)),
                        "kl_p99": float(np.percentile(wk, 99)), "kl_max": float(np.max(wk))})
    out = {
        "probes_compared": n, "probes_skipped_base": len(pos_b) - n, "probes_skipped_cand": len(pos_c) - n,
        "bit_identical": sum(p["identical"] for p in probes),
        "overall": {"probes": n, "flips": len(flips), "flip_rate": len(flips) / n, "flip_rate_ci": wilson(len(flips), n),
                    "confident_flips": sum(klass(p["base_prob"]) == "confident" for p in flips),
                    "uncertain_flips": sum(klass(p["base_prob"]) == "uncertain" for p in flips),
                    "same_top1_rate": 1 - len(flips) / n,
                    "top5_agree": float(np.mean([p["top5"] for p in probes])),
                    "top10_agree": float(np.mean([p["top10"] for p in probes])),
                    "js_mean": float(np.mean([p["js"] for p in probes])),
                    "kl_base_cand": kl_stats(kl), "kl_cand_base": kl_stats([p["kl_cand_base"] for p in probes])},
        "windows": windows,
        "flips": [{"position": p["position"], "window": p["position"] // a.window,
                   "span": span_at(mb, p["position"] + 1), "base_token": p["base_token"],
                   "cand_token": p["cand_token"], "base_prob": p["base_prob"], "cand_prob": p["cand_prob"],
                   "cand_prob_of_base_token": p["cand_prob_of_base"], "base_margin": p["base_margin"],
                   "kl": p["kl_base_cand"], "class": klass(p["base_prob"])} for p in flips],
    }
    if a.probes:
        out["probes"] = probes
    json.dump(no_nan(out), sys.stdout, allow_nan=False)
    print()


if __name__ == "__main__":
    main()
