#!/usr/bin/env python3
"""Prefill against served, split by where a probe lies (docs/served.md).

    served_split.py PREFILL.safetensors SERVED.safetensors

Groups of probe positions p (the logits at p predict token p+1), from the served capture's
manifest spans with the rule of ModelWrites (src/workload/workload.cpp), written here again:
  decode steps   - the model wrote tokens p and p+1: p was fed alone (the served decode path)
  tool calls     - token p+1 lies in a tool call (a subset of what the model wrote)
  prefilled      - every other probe (prefilled in both captures)
Per group: probes, flips (argmax differs), KL(prefill||served) mean in FP64, rows bit-identical
(equal digests). Needs numpy only: the files are memory-mapped and the rows read in chunks, so
F32, F16 and BF16 captures of long sessions fit in memory."""
import json
import struct
import sys

import numpy as np

DTYPES = {"F32": np.float32, "F16": np.float16, "BF16": np.uint16, "U8": np.uint8, "I32": np.int32,
          "U32": np.uint32, "I64": np.int64, "U64": np.uint64}


def read(path):
    """A safetensors file's tensors, memory-mapped (BF16 as raw uint16), and its metadata."""
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
    meta = header.pop("__metadata__", {})
    mm = np.memmap(path, np.uint8, "r")
    out = {}
    for name, t in header.items():
        b, e = t["data_offsets"]
        a = mm[8 + n + b:8 + n + e].view(DTYPES[t["dtype"]]).reshape(t["shape"])
        out[name] = (a, t["dtype"])
    return out, meta


def rows_f64(t, lo, hi):
    a, dtype = t
    x = a[lo:hi]
    if dtype == "BF16":
        x = (x.astype(np.uint32) << 16).view(np.float32)
    return x.astype(np.float64)


def model_writes(spans, pos, has_messages):
    if not has_messages:
        return True
    inner = None
    for s in spans:
        if s["kind"] == "literal" or not (s["begin"] <= pos < s["end"]):
            continue
        n, m = s["end"] - s["begin"], (inner["end"] - inner["begin"]) if inner else None
        if inner is None or n < m or (n == m and inner["kind"] == "message"):
            inner = s
    if inner is None:
        return False
    if inner["kind"] == "tool_call":
        return True
    if inner["kind"] == "tool_result":
        return False
    if inner.get("role") != "assistant":
        return False
    # "generated": what the message generated, without its role header (absent in older captures).
    b, e = inner.get("generated", [inner["begin"], inner["end"]])
    return b <= pos < e


def log_softmax(x):
    m = x.max(axis=1, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(axis=1, keepdims=True))


def main():
    a, _ = read(sys.argv[1])
    b, meta = read(sys.argv[2])
    man = json.loads(meta["flipscope.manifest"])
    a, b, la, lb = {k: v[0] for k, v in a.items()}, {k: v[0] for k, v in b.items()}, a["logits"], b["logits"]
    assert (a["tokens"] == b["tokens"]).all() and (a["positions"] == b["positions"]).all()
    spans = man["workload"]["spans"]
    has_messages = any(s["kind"] == "message" for s in spans)
    n = len(b["tokens"])
    wrote = [model_writes(spans, p, has_messages) for p in range(n)]
    calls = np.zeros(n + 1, bool)
    for s in spans:
        if s["kind"] == "tool_call":
            calls[s["begin"]:s["end"]] = True
    pos = b["positions"]
    step = np.array([wrote[p] and p + 1 < n and wrote[p + 1] for p in pos])
    call = calls[pos + 1]
    flip = a["argmax"] != b["argmax"]
    same = a["digest"] == b["digest"]
    kl = np.empty(len(pos))
    for lo in range(0, len(pos), 256):
        lp, lq = log_softmax(rows_f64(la, lo, lo + 256)), log_softmax(rows_f64(lb, lo, lo + 256))
        kl[lo:lo + 256] = (np.exp(lp) * (lp - lq)).sum(axis=1)
    groups = [("all", np.ones(len(pos), bool)), ("decode steps", step), ("tool calls", call), ("prefilled", ~step)]
    print(f"{'group':<14}{'probes':>8}{'flips':>7}{'flip %':>9}{'KL mean':>12}{'identical':>11}")
    for name, g in groups:
        k = int(g.sum())
        if k == 0:
            continue
        print(f"{name:<14}{k:>8}{int(flip[g].sum()):>7}{100 * flip[g].mean():>8.2f}%{kl[g].mean():>12.3g}"
              f"{int(same[g].sum()):>11}")
    served = man.get("served", {})
    print("served:", {k: served[k] for k in ("fed_singly", "prefill_segments", "written_tokens", "written_runs")
                      if k in served})


if __name__ == "__main__":
    main()
