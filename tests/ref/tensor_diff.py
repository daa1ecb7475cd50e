#!/usr/bin/env python3
"""Independent numpy FP64 check of `flipscope tensors` metrics for one pair of tensors.

usage: tensor_diff.py A NAME_A B NAME_B [--permute-b HEADS]

A and B are GGUF files (read and dequantized with gguf-py) or .safetensors files (parsed here,
BF16 widened from its raw bits). Prints one JSON object: rel_l2 = ||a-b|| / ||a||, max_abs,
cosine, n_differ, and the shapes (numpy order). --permute-b applies convert_hf_to_gguf.py's
Q/K permutation (HEADS heads) to B's rows first, the way the GGUF side of a conversion holds them.
"""
import argparse
import json
import struct
import sys

import numpy as np
import gguf

ST_DTYPES = {"F32": np.float32, "F16": np.float16, "BF16": np.uint16, "F64": np.float64}


def load_gguf(path, name):
    for t in gguf.GGUFReader(path).tensors:
        if t.name == name:
            w = gguf.quants.dequantize(t.data, t.tensor_type)
            return np.asarray(w, dtype=np.float64).reshape([int(d) for d in reversed(t.shape)])
    raise SystemExit(f"{path}: no tensor {name}")


def load_safetensors(path, name):
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(n))
        e = header[name]
        begin, end = e["data_offsets"]
        f.seek(8 + n + begin)
        raw = np.frombuffer(f.read(end - begin), dtype=ST_DTYPES[e["dtype"]])
    if e["dtype"] == "BF16":
        raw = (raw.astype(np.uint32) << 16).view(np.float32)
    return raw.astype(np.float64).reshape(e["shape"])


def load(path, name):
    with open(path, "rb") as f:
        magic = f.read(4)
    return load_gguf(path, name) if magic == b"GGUF" else load_safetensors(path, name)


def permute(w, heads):
    """convert_hf_to_gguf.py's LlamaModel.permute."""
    return w.reshape(heads, 2, w.shape[0] // heads // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("a")
    ap.add_argument("name_a")
    ap.add_argument("b")
    ap.add_argument("name_b")
    ap.add_argument("--permute-b", type=int, default=0)
    args = ap.parse_args()
    a = load(args.a, args.name_a)
    b = load(args.b, args.name_b)
    if args.permute_b:
        b = permute(b, args.permute_b)
    d = (a - b).ravel()
    na, nb = np.linalg.norm(a.ravel()), np.linalg.norm(b.ravel())
    out = {
        "shape_a": list(a.shape),
        "shape_b": list(b.shape),
        "rel_l2": float(np.linalg.norm(d) / na),
        "max_abs": float(np.max(np.abs(d))),
        "cosine": float(np.dot(a.ravel(), b.ravel()) / (na * nb)),
        "n_differ": int(np.count_nonzero(d)),
    }
    print(json.dumps(out))


if __name__ == "__main__":
    sys.exit(main())
