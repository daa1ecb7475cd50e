#!/usr/bin/env bash
# On the GPU machine after remote-vllm.sh unpack + convert (the vLLM wheels installed, the model
# folder $work/hf written) and remote.sh build-bg (flipscope built): served replay over HTTP
# (docs/served.md, "Over HTTP"). For a bf16 and an fp8 KV cache (FA3), one vLLM server each with
# prefix caching on and its counts reported; over the default session each server gives a prefill
# capture (one prompt-logprobs request: vLLM computes such a request without its prefix cache) and
# a served one (a generation per assistant message, a one-token request per decode step); then
# compare prefill against served, and the served record's rows by source, the proof and the
# requests per second into the summary; then fp8 against bf16 under each replay.
#   bench/gpu/vllm-served.sh NAME           results in $OUT/NAME.tar.gz and $OUT/NAME-summary.txt
# Under the device tool, e.g.: bench/gpu/vllm-served.sh served-fa3   (after the set-up calls above)
set -euo pipefail
work=/root/flipscope-gpu name=$1
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export VLLM_USE_FLASHINFER_SAMPLER=0 HF_HUB_OFFLINE=1 VLLM_NO_USAGE_STATS=1 FLIPSCOPE_NO_PROGRESS=1
export LD_LIBRARY_PATH="$(cat "$work/build-dir")/bin:$work/lib" PYTHONPATH=$work/site
out=$work/results/$name && mkdir -p "$out"
# The background steps of the earlier calls: the CUDA build (flipscope's libraries), vLLM's install
# and the model folder it serves.
for f in build.done site.done hf.done; do
  for _ in $(seq 150); do [ -f "$work/$f" ] && break; sleep 2; done
  [ -f "$work/$f" ] || { echo "$f missing after 300 s" >&2; tail -20 "$work/$f.log" >&2; exit 1; }
done
fs=$work/flipscope
# Prefix caching on, with usage.prompt_tokens_details.cached_tokens in every answer: without them
# flipscope refuses a served replay, naming these flags.
common=(--dtype bfloat16 --max-model-len 8192 --max-logprobs 20 --logprobs-mode raw_logprobs --generation-config vllm
        --enforce-eager --enable-prefix-caching --enable-prompt-tokens-details --gpu-memory-utilization 0.05
        --kv-cache-memory-bytes 4294967296 --attention-backend FLASH_ATTN --max-num-batched-tokens 2048)
declare -A kv=([bf16]="auto" [fp8]="fp8")
declare -A ports=([bf16]=8301 [fp8]=8302)
for c in bf16 fp8; do
  setsid python3 -m vllm.entrypoints.cli.main serve "$work/hf" --port "${ports[$c]}" --served-model-name smollm2 \
    "${common[@]}" --kv-cache-dtype "${kv[$c]}" > "$out/$c.log" 2>&1 < /dev/null &
  echo $! > "$out/$c.pid"
done
for c in bf16 fp8; do
  for _ in $(seq 200); do
    python3 -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:${ports[$c]}/health', timeout=2)" 2>/dev/null && break
    sleep 2
  done
done
probes=(--stride 32 --full tool_calls --logprobs 20 -q)
for c in bf16 fp8; do
  url=http://127.0.0.1:${ports[$c]}
  note="vllm serve ${common[*]} --kv-cache-dtype ${kv[$c]}"
  "$fs" capture --engine openai --url "$url" -m "$work/model.gguf" -w examples/netops-session.json \
    -o "$out/$c-prefill.safetensors" "${probes[@]}" --server-note "$note"
  "$fs" capture --engine openai --url "$url" -m "$work/model.gguf" -w examples/netops-session.json \
    -o "$out/$c-served.safetensors" "${probes[@]}" --replay served --server-note "$note"
  "$fs" compare "$out/$c-prefill.safetensors" "$out/$c-served.safetensors" --window 2048 --json -q \
    > "$out/$c-prefill-vs-served.json" || true
done
# The fp8 KV cache against bf16 under each replay: does the decode path move its effect?
for r in prefill served; do
  "$fs" compare "$out/bf16-$r.safetensors" "$out/fp8-$r.safetensors" --window 2048 --json -q \
    > "$out/bf16-vs-fp8-$r.json" || true
done
# A served answer with its cached-token count, for the parsers' tests (tests/data/vllm/).
python3 - "http://127.0.0.1:${ports[bf16]}" "$out" <<'PY'
import json, sys, urllib.request
url, out = sys.argv[1], sys.argv[2]
ids = [1, 9690, 314, 260, 5248, 2415, 355, 6452, 29, 2084, 4214, 30] * 4
def post(body):
    req = urllib.request.Request(url + "/v1/completions", json.dumps(body).encode(), {"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=60) as r:
        return r.read()
body = {"model": "smollm2", "max_tokens": 4, "temperature": 0, "logprobs": 5, "return_tokens_as_token_ids": True}
post({**body, "prompt": ids})
open(f"{out}/vllm-served-answer.json", "wb").write(post({**body, "prompt": ids + [28]}))
PY
for c in bf16 fp8; do kill -TERM -- "-$(cat "$out/$c.pid")" 2>/dev/null || true; done
python3 - "$out" <<'PY' | tee "$out/summary.txt"
import json, os, sys
from safetensors import safe_open
out = sys.argv[1]
for c in ("bf16", "fp8"):
    with safe_open(f"{out}/{c}-served.safetensors", "np") as f:
        sv = json.loads(f.metadata()["flipscope.manifest"])["served"]
    j = json.load(open(f"{out}/{c}-prefill-vs-served.json")); j = j[0] if isinstance(j, list) else j; o = j["overall"]
    print(f'{c}: prefill vs served {o["flips"]} flips / {o["probes"]} probes, KL {o["kl_base_cand"]["mean"]:.3g}; '
          f'rows {sv["rows"]}; proof {sv["proof"]["identical"]} of {sv["proof"]["compared"]} identical; '
          f'{sv["requests"]} requests, {sv["requests_per_s"]:.1f}/s; generation matched '
          f'{sv["generation_matched"]} of {sv["generated_tokens"]}')
for r in ("prefill", "served"):
    j = json.load(open(f"{out}/bf16-vs-fp8-{r}.json")); j = j[0] if isinstance(j, list) else j; o = j["overall"]
    print(f'fp8 against bf16 KV, {r} replay: {o["flips"]} flips / {o["probes"]} probes, '
          f'KL {o["kl_base_cand"]["mean"]:.3g}, identical {j.get("bit_identical")}')
PY
tar -C "$work/results" -czf "$OUT/$name.tar.gz" --exclude '*.log' "$name" && cp "$out/summary.txt" "$OUT/$name-summary.txt"
