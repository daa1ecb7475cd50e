"""An independent FP64 forward pass in numpy for the llama, qwen2, qwen3, qwen3moe, phi3, gemma2,
gemma3 and qwen35 GGUFs, checked against the exact engine's FP64 logits (build/bin/exact_dump) on a
short prefix, or against a capture's logits (--against-capture).

The GGUF is read with the gguf package and dequantized with gguf's own dequantize (not ggml's);
every operation is written from the architectures' definitions in plain numpy float64:
RMS norm, RoPE (llama: neighbouring pairs; the others: halves), grouped-query attention with
causal and sliding-window masks, SiLU / tanh-GELU gated MLP, Q/K/V biases and a fused QKV matrix
(qwen2), per-head Q/K norms (qwen3, gemma3), qwen3moe's router and experts, phi3's fused gate-up,
gemma's post norms, embedding scale sqrt(n_embd) and attention scale, gemma2's attention-score and logit soft-capping
(defaults 50 and 30) and its sliding even layers (window 4096 unless the file says), and qwen35's
hybrid (Qwen 3.5 / 3.6): gated delta net layers (causal depthwise conv + SiLU, L2-normed Q/K, the
gated delta rule with key heads tiled over value heads, gated RMS norm) with every
full_attention_interval-th layer gated full attention (query + sigmoid gate per head, Q/K norms,
interleaved M-RoPE as llama.cpp feeds text positions (p, p, p, 0)), written from llama.cpp's
src/models/qwen35.cpp, delta-net-base.cpp and ggml-cpu's ops. Agreement is
measured per row as max |a - b| over the row's max |b| (relative to the row's scale: single
logits near 0 have no useful relative error).

usage: exact_ref.py --check          (the ctest integration test: SmolLM2 on 64 tokens, Gemma 3 on
                                      640, past its 512-token sliding window)
       exact_ref.py --tiny           (tiny all-F32 models of each architecture written by
                                      build/bin/tiny_model, 200 tokens, to TINY_TOLERANCE)
       exact_ref.py MODEL WORKLOAD [--chat-template T] [-n 64]
       exact_ref.py MODEL --against-capture CAPTURE [-q]
                                     (the FP64 forward over a full capture's tokens: per row max
                                      |log-softmax difference|, KL(FP64 || capture) and top-1;
                                      the bounds --logp-tolerance, --kl-mean, --kl-max fit all-F32
                                      models under llama.cpp F32, -fa off, F32 KV cache)
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
              ("gemma2-defaults", ["--arch", "gemma2"]),
              # layers 1 and 3 full attention (interval 2), 2 key / 4 value heads; M-RoPE sections [3,3,2,0]
              # rotate every pair, [4,0,0,0] leaves pairs 1, 2, 5, 6 in the unrotated "e" section
              ("qwen35", ["--arch", "qwen35", "--n-layer", "4", "--rope-dims", "16"]),
              ("qwen35-sections-4000", ["--arch", "qwen35", "--n-layer", "4", "--rope-dims", "16",
                                        "--rope-sections", "4", "0", "0", "0"])]


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
        # NeoX rope rotates halves; llama's rotates neighbours (qwen35's interleaved M-RoPE pairs halves too).
        self.neox = a in ("gemma2", "gemma3", "qwen2", "qwen3", "qwen3moe", "phi3", "qwen35")
        self.rope_live = None  # per rotated pair: 1 takes the position, 0 stays unrotated (qwen35's "e" section)
        if a == "qwen35":
            self.init_qwen35()

    def init_qwen35(self):
        """Qwen 3.5 / 3.6 hybrid hyperparameters, as llama_model_qwen35::load_arch_hparams reads them."""
        a = self.arch
        # MTP (next-token prediction) blocks follow the trunk in block_count and are not run in the main pass.
        self.n_layer -= self.field(f"{a}.nextn_predict_layers", 0)
        rec = self.r.fields.get(f"{a}.attention.recurrent_layers")
        if rec is not None:  # get_key_or_arr: an array per layer, or one value for every layer
            v = rec.contents()
            self.recurrent = [bool(x) for x in v] if isinstance(v, list) else [bool(v)] * self.n_layer
        else:  # every full_attention_interval-th layer (1-based) is full attention, the others gated delta nets
            every = self.field(f"{a}.full_attention_interval", 4)
            self.recurrent = [(i + 1) % every != 0 for i in range(self.n_layer)]
        self.d_conv = self.field(f"{a}.ssm.conv_kernel")
        self.d_inner = self.field(f"{a}.ssm.inner_size")
        self.d_state = self.field(f"{a}.ssm.state_size")  # the key head width (and the value head's)
        self.n_vhead = self.field(f"{a}.ssm.time_step_rank")
        self.n_khead = self.field(f"{a}.ssm.group_count")
        # The attention scale is 1/sqrt(head_dim) always: qwen35's loader never reads attention.scale.
        sections = list(self.field(f"{a}.rope.dimension_sections")) + [0, 0, 0]
        self.rope_live = imrope_live_pairs(self.n_rot, sections[:4])

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


def imrope_live_pairs(n_rot, sections):
    """Interleaved M-RoPE (LLAMA_ROPE_TYPE_IMROPE, ggml_mrope_cache_init with is_imrope) for text:
    pair i lies in sector i % sum(sections); sectors 1, 4, 7, ... below 3*sections[1] take the h
    position, 2, 5, ... below 3*sections[2] the w position, 0, 3, ... below 3*sections[0] the t
    position, every other sector the e position. llama.cpp feeds a text token at p the positions
    (p, p, p, 0), so t/h/w pairs rotate by p * base^(-2i/n_rot) like plain NeoX rope, and e pairs by 0.
    Returns 1.0 for the pairs that rotate, 0.0 for those that stay as they are."""
    s0, s1, s2, _ = sections
    total = sum(sections)
    live = np.zeros(n_rot // 2)
    for i in range(n_rot // 2):
        sec = i % total
        live[i] = ((sec % 3 == 1 and sec < 3 * s1) or (sec % 3 == 2 and sec < 3 * s2)
                   or (sec % 3 == 0 and sec < 3 * s0))
    return live


def rope(x, base, n_rot, neox, live=None):
    """x: [n, heads, hd]; rotates the first n_rot dimensions by pos * base^(-2i/n_rot), pair i's
    angle times live[i] when live is given (0: a pair whose M-RoPE position is 0)."""
    n = x.shape[0]
    half = n_rot // 2
    theta = np.arange(n, dtype=np.float64)[:, None] * base ** (-2.0 * np.arange(half) / n_rot)
    if live is not None:
        theta = theta * live
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


def qkv(m, p, x, q_hd=None):
    """Q, K and V of one layer [n, heads, hd], from attn_q/k/v or a fused attn_qkv, biases added;
    Q's heads q_hd wide (default hd; qwen35's full attention: 2 * hd, each head's query then its gate)."""
    q_hd = q_hd or m.hd
    n, q_w, kv_w = len(x), m.n_head * q_hd, m.n_kv * m.hd
    if p + "attn_qkv.weight" in m.t:
        y = x @ m.w(p + "attn_qkv.weight").T
        if p + "attn_qkv.bias" in m.t:
            y = y + m.w(p + "attn_qkv.bias")
        q, k, v = y[:, :q_w], y[:, q_w:q_w + kv_w], y[:, q_w + kv_w:]
    else:
        q, k, v = (x @ m.w(p + f"attn_{c}.weight").T for c in "qkv")
    q, k, v = (t + m.w(p + f"attn_{c}.bias") if p + f"attn_{c}.bias" in m.t else t for t, c in zip((q, k, v), "qkv"))
    return q.reshape(n, m.n_head, q_hd), k.reshape(n, m.n_kv, m.hd), v.reshape(n, m.n_kv, -1)


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


def sigmoid(x):
    return 1 / (1 + np.exp(-x))


def gated_attention(m, p, x):
    """qwen35's full-attention mixer (build_layer_attn): attn_q gives each head its query and then
    its output gate; per-head Q and K RMS norms; interleaved M-RoPE on Q and K; causal GQA softmax
    attention scaled by 1/sqrt(head_dim); the heads' outputs times sigmoid(gate), then attn_output."""
    n = len(x)
    W = lambda name: m.w(p + name + ".weight")
    qg, k, v = qkv(m, p, x, 2 * m.hd)
    q, gate = qg[..., :m.hd], qg[..., m.hd:]
    q, k = rms(q, W("attn_q_norm"), m.eps), rms(k, W("attn_k_norm"), m.eps)
    q, k = rope(q, m.base, m.n_rot, True, m.rope_live), rope(k, m.base, m.n_rot, True, m.rope_live)
    a = attend(q, k, v, 1.0 / np.sqrt(m.hd), 0) * sigmoid(gate)
    return a.reshape(n, -1) @ W("attn_output").T


def causal_conv(x, w):
    """ggml_ssm_conv over a fresh sequence: channel c at token t is sum_k xp[t + k, c] * w[c, k],
    xp being x after d_conv - 1 zero rows (the recurrent conv state starts at zero); w is
    ssm_conv1d [channels, d_conv], so its last column weighs the current token."""
    d_conv = w.shape[1]
    xp = np.concatenate([np.zeros((d_conv - 1, x.shape[1])), x])
    return sum(xp[k:k + len(x)] * w[:, k] for k in range(d_conv))


def l2_norm(x, eps):
    """build_gdn_l2_norm: rms_norm(x, eps/n) / sqrt(n), i.e. x / sqrt(sum(x^2) + eps) over the last axis."""
    return x / np.sqrt(np.sum(x * x, axis=-1, keepdims=True) + eps)


def gated_delta_net(m, p, x):
    """qwen35's linear-attention mixer (build_layer_attn_linear and ggml's gated_delta_net op).

    attn_qkv gives [q: key heads x d_state | k: the same | v: value heads x head_v], which goes
    through the causal depthwise conv and SiLU; q and k are L2-normalized per head. Per token,
    value head h (reading key head h % n_khead: the key heads tile, as ggml_repeat and the fused
    op's iv1 % neq1 do) runs the gated delta rule on a state S [d_state x head_v] that starts at 0:
        S *= exp(g);  delta_j = (v_j - sum_i S[i][j] k_i) * beta;  S[i][j] += k_i delta_j;
        o_j = sum_i S[i][j] q_i / sqrt(head_v)
    with beta = sigmoid(ssm_beta x) and g = softplus(ssm_alpha x + ssm_dt) * ssm_a (ssm_a is stored
    as -exp(A_log) already). Each head's output is RMS-normed (ssm_norm), times silu(z) with
    z = attn_gate x, then ssm_out."""
    n = len(x)
    W = lambda name: m.w(p + name + ".weight")
    Hk, Hv, dk = m.n_khead, m.n_vhead, m.d_state
    dv = m.d_inner // Hv  # llama.cpp's head_v_dim; its state is square, so dv == dk
    key_w = Hk * dk
    mixed = x @ W("attn_qkv").T
    z = (x @ W("attn_gate").T).reshape(n, Hv, dv)
    beta = sigmoid(x @ W("ssm_beta").T)  # [n, Hv]
    # softplus in float64 (ggml returns x itself above 20, a 2e-9 difference there)
    g = np.logaddexp(0.0, x @ W("ssm_alpha").T + m.w(p + "ssm_dt.bias")) * m.w(p + "ssm_a")
    c = causal_conv(mixed, W("ssm_conv1d"))
    c = c / (1 + np.exp(-c))
    q = l2_norm(c[:, :key_w].reshape(n, Hk, dk), m.eps)
    k = l2_norm(c[:, key_w:2 * key_w].reshape(n, Hk, dk), m.eps)
    v = c[:, 2 * key_w:].reshape(n, Hv, dv)
    kh = np.arange(Hv) % Hk  # the key head each value head reads
    state = np.zeros((Hv, dk, dv))  # state[h, i, j] = S[i][j]
    o = np.empty((n, Hv, dv))
    for t in range(n):
        qt, kt = q[t, kh], k[t, kh]  # [Hv, dk]
        state *= np.exp(g[t])[:, None, None]
        delta = (v[t] - np.einsum("hij,hi->hj", state, kt)) * beta[t][:, None]
        state += kt[:, :, None] * delta[:, None, :]
        o[t] = np.einsum("hij,hi->hj", state, qt) / np.sqrt(dv)
    o = rms(o, W("ssm_norm"), m.eps) * (z / (1 + np.exp(-z)))
    return o.reshape(n, -1) @ W("ssm_out").T


def forward(m, tokens):
    gemma = m.gemma
    n = len(tokens)
    h = m.embedding_rows("token_embd.weight", tokens) * (np.sqrt(m.n_embd) if gemma else 1.0)
    for il in range(m.n_layer):
        p = f"blk.{il}."
        W = lambda name: m.w(p + name + ".weight")
        swa = gemma and m.window > 0 and il % m.swa_every < m.swa_every - 1
        x = rms(h, W("attn_norm"), m.eps)
        if m.arch == "qwen35":  # hybrid: gated delta net or gated full attention
            o = gated_delta_net(m, p, x) if m.recurrent[il] else gated_attention(m, p, x)
        else:
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
        # qwen35 names its pre-FFN norm post_attention_norm (gemma's is a post-norm of the attention, above)
        x = rms(h, W("post_attention_norm" if m.arch == "qwen35" else "ffn_norm"), m.eps)
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


def log_softmax(x):
    x = x - x.max(axis=1, keepdims=True)
    return x - np.log(np.exp(x).sum(axis=1, keepdims=True))


def capture_logits(path):
    """tokens, positions and the logits rows of a full capture (docs/capture-format.md); BF16 rows
    widened exactly (numpy has no bfloat16, so they are read as raw bits)."""
    from safetensors import deserialize
    with open(path, "rb") as f:
        t = dict(deserialize(f.read()))
    if "logits" not in t:
        sys.exit(f"{path}: a truncated capture (top-k only); --against-capture needs full logits")
    arr = lambda name, dt: np.frombuffer(t[name]["data"], dt).reshape(t[name]["shape"])
    lg = t["logits"]
    if lg["dtype"] == "BF16":
        logits = (arr("logits", np.uint16).astype(np.uint32) << 16).view(np.float32)
    else:
        logits = arr("logits", np.float32)
    return arr("tokens", np.int32), arr("positions", np.int32), logits.astype(np.float64)


def against_capture(model, capture, logp_tolerance, kl_mean, kl_max, quiet=False):
    """The FP64 forward over a capture's tokens, row by row against the capture's logits:
    max |log-softmax difference|, top-1 agreement and KL(FP64 reference || capture). Passes when
    every top-1 agrees and the worst |dlogp|, the mean KL and the largest KL are within bounds;
    the defaults fit an all-F32 model under llama.cpp's F32 arithmetic (-fa off, F32 KV cache),
    not quantized weights."""
    tokens, positions, theirs = capture_logits(capture)
    ref = forward(Model(model), tokens[:positions[-1] + 1])[positions]
    a, b = log_softmax(ref), log_softmax(theirs)
    dlp = np.max(np.abs(a - b), axis=1)
    kl = np.sum(np.exp(a) * (a - b), axis=1)
    top_ref, top_cap = np.argmax(ref, axis=1), np.argmax(theirs, axis=1)
    if not quiet:
        print("   row  pos  max|dlogp|          KL  top-1 ref/capture")
        for i, pos in enumerate(positions):
            mark = "" if top_ref[i] == top_cap[i] else "  DIFFERS"
            print(f"{i:6d} {pos:4d}  {dlp[i]:10.3e}  {kl[i]:10.3e}  {top_ref[i]}/{top_cap[i]}{mark}")
    same = int(np.sum(top_ref == top_cap))
    print(f"{os.path.basename(model)} vs {os.path.basename(capture)}: {len(positions)} rows, max |dlogp| "
          f"{dlp.max():.3e} (row {int(np.argmax(dlp))}), mean of the rows' max {dlp.mean():.3e}, "
          f"mean KL {kl.mean():.3e}, max KL {kl.max():.3e}, top-1 equal {same}/{len(positions)}")
    return dlp.max() <= logp_tolerance and kl.mean() <= kl_mean and kl.max() <= kl_max and same == len(positions)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model", nargs="?")
    ap.add_argument("workload", nargs="?")
    ap.add_argument("--chat-template", default="")
    ap.add_argument("-n", type=int, default=0, help="prefix tokens (default 64; --check: 64 and 640)")
    ap.add_argument("--check", action="store_true", help="both models on examples/netops-demo.json")
    ap.add_argument("--tiny", action="store_true", help="tiny models of each architecture on the demo session")
    ap.add_argument("--against-capture", metavar="CAPTURE",
                    help="compare MODEL's FP64 forward with a full capture's logits (MODEL CAPTURE; no workload: "
                         "the capture holds the tokens fed)")
    # llama.cpp's F32 arithmetic puts the tiny qwen35 models' worst |dlogp| at 2e-5 over 72 tokens and
    # 2e-4 over 460 (a float32 run of this same numpy code lands as far), their mean KL near 1e-11.
    ap.add_argument("--logp-tolerance", type=float, default=5e-4,
                    help="--against-capture: the largest |log-softmax difference| that passes (default 5e-4)")
    ap.add_argument("--kl-mean", type=float, default=1e-8, help="--against-capture: bound on the mean KL (1e-8)")
    ap.add_argument("--kl-max", type=float, default=1e-7, help="--against-capture: bound on the largest KL (1e-7)")
    ap.add_argument("-q", "--quiet", action="store_true", help="--against-capture: the summary line only")
    a = ap.parse_args()
    if a.against_capture:
        if not a.model:
            ap.error("--against-capture needs MODEL")
        ok = against_capture(a.model, a.against_capture, a.logp_tolerance, a.kl_mean, a.kl_max, a.quiet)
        print("OK" if ok else f"FAIL: |dlogp| above {a.logp_tolerance}, KL mean above {a.kl_mean} or max above "
                              f"{a.kl_max}, or a top-1 differs")
        sys.exit(0 if ok else 1)
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
