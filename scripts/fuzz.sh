#!/usr/bin/env bash
# Runs the libFuzzer targets built in BUILD (make fuzz) for SECONDS each, one after another: all of
# them, or the ones named after SECONDS (make fuzz FUZZ_TARGETS="fuzz_gguf fuzz_manifest").
# Corpus: BUILD/corpus/TARGET (grows across runs) seeded from fuzz/corpus/TARGET (real files, in
# git). A crashing input lands in BUILD/crashes/; each becomes a unit test (docs/reliability.md).
# Prints one summary line per target (executions, cov, ft, corpus) and fails if any target failed.
set -uo pipefail
build=${1:?usage: fuzz.sh BUILD SECONDS [TARGET...]}
seconds=${2:-60}
shift 2 || shift $#
wanted=("$@")
root=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$build/crashes" "$build/logs"
status=0
for bin in "$build"/fuzz/fuzz_*; do
  [ -x "$bin" ] || continue
  name=$(basename "$bin")
  [ ${#wanted[@]} -eq 0 ] || [[ " ${wanted[*]} " == *" $name "* ]] || continue
  corpus="$build/corpus/$name"
  mkdir -p "$corpus"
  log="$build/logs/$name.log"
  # -malloc_limit_mb: no input (at most a few hundred KiB) may make a parser allocate 512 MiB.
  "$bin" "$corpus" "$root/fuzz/corpus/$name" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
    -malloc_limit_mb=512 -print_final_stats=1 -artifact_prefix="$build/crashes/$name-" >"$log" 2>&1
  rc=$?
  done_line=$(grep -E '^#[0-9]+\s+DONE' "$log" | tail -1)
  execs=$(sed -nE 's/^stat::number_of_executed_units: *([0-9]+)/\1/p' "$log" | tail -1)
  if [ $rc -ne 0 ]; then
    status=1
    echo "$name: FAILED (exit $rc) after ${execs:-?} executions; see $log and $build/crashes/"
  else
    echo "$name: ${execs:-?} executions in ${seconds}s; ${done_line#*DONE   }"
  fi
done
exit $status
