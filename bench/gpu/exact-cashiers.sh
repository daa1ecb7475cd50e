#!/usr/bin/env bash
# On the GPU machine (through the device tool), from the repository root, after
# `bench/gpu/remote.sh build-bg` (carrying .gpu/a) and `bench/gpu/remote.sh stage` (carrying .gpu/p01):
#   bench/gpu/exact-cashiers.sh exact [gemma]  carrying .gpu/b: waits for the CUDA build (flipscope needs its
#                                      libllama), then the exact engine's FP64 capture of the default
#                                      session on the host's 16 CPUs, then transformers in fp64, fp32
#                                      and bf16 on the same tokens and probes
#   bench/gpu/exact-cashiers.sh llama [gemma]  runs h200-exact.toml (llama.cpp CUDA and CPU), compares every
#                                      capture with exact, `flipscope layers` CUDA against CPU with
#                                      --exact, and h200-load.toml (the load floor)
# `gemma` (after packing Gemma 3 270M: pack.sh build MODEL, five loads) does the same over the
# 31K-token session generated there, rendered with the gemma template, with h200-exact-gemma.toml;
# transformers runs fp32 and bf16 only (fp64 attention over 31K tokens is a 30 GB matrix per layer),
# and the layers and load steps are left out.
# Everything comes back as $OUT/exact-cashiers.tar.gz plus $OUT/summary.txt.
set -uo pipefail
work=${FLIPSCOPE_GPU_WORK:-/root/flipscope-gpu}
fs=$work/flipscope
export FLIPSCOPE_NO_PROGRESS=1
log() { echo "[$(date +%T)] $*" | tee -a "$work/cashiers.log"; }

join_model() {
  cp .gpu/p*/model.part-* "$work/" 2>/dev/null || true
  [ -f "$work/model.gguf" ] || cat "$work"/model.part-* > "$work/model.gguf"
  [ "$(sha256sum "$work/model.gguf" | cut -d' ' -f1)" = "$(cat "$work/model.sha256")" ] ||
    { log "model parts do not join to the packed model"; exit 1; }
}

# flipscope with the carried OpenBLAS (and libcrypto only where the image has none of its own);
# python runs without them, so torch keeps its own libraries.
libpath=$work/blas:$work/lib
fsr() { LD_LIBRARY_PATH="$libpath" "$fs" "$@"; }

set_model() {  # set_model [gemma]: the workload, template, experiment and dtypes of the model packed
  workload=examples/netops-session.json template=() toml=bench/gpu/h200-exact.toml window=2048
  dtypes="fp64 fp32 bf16" extra=1
  if [ "${1:-}" = gemma ]; then
    workload=$work/netops-32k.json template=(--chat-template gemma) toml=bench/gpu/h200-exact-gemma.toml
    window=4096 dtypes="fp32 bf16" extra=0
    [ -f "$workload" ] || python3 examples/gen_session.py --seed 2 --target-tokens 32000 -o "$workload"
    export FLIPSCOPE_GPU_WORKLOAD=$workload
  fi
}

wait_build() {
  for _ in $(seq 100); do [ -f "$work/build.done" ] && break; sleep 5; done
  [ -f "$work/build.done" ] || { tail -20 "$work/build.done.log"; log "the CUDA build has not finished"; exit 1; }
  tail -1 "$work/build.done.log" | tee -a "$work/cashiers.log"
  libpath=$libpath:$(cat "$work/build-dir")/bin
}

set_model "${2:-}"
case "${1:-}" in
  exact)
    mkdir -p "$work/blas" "$work/caps"
    for f in .gpu/b/blas/*.gz; do gunzip -c "$f" > "$work/blas/$(basename "${f%.gz}")"; done
    ldconfig -p | grep -q 'libcrypto.so.3 ' || gunzip -c .gpu/b/crypto/libcrypto.so.3.gz > "$work/lib/libcrypto.so.3"
    python3 -m pip install -q --no-index --no-deps --no-compile --target "$work/gguf-py" .gpu/b/gguf-*.whl
    join_model
    wait_build
    LD_LIBRARY_PATH="$libpath" ldd "$fs" | grep "not found" && { log "flipscope misses libraries"; exit 1; }
    start=$(date +%s)
    /usr/bin/time -f "exact: wall %e s, user %U s, peak %M KiB" env LD_LIBRARY_PATH="$libpath" "$fs" capture --engine exact -m "$work/model.gguf" \
      -w "$workload" "${template[@]}" --stride 32 --full tool_calls -t 16 -o "$work/caps/exact.safetensors" -q \
      2>&1 | tee -a "$work/cashiers.log"
    log "exact capture: $(( $(date +%s) - start )) s"
    # transformers in the background (its own session), so the next call runs llama.cpp meanwhile.
    # shellcheck disable=SC2016  # expanded by the inner shell, from its arguments
    setsid bash -c 'for dtype in $3; do
        PYTHONPATH="$1" python3 -m flipscope_capture.hf --model "$2/model.gguf" --tokens-from "$2/caps/exact.safetensors" \
          -o "$2/caps/hf-$dtype.safetensors" --attn sdpa --dtype "$dtype" 2>&1 | tail -1; done
      touch "$2/hf-caps.done"' _ "$work/gguf-py:$PWD/python" "$work" "$dtypes" > "$work/hf-caps.log" 2>&1 < /dev/null &
    log "transformers captures started in the background"
    ls -la "$work/caps" | tee -a "$work/cashiers.log"
    ;;
  llama)
    join_model
    wait_build
    export FLIPSCOPE_GPU_MODEL="$work/model.gguf"
    fsr --version | tee -a "$work/cashiers.log"
    log "$toml"
    fsr run "$toml" -o "$work/out-exact" > "$work/run-exact.log" 2>&1 || log "run h200-exact failed"
    tail -25 "$work/run-exact.log"
    caps=$work/out-exact/captures
    for _ in $(seq 90); do [ -f "$work/hf-caps.done" ] && break; sleep 5; done
    cat "$work/hf-caps.log" | tee -a "$work/cashiers.log"
    mkdir -p "$work/cmp"
    for c in "$caps"/*-r*.safetensors "$work"/caps/hf-*.safetensors; do
      n=$(basename "$c" .safetensors)
      fsr compare "$work/caps/exact.safetensors" "$c" --window "$window" --json -q --no-text > "$work/cmp/exact-vs-$n.json" ||
        log "compare $n failed"
    done
    fsr compare "$caps/baseline-r0.safetensors" "$caps/cpu-r0.safetensors" --window "$window" --json -q --no-text \
      > "$work/cmp/cuda-vs-cpu.json"
    python3 bench/gpu/exact_table.py "$work/cmp" | tee "$work/exact-table.txt"
    if [ "$extra" = 1 ]; then
      log "layers CUDA against CPU, with exact"
      fsr layers "$caps/baseline-r0.safetensors" "$caps/cpu-r0.safetensors" -o "$work/layers-cuda-cpu.json" \
        --html "$work/layers-cuda-cpu.html" --exact > "$work/layers.log" 2>&1 || log "layers failed"
      tail -30 "$work/layers.log"
      log "h200-load.toml"
      fsr run bench/gpu/h200-load.toml -o "$work/out-load" > "$work/run-load.log" 2>&1 || log "run h200-load failed"
      tail -25 "$work/run-load.log"
    fi
    tar -C "$work" -czf "$OUT/exact-cashiers.tar.gz" cashiers.log cmp exact-table.txt run-exact.log layers.log \
      layers-cuda-cpu.json layers-cuda-cpu.html run-load.log out-exact/results.json out-exact/report.html \
      out-load/results.json out-load/report.html out-load/report.md out-exact/report.md 2>/dev/null
    cp "$work/exact-table.txt" "$OUT/summary.txt"
    ls -la "$OUT"
    ;;
  *) echo "usage: exact-cashiers.sh exact [gemma] | llama [gemma]" >&2; exit 2 ;;
esac
