"""vLLM offline writer: LLM.generate with prompt_logprobs over the same tokens, the top-k written
as a truncated flipscope capture.

    python -m flipscope_capture.vllm_offline --model HF_DIR --tokens-from CAPTURE.safetensors \\
        -o OUT.safetensors [--logprobs 20] [--dtype bfloat16] [--tp 1] [--stride 32] \\
        [--engine-args '{"enforce_eager": true, "kv_cache_dtype": "fp8"}']

--engine-args is a JSON object of extra vllm.LLM arguments (the knob under test). vLLM is
imported only when this runs.
"""
import argparse
import json
import sys
import time

import numpy as np

from . import format as fmt


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m flipscope_capture.vllm_offline", description=__doc__.split("\n")[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--tokens-from", required=True)
    ap.add_argument("-o", "--output", required=True)
    ap.add_argument("--logprobs", type=int, default=20)
    ap.add_argument("--dtype", default="bfloat16")
    ap.add_argument("--tp", type=int, default=1, help="tensor_parallel_size")
    ap.add_argument("--stride", type=int, default=None)
    ap.add_argument("--engine-args", default="{}", help="JSON object of extra vllm.LLM arguments")
    a = ap.parse_args(argv)
    try:
        import vllm
        from vllm import LLM, SamplingParams
    except ImportError as e:
        sys.exit(f"flipscope_capture.vllm_offline: error: needs vllm ({e})")
    tokens, positions, source = fmt.tokens_and_positions(a.tokens_from, a.stride)
    extra = json.loads(a.engine_args)
    t0 = time.time()
    llm = LLM(model=a.model, dtype=a.dtype, tensor_parallel_size=a.tp, max_logprobs=a.logprobs,
              max_model_len=max(len(tokens) + 1, extra.pop("max_model_len", 0)), **extra)
    t1 = time.time()
    params = SamplingParams(max_tokens=1, temperature=0.0, prompt_logprobs=a.logprobs)
    out = llm.generate([{"prompt_token_ids": [int(t) for t in tokens]}], params)[0]
    t2 = time.time()
    plp = out.prompt_logprobs  # entry i: the distribution that predicts token i; entry 0 is None
    if len(plp) != len(tokens):
        sys.exit(f"flipscope_capture.vllm_offline: error: {len(plp)} prompt_logprobs for {len(tokens)} tokens")
    k = a.logprobs
    ids = np.empty((len(positions), k), "<i4")
    lps = np.empty((len(positions), k), "<f4")
    for row, p in enumerate(positions):
        ids[row], lps[row] = fmt.topk_from_entries({t: lp.logprob for t, lp in plp[p + 1].items()}, k)
    engine = {"engine": "vllm-offline", "vllm": vllm.__version__, "dtype": a.dtype, "tensor_parallel_size": a.tp,
              "logprobs": k, "engine_args": json.loads(a.engine_args),
              "flags": f"--dtype {a.dtype} --tp {a.tp} --engine-args '{a.engine_args}'"}
    m = fmt.manifest(engine, tokens, positions, source, {"path": a.model}, a.stride,
                     {"load_s": t1 - t0, "prefill_s": t2 - t1})
    m["truncation"] = {"k": k, "note": "vLLM's top-k prompt log-probabilities: flips exact, KL a tail-bucket estimate"}
    fmt.write_topk(a.output, tokens, positions, ids, lps, ids[:, 0], m)
    print(f"wrote {a.output}: {len(tokens)} tokens, {len(positions)} probes, top-{k}", file=sys.stderr)


if __name__ == "__main__":
    main()
