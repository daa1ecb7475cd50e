"""flipscope compare against llama.cpp's own `llama-perplexity --kl-divergence`, on the same tokens.

llama-perplexity splits a text into chunks of -c tokens (the first replaced by BOS when the model
adds one) and scores positions n_ctx/2 .. n_ctx-2 of each chunk (position p predicts token p+1).
Its base run stores every scored row's log-probabilities as uint16 (16 nats below the top, in
65535 steps) and its --kl-divergence run compares a candidate configuration with them.

This script reads the tokens back from the base file, captures each chunk with flipscope under
both configurations (probes: exactly the scored positions), compares them with `flipscope
compare --window n_ctx/2` (window 1 holds the scored positions) and prints the two tools side by
side. It also applies llama-perplexity's formula (uint16 base, tail below -16 nats dropped) to
flipscope's own rows in numpy, which isolates the storage error, and derives the tolerance:

  mean KL:     |flipscope - llama-perplexity| <= half a uint16 step of the 16-nat range
               (16/65535/2 nats per log-prob, so per row at most that times (1 + E|log p - log q|))
               plus the dropped tail's mass, measured on these rows;
  same top-1:  the two may differ only on rows whose base top-2 gap is below one uint16 step.

Usage: kld_crosscheck.py --check            (the test: one candidate, asserts the bounds)
       kld_crosscheck.py --configs all      (the figures in docs/compare.md)
Environment: FLIPSCOPE_BIN, LLAMA_BIN_DIR, FLIPSCOPE_CACHE_DIR, FLIPSCOPE_SOURCE_DIR.
"""
import argparse
import atexit
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile

import numpy as np
from safetensors.numpy import load_file

BIN = os.environ["FLIPSCOPE_BIN"]
PPL = os.path.join(os.environ["LLAMA_BIN_DIR"], "llama-perplexity")
MODEL = os.path.join(os.environ["FLIPSCOPE_CACHE_DIR"], "models", "SmolLM2-135M-Instruct.Q4_1.gguf")
SRC = os.environ["FLIPSCOPE_SOURCE_DIR"]
BASE = ["-fa", "on", "-ctk", "f16", "-ctv", "f16"]
CONFIGS = {
    "kv-q4_0": ["-fa", "on", "-ctk", "q4_0", "-ctv", "q4_0"],
    "kv-q8_0": ["-fa", "on", "-ctk", "q8_0", "-ctv", "q8_0"],
    "fa-off": ["-fa", "off", "-ctk", "f16", "-ctv", "f16"],
}
STEP = 16.0 / 65535.0  # llama-perplexity's uint16 step at the widest (16-nat) range


def sh(cmd):
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed ({p.returncode}):\n{p.stderr[-3000:]}")
    return p.stdout + p.stderr


def workload_text(path):
    """The default session's text (messages and tool-call arguments) as plain text."""
    doc = json.load(open(os.path.join(SRC, "examples", "netops-session.json")))
    parts = []
    for m in doc["messages"]:
        if m.get("content"):
            parts.append(m["content"])
        for c in m.get("tool_calls") or []:
            parts.append(json.dumps(c["function"]))
    open(path, "w").write("\n\n".join(parts))


def read_base(path):
    """Header, tokens and per-chunk uint16 rows of a --kl-divergence-base file."""
    b = open(path, "rb").read()
    assert b[:8] == b"_logits_", path
    n_ctx, n_vocab, n_chunk = struct.unpack_from("<Iii", b, 8)
    off = 20
    tokens = np.frombuffer(b, np.int32, n_ctx * n_chunk, off).reshape(n_chunk, n_ctx)
    off += 4 * n_ctx * n_chunk
    nv = 2 * ((n_vocab + 1) // 2) + 4
    rows = n_ctx - 1 - n_ctx // 2
    data = np.frombuffer(b, np.uint16, n_chunk * rows * nv, off).reshape(n_chunk, rows, nv)
    return n_ctx, n_vocab, tokens, data


def log_softmax(x):
    x = x.astype(np.float64)
    m = x.max(axis=-1, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(axis=-1, keepdims=True))


def capture(tokens_path, knobs, out, n_ctx):
    first = n_ctx // 2
    sh([BIN, "capture", "-m", MODEL, "-w", tokens_path, "-o", out, "--stride", str(n_ctx), "--full",
        f"{first}-{n_ctx - 2}", "-c", str(n_ctx), "-b", str(n_ctx), "-ub", "512", "-t", "2", *knobs])


def run_config(name, knobs, text, base_file, n_ctx, chunks, tmp, base_caps):
    out = sh([PPL, "-m", MODEL, "-f", text, "-c", str(n_ctx), "-b", str(n_ctx), "--chunks", str(chunks), "-t", "2",
              "--kl-divergence-base", base_file, "--kl-divergence", *knobs])
    lp_kl = float(re.search(r"Mean\s+KLD:\s+([-0-9.e+]+)", out).group(1))
    lp_same = float(re.search(r"Same top p:\s+([0-9.]+)", out).group(1)) / 100
    n_ctx_f, n_vocab, tokens, data = read_base(base_file)
    first = n_ctx // 2
    fs_kl_sum = fs_probes = fs_flips = 0
    emu_kl, bound = [], []
    tie_rows = 0
    for c in range(chunks):
        cand = os.path.join(tmp, f"{name}-{c}.safetensors")
        capture(os.path.join(tmp, f"chunk{c}.tokens"), knobs, cand, n_ctx)
        cmp = json.loads(sh([BIN, "compare", base_caps[c], cand, "--window", str(first), "--json"]))
        cmp = cmp[0] if isinstance(cmp, list) else cmp
        w = cmp["windows"][1]
        assert w["begin"] == first and w["probes"] == n_ctx - 1 - first, w
        fs_kl_sum += w["kl_mean"] * w["probes"]
        fs_probes += w["probes"]
        fs_flips += w["flips"]
        # llama-perplexity's formula over flipscope's candidate rows and the stored uint16 base.
        cr = load_file(cand)
        sel = cr["positions"] >= first
        q = log_softmax(cr["logits"][sel])
        d = data[c]
        scale = d[:, 0:2].copy().view(np.float32)[:, 0]
        minlp = d[:, 2:4].copy().view(np.float32)[:, 0]
        lpb = scale[:, None] * d[:, 4:4 + n_vocab].astype(np.float64) + minlp[:, None]
        keep = lpb > -16
        emu_kl.append(np.where(keep, np.exp(lpb) * (lpb - q), 0).sum(axis=1))
        br = load_file(base_caps[c])
        base_rows = br["logits"][br["positions"] >= first]
        lp = log_softmax(base_rows)
        p = np.exp(lp)
        # Per row: half a step times (1 + sum p|log p - log q|), plus the dropped tail's share.
        bound.append(scale / 2 * (1 + (p * np.abs(lp - q)).sum(axis=1))
                     + np.abs(np.where(keep, 0, p * (lp - q)).sum(axis=1)))
        top2 = np.sort(base_rows, axis=1)[:, -2:]
        tie_rows += int((top2[:, 1] - top2[:, 0] < STEP).sum())
    emu_kl = np.concatenate(emu_kl)
    fs_kl = fs_kl_sum / fs_probes
    return {
        "config": name, "rows": fs_probes,
        "flipscope_kl": fs_kl, "perplexity_kl": lp_kl, "emulated_kl": float(emu_kl.mean()),
        "flipscope_same_top1": 1 - fs_flips / fs_probes, "perplexity_same_top1": lp_same,
        # + 2e-6: llama-perplexity's float32 arithmetic and its 6-decimal print.
        "kl_bound": float(np.concatenate(bound).mean()) + 2e-6,
        "same_bound_rows": tie_rows,
    }


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--check", action="store_true")
    ap.add_argument("--configs", default="kv-q4_0")
    ap.add_argument("-c", type=int, default=512)
    ap.add_argument("--chunks", type=int, default=6)
    a = ap.parse_args()
    names = list(CONFIGS) if a.configs == "all" else a.configs.split(",")
    tmp = tempfile.mkdtemp(prefix="flipscope-kld-")
    if os.environ.get("FLIPSCOPE_KEEP_TMP") != "1":  # its .kld and captures are hundreds of MB
        atexit.register(shutil.rmtree, tmp, ignore_errors=True)
    text = os.path.join(tmp, "text.txt")
    workload_text(text)
    base_file = os.path.join(tmp, "base.kld")
    sh([PPL, "-m", MODEL, "-f", text, "-c", str(a.c), "-b", str(a.c), "--chunks", str(a.chunks), "-t", "2",
        "--kl-divergence-base", base_file, *BASE])
    _, _, tokens, _ = read_base(base_file)
    import gguf
    fields = gguf.GGUFReader(MODEL).fields
    add_bos = "tokenizer.ggml.add_bos_token" in fields and fields["tokenizer.ggml.add_bos_token"].contents()
    base_caps = []
    for c in range(a.chunks):
        # The tokens llama-perplexity evaluated: a chunk's first token becomes BOS when the model adds one.
        ids = tokens[c].copy()
        if add_bos:
            ids[0] = fields["tokenizer.ggml.bos_token_id"].contents()
        path = os.path.join(tmp, f"chunk{c}.tokens")
        open(path, "w").write(" ".join(map(str, ids)))
        cap = os.path.join(tmp, f"base-{c}.safetensors")
        capture(path, BASE, cap, a.c)
        base_caps.append(cap)
    results = [run_config(n, CONFIGS[n], text, base_file, a.c, a.chunks, tmp, base_caps) for n in names]
    print(json.dumps(results, indent=1))
    if a.check:
        for r in results:
            assert abs(r["flipscope_kl"] - r["perplexity_kl"]) <= r["kl_bound"], r
            assert abs(r["flipscope_same_top1"] - r["perplexity_same_top1"]) * r["rows"] <= r["same_bound_rows"] + 0.5, r
        print("ok")


if __name__ == "__main__":
    main()
