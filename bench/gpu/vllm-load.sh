#!/usr/bin/env bash
# On the GPU machine after remote-vllm.sh matrix: the repeat floor under load. For each of a plain
# FA3 server and one with VLLM_BATCH_INVARIANT=1, `flipscope capture --load N --load-repeats R`
# captures the default session alone, then R times beside N filler requests; each loaded capture
# is also compared with the alone one. (The figures in docs/load.md were taken before capture had
# --load, by a version of this script that sent seeded random-token fillers itself.)
#   bench/gpu/vllm-load.sh NAME N R          results in $OUT/NAME.tar.gz and $OUT/NAME-summary.txt
set -euo pipefail
work=/root/flipscope-gpu name=$1 n=$2 reps=$3
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export VLLM_USE_FLASHINFER_SAMPLER=0 HF_HUB_OFFLINE=1 VLLM_NO_USAGE_STATS=1 FLIPSCOPE_NO_PROGRESS=1
export LD_LIBRARY_PATH="$(cat "$work/build-dir")/bin:$work/lib" PYTHONPATH=$work/site
out=$work/results/$name && mkdir -p "$out"
fs=$work/flipscope
common=(--dtype bfloat16 --max-model-len 8192 --max-logprobs 20 --logprobs-mode raw_logprobs --generation-config vllm
        --enforce-eager --no-enable-prefix-caching --gpu-memory-utilization 0.05 --kv-cache-memory-bytes 4294967296
        --attention-backend FLASH_ATTN --max-num-batched-tokens 2048)
declare -A envs=([fa3]="" [fa3-bi]="VLLM_BATCH_INVARIANT=1")
declare -A ports=([fa3]=8201 [fa3-bi]=8202)
for c in fa3 fa3-bi; do
  # shellcheck disable=SC2086
  setsid env ${envs[$c]} python3 -m vllm.entrypoints.cli.main serve "$work/hf" --port "${ports[$c]}" \
    --served-model-name smollm2 "${common[@]}" > "$out/$c.log" 2>&1 < /dev/null &
  echo $! > "$out/$c.pid"
done
for c in fa3 fa3-bi; do
  for _ in $(seq 200); do
    python3 -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:${ports[$c]}/health', timeout=2)" 2>/dev/null && break
    sleep 2
  done
done
# flipscope's own load: the workload alone to -o, then R times while N filler requests (cut from
# the workload, varied lengths, half generating) keep the batch full; OUT.load.json counts the
# loaded repeats bit-identical to the alone capture (docs/load.md).
for c in fa3 fa3-bi; do
  "$fs" capture --engine openai --url "http://127.0.0.1:${ports[$c]}" -m "$work/model.gguf" \
    -w examples/netops-session.json -o "$out/$c.safetensors" --stride 32 --full tool_calls --logprobs 20 -q \
    --load "$n" --load-repeats "$reps" 2>&1 | tee "$out/$c-load.txt"
  for r in $(seq "$reps"); do
    "$fs" compare "$out/$c.safetensors" "$out/$c.load$r.safetensors" --window 2048 --json -q \
      > "$out/$c-load$n-r$r.json" || true
  done
done
for c in fa3 fa3-bi; do kill -TERM -- "-$(cat "$out/$c.pid")" 2>/dev/null || true; done
python3 - "$out" <<'PY' | tee "$out/summary.txt"
import glob, json, os, sys
for p in sorted(glob.glob(f"{sys.argv[1]}/*-load*.json")):
    j = json.load(open(p)); j = j[0] if isinstance(j, list) else j; o = j["overall"]
    print(f'{os.path.basename(p)[:-5]:18} vs alone: {o["flips"]:>3} flips / {o["probes"]}  KL {o["kl_base_cand"]["mean"]:.3g}  '
          f'bit-identical probes {j["bit_identical"]}')
PY
tar -C "$work/results" -czf "$OUT/$name.tar.gz" --exclude '*.log' "$name" && cp "$out/summary.txt" "$OUT/$name-summary.txt"
