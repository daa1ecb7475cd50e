#!/usr/bin/env bash
# timed-launcher.sh COMMAND ARGS... : runs a compile or link step (through ccache when given) and
# appends its CPU time to $FLIPSCOPE_CPU_LOG, one line "user_s sys_s wall_s OUTPUT", for
# scripts/build-times.py --cpu. Ninja's log holds each step's wall time only, which grows with
# whatever else shares the machine; the CPU time of the compiler does not. Configure with
#   -DCMAKE_CXX_COMPILER_LAUNCHER="$PWD/scripts/timed-launcher.sh;ccache"
#   -DCMAKE_CXX_LINKER_LAUNCHER="$PWD/scripts/timed-launcher.sh"
# (and the same for C); without FLIPSCOPE_CPU_LOG it only runs the command.
if [ -z "${FLIPSCOPE_CPU_LOG:-}" ]; then exec "$@"; fi
out=-
prev=
for a in "$@"; do
  [ "$prev" = -o ] && out=$a
  prev=$a
done
exec /usr/bin/time -a -o "$FLIPSCOPE_CPU_LOG" -f "%U %S %e $out" "$@"
