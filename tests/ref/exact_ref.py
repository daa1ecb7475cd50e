"""An independent FP64 forward pass in numpy for the llama, qwen2, qwen3, qwen3moe, phi3, gemma2 and
gemma3 GGUFs, checked against the exact engine's FP64 logits (build/bin/exact_dump) on a short prefix.

The GGUF is read with the gguf package and dequantized with gguf's own dequantize (not ggml's);
every operation is written from the architectures' definitions in plain numpy float64:
RMS norm, RoPE (llama: neighbouring pairs; the others: halves), grouped-query attention with
causal and sliding-window masks, SiLU / tanh-GELU gated MLP, Q/K/V biases and a fused QKV matrix
(qwen2), per-head Q/K norms (qwen3, gemma3), qwen3moe's router and experts, phi3's fused gate-up,
gemma's post norms, embedding scale sqrt(n_embd) and attention scale, gemma2's attention-score and logit soft-capping
(defaults 50 and 30) and its sliding even layers (window 4096 unless the file says). Agreement is
measured per row as max |a - b| over the row's max |b| (relative to the row's scale: single
logits near 0 have no useful relative error).

usage: exact_ref.py --check          (the ctest integration test: SmolLM2 on 64 tokens, Gemma 3 on
                                      640, past its 512-token sliding window)
       exact_ref.py --tiny           (tiny all-F32 models of each architecture written by
                                      build/bin/tiny_model, 200 tokens, to TINY_TOLERANCE)
       exact_ref.py MODEL WORKLOAD [--chat-template T] [-n 64]
"""
import argparse
import os
import subprocess
import sys
import tempfile

import numpy as np
import gguf

import gguf_fast

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "integration"))

TOLERANCE = 1e-9
# All-F32 tiny models: nothing is dequantized, so the two FP64 passes differ only in summation order.
TINY_TOLERANCE = 1e-12
# The tiny models checked by --tiny: (name, tiny_model's flags).
TINY_CASES = [("llama", ["--arch", "llama"]), ("qwen2", ["--arch", "qwen2"]),
              ("qwen2-fused-qkv", ["--arch", "qwen2", "--fused-qkv"]), ("qwen3", ["--arch", "qwen3"]),
              ("qwen3-wide-heads", ["--arch", "qwen3", "--head-dim", "48"]),
              ("phi3", ["--arch", "phi3", "--fused-qkv"]), ("qwen3moe", ["--arch", "qwen3moe"]),
              ("gemma2", ["--arch", "gemma2", "--sliding-window", "16", "--attn-softcap", "2", "--final-softcap", "15"]),
              ("gemma2-defaults", ["--arch", "gemma2"])]


class Model:
    def __init__(self, path):
        self.r = gguf_fast.reader(path)
        self.t = {t.name: t for t in self.r.tensors}
        self.arch = self.field("general.architecture")
        a = self.arch
        self.n_layer = self.field(f"{a}.block_count")
        self.n_embd = self.field(f"{a}.embedding_length")
        self.n_head = self.field(f"{a}.attention.head_count")
        self.n_kv = self.field(f"{a}.attention.head_count_kv", self.n_head)
        self.hd = self.field(f"{a}.attention.key_length", self.n_embd // self.n_head)
        self.n_rot = self.field(f"{a}.rope.dimension_count", self.hd)
        self.eps = float(self.field(f"{a}.attention.layer_norm_rms_epsilon"))
        self.base = float(self.field(f"{a}.rope.freq_base", 10000.0))
        g2 = a == "gemma2"
        self.gemma = a in ("gemma2", "gemma3")
        self.window = self.field(f"{a}.attention.sliding_window", 4096 if g2 else 0) if self.gemma else 0
        self.swa_every = 2 if g2 else 6  # gemma2: even layers slide; gemma3: 5 of every 6
        self.base_swa = float(self.field(f"{a}.rope.freq_base_swa", self.base if g2 else 10000.0))
        self.softcap = float(self.field(f"{a}.final_logit_softcapping", 30.0 if g2 else 0.0)) if self.gemma else 0.0
        self.attn_softcap = float(self.field(f"{a}.attn_logit_softcapping", 50.0)) if g2 else 0.0
        # NeoX rope rotates halves; llama's rotates neighbours.
        self.neox = a in ("gemma2", "gemma3", "qwen2", "qwen3", "qwen3moe", "phi3")

    def field(self, key, default=None):
        f = self.r.fields.get(key)
        if f is None:
            if default is None:
                raise KeyError(key)
            return default
        return f.contents()

    def w(self, name):
        t = self.t[name]
        return gguf.dequantize(t.data, t.tensor_type).astype(np.float64)

    def embedding_rows(self, name, ids):
        t = self.t[name]
        return gguf.dequantize(t.data[ids], t.tensor_type).astype(np.float64)


def rms(x, w, eps):
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * w


def rope(x, base, n_rot, neox):
    """x: [n, heads, hd]; rotates the first n_rot dimensions by pos * base^(-2i/n_rot)."""
    n = x.shape[0]
    half = n_rot // 2
    theta = np.arange(n, dtype=np.float64)[:, None] * base ** (-2.0 * np.arange(half) / n_rot)
    c, s = np.cos(theta)[:, None, :], np.sin(theta)[:, None, :]
    out = x.copy()
    if neox:
        a, b = x[..., :half], x[..., half:n_rot]
        out[..., :half], out[..., half:n_rot] = a * c - b * s, a * s + b * c
    else:
        a, b = x[..., 0:n_rot:2], x[..., 1:n_rot:2]
        out[..., 0:n_rot:2], out[..., 1:n_rot:2] = a * c - b * s, a * s + b * c
    return out


def attend(q, k, v, scale, window, softcap=0.0):
    """q [n, H, d], k/v [n, G, d]; query head h reads kv head h // (H // G); scores soft-capped
    (softcap * tanh(s / softcap)) when softcap > 0."""
    n, H, _ = q.shape
    G = k.shape[1]
    i = np.arange(n)[:, None]
    j = np.arange(n)[None, :]
    masked = (j > i) | ((i - j >= window) if window else False)
    out = np.empty((n, H, v.shape[2]))
    for h in range(H):
        g = h // (H // G)
        s = (q[:, h, :] @ k[:, g, :].T) * scale
        if softcap:
            s = softcap * np.tanh(s / softcap)
        s[masked] = -np.inf
        s = np.exp(s - s.max(axis=1, keepdims=True))
        out[:, h, :] = (s / s.sum(axis=1, keepdims=True)) @ v[:, g, :]
    return out


def qkv(m, p, x):
    """Q, K and V of one layer [n, heads, hd], from attn_q/k/v or a fused attn_qkv, biases added."""
    n, q_w, kv_w = len(x), m.n_head * m.hd, m.n_kv * m.hd
    if p + "attn_qkv.weight" in m.t:
        y = x @ m.w(p + "attn_qkv.weight").T
        if p + "attn_qkv.bias" in m.t:
            y = y + m.w(p + "attn_qkv.bias")
        q, k, v = y[:, :q_w], y[:, q_w:q_w + kv_w], y[:, q_w + kv_w:]
    else:
        q, k, v = (x @ m.w(p + f"attn_{c}.weight").T for c in "qkv")
    q, k, v = (t + m.w(p + f"attn_{c}.bias") if p + f"attn_{c}.bias" in m.t else t for t, c in zip((q, k, v), "qkv"))
    return q.reshape(n, m.n_head, m.hd), k.reshape(n, m.n_kv, m.hd), v.reshape(n, m.n_kv, -1)


def moe(m, p, x):
    """The experts' MLP: each token's n_expert_used most probable experts (softmax over the
    router), their probabilities divided by their sum, each expert's SiLU-gated MLP weighted."""
    a = m.arch
    used = m.field(f"{a}.expert_used_count")
    r = x @ m.w(p + "ffn_gate_inp.weight").T
    probs = np.exp(r - r.max(axis=1, keepdims=True))
    probs /= probs.sum(axis=1, keepdims=True)
    gate, up, down = (m.w(p + f"ffn_{c}_exps.weight") for c in ("gate", "up", "down"))  # [expert, out, in]
    out = np.zeros_like(x)
    for t in range(len(x)):
        top = np.argsort(-probs[t], kind="stable")[:used]
        w = probs[t, top] / probs[t, top].sum()
        for e, we in zip(top, w):
            g, u = gate[e] @ x[t], up[e] @ x[t]
            out[t] += we * (down[e] @ (g / (1 + np.exp(-g)) * u))
    return out


def forward(m, tokens):
    gemma = m.gemma
    n = len(tokens)
    h = m.embedding_rows("token_embd.weight", tokens) * (np.sqrt(m.n_embd) if gemma else 1.0)
    for il in range(m.n_layer):
        p = f"blk.{il}."
        W = lambda name: m.w(p + name + ".weight")
        swa = gemma and m.window > 0 and il % m.swa_every < m.swa_every - 1
        x = rms(h, W("attn_norm"), m.eps)
        q, k, v = qkv(m, p, x)
        if p + "attn_q_norm.weight" in m.t:
            q, k = rms(q, W("attn_q_norm"), m.eps), rms(k, W("attn_k_norm"), m.eps)
        base = m.base_swa if swa else m.base
        q, k = rope(q, base, m.n_rot, m.neox), rope(k, base, m.n_rot, m.neox)
        scale = 1.0 / np.sqrt(m.hd)
        a = attend(q, k, v, scale, m.window if swa else 0, m.attn_softcap).reshape(n, -1)
        o = a @ W("attn_output").T
        if gemma:
            o = rms(o, W("post_attention_norm"), m.eps)
        h = h + o
        x = rms(h, W("ffn_norm"), m.eps)
        if p + "ffn_gate_inp.weight" in m.t:  # qwen3moe: softmax router, top-k, renormalized weights
            d = moe(m, p, x)
            h = h + d
            continue
        if p + "ffn_gate.weight" in m.t:
            g, u = x @ W("ffn_gate").T, x @ W("ffn_up").T
        else:  # phi3: one up projection, its first half the gate
            g, u = np.split(x @ W("ffn_up").T, 2, axis=1)
        if gemma:
            act = 0.5 * g * (1 + np.tanh(np.sqrt(2 / np.pi) * g * (1 + 0.044715 * g * g)))
        else:
            act = g / (1 + np.exp(-g))
        d = (act * u) @ W("ffn_down").T
        if gemma:
            d = rms(d, W("post_ffw_norm"), m.eps)
        h = h + d
    h = rms(h, m.w("output_norm.weight"), m.eps)
    out_name = "output.weight" if "output.weight" in m.t else "token_embd.weight"
    t = m.t[out_name]
    logits = np.empty((n, t.data.shape[0]))
    for v0 in range(0, t.data.shape[0], 16384):
        logits[:, v0:v0 + 16384] = h @ gguf.dequantize(t.data[v0:v0 + 16384], t.tensor_type).astype(np.float64).T
    if "output.bias" in m.t:
        logits += m.w("output.bias")
    if m.softcap:
        logits = m.softcap * np.tanh(logits / m.softcap)
    return logits


def check(model, workload, template, n, tolerance=TOLERANCE):
    bindir = os.path.dirname(os.environ.get("FLIPSCOPE_BIN", "build/bin/flipscope"))
    with tempfile.TemporaryDirectory() as d:
        prefix = os.path.join(d, "dump")
        cmd = [os.path.join(bindir, "exact_dump"), "-m", model, "-w", workload, "-n", str(n), "-o", prefix]
        if template:
            cmd += ["--chat-template", template]
        subprocess.run(cmd, check=True)
        tokens = np.fromfile(prefix + ".tokens", np.int32)
        ours = np.fromfile(prefix + ".logits", np.float64).reshape(len(tokens), -1)
    ref = forward(Model(model), tokens)
    rel = np.max(np.abs(ours - ref), axis=1) / np.max(np.abs(ref), axis=1)
    same = int(np.sum(np.argmax(ours, axis=1) == np.argmax(ref, axis=1)))
    print(f"{os.path.basename(model)}: {len(tokens)} tokens, max row-relative difference {rel.max():.3e}, "
          f"top-1 equal {same}/{len(tokens)}")
    return rel.max() <= tolerance and same == len(tokens)


def check_tiny(workload, n):
    """Each TINY_CASES model, written by tiny_model (all F32), to TINY_TOLERANCE."""
    bindir = os.path.dirname(os.environ.get("FLIPSCOPE_BIN", "build/bin/flipscope"))
    ok = True
    with tempfile.TemporaryDirectory() as d:
        for name, flags in TINY_CASES:
            path = os.path.join(d, f"tiny-{name}.gguf")
            subprocess.run([os.path.join(bindir, "tiny_model"), *flags, "--matrix-type", "f32", "--weight-scale", "4",
                            "-o", path], check=True)
            ok &= check(path, workload, "", n, TINY_TOLERANCE)
    return ok


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model", nargs="?")
    ap.add_argument("workload", nargs="?")
    ap.add_argument("--chat-template", default="")
    ap.add_argument("-n", type=int, default=0, help="prefix tokens (default 64; --check: 64 and 640)")
    ap.add_argument("--check", action="store_true", help="both models on examples/netops-demo.json")
    ap.add_argument("--tiny", action="store_true", help="tiny models of each architecture on the demo session")
    a = ap.parse_args()
    if a.tiny:
        import common
        ok = check_tiny(os.path.join(common.SRC, "examples", "netops-demo.json"), a.n or 200)
    elif a.check:
        import common
        demo = os.path.join(common.SRC, "examples", "netops-demo.json")
        ok = check(common.SMOL, demo, "", a.n or 64) & check(common.GEMMA, demo, "gemma", a.n or 640)
    else:
        ok = check(a.model, a.workload, a.chat_template, a.n or 64)
    print("OK" if ok else f"FAIL: tolerance {TINY_TOLERANCE if a.tiny else TOLERANCE}")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
