#!/usr/bin/env python3
"""Writes a Hugging Face folder that vLLM serves from a GGUF file, and checks that it computes.

    gguf_to_hf.py MODEL.gguf OUT_DIR

transformers dequantizes the GGUF (its gguf loader) but refuses to save such a model, and the
config it builds names no architecture: a folder written from it naively is served as an
untrained head (every log-probability ln(1/n_vocab)). This writes config.json with the
architecture named and no quantization note, model.safetensors in float32 without the tied
lm_head, and the tokenizer;
then reloads the folder with transformers and requires the same logits as the GGUF model on a
short prompt (max difference 0) and a non-uniform distribution.
"""
import json
import os
import sys

import torch
from safetensors.torch import save_file
from transformers import AutoModelForCausalLM, AutoTokenizer


def main():
    gguf_path, out = sys.argv[1], sys.argv[2]
    folder, name = os.path.split(os.path.abspath(gguf_path))
    os.makedirs(out, exist_ok=True)
    tok = AutoTokenizer.from_pretrained(folder, gguf_file=name)
    tok.save_pretrained(out)
    model = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name, dtype=torch.float32).eval()
    cfg = model.config
    cfg.architectures = [type(model).__name__]
    tied = bool(getattr(cfg, "tie_word_embeddings", False))
    state = {k: v.detach().contiguous() for k, v in model.state_dict().items() if not (tied and k == "lm_head.weight")}
    save_file(state, os.path.join(out, "model.safetensors"), metadata={"format": "pt"})
    cfg.save_pretrained(out)
    # The config keeps transformers' GGUF quantization note, which vLLM refuses ("Unknown
    # quantization method: gguf"): the weights written are plain float32.
    path = os.path.join(out, "config.json")
    with open(path) as f:
        written = json.load(f)
    written.pop("quantization_config", None)
    written.pop("dtype", None)
    written["torch_dtype"] = "float32"
    with open(path, "w") as f:
        json.dump(written, f, indent=1)
    again = AutoModelForCausalLM.from_pretrained(out, dtype=torch.float32).eval()
    ids = torch.tensor([tok("Show the ARP table on lab-core01 and find 10.25.223.91.")["input_ids"]])
    with torch.no_grad():
        a, b = model(ids).logits[0], again(ids).logits[0]
    diff = (a - b).abs().max().item()
    spread = a.std(dim=-1).min().item()
    print(f"{out}: {type(model).__name__}, {sum(v.numel() for v in state.values())} parameters, "
          f"reload max |diff| {diff}, min logit std {spread:.3f}")
    if diff != 0.0 or spread < 0.5:
        sys.exit(f"{out}: the folder does not compute the GGUF's function (diff {diff}, std {spread})")


if __name__ == "__main__":
    main()
