#!/usr/bin/env bash
# On the GPU machine (through the device tool), from the repository root, with the loads of
# bench/gpu/pack-exact.sh (docs/exact.md, "On a GPU"):
#   bench/gpu/exact-gpu.sh setup          carrying .gpu/x: unpack, find cuBLAS
#   bench/gpu/exact-gpu.sh tiny           CPU against device on a tiny model of every architecture,
#                                         and two mutations that must be caught
#   bench/gpu/exact-gpu.sh stage          carrying .gpu/yNN: keep the model part
#   bench/gpu/exact-gpu.sh smol [WORKLOAD] [STRIDE]  join the model, CPU against device on a workload
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
