#!/usr/bin/env bash
# The exact engine's thread scaling on the GPU host's CPUs (docs/exact.md, "Threads"), through the
# device tool, from the repository root:
#   bench/gpu/exact-threads.sh [WORKLOAD] [THREADS...]
# The exact FP64 capture of one workload (default: the demo session) at each thread count (default
# 16 8 4 2 1), one after another, with wall, CPU, peak memory and the engine's own split of its
# time (manifest timings.parts, where the binary records it), then a check that every capture's
# rows are bit-identical to the first's. Prints a table; $OUT/exact-threads.txt keeps it.
# Environment:
#   BINS="old=PATH new=PATH"  the binaries to time, each over every thread count (default: the
#                             flipscope that remote.sh build-bg unpacked)
#   TEMPLATE=NAME             chat template (default gemma; empty: the model's own)
# Libraries: carried OpenBLAS (.gpu/b, unpacked once), then $work/lib, then the CUDA build's when
# there is one (a binary built here with the CPU llama.cpp libraries in $work/lib needs none).
set -uo pipefail
work=${FLIPSCOPE_GPU_WORK:-/root/flipscope-gpu}
workload=${1:-examples/netops-demo.json}
shift || true
read -r -a threads <<< "${*:-16 8 4 2 1}"
read -r -a bins <<< "${BINS:-flipscope=$work/flipscope}"
template=(--chat-template "${TEMPLATE-gemma}")
[ -n "${TEMPLATE-gemma}" ] || template=()
mkdir -p "$work/blas" "$work/threads"
for f in .gpu/b/blas/*.gz; do
  [ -f "$f" ] && [ ! -f "$work/blas/$(basename "${f%.gz}")" ] && gunzip -c "$f" > "$work/blas/$(basename "${f%.gz}")"
done
libs="$work/blas:$work/lib"
if [ -f "$work/build.done.log" ]; then
  for _ in $(seq 96); do [ -f "$work/build.done" ] && break; sleep 5; done
  [ -f "$work/build.done" ] || { echo "the CUDA build has not finished" >&2; exit 1; }
  libs="$libs:$(cat "$work/build-dir")/bin"
fi
export LD_LIBRARY_PATH=$libs FLIPSCOPE_NO_PROGRESS=1
[ -f "$work/model.gguf" ] || cat "$work"/model.part-* > "$work/model.gguf"
echo "host: $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2); $workload" | tee "$OUT/exact-threads.txt"
for b in "${bins[@]}"; do
  name=${b%%=*} bin=${b#*=}
  for t in "${threads[@]}"; do
    /usr/bin/time -f "%e %U %S %M" -o "$work/threads/$name-t$t.time" "$bin" capture --engine exact \
      -m "$work/model.gguf" -w "$workload" "${template[@]}" --stride 32 --full tool_calls -t "$t" \
      -o "$work/threads/$name-t$t.safetensors" -q > "$work/threads/$name-t$t.log" 2>&1 ||
      { tail -3 "$work/threads/$name-t$t.log"; exit 1; }
  done
  # Speed-up against the fewest threads run (one thread: the serial time), with the engine's parts.
  echo "$name: threads | wall s | CPU s | peak MiB | speed-up | efficiency | load, prefill and its parts (s)" |
    tee -a "$OUT/exact-threads.txt"
  for t in "${threads[@]}"; do
    python3 - "$work/threads/$name-t$t.safetensors" "$t" "$(cat "$work/threads/$name-t$t.time")" <<'EOF'
import json, struct, sys
with open(sys.argv[1], "rb") as f:
    n = struct.unpack("<Q", f.read(8))[0]
    t = json.loads(json.loads(f.read(n))["__metadata__"]["flipscope.manifest"])["timings"]
parts = " ".join(f"{k[:-2]} {v:.1f}" for k, v in t.get("parts", {}).items())
print(sys.argv[2], *sys.argv[3].split(), f"load {t['load_s']:.1f} prefill {t['prefill_s']:.1f} {parts}")
EOF
  done | sort -n | awk '
    NR == 1 { base = $2 * $1 }
    { rest = ""; for (i = 6; i <= NF; ++i) rest = rest " " $i
      printf "%d | %.1f | %.1f | %.0f | %.2fx | %.0f%% |%s\n", $1, $2, $3 + $4, $5 / 1024, base / $2, 100 * base / $2 / $1, rest }' |
    tee -a "$OUT/exact-threads.txt"
done
ref=${bins[0]%%=*}-t${threads[0]}
for b in "${bins[@]}"; do
  for t in "${threads[@]}"; do
    [ "${b%%=*}-t$t" = "$ref" ] && continue
    "${bins[0]#*=}" compare "$work/threads/$ref.safetensors" "$work/threads/${b%%=*}-t$t.safetensors" --json -q --no-text \
      > "$work/threads/cmp.json" || continue
    python3 -c "import json, sys; d = json.load(open(sys.argv[1]))
print(f\"{sys.argv[2]} against {sys.argv[3]}: {d['bit_identical']} of {d['probes_compared']} rows bit-identical, {len(d['flips'])} flips\")" \
      "$work/threads/cmp.json" "${b%%=*} -t $t" "$ref" | tee -a "$OUT/exact-threads.txt"
  done
done
