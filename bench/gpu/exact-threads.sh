#!/usr/bin/env bash
# On the GPU machine (through the device tool), from the repository root, after
# `bench/gpu/remote.sh build-bg` (carrying .gpu/a) and the model's stage calls, carrying .gpu/b:
#   bench/gpu/exact-threads.sh [WORKLOAD] [THREADS...]
# The exact engine's FP64 capture of one workload (default: the demo session, Gemma 3's template)
# at each thread count (default 1 2 4 8 16), one after another, with its wall, CPU and peak memory,
# then a check that every capture's rows are bit-identical to the first's (the thread count must
# not change the numbers). Prints a table; $OUT/exact-threads.txt keeps it (docs/exact.md, "Threads").
set -uo pipefail
work=${FLIPSCOPE_GPU_WORK:-/root/flipscope-gpu}
workload=${1:-examples/netops-demo.json}
shift || true
threads=("${@:-1 2 4 8 16}")
read -r -a threads <<< "${threads[*]}"
mkdir -p "$work/blas" "$work/threads"
for f in .gpu/b/blas/*.gz; do [ -f "$work/blas/$(basename "${f%.gz}")" ] || gunzip -c "$f" > "$work/blas/$(basename "${f%.gz}")"; done
for _ in $(seq 96); do [ -f "$work/build.done" ] && break; sleep 5; done
[ -f "$work/build.done" ] || { echo "the CUDA build has not finished" >&2; exit 1; }
export LD_LIBRARY_PATH="$work/blas:$work/lib:$(cat "$work/build-dir")/bin" FLIPSCOPE_NO_PROGRESS=1
[ -f "$work/model.gguf" ] || cat "$work"/model.part-* > "$work/model.gguf"
echo "host: $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2)" | tee "$OUT/exact-threads.txt"
for t in "${threads[@]}"; do
  cap="$work/threads/exact-t$t.safetensors"
  /usr/bin/time -f "%e %U %S %M" -o "$work/threads/t$t.time" "$work/flipscope" capture --engine exact \
    -m "$work/model.gguf" -w "$workload" --chat-template gemma --stride 32 --full tool_calls -t "$t" -o "$cap" -q \
    > "$work/threads/t$t.log" 2>&1 || { tail -3 "$work/threads/t$t.log"; exit 1; }
done
# Speed-up against one thread (or, without a 1-thread run, against the fewest threads run, as if linear).
echo "threads | wall s | CPU s | peak MiB | speed-up | efficiency" | tee -a "$OUT/exact-threads.txt"
for t in "${threads[@]}"; do echo "$t $(cat "$work/threads/t$t.time")"; done | sort -n | awk '
  NR == 1 { base = $2 * $1 }
  { printf "%d | %.1f | %.1f | %.0f | %.2fx | %.0f%%\n", $1, $2, $3 + $4, $5 / 1024, base / $2, 100 * base / $2 / $1 }' |
  tee -a "$OUT/exact-threads.txt"
ref="$work/threads/exact-t${threads[0]}.safetensors"
for t in "${threads[@]:1}"; do
  "$work/flipscope" compare "$ref" "$work/threads/exact-t$t.safetensors" --json -q --no-text > "$work/threads/cmp-t$t.json"
  python3 - "$work/threads/cmp-t$t.json" "$t" <<'EOF' | tee -a "$OUT/exact-threads.txt"
import json, sys
d = json.load(open(sys.argv[1]))
print(f"-t {sys.argv[2]} against the first: {d['bit_identical']} of {d['probes_compared']} rows bit-identical, {len(d['flips'])} flips")
EOF
done
grep -h "threads\|blas\|core" "$work/threads/t${threads[-1]}.log" | head -5 | tee -a "$OUT/exact-threads.txt"
