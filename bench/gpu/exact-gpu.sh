#!/usr/bin/env bash
# On the GPU machine (through the device tool), from the repository root, with the loads of
# bench/gpu/pack-exact.sh (docs/exact.md, "On a GPU"):
#   bench/gpu/exact-gpu.sh setup          carrying .gpu/x: unpack, find cuBLAS
#   bench/gpu/exact-gpu.sh tiny           CPU against device on a tiny model of every architecture,
#                                         and two mutations that must be caught
#   bench/gpu/exact-gpu.sh stage          carrying .gpu/yNN: keep the model part
#   bench/gpu/exact-gpu.sh smol [WORKLOAD] [STRIDE]  join the model, CPU against device on a workload
#   bench/gpu/exact-gpu.sh gemma [WORKLOAD] [STRIDE] CPU against device on the Gemma 3 model that
#                                         bench/gpu/remote.sh staged (.gpu/a and .gpu/pNN of pack.sh)
#   bench/gpu/exact-gpu.sh speed NAME MODEL [TEMPLATE]  flipscope's exact capture on the device
#                                         against llama.cpp CUDA's capture (remote.sh build first)
#   bench/gpu/exact-gpu.sh gen SHAPE TYPE NAME       write a shaped model in the background
#   bench/gpu/exact-gpu.sh cost NAME LENGTHS...      wait for it, then one pass per length
# State lives in /root/fx while the machine stays warm between calls.
set -uo pipefail
work=/root/fx
out=${OUT:-/tmp/out}
mkdir -p "$work" "$out"
env_file=$work/env.sh
[ -f "$env_file" ] && . "$env_file"
run() { echo "+ $*"; "$@"; }

case "$1" in
  setup)
    mkdir -p "$work/lib"
    cp .gpu/x/exact_gpu .gpu/x/tiny_model .gpu/x/model.* "$work/"
    cp .gpu/x/lib/* .gpu/x/blas/* "$work/lib/" && gunzip -f "$work"/lib/*.gz
    cublas=$(ldconfig -p | awk '/libcublas\.so\.13 / {print $NF; exit}')
    [ -n "$cublas" ] || cublas=$(find /usr/local /opt / -name 'libcublas.so.13' -print -quit 2>/dev/null)
    echo "export LD_LIBRARY_PATH=$work/lib:$(dirname "$cublas") FLIPSCOPE_CUBLAS=$cublas" > "$env_file"
    cat "$env_file"
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
    nproc; free -g | head -2; df -h /root | tail -1
    ;;
  tiny)
    # Widths and layers beyond the tests' defaults; 600 tokens in query blocks of 128 and chunks of
    # 100, so that blocks, windows, chunked projections and the DeltaNet state across chunks all run.
    common=(--n-embd 128 --n-head 4 --n-head-kv 2 --n-ff 256 --weight-scale 2)
    for spec in "llama --n-layer 3" "qwen2 --n-layer 3" "qwen3 --n-layer 3" "qwen3moe --n-layer 3" "phi3 --n-layer 3" \
        "qwen35 --n-layer 4 --full-attention-interval 2" \
        "gemma2 --n-layer 3 --sliding-window 100 --attn-softcap 50 --final-softcap 30" \
        "gemma3 --n-layer 7 --sliding-window 100" "llama --n-layer 3 --rope-dims 16"; do
      read -r arch extra <<<"$spec"
      f=$work/tiny-${arch}${extra:+-$(echo "$extra" | tr -cd 'a-z0-9')}.gguf
      # shellcheck disable=SC2086
      "$work/tiny_model" --arch "$arch" "${common[@]}" $extra -o "$f" || exit 1
      "$work/exact_gpu" check -m "$f" --random 600 --chunk 100 --query-block 128 -t 16 | tee -a "$out/tiny.txt"
    done
    for m in "qwen2 drop-bias" "llama rope-mode" "qwen3 rope-mode"; do
      read -r arch mutation <<<"$m"
      "$work/exact_gpu" check -m "$(ls "$work"/tiny-"$arch"-*.gguf | head -1)" --random 600 --chunk 100 \
        --query-block 128 -t 16 --mutation "$mutation" | tee -a "$out/tiny.txt"
      echo "exit status ${PIPESTATUS[0]} (1: the check caught the mutation)" | tee -a "$out/tiny.txt"
    done
    ;;
  stage)
    cp .gpu/y*/model.part-* "$work/" 2>/dev/null; ls -la "$work"/model.part-*
    ;;
  smol)
    cp .gpu/y*/model.part-* "$work/" 2>/dev/null
    [ -f "$work/model.gguf" ] || cat "$work"/model.part-* > "$work/model.gguf"
    [ "$(sha256sum "$work/model.gguf" | cut -d' ' -f1)" = "$(cat "$work/model.sha256")" ] ||
      { echo "model parts do not join to the packed model" >&2; exit 1; }
    run "$work/exact_gpu" check -m "$work/model.gguf" -w "${2:-examples/netops-session.json}" --stride "${3:-4}" \
      -t 16 | tee -a "$out/smol.txt"
    ;;
  gemma)
    g=/root/flipscope-gpu
    [ -f "$g/model.gguf" ] || cat "$g"/model.part-* > "$g/model.gguf"
    [ "$(sha256sum "$g/model.gguf" | cut -d' ' -f1)" = "$(cat "$g/model.sha256")" ] ||
      { echo "model parts do not join to the packed model" >&2; exit 1; }
    run "$work/exact_gpu" check -m "$g/model.gguf" --chat-template gemma -w "${2:-examples/netops-session.json}" \
      --stride "${3:-4}" -t 16 | tee -a "$out/gemma.txt"
    ;;
  speed)
    # The same capture (every 4th position probed, F32 rows) by the exact engine on the device and by
    # llama.cpp CUDA (-ngl 99 -fa on, F16 KV), each timed end to end, then compared (flips of
    # llama.cpp CUDA against the truth). OpenBLAS alone from this machine's libraries: the CUDA
    # build's libllama and libggml come first.
    g=/root/flipscope-gpu name=$2 model=$3
    mkdir -p "$work/blas" && ln -sf "$work"/lib/libopenblas.so.0 "$work"/lib/libgfortran.so.5 "$work"/lib/libquadmath.so.0 "$work/blas/"
    export LD_LIBRARY_PATH="$(cat "$g/build-dir")/bin:$g/lib:$work/blas" FLIPSCOPE_NO_PROGRESS=1
    args=(-m "$model" -w examples/netops-session.json --stride 4 --store f32 ${4:+--chat-template "$4"})
    TIMEFORMAT="%R s wall"
    for pass in 1 2; do
      echo "== $name, pass $pass: exact on CUDA0" | tee -a "$out/speed.txt"
      { time "$g/flipscope" capture "${args[@]}" --engine exact -dev CUDA0 -t 16 -o "/dev/shm/$name-exact-$pass.safetensors" -q; } 2>&1 | tee -a "$out/speed.txt"
      echo "== $name, pass $pass: llama.cpp CUDA" | tee -a "$out/speed.txt"
      { time "$g/flipscope" capture "${args[@]}" -ngl 99 -fa on -t 16 -o "/dev/shm/$name-cuda-$pass.safetensors" -q; } 2>&1 | tee -a "$out/speed.txt"
    done
    python3 - "/dev/shm/$name-exact-2.safetensors" "/dev/shm/$name-cuda-2.safetensors" <<'PY' | tee -a "$out/speed.txt"
import json, struct, sys
for path in sys.argv[1:]:
    with open(path, "rb") as f:
        head = json.loads(f.read(struct.unpack("<Q", f.read(8))[0]))
    print(path, json.dumps(json.loads(head["__metadata__"]["flipscope.manifest"]).get("timings")))
PY
    "$g/flipscope" compare "/dev/shm/$name-exact-2.safetensors" "/dev/shm/$name-cuda-2.safetensors" | tee -a "$out/speed.txt"
    ;;
  gen)
    shape=$2 type=$3 name=$4
    rm -f "$work/$name.done"
    setsid bash -c "start=\$(date +%s); '$work/tiny_model' --shape $shape --matrix-type $type --output-scale 8 \
      -t 16 -o '$work/$name.gguf' && echo \"written in \$(( \$(date +%s) - start )) s\" && touch '$work/$name.done'" \
      > "$work/$name.log" 2>&1 < /dev/null &
    echo "writing $name ($shape, $type) in the background"
    ;;
  cost)
    name=$2; shift 2
    for _ in $(seq 120); do [ -f "$work/$name.done" ] && break; sleep 5; done
    cat "$work/$name.log"; ls -la "$work/$name.gguf"
    run "$work/exact_gpu" cost -m "$work/$name.gguf" --tokens "$@" -t 16 2>&1 | tee -a "$out/cost-$name.txt"
    nvidia-smi --query-gpu=memory.used --format=csv
    ;;
esac
