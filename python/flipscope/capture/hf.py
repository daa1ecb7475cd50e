"""Hugging Face transformers writer: the same tokens teacher-forced through a transformers model,
full-vocabulary logits at the probe positions, written as a flipscope capture.

    python -m flipscope_capture.hf --model DIR_OR_GGUF --tokens-from CAPTURE.safetensors \\
        -o OUT.safetensors [--attn eager|sdpa|flash_attention_2] [--dtype bf16|fp16|fp32|fp64] \\
        [--stride 32] [--device cuda] [--store f32|bf16]

--model is a Hugging Face model folder (or hub id), or a .gguf file (loaded, dequantized, through
transformers' gguf_file support). --tokens-from takes a flipscope capture (its tokens, and its
probe positions unless --stride is given) or a token-id file (JSON list or whitespace-separated).
Needs torch and transformers (>= 4.50, for logits_to_keep with explicit positions); they are
imported only when this runs.
"""
import argparse
import os
import sys
import time

import numpy as np

from . import format as fmt

DTYPES = {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32", "fp64": "float64"}


def load_model(model, dtype, attn, device):
    import torch
    from transformers import AutoModelForCausalLM
    kw = {"torch_dtype": getattr(torch, DTYPES[dtype]), "attn_implementation": attn}
    if model.endswith(".gguf"):
        m = AutoModelForCausalLM.from_pretrained(os.path.dirname(os.path.abspath(model)),
                                                 gguf_file=os.path.basename(model), **kw)
    else:
        m = AutoModelForCausalLM.from_pretrained(model, **kw)
    return m.to(device).eval()


def probe_logits(model, tokens, positions, device):
    """F32 logits [n_probes, V] at positions from one teacher-forced forward over all tokens (the
    whole prefix matters); logits_to_keep computes the vocabulary projection at the probes only,
    with the model's own head (final soft-capping included)."""
    import torch
    ids = torch.tensor(np.asarray(tokens)[None, :], dtype=torch.long, device=device)
    keep = torch.tensor(np.asarray(positions), dtype=torch.long, device=device)
    with torch.no_grad():
        out = model(ids, logits_to_keep=keep, use_cache=False)
    logits = out.logits[0]
    if logits.shape[0] != len(positions):
        raise RuntimeError(f"the model returned {logits.shape[0]} rows for {len(positions)} probes "
                           "(transformers too old for logits_to_keep with positions?)")
    return logits.float().cpu().numpy()


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m flipscope_capture.hf", description=__doc__.split("\n")[0])
    ap.add_argument("--model", required=True, help="HF model folder or hub id, or a .gguf file")
    ap.add_argument("--tokens-from", required=True, help="flipscope capture or token-id file")
    ap.add_argument("-o", "--output", required=True)
    ap.add_argument("--attn", default="sdpa", choices=["eager", "sdpa", "flash_attention_2"])
    ap.add_argument("--dtype", default="bf16", choices=list(DTYPES))
    ap.add_argument("--stride", type=int, default=None, help="probe every N-th position (default: the capture's probes)")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--store", default="f32", choices=["f32", "bf16"])
    a = ap.parse_args(argv)
    try:
        import torch
        import transformers
    except ImportError as e:
        sys.exit(f"flipscope_capture.hf: error: needs torch and transformers ({e})")
    tokens, positions, source = fmt.tokens_and_positions(a.tokens_from, a.stride)
    t0 = time.time()
    model = load_model(a.model, a.dtype, a.attn, a.device)
    t1 = time.time()
    logits = probe_logits(model, tokens, positions, a.device)
    t2 = time.time()
    engine = {"engine": "transformers", "transformers": transformers.__version__, "torch": torch.__version__,
              "attn_implementation": a.attn, "dtype": a.dtype, "device": a.device,
              "device_name": torch.cuda.get_device_name() if a.device.startswith("cuda") else a.device,
              "flags": f"--attn {a.attn} --dtype {a.dtype}"}
    model_info = {"path": os.path.abspath(a.model) if os.path.exists(a.model) else a.model,
                  "architecture": getattr(model.config, "model_type", None),
                  "sha256": fmt.sha256_file(a.model) if os.path.isfile(a.model) else None}
    m = fmt.manifest(engine, tokens, positions, source, model_info, a.stride,
                     {"load_s": t1 - t0, "prefill_s": t2 - t1, "tokens_per_s": len(tokens) / max(t2 - t1, 1e-9)})
    fmt.write_full(a.output, tokens, positions, logits, m, a.store)
    print(f"wrote {a.output}: {len(tokens)} tokens, {len(positions)} probes, {a.attn} {a.dtype}", file=sys.stderr)


if __name__ == "__main__":
    main()
