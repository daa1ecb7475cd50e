#!/usr/bin/env bash
# The exact engine's speed against llama.cpp's capture of the same workload in the same run, both
# on the same threads: wall time, CPU time and peak memory of `flipscope capture`.
#   bench/exact_bench.sh [BUILD_DIR] [MODEL] [WORKLOAD] [THREADS] [extra capture flags...]
set -euo pipefail
build=${1:-build}
model=${2:-$HOME/.cache/flipscope/models/SmolLM2-135M-Instruct.Q4_1.gguf}
workload=${3:-examples/netops-session.json}
threads=${4:-2}
shift $(( $# < 4 ? $# : 4 ))
fs="$build/bin/flipscope"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export FLIPSCOPE_NO_PROGRESS=1

# GNU time: wall seconds, user + system CPU seconds, peak RSS in KiB.
measure() { /usr/bin/time -f "%e %U %S %M" "$@" 2>&1 >/dev/null | tail -n1; }
echo "model: $(basename "$model")  workload: $workload  threads: $threads  load: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "engine  wall_s  cpu_s  peak_MiB  tokens  tokens_per_s"
for engine in exact llama; do
  read -r wall user sys rss < <(measure "$fs" capture --engine "$engine" -m "$model" -w "$workload" \
    -o "$tmp/$engine.safetensors" -t "$threads" -q "$@")
  n=$("$fs" inspect "$tmp/$engine.safetensors" --json | python3 -c "import json,sys;print(json.load(sys.stdin)['manifest']['workload']['n_tokens'])")
  printf '%-6s  %6.1f  %5.1f  %8.0f  %6d  %8.1f\n' "$engine" "$wall" "$(echo "$user + $sys" | bc)" "$(echo "$rss / 1024" | bc)" "$n" "$(echo "$n / $wall" | bc -l)"
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
"$fs" compare "$tmp/exact.safetensors" "$tmp/llama.safetensors" | head -n 12
