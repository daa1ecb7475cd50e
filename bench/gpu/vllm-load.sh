#!/usr/bin/env bash
# On the GPU machine after remote-vllm.sh matrix: the repeat floor under load. For each of a plain
# FA3 server and one with VLLM_BATCH_INVARIANT=1, the default session is captured alone, then R
# times while N filler requests (seeded random token ids, 200-3000 tokens, 16-256 generated) keep
# the server's batch full. Each loaded capture is compared with the alone one.
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
cap() {  # cap PORT FILE
  "$fs" capture --engine openai --url "http://127.0.0.1:$1" -m "$work/model.gguf" -w examples/netops-session.json \
    -o "$2" --stride 32 --full tool_calls --logprobs 20 -q
}
for c in fa3 fa3-bi; do
  port=${ports[$c]}
  cap "$port" "$out/$c-alone.safetensors"
  for r in $(seq "$reps"); do
    python3 - "$port" "$n" "$r" > "$out/$c-fillers-$r.txt" 2>&1 <<'PY' &
import json, random, sys, threading, time, urllib.request
port, n, seed = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
stop = time.time() + 25
def filler(i):
    rng = random.Random(seed * 1000 + i)
    done = 0
    while time.time() < stop:
        body = {"model": "smollm2", "prompt": [rng.randrange(100, 49000) for _ in range(rng.randrange(200, 3000))],
                "max_tokens": rng.randrange(16, 256), "temperature": 0, "ignore_eos": True}
        req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/completions", json.dumps(body).encode(),
                                     {"Content-Type": "application/json"})
        urllib.request.urlopen(req, timeout=120).read()
        done += 1
    print(f"filler {i}: {done} requests")
ts = [threading.Thread(target=filler, args=(i,)) for i in range(n)]
[t.start() for t in ts]
[t.join() for t in ts]
PY
    fillers=$!
    sleep 3  # the fillers are running
    cap "$port" "$out/$c-load$n-r$r.safetensors"
    wait "$fillers"  # only them: the servers are children of this shell too
    "$fs" compare "$out/$c-alone.safetensors" "$out/$c-load$n-r$r.safetensors" --window 2048 --json -q \
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
