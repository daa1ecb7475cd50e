#!/usr/bin/env bash
# On the GPU machine (through the device tool), from the repository root:
#   bench/gpu/remote.sh build             unpack .gpu/a, build llama.cpp with CUDA (Hopper only)
#   bench/gpu/remote.sh build-bg          the same in the background (its own session), so that the
#                                         next calls carry loads while it builds; writes build.done
#   bench/gpu/remote.sh stage             keep the model parts this call carried (.gpu/pNN)
#   bench/gpu/remote.sh run TOML NAME     stage, join the model, run the experiment into $OUT/NAME
#   bench/gpu/remote.sh served-bench WORKLOAD [ARGS]  bench/served_bench on the packed model
#                                         (packed by hand into .gpu/c, carried with a stage call)
#   bench/gpu/remote.sh run-bg TOML NAME TOKENS  the same with a TOKENS-token session, in the
#                                         background (captures under /dev/shm when the disk is short)
#   bench/gpu/remote.sh wait NAME         wait (at most 9 minutes) for run-bg NAME and bring back its
#                                         results.json, report.html (gzipped when large) and log
#   bench/gpu/remote.sh curve LENGTHS     bench/scale.py over those session lengths (docs/performance.md);
#                                         Gemma 3's template unless CURVE_TEMPLATE says otherwise
#                                         (CURVE_TEMPLATE= for a model with its own, e.g. SmolLM2)
#   bench/gpu/remote.sh layers TOKENS [FLIPS]  layers on CUDA (docs/layers.md): Gemma 3 captures of a
#                                         TOKENS-token session, F16 against q4_0 KV; layers as is
#                                         (refused when the rows drift), with --allow-drift on FLIPS
#                                         flips (16), then both captured and recomputed with
#                                         GGML_CUDA_DISABLE_FUSION=1, into $OUT/layers-TOKENS
#   bench/gpu/remote.sh overhead LENGTHS [ARGS]  bench/capture_overhead.py over those session
#                                         lengths: capture against bare_prefill --outputs (carried
#                                         in .gpu/c), Gemma 3's template, captures in /dev/shm;
#                                         a flipscope-before carried in .gpu/c captures too (--before)
#   bench/gpu/remote.sh pairs A B CONFIG...  compare each configuration's first capture of the
#                                         experiments run as A and B (prefill against served:
#                                         compare --json and bench/served_split.py) into $OUT/pairs
# State lives in /root/flipscope-gpu while the machine stays warm between calls (30 s), so the
# loads are carried by calls made one right after another. `run` also generates the 32K-token
# session (FLIPSCOPE_GPU_WORKLOAD) for experiments that use it.
set -euo pipefail
work=/root/flipscope-gpu
export FLIPSCOPE_CACHE=$work FLIPSCOPE_CUDA_ARCH=${FLIPSCOPE_CUDA_ARCH:-90}
unpack_a() {
  mkdir -p "$work/src" "$work/lib"
  tar -C "$work/src" -xzf .gpu/a/llama-src.tar.gz
  cp .gpu/a/flipscope "$work/" && cp .gpu/a/lib/* "$work/lib/" && cp .gpu/a/model.* "$work/"
}

# A call after build-bg waits for the background build (at most 8 minutes).
wait_build() {
  for _ in $(seq 96); do [ -f "$work/build.done" ] || [ ! -f "$work/build.done.log" ] && break; sleep 5; done
  [ -f "$work/build-dir" ] && [ -s "$work/build-dir" ] || { cat "$work/build.done.log" >&2; exit 1; }
}

# Joins the staged model parts once and checks them against the packed model's SHA-256.
join_model() {
  cp .gpu/p*/model.part-* "$work/" 2>/dev/null || true
  wait_build
  [ -f "$work/model.gguf" ] || cat "$work"/model.part-* > "$work/model.gguf"
  [ "$(sha256sum "$work/model.gguf" | cut -d' ' -f1)" = "$(cat "$work/model.sha256")" ] ||
    { echo "model parts do not join to the packed model" >&2; exit 1; }
  export LD_LIBRARY_PATH="$(cat "$work/build-dir")/bin:$work/lib"
}

case "$1" in
  build-bg)
    unpack_a
    setsid bash -c "start=\$(date +%s); scripts/build-llama.sh '$work/src' cuda > '$work/build-dir' &&
      echo \"llama.cpp CUDA build: \$(( \$(date +%s) - start )) s\" && touch '$work/build.done'" \
      > "$work/build.done.log" 2>&1 < /dev/null &
    echo "building llama.cpp with CUDA in the background"
    ;;
  build)
    unpack_a
    start=$(date +%s)
    scripts/build-llama.sh "$work/src" cuda > "$work/build-dir"
    echo "llama.cpp CUDA build: $(( $(date +%s) - start )) s in $(cat "$work/build-dir")"
    LD_LIBRARY_PATH="$(cat "$work/build-dir")/bin:$work/lib" "$work/flipscope" --version
    ;;
  stage)
    cp .gpu/p*/model.part-* "$work/" 2>/dev/null || true
    for f in .gpu/c/*; do [ -f "$f" ] && cp "$f" "$work/"; done
    ls "$work"/model.part-*
    ;;
  run)
    join_model
    python3 examples/gen_session.py --seed 2 --target-tokens 32000 -o "$work/netops-32k.json"
    export FLIPSCOPE_GPU_MODEL="$work/model.gguf" FLIPSCOPE_GPU_WORKLOAD="$work/netops-32k.json" FLIPSCOPE_NO_PROGRESS=1
    "$work/flipscope" --version
    mkdir -p "$OUT/$3"
    "$work/flipscope" run "$2" -o "$work/out-$3" 2>&1 | tee "$OUT/$3/run.log"
    cp "$work/out-$3"/{results.json,report.html,report.md} "$OUT/$3/"
    ;;
  run-bg)
    join_model
    python3 examples/gen_session.py --seed 2 --target-tokens "$4" -o "$work/netops-$4.json"
    # A full-vocabulary capture of a 100K-token session is about 10 GiB: the results folder goes
    # where there is room for all of the experiment's captures.
    out="$work/out-$3" && [ "$(df --output=avail -B1G /dev/shm | tail -1)" -gt 60 ] && out="/dev/shm/out-$3"
    echo "$out" > "$work/$3.outdir"
    FLIPSCOPE_GPU_MODEL="$work/model.gguf" FLIPSCOPE_GPU_WORKLOAD="$work/netops-$4.json" FLIPSCOPE_NO_PROGRESS=1 \
      setsid bash -c "$(command -v /usr/bin/time > /dev/null && echo "/usr/bin/time -v") '$work/flipscope' run '$2' -o '$out' > '$work/$3.log' 2>&1; touch '$work/$3.done'" \
      < /dev/null > /dev/null 2>&1 &
    echo "running $2 into $out in the background"
    ;;
  wait)
    for _ in $(seq 108); do [ -f "$work/$2.done" ] && break; sleep 5; done
    out=$(cat "$work/$2.outdir") && mkdir -p "$OUT/$2" && cp "$work/$2.log" "$OUT/$2/run.log"
    [ -f "$work/$2.done" ] || { echo "still running"; tail -5 "$work/$2.log"; exit 1; }
    cp "$out/results.json" "$out/report.md" "$OUT/$2/" 2>/dev/null || true
    gzip -6 -c "$out/report.html" > "$OUT/$2/report.html.gz"
    ls -la "$out" "$out/captures" | tee "$OUT/$2/files.txt"; df -h / /dev/shm | tee -a "$OUT/$2/files.txt"
    ;;
  curve)
    join_model
    python3 bench/scale.py --flipscope "$work/flipscope" --bare "$work/bare_prefill" -m "$work/model.gguf" \
      ${CURVE_TEMPLATE---chat-template gemma} --knobs "-ngl 99 -fa on -t 16" --lengths "$2" --out "$work/curve" "${@:3}" 2>&1 |
      tee -a "$OUT/curve.txt"
    cp "$work/curve/scale.jsonl" "$OUT/"
    ;;
  layers)
    join_model
    o="$OUT/layers-$2" w="$work/layers-$2" && mkdir -p "$o" "$w"
    python3 examples/gen_session.py --seed 2 --target-tokens "$2" -o "$w/session.json"
    export FLIPSCOPE_NO_PROGRESS=1
    cap() {  # NAME FLAGS...: a capture of the session into $w/NAME.safetensors
      local name=$1 && shift
      "$work/flipscope" capture -m "$work/model.gguf" --chat-template gemma -w "$w/session.json" --stride 32 \
        --full tool_calls -ngl 99 -fa on -t 16 -q "$@" -o "$w/$name.safetensors" 2>&1 | tee -a "$o/log.txt"
    }
    lay() {  # NAME FLAGS...: flipscope layers on $w/BASE and $w/CAND, timed, into $o/NAME.json
      local name=$1 base=$2 cand=$3 && shift 3
      local t0 && t0=$(date +%s.%N)
      { "$work/flipscope" layers "$w/$base.safetensors" "$w/$cand.safetensors" -o "$o/$name.json" -q "$@" ||
          echo "$name: exit $?"; } 2>&1 | tee -a "$o/log.txt"
      echo "$name: $(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN {printf "%.1f", b - a}') s wall" | tee -a "$o/log.txt"
    }
    cap base && cap q4 -ctk q4_0 -ctv q4_0
    "$work/flipscope" compare "$w/base.safetensors" "$w/q4.safetensors" --json > "$o/compare-q4.json"
    lay strict base q4
    lay drift base q4 --allow-drift --max-flips "${3:-16}" --html "$o/drift.html"
    export GGML_CUDA_DISABLE_FUSION=1
    cap base-nofuse && cap q4-nofuse -ctk q4_0 -ctv q4_0
    lay nofuse-strict base-nofuse q4-nofuse --max-flips "${3:-16}"
    "$work/flipscope" compare "$w/base.safetensors" "$w/base-nofuse.safetensors" --json > "$o/compare-fusion.json"
    ;;
  overhead)
    join_model
    before= && [ -x "$work/flipscope-before" ] && before="$work/flipscope-before"
    python3 bench/capture_overhead.py --flipscope "$work/flipscope" --bare "$work/bare_prefill" \
      -m "$work/model.gguf" --chat-template gemma --knobs "-ngl 99 -fa on -t 16" --lengths "$2" \
      --out /dev/shm/overhead ${before:+--before "$before"} "${@:3}" 2>&1 | tee -a "$OUT/overhead.txt"
    ;;
  pairs)
    export LD_LIBRARY_PATH="$(cat "$work/build-dir")/bin:$work/lib" FLIPSCOPE_NO_PROGRESS=1
    a=$2 b=$3 && shift 3 && mkdir -p "$OUT/pairs"
    for c in "$@"; do
      pa="$work/out-$a/captures/$c-r0.safetensors" pb="$work/out-$b/captures/$c-r0.safetensors"
      "$work/flipscope" compare "$pa" "$pb" --window "${PAIRS_WINDOW:-4096}" --json > "$OUT/pairs/$c.json"
      { echo "== $c: $a against $b"; python3 bench/served_split.py "$pa" "$pb"; } | tee -a "$OUT/pairs/split.txt"
    done
    ;;
  served-bench)
    join_model
    shift && "$work/served_bench" "$work/model.gguf" "$@" 2>&1 | tee "$OUT/served-bench.txt"
    ;;
  *) echo "usage: remote.sh build | build-bg | stage | run TOML NAME | run-bg TOML NAME TOKENS | wait NAME | curve LENGTHS | pairs A B CONFIG... | served-bench WORKLOAD [ARGS]" >&2; exit 2 ;;
esac
