#!/usr/bin/env bash
# On the GPU machine, after bench/gpu/remote.sh build and stage (the last model part carried by
# this call): the same tokens through three cashiers. llama.cpp captures on CUDA and on the CPU
# (remote.sh run TOML NAME), then transformers (python -m flipscope_capture.hf, the GGUF
# dequantized, sdpa attention in fp32 and in bf16) on the CUDA capture's tokens and probes, then
# flipscope compare of every pair. Needs the gguf wheel in .whl (transformers reads GGUF with it).
#   bench/gpu/cashiers.sh TOML NAME          -> $OUT/NAME/{run.log,results.json,cashiers.json,...}
set -euo pipefail
work=/root/flipscope-gpu
bench/gpu/remote.sh run "$1" "$2"
caps=$work/out-$2/captures
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site:$PWD/python
for dtype in fp32 bf16; do
  python3 -m flipscope_capture.hf --model "$work/model.gguf" --tokens-from "$caps/baseline-r0.safetensors" \
    -o "$work/hf-sdpa-$dtype.safetensors" --attn sdpa --dtype "$dtype" --store bf16 2>&1 | tail -3
done
export LD_LIBRARY_PATH="$(cat "$work/build-dir")/bin:$work/lib"
declare -A cap=([cuda]=$caps/baseline-r0.safetensors [cpu]=$caps/cpu-r0.safetensors
                [hf-fp32]=$work/hf-sdpa-fp32.safetensors [hf-bf16]=$work/hf-sdpa-bf16.safetensors)
pairs="cuda:hf-fp32 cuda:hf-bf16 cuda:cpu hf-fp32:hf-bf16 hf-fp32:cpu"
for pair in $pairs; do
  "$work/flipscope" compare "${cap[${pair%%:*}]}" "${cap[${pair##*:}]}" --window 4096 --json -q --no-text \
    > "$work/cmp-${pair/:/-vs-}.json"
done
python3 - "$work" "$OUT/$2/cashiers.json" $pairs <<'PY'
import json, sys
work, out, pairs = sys.argv[1], sys.argv[2], sys.argv[3:]
table = {}
for p in pairs:
    c = json.load(open(f"{work}/cmp-{p.replace(':', '-vs-')}.json"))
    o = c["overall"]
    table[p] = {"probes": o["probes"], "flips": o["flips"], "flip_rate": o["flip_rate"],
                "kl_mean": o["kl_base_cand"]["mean"], "kl_p99": o["kl_base_cand"]["p99"],
                "window_flip_rates": [w["flip_rate"] for w in c["windows"]],
                "window_kl_means": [w["kl_mean"] for w in c["windows"]]}
    print(f"{p:18} {o['flips']:4} / {o['probes']} flips ({100 * o['flip_rate']:.2f}%)  "
          f"KL mean {o['kl_base_cand']['mean']:.3g}  p99 {o['kl_base_cand']['p99']:.3g}")
json.dump(table, open(out, "w"), indent=1)
PY
