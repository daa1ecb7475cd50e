#!/usr/bin/env python3
"""Writes a Hugging Face-style safetensors checkpoint from a GGUF file, for the `tensors` tests.

usage: gguf_to_safetensors.py MODEL.gguf OUT [--dtype f32|f16|bf16] [--shards N] [--keep-permutation]

Independent of flipscope: the GGUF is read and dequantized with gguf-py, tensor names are mapped
back to Hugging Face names (the inverse of llama.cpp's convention for llama-style models), the
Q/K rows are put back in Hugging Face order (undoing convert_hf_to_gguf.py's permute) unless
--keep-permutation, and the file is written byte by byte (numpy has no bfloat16). With
--shards N > 1, OUT is a folder with model-0000i-of-0000N.safetensors and
model.safetensors.index.json.
"""
import argparse
import json
import os
import re
import struct
import sys

import numpy as np
import gguf

TOP = {"token_embd": "model.embed_tokens", "output_norm": "model.norm", "output": "lm_head"}
LAYER = {"attn_q": "self_attn.q_proj", "attn_k": "self_attn.k_proj", "attn_v": "self_attn.v_proj",
         "attn_output": "self_attn.o_proj", "attn_norm": "input_layernorm", "ffn_norm": "post_attention_layernorm",
         "ffn_gate": "mlp.gate_proj", "ffn_up": "mlp.up_proj", "ffn_down": "mlp.down_proj"}


def hf_name(name):
    stem, kind = name.rsplit(".", 1)
    if stem in TOP:
        return f"{TOP[stem]}.{kind}"
    m = re.fullmatch(r"blk\.(\d+)\.(\w+)", stem)
    if not m or m.group(2) not in LAYER:
        return name
    return f"model.layers.{m.group(1)}.{LAYER[m.group(2)]}.{kind}"


def unpermute(w, heads):
    """Inverse of convert_hf_to_gguf.py's LlamaModel.permute (rows of each head)."""
    rows = w.shape[0]
    return w.reshape(heads, rows // heads // 2, 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def field(reader, key):
    f = reader.fields.get(key)
    return None if f is None else f.contents()


def encode(a, dtype):
    a = np.ascontiguousarray(a, dtype=np.float32)
    if dtype == "f32":
        return "F32", a.tobytes()
    if dtype == "f16":
        return "F16", a.astype(np.float16).tobytes()
    bits = a.view(np.uint32).astype(np.uint64)
    rounded = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)  # round to nearest even
    return "BF16", rounded.tobytes()


def write(path, tensors):
    header, blobs, offset = {}, [], 0
    for name, (dt, shape, blob) in tensors.items():
        header[name] = {"dtype": dt, "shape": list(shape), "data_offsets": [offset, offset + len(blob)]}
        blobs.append(blob)
        offset += len(blob)
    header["__metadata__"] = {"format": "pt"}
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("gguf")
    ap.add_argument("out")
    ap.add_argument("--dtype", default="f32", choices=["f32", "f16", "bf16"])
    ap.add_argument("--shards", type=int, default=1)
    ap.add_argument("--keep-permutation", action="store_true")
    a = ap.parse_args()
    r = gguf.GGUFReader(a.gguf)
    arch = field(r, "general.architecture")
    n_head = int(field(r, f"{arch}.attention.head_count"))
    n_head_kv = int(field(r, f"{arch}.attention.head_count_kv") or n_head)
    tensors = {}
    for t in r.tensors:
        w = gguf.quants.dequantize(t.data, t.tensor_type).astype(np.float32)
        w = w.reshape([int(d) for d in reversed(t.shape)])
        name = hf_name(t.name)
        if not a.keep_permutation and name.endswith("q_proj.weight"):
            w = unpermute(w, n_head)
        if not a.keep_permutation and name.endswith("k_proj.weight"):
            w = unpermute(w, n_head_kv)
        dt, blob = encode(w, a.dtype)
        tensors[name] = (dt, w.shape, blob)
    if a.shards <= 1:
        write(a.out, tensors)
        return
    os.makedirs(a.out, exist_ok=True)
    names = list(tensors)
    weight_map = {}
    for i in range(a.shards):
        fname = f"model-{i + 1:05d}-of-{a.shards:05d}.safetensors"
        part = {n: tensors[n] for n in names[i::a.shards]}
        write(os.path.join(a.out, fname), part)
        weight_map.update({n: fname for n in part})
    with open(os.path.join(a.out, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": sum(len(v[2]) for v in tensors.values())}, "weight_map": weight_map}, f)


if __name__ == "__main__":
    sys.exit(main())
