#!/usr/bin/env bash
# Capture overhead: `flipscope capture` against a bare libllama prefill of the same tokens with the
# same knobs that stores nothing, and peak memory against the number of probes.
#   bench/capture_bench.sh [BUILD_DIR] [MODEL] [WORKLOAD] [N_TOKENS]
set -euo pipefail
build=${1:-build}
model=${2:-$HOME/.cache/flipscope/models/SmolLM2-135M-Instruct.Q4_1.gguf}
workload=${3:-examples/netops-session.json}
ntok=${4:-0}
py=${FLIPSCOPE_PYTHON:-$HOME/.cache/flipscope/venv/bin/python}
fs="$build/bin/flipscope"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
knobs=(-fa on -ctk f16 -ctv f16 -b 2048 -ub 512 -t 2 -c 8192)
export FLIPSCOPE_NO_PROGRESS=1

# The workload's tokens, once, as a token-id file (optionally only the first N).
"$fs" capture -m "$model" -w "$workload" -o "$tmp/tok.safetensors" --stride 100000 "${knobs[@]}" -q 2>/dev/null
"$py" - "$tmp/tok.safetensors" "$tmp/tokens.txt" "$ntok" <<'PY'
import sys, json
from safetensors.numpy import load_file
t = load_file(sys.argv[1])["tokens"]
n = int(sys.argv[3]) or len(t)
open(sys.argv[2], "w").write(" ".join(map(str, t[:n].tolist())))
PY
n=$(wc -w < "$tmp/tokens.txt")
peak() { /usr/bin/time -f "%e %M" "$@" 2>&1 >/dev/null | tail -n1; }

echo "tokens: $n  model: $(basename "$model")  knobs: ${knobs[*]}"
echo "run  bare_prefill_s  capture_prefill_s  capture_wall_s  ratio_prefill"
for r in 1 2 3; do
  bare=$("$build/bench/bare_prefill" "$model" "$tmp/tokens.txt" "${knobs[@]}" | cut -d' ' -f2)
  start=$(date +%s.%N)
  "$fs" capture -m "$model" -w "$tmp/tokens.txt" --format tokens -o "$tmp/cap.safetensors" --stride 32 "${knobs[@]}" -q 2>/dev/null
  wall=$(echo "$(date +%s.%N) - $start" | bc)
  pre=$("$py" -c "import json,sys;from safetensors import safe_open;f=safe_open(sys.argv[1],'np');print(json.loads(f.metadata()['flipscope.manifest'])['timings']['prefill_s'])" "$tmp/cap.safetensors")
  printf '%s  %.2f  %.2f  %.2f  %.3f\n' "$r" "$bare" "$pre" "$wall" "$(echo "$pre / $bare" | bc -l)"
done
echo "capture file (stride 32, f32): $(stat -c %s "$tmp/cap.safetensors") bytes"

echo "peak memory against probes (stride -> probes, wall s, max RSS KiB):"
for s in 512 64 8 1; do
  read -r wall rss < <(peak "$fs" capture -m "$model" -w "$tmp/tokens.txt" --format tokens -o "$tmp/m.safetensors" --stride $s "${knobs[@]}" -q)
  probes=$(( (n - 1 + s - 1) / s ))
  echo "  stride $s -> $probes probes: $wall s, $rss KiB"
done
