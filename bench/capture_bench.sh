#!/usr/bin/env bash
# Capture overhead: `flipscope capture` against a bare libllama prefill of the same tokens with the
# same knobs that stores nothing, in the same run (alternating), and peak memory against the
# number of probes.
#   bench/capture_bench.sh [BUILD_DIR] [MODEL] [WORKLOAD | TARGET_TOKENS] [N_TOKENS]
# A number as the third argument generates the network-operations session of about that many
# tokens (examples/gen_session.py --seed 2, as bench/scale.py does). N_TOKENS > 0 cuts the
# capture to a token-id file of the first N tokens (then the probes are the stride alone).
# Environment: ROUNDS (3), STORE (f32; bf16 as bench/scale.py), PLAN (--stride 32; e.g.
# "--stride 32 --full tool_calls"), CHAT_TEMPLATE (gemma for Gemma 3), PEAK (1: the memory table),
# KNOBS (the llama.cpp flags below), OUTPUTS (1: also a bare prefill that computes and copies out
# the capture's probe rows, bare_prefill --outputs, and the capture's ratio to it: what the row
# work costs beyond the output rows themselves).
set -euo pipefail
build=${1:-build}
model=${2:-$HOME/.cache/flipscope/models/SmolLM2-135M-Instruct.Q4_1.gguf}
workload=${3:-examples/netops-session.json}
ntok=${4:-0}
py=${FLIPSCOPE_PYTHON:-$HOME/.cache/flipscope/venv/bin/python}
fs="$build/bin/flipscope"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
read -r -a knobs <<< "${KNOBS:--fa on -ctk f16 -ctv f16 -b 2048 -ub 512 -t 2 -c 8192}"
read -r -a plan <<< "${PLAN:---stride 32}"
rounds=${ROUNDS:-3}
store=${STORE:-f32}
tmpl=()
[[ -n "${CHAT_TEMPLATE:-}" ]] && tmpl=(--chat-template "$CHAT_TEMPLATE")
export FLIPSCOPE_NO_PROGRESS=1

if [[ "$workload" =~ ^[0-9]+$ ]]; then
  python3 examples/gen_session.py --seed 2 --target-tokens "$workload" -o "$tmp/session.json"
  workload="$tmp/session.json"
fi
# The tokens the capture is fed, read back from a capture file, as bare_prefill's token-id file.
tokens_of() {  # FILE OUT [TENSOR]: the first N_TOKENS token ids, or every value of TENSOR
  "$py" - "$1" "$2" "$ntok" "${3:-tokens}" <<'PY'
import sys
from safetensors import safe_open
t = safe_open(sys.argv[1], "np").get_tensor(sys.argv[4])  # one tensor: numpy has no bfloat16
n = int(sys.argv[3]) if sys.argv[4] == "tokens" and int(sys.argv[3]) else len(t)
open(sys.argv[2], "w").write(" ".join(map(str, t[:n].tolist())))
PY
}
src=(-w "$workload" "${tmpl[@]}")
if (( ntok > 0 )); then
  "$fs" capture -m "$model" "${src[@]}" -o "$tmp/tok.safetensors" --stride 100000 "${knobs[@]}" -q 2>/dev/null
  tokens_of "$tmp/tok.safetensors" "$tmp/tokens.txt"
  src=(-w "$tmp/tokens.txt" --format tokens)
fi
manifest() {
  "$py" -c "import json,sys;from safetensors import safe_open;f=safe_open(sys.argv[1],'np');m=json.loads(f.metadata()['flipscope.manifest']);print(m['timings']['prefill_s'], m['probe_plan']['n_probes'], m['workload']['n_tokens'])" "$1"
}
# wall s, user+sys s, max RSS KiB of a command (its stdout to $tmp/out).
timed() { /usr/bin/time -f "%e %U %S %M" "$@" 2>"$tmp/time" >"$tmp/out" || { cat "$tmp/time" >&2; exit 1; }
  tail -n1 "$tmp/time" | awk '{printf "%s %.2f %s\n", $1, $2 + $3, $4}'; }

echo "model: $(basename "$model")  workload: $(basename "$workload")  plan: ${plan[*]} --store $store  knobs: ${knobs[*]}"
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "round  tokens  probes  bare_prefill_s  bare_wall_s  bare_cpu_s  capture_prefill_s  capture_wall_s  capture_cpu_s  ratio_prefill  ratio_wall${OUTPUTS:+  bare_outputs_prefill_s  ratio_prefill_to_outputs}"
for r in $(seq 1 "$rounds"); do
  read -r cwall ccpu _ < <(timed "$fs" capture -m "$model" "${src[@]}" -o "$tmp/cap.safetensors" "${plan[@]}" \
    --store "$store" "${knobs[@]}" -q)
  read -r cpre probes n < <(manifest "$tmp/cap.safetensors")
  [[ -f "$tmp/tokens.txt" ]] || tokens_of "$tmp/cap.safetensors" "$tmp/tokens.txt"
  read -r bwall bcpu _ < <(timed "$build/bench/bare_prefill" "$model" "$tmp/tokens.txt" "${knobs[@]}")
  bpre=$(cut -d' ' -f2 "$tmp/out")
  printf '%s  %s  %s  %.2f  %.2f  %.2f  %.2f  %.2f  %.2f  %.3f  %.3f' "$r" "$n" "$probes" "$bpre" "$bwall" "$bcpu" \
    "$cpre" "$cwall" "$ccpu" "$(echo "$cpre / $bpre" | bc -l)" "$(echo "$cwall / $bwall" | bc -l)"
  if [[ -n "${OUTPUTS:-}" ]]; then
    tokens_of "$tmp/cap.safetensors" "$tmp/positions.txt" positions
    timed "$build/bench/bare_prefill" "$model" "$tmp/tokens.txt" "${knobs[@]}" --outputs "$tmp/positions.txt" >/dev/null
    opre=$(cut -d' ' -f2 "$tmp/out")
    printf '  %.2f  %.3f' "$opre" "$(echo "$cpre / $opre" | bc -l)"
  fi
  echo
done
echo "capture file (${plan[*]}, $store): $(stat -c %s "$tmp/cap.safetensors") bytes"
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
[[ "${PEAK:-1}" == 1 ]] || exit 0

echo "peak memory against probes (stride -> probes, wall s, max RSS KiB):"
for s in 512 64 8 1; do
  read -r wall _ rss < <(timed "$fs" capture -m "$model" "${src[@]}" -o "$tmp/m.safetensors" --stride $s "${knobs[@]}" -q)
  read -r _ probes _ < <(manifest "$tmp/m.safetensors")
  echo "  stride $s -> $probes probes: $wall s, $rss KiB"
done
