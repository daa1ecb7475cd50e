#!/usr/bin/env bash
# On the GPU machine (through the device tool), from the repository root, after remote.sh build-bg:
#   bench/gpu/remote-vllm.sh stage          keep the vLLM and model loads this call carried (.gpu/vNN, .gpu/pNN)
#   bench/gpu/remote-vllm.sh unpack         stage, join and check the vLLM wheels, install them in the background
#   bench/gpu/remote-vllm.sh convert        join the model, write the folder vLLM serves (gguf_to_hf.py) in the background
#   bench/gpu/remote-vllm.sh matrix NAME [FIRST [COUNT]]
#       the configurations of bench/gpu/vllm-matrix.txt (FIRST..FIRST+COUNT-1, 1-based): each vLLM
#       server started at once beside the others, waited for, captured twice over the default
#       session, stopped; then every capture compared with llama.cpp's CUDA capture of the same
#       tokens and with vLLM's reference (fa3-2k). Results in $OUT/NAME.tar.gz.
#       VLLM_SET=gemma: Gemma 3 270M (packed by pack.sh build MODEL) over the 31K-token session,
#       32K context; VLLM_REPEATS=1 captures every configuration but the first once. With the exact
#       capture of exact-cashiers.sh (caps/exact.safetensors) each capture is compared with it too.
#   bench/gpu/remote-vllm.sh forks [TOML]   flipscope run of TOML (default h200-vllm-forks.toml; servers
#       launched by flipscope one after another, forks followed at the flips over HTTP); resumes
#       from the captures a cut-off call left. Results in $OUT/NAME.tar.gz (NAME: the file's name
#       without h200- and .toml).
# State lives in /root/flipscope-gpu while the machine stays warm between calls (bench/gpu/vllm.md).
set -euo pipefail
work=/root/flipscope-gpu
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export VLLM_USE_FLASHINFER_SAMPLER=0 HF_HUB_OFFLINE=1 VLLM_NO_USAGE_STATS=1 DO_NOT_TRACK=1 FLIPSCOPE_NO_PROGRESS=1
workload=examples/netops-session.json template=() ctx=8192 window=2048 served=smollm2
if [ "${VLLM_SET:-}" = gemma ]; then
  workload=$work/netops-32k.json template=(--chat-template gemma) ctx=32768 window=4096 served=gemma3
fi
probes=(--stride 32 --full tool_calls)
common=(--dtype bfloat16 --max-model-len "$ctx" --max-logprobs 20 --logprobs-mode raw_logprobs --generation-config vllm
        --enforce-eager --no-enable-prefix-caching --gpu-memory-utilization 0.05 --kv-cache-memory-bytes 2147483648)

stage() {
  mkdir -p "$work"
  cp .gpu/v*/wheels.* "$work/" 2>/dev/null || true
  cp .gpu/p*/model.part-* "$work/" 2>/dev/null || true
  ls "$work"
}

wait_file() {  # wait_file FILE SECONDS WHAT: until FILE exists, or fail naming WHAT and its log
  local i
  for ((i = 0; i < $2; i++)); do [ -f "$1" ] && return 0; sleep 1; done
  echo "$3 did not finish within $2 s" >&2; tail -20 "$1.log" 2>/dev/null >&2 || true; exit 1
}

healthy() { python3 -c "import urllib.request,sys; urllib.request.urlopen('http://127.0.0.1:$1/health', timeout=2)" 2>/dev/null; }

fixtures() {  # fixtures PORT DIR: small real response bodies for the parsers' tests
  local url=http://127.0.0.1:$1 ids='[1, 9690, 314, 260, 5248, 2415, 355, 6452, 29, 2084, 4214, 30]'
  python3 - "$url" "$2" "$ids" <<'PY'
import json, sys, urllib.request
url, out, ids = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
def get(path):
    with urllib.request.urlopen(url + path, timeout=30) as r:
        return r.read()
def post(body):
    req = urllib.request.Request(url + "/v1/completions", json.dumps(body).encode(), {"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=60) as r:
        return r.read()
model = json.loads(get("/v1/models"))["data"][0]["id"]
open(f"{out}/vllm-version.json", "wb").write(get("/version"))
open(f"{out}/vllm-models.json", "wb").write(get("/v1/models"))
open(f"{out}/vllm-prompt-logprobs.json", "wb").write(post(
    {"model": model, "prompt": ids, "max_tokens": 1, "temperature": 0, "prompt_logprobs": 5}))
open(f"{out}/vllm-completion-logprobs.json", "wb").write(post(
    {"model": model, "prompt": ids, "max_tokens": 6, "temperature": 0, "logprobs": 5}))
PY
}

join_model() {
  stage >/dev/null
  [ -f "$work/model.gguf" ] || cat "$work"/model.part-* > "$work/model.gguf"
  [ "$(sha256sum "$work/model.gguf" | cut -d' ' -f1)" = "$(cat "$work/model.sha256")" ] ||
    { echo "model parts do not join to the packed model" >&2; exit 1; }
}

convert() {  # transformers reads GGUF through the gguf package: the wheel carried in .gpu/b (or .gpu/a)
  join_model
  [ -d "$work/gguf-py/gguf" ] ||  # installed already by exact-cashiers.sh exact from .gpu/b
    { mkdir -p "$work/gguf-py" && python3 -m pip install -q --no-index --no-deps --target "$work/gguf-py" "$(ls .gpu/b/gguf-*.whl .gpu/a/gguf-*.whl 2>/dev/null | head -1)"; }
  setsid bash -c "PYTHONPATH='$work/gguf-py' python3 bench/gpu/gguf_to_hf.py '$work/model.gguf' '$work/hf' && touch '$work/hf.done'" \
    > "$work/hf.done.log" 2>&1 < /dev/null &
  echo "converting the model in the background"
}

matrix() {
  local name=$1 first=${2:-1} count=${3:-99} out=$work/results/$1 caps=$work/vllm
  wait_file "$work/build.done" 420 "the llama.cpp CUDA build"
  wait_file "$work/site.done" 300 "installing vLLM"
  wait_file "$work/hf.done" 120 "the model conversion"
  join_model
  cat "$work/hf.done.log"
  export LD_LIBRARY_PATH="$(cat "$work/build-dir")/bin:$work/lib" PYTHONPATH=$work/site
  local fs=$work/flipscope
  mkdir -p "$out" "$caps"
  [ -f "$workload" ] || python3 examples/gen_session.py --seed 2 --target-tokens 32000 -o "$workload"
  # exact-cashiers.sh llama's CUDA baseline is this very capture (same flags, tokens and probes)
  [ -f "$work/out-exact/captures/baseline-r0.safetensors" ] && [ "${VLLM_SET:-}" = gemma ] &&
    ln -sf "$work/out-exact/captures/baseline-r0.safetensors" "$caps/llama-cuda.safetensors"
  [ -f "$caps/llama-cuda.safetensors" ] || "$fs" capture -m "$work/model.gguf" -w "$workload" "${template[@]}" -c "$ctx" \
    -o "$caps/llama-cuda.safetensors" -ngl 99 -sm none -fa on -ctk f16 -ctv f16 -ub 512 "${probes[@]}" -q
  python3 -c "import vllm, torch; print('vllm', vllm.__version__, 'torch', torch.__version__)" | tee "$out/versions.txt"
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader >> "$out/versions.txt"
  local -a names=() ports=() pids=()
  local i=0 line cname cenv cargs port
  while IFS='|' read -r cname cenv cargs; do
    cname=$(echo "$cname" | xargs); [ -z "$cname" ] || [ "${cname:0:1}" = "#" ] && continue
    i=$((i + 1)); [ "$i" -lt "$first" ] || [ "$i" -ge $((first + count)) ] && continue
    port=$((8100 + i))
    # shellcheck disable=SC2086  # the flags of one configuration, split as written
    setsid env $cenv python3 -m vllm.entrypoints.cli.main serve "$work/hf" --port "$port" --served-model-name "$served" \
      "${common[@]}" $cargs > "$caps/$cname.log" 2>&1 < /dev/null &
    names+=("$cname"); ports+=("$port"); pids+=($!)
    echo "$cname: env [$cenv] flags [${common[*]} $cargs]" >> "$out/servers.txt"
    sleep 3
  done < bench/gpu/vllm-matrix.txt
  local t0=$SECONDS k
  for k in "${!names[@]}"; do
    until healthy "${ports[$k]}"; do
      if ! kill -0 "${pids[$k]}" 2>/dev/null || [ $((SECONDS - t0)) -gt 360 ]; then
        echo "${names[$k]}: the server did not come up; its log ends:"; tail -15 "$caps/${names[$k]}.log"; break
      fi
      sleep 2
    done
    healthy "${ports[$k]}" || continue
    echo "${names[$k]}: up after $((SECONDS - t0)) s"
    [ -f "$out/vllm-version.json" ] || fixtures "${ports[$k]}" "$out"
    local reps=${VLLM_REPEATS:-2}; [ "$first" = 1 ] && [ "$k" = 0 ] && reps=2  # the reference's repeat floor
    for r in $(seq "$reps"); do
      "$fs" capture --engine openai --url "http://127.0.0.1:${ports[$k]}" -m "$work/model.gguf" -w "$workload" "${template[@]}" \
        -o "$caps/${names[$k]}-r$r.safetensors" "${probes[@]}" --logprobs 20 -q \
        --server-note "vllm serve $(grep "^${names[$k]}:" "$out/servers.txt" | cut -d' ' -f2-)" || echo "${names[$k]} r$r failed"
    done
  done
  for k in "${!pids[@]}"; do kill -TERM -- "-${pids[$k]}" 2>/dev/null || true; done
  sleep 5
  for k in "${!pids[@]}"; do kill -KILL -- "-${pids[$k]}" 2>/dev/null || true; done
  for c in "$caps"/*-r1.safetensors; do
    local n; n=$(basename "$c" -r1.safetensors)
    "$fs" compare "$caps/llama-cuda.safetensors" "$c" --window "$window" --json -q > "$out/cuda-vs-$n.json" || true
    [ -f "$caps/fa3-2k-r1.safetensors" ] &&
      "$fs" compare "$caps/fa3-2k-r1.safetensors" "$c" --window "$window" --json -q > "$out/fa3-vs-$n.json" || true
    [ -f "$caps/$n-r2.safetensors" ] &&
      "$fs" compare "$c" "$caps/$n-r2.safetensors" --window "$window" --json -q > "$out/repeat-$n.json" || true
    [ -f "$work/caps/exact.safetensors" ] &&
      "$fs" compare "$work/caps/exact.safetensors" "$c" --window "$window" --json -q > "$out/exact-vs-$n.json" || true
  done
  (cd "$caps" && tar -czf "$out/captures.tar.gz" --exclude llama-cuda.safetensors -- *.safetensors *.log)
  # One flat summary: flips and mean KL of each against the two references, and the repeat.
  python3 - "$out" <<'PY' | tee "$out/summary.txt"
import glob, json, os, sys
out = sys.argv[1]
def stat(path):
    try:
        j = json.load(open(path))
        j = j[0] if isinstance(j, list) else j
        o = j["overall"]
        return f'{o["flips"]:>4} flips / {o["probes"]:>5}  KL {o["kl_base_cand"]["mean"]:.3g}  identical {j.get("bit_identical")}'
    except Exception as e:
        return f"n/a ({type(e).__name__})"
for p in sorted(glob.glob(f"{out}/cuda-vs-*.json")):
    n = os.path.basename(p)[len("cuda-vs-"):-5]
    print(f"{n:16} vs llama.cpp CUDA: {stat(p)} | vs fa3-2k: {stat(f'{out}/fa3-vs-{n}.json')} | "
      f"repeat: {stat(f'{out}/repeat-{n}.json')} | vs exact: {stat(f'{out}/exact-vs-{n}.json')}")
PY
  # What comes back is at most 8 files: one archive and the summary.
  tar -C "$work/results" -czf "$OUT/$name.tar.gz" "$name" && cp "$out/summary.txt" "$OUT/$name-summary.txt"
}

forks() {
  local toml=${1:-bench/gpu/h200-vllm-forks.toml}
  local name=$(basename "$toml" .toml)
  name=${name#h200-} out=$work/out-$name${VLLM_SET:+-$VLLM_SET}
  wait_file "$work/build.done" 420 "the llama.cpp CUDA build"
  wait_file "$work/site.done" 300 "installing vLLM"
  wait_file "$work/hf.done" 120 "the model conversion"
  join_model
  export LD_LIBRARY_PATH="$(cat "$work/build-dir")/bin:$work/lib" PYTHONPATH=$work/site
  export FLIPSCOPE_GPU_MODEL=$work/model.gguf VLLM_MODEL_DIR=$work/hf FLIPSCOPE_GPU_WORKLOAD=$workload
  "$work/flipscope" run "$toml" -o "$out" > "$work/$name.log" 2>&1 || echo "flipscope run failed" >> "$work/$name.log"
  tail -40 "$work/$name.log"
  (cd "$out" && tar -czf "$OUT/$name.tar.gz" results.json report.html report.md ./*.log captures/*.log \
    captures/*.forks.json "$work/$name.log" 2>/dev/null) || true
  ls -la "$OUT"
}

case "$1" in
  stage) stage ;;
  forks) shift; forks "$@" ;;
  unpack)
    stage >/dev/null
    cat "$work"/wheels.tar.part-* > "$work/wheels.tar"
    [ "$(sha256sum "$work/wheels.tar" | cut -d' ' -f1)" = "$(cat "$work/wheels.sha256")" ] ||
      { echo "vLLM parts do not join to the packed wheels" >&2; exit 1; }
    tar -C "$work" -xf "$work/wheels.tar"
    setsid bash -c "python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target '$work/site' \
      '$work'/pack/*.whl && touch '$work/site.done'" > "$work/site.done.log" 2>&1 < /dev/null &
    echo "installing vLLM in the background"
    ;;
  convert) convert ;;
  matrix) shift; matrix "$@" ;;
  *) echo "usage: remote-vllm.sh stage | unpack | convert | matrix NAME [FIRST [COUNT]] | forks [TOML]" >&2; exit 2 ;;
esac
