#!/usr/bin/env python3
"""Independent check of flipscope capture files with the safetensors library and numpy.

usage: check_capture.py F32_CAPTURE BF16_CAPTURE TRUNCATED_CAPTURE
       check_capture.py --write-sample F32_OUT BF16_OUT

The F32 and BF16 captures must have been written from the same F32 logits rows. Checks the
tensor table (names, dtypes, shapes), positions, argmax (lowest id on ties, from the F32 rows),
digests (equal exactly where rows are byte-identical), BF16 round-to-nearest-even storage and the
manifest. Prints one line per failed check and exits 1, else prints one "ok" line.

--write-sample writes two captures the way a small Python writer would (safetensors' own
serializer, its own tensor order): 4 probes x 11 vocabulary, F32 and BF16, for the reader to open.
"""
import json
import sys

import numpy as np
from safetensors import deserialize, safe_open, serialize_file
from safetensors.numpy import load_file, save_file

MANIFEST_KEY = "flipscope.manifest"
NP_TYPES = {"I32": np.int32, "U64": np.uint64, "F32": np.float32, "BF16": np.uint16}  # BF16 as raw bits
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)


def load_raw(path):
    """All tensors via safetensors.deserialize; numpy has no bfloat16, so BF16 stays raw uint16 bits."""
    with open(path, "rb") as f:
        items = deserialize(f.read())
    return {name: (v["dtype"], np.frombuffer(v["data"], NP_TYPES[v["dtype"]]).reshape(v["shape"]))
            for name, v in items}


def check_manifest(path):
    with safe_open(path, framework="np") as f:
        meta = f.metadata() or {}
    check(MANIFEST_KEY in meta, f"{path}: no '{MANIFEST_KEY}' in __metadata__")
    if MANIFEST_KEY in meta:
        try:
            check(isinstance(json.loads(meta[MANIFEST_KEY]), dict), f"{path}: manifest is not a JSON object")
        except json.JSONDecodeError as e:
            failures.append(f"{path}: manifest is not JSON: {e}")


def check_common(path, t):
    """tokens/positions/argmax/digest dtypes, shapes and positions; returns n_probes."""
    for name, dtype in (("tokens", np.int32), ("positions", np.int32), ("argmax", np.int32), ("digest", np.uint64)):
        check(name in t and t[name].dtype == dtype and t[name].ndim == 1, f"{path}: {name} missing or not {dtype}[n]")
    n = t["positions"].shape[0]
    check(t["argmax"].shape == (n,) and t["digest"].shape == (n,), f"{path}: argmax/digest length != positions")
    pos = t["positions"].astype(np.int64)
    check(bool(np.all(np.diff(pos) > 0)), f"{path}: positions not strictly ascending")
    check(bool(np.all((pos >= 0) & (pos < t["tokens"].shape[0]))), f"{path}: positions outside the tokens")
    check_manifest(path)
    return n


def check_digest_pattern(path, digest, row_bytes):
    """digest[i] == digest[j] exactly when rows i and j are byte-identical."""
    n = len(row_bytes)
    for i in range(n):
        for j in range(i + 1, n):
            check((digest[i] == digest[j]) == (row_bytes[i] == row_bytes[j]),
                  f"{path}: digest of rows {i},{j} does not follow their bytes")
    return sum(row_bytes[i] == row_bytes[j] for i in range(n) for j in range(i + 1, n))


def bf16_rne_bits(x):
    """Nearest BF16 to each F32 value, ties to an even mantissa, chosen by comparing in float64."""
    bits = x.view(np.uint32)
    lo_bits = bits & np.uint32(0xFFFF0000)
    hi_bits = lo_bits + np.uint32(0x10000)  # next BF16 away from zero
    lo = lo_bits.view(np.float32).astype(np.float64)
    hi = hi_bits.view(np.float32).astype(np.float64)
    d_lo, d_hi = np.abs(x.astype(np.float64) - lo), np.abs(hi - x.astype(np.float64))
    lo_even = (lo_bits >> np.uint32(16)) & np.uint32(1) == 0
    pick_lo = (d_lo < d_hi) | ((d_lo == d_hi) & lo_even)
    return (np.where(pick_lo, lo_bits, hi_bits) >> np.uint32(16)).astype(np.uint16)


def main(f32_path, bf16_path, topk_path):
    full = load_file(f32_path)  # the standard loader must read F32 and truncated captures as is
    n = check_common(f32_path, full)
    logits = full.get("logits")
    check(logits is not None and logits.dtype == np.float32 and logits.ndim == 2 and logits.shape[0] == n,
          f"{f32_path}: logits missing or not float32[n_probes, n_vocab]")
    check(np.array_equal(full["argmax"], np.argmax(logits, axis=1)), f"{f32_path}: argmax != argmax of the F32 rows")
    rows = [r.tobytes() for r in logits]
    same = check_digest_pattern(f32_path, full["digest"], rows)

    raw = load_raw(bf16_path)
    bf = {name: arr for name, (_, arr) in raw.items()}
    check_common(bf16_path, bf)
    check(raw.get("logits", ("",))[0] == "BF16", f"{bf16_path}: logits dtype is not BF16")
    check(np.array_equal(bf["logits"], bf16_rne_bits(logits)), f"{bf16_path}: logits are not F32 rounded to nearest even")
    for name in ("tokens", "positions", "argmax", "digest"):
        check(np.array_equal(bf[name], full[name]), f"{bf16_path}: {name} differs from the F32 capture's")

    trunc = load_file(topk_path)
    m = check_common(topk_path, trunc)
    check("logits" not in trunc, f"{topk_path}: a truncated capture holds logits")
    ids, lps = trunc.get("topk_ids"), trunc.get("topk_logprobs")
    check(ids is not None and ids.dtype == np.int32 and ids.ndim == 2 and ids.shape[0] == m,
          f"{topk_path}: topk_ids missing or not int32[n_probes, k]")
    check(lps is not None and lps.dtype == np.float32 and lps.shape == ids.shape,
          f"{topk_path}: topk_logprobs missing or not float32 like topk_ids")
    check(bool(np.all(np.diff(lps, axis=1) <= 0)), f"{topk_path}: top-k logprobs not descending")
    same_topk = check_digest_pattern(topk_path, trunc["digest"], [i.tobytes() + l.tobytes() for i, l in zip(ids, lps)])

    if failures:
        print("\n".join(failures))
        return 1
    print(f"ok: {n} probes x {logits.shape[1]} (F32, BF16), {same} identical row pair(s); "
          f"{m} truncated probes x {ids.shape[1]}, {same_topk} identical pair(s)")
    return 0


def write_sample(f32_path, bf16_path):
    """A capture as a Python writer makes it; digests are row indices (the reader does not recompute them)."""
    rows = (np.sin(np.arange(4 * 11, dtype=np.float64) * 0.7) * 3).astype(np.float32).reshape(4, 11)
    rows[1, 2] = rows[1, 8] = 5.0  # a tie: argmax is the lower id
    t = {"tokens": (np.arange(40) % 11).astype(np.int32), "positions": np.array([0, 9, 10, 30], np.int32),
         "argmax": np.argmax(rows, axis=1).astype(np.int32), "digest": np.arange(4, dtype=np.uint64)}
    meta = {MANIFEST_KEY: json.dumps({"writer": "check_capture.py"})}
    save_file({**t, "logits": rows}, f32_path, metadata=meta)
    flat = {k: {"dtype": v.dtype.name, "shape": list(v.shape), "data": v.tobytes()} for k, v in t.items()}
    flat["logits"] = {"dtype": "bfloat16", "shape": [4, 11], "data": bf16_rne_bits(rows).tobytes()}
    serialize_file(flat, bf16_path, metadata=meta)
    return 0


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--write-sample":
        sys.exit(write_sample(*sys.argv[2:]))
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    sys.exit(main(*sys.argv[1:]))
