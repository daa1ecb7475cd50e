#!/usr/bin/env bash
# build-llama.sh SRC_DIR [cpu|cuda] : builds libllama, llama-common and the llama.cpp tools flipscope
# uses (llama-perplexity, llama-quantize, and llama-server, which `flipscope run --verify-recipe`
# starts) once per (source, variant, CPU options, host CPU) and reuses the build. Prints the build
# directory.
#
# CPU code path (docs/building.md):
#   FLIPSCOPE_LLAMA_CPU=native   (default) -march=native for this machine, with AMX masked out:
#                                some VMs report AMX but fault on its tile instructions.
#   FLIPSCOPE_LLAMA_CPU=portable GGML_NATIVE=OFF: ggml's own default set (SSE4.2, AVX, AVX2, FMA,
#                                F16C, BMI2), for a build carried to other x86-64 machines.
#   FLIPSCOPE_LLAMA_AMX=ON       opt in to ggml's AMX kernels (with either of the above).
# FLIPSCOPE_LLAMA_TARGETS=libs builds the libraries alone (libllama, ggml, llama-common): what a
# capture worker of `flipscope history` links (scripts/build-worker.sh); a quarter fewer steps.
# The cache key holds the source path and commit, the variant, these options and, for native
# builds, a hash of this machine's CPU model and flags, so a build is never reused on another CPU.
# FLIPSCOPE_LLAMA_BUILD_DIR=DIR builds in DIR instead (one per commit of a checkout, beside its
# worktree, so that ccache sees the same relative paths from one commit to the next), and
# FLIPSCOPE_LLAMA_BUILD_COMMIT=TEXT is the commit text compiled in (LLAMA_COMMIT, a definition on
# every libllama file: the commit's own id would make each of them a ccache miss at every commit;
# the real id is still recorded in OUT/.flipscope-commit and the manifests).
. "$(dirname "$0")/common.sh"
src=$(cd "$1" && pwd)
variant=${2:-cpu}
cpu_mode=${FLIPSCOPE_LLAMA_CPU:-native}
amx=${FLIPSCOPE_LLAMA_AMX:-OFF}
case "$amx" in ON|on|1|TRUE|true|YES|yes) amx=ON ;; *) amx=OFF ;; esac
commit=$(cat "$src/.flipscope-commit" 2>/dev/null || git -C "$src" rev-parse HEAD 2>/dev/null || echo unknown)

cpu_flags=()
case "$cpu_mode" in
  native)
    cpu_flags+=(-DGGML_NATIVE=ON)
    # GCC keeps an explicit -mno-X over what -march=native implies, whatever the order.
    if [ "$amx" = OFF ]; then
      cpu_flags+=("-DCMAKE_C_FLAGS=-mno-amx-tile -mno-amx-int8 -mno-amx-bf16"
                  "-DCMAKE_CXX_FLAGS=-mno-amx-tile -mno-amx-int8 -mno-amx-bf16")
    fi
    host=$( (grep -m1 '^model name' /proc/cpuinfo; grep -m1 '^flags' /proc/cpuinfo) 2>/dev/null | sha256sum | cut -c1-12) ;;
  portable)
    cpu_flags+=(-DGGML_NATIVE=OFF)
    [ "$amx" = ON ] && cpu_flags+=(-DGGML_AVX512=ON -DGGML_AVX512_VNNI=ON -DGGML_AMX_TILE=ON -DGGML_AMX_INT8=ON -DGGML_AMX_BF16=ON)
    host=any ;;
  *) die "FLIPSCOPE_LLAMA_CPU='$cpu_mode': expected native or portable" ;;
esac
options="cpu=$cpu_mode amx=$amx"
key=$(printf '%s|%s|%s|%s|%s' "$src" "$commit" "$variant" "$options" "$host" | sha256sum | cut -c1-12)
out="${FLIPSCOPE_LLAMA_BUILD_DIR:-$FLIPSCOPE_CACHE/llama/build-$variant-$key}"
stamp="$out/.flipscope-built"
targets=(llama llama-common llama-perplexity llama-quantize llama-server)
case "${FLIPSCOPE_LLAMA_TARGETS:-all}" in
  all) ;;
  libs) targets=(llama llama-common); stamp="$out/.flipscope-built-libs"
        # A complete build serves a libraries-only request as well.
        if [ -f "$out/.flipscope-built" ]; then printf '%s\n' "$out"; exit 0; fi ;;
  *) die "FLIPSCOPE_LLAMA_TARGETS='$FLIPSCOPE_LLAMA_TARGETS': expected all or libs" ;;
esac
# A build made before llama-server was among the tools gets it added (the libraries stay as built).
if [ -f "$stamp" ] && { [ "${targets[-1]}" != llama-server ] || [ -x "$out/bin/llama-server" ]; }; then
  printf '%s\n' "$out"; exit 0
fi
extra=()
case "$variant" in
  cpu) ;;
  cuda) extra+=(-DGGML_CUDA=ON "-DCMAKE_CUDA_ARCHITECTURES=${FLIPSCOPE_CUDA_ARCH:-90}") ;;
  *) die "unknown llama.cpp variant '$variant' (cpu or cuda)" ;;
esac
launcher=()
if command -v ccache >/dev/null; then
  export CCACHE_DIR="${CCACHE_DIR:-$FLIPSCOPE_CACHE/ccache}"
  launcher=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache)
fi
log "building llama.cpp ($variant, ${commit:0:12}, $options) in $out; this takes about 10 minutes on 2 cores, once"
cmake -S "$src" -B "$out" -G Ninja -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=ON \
  -DLLAMA_BUILD_COMMIT="${FLIPSCOPE_LLAMA_BUILD_COMMIT:-${commit:0:12}}" -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
  -DLLAMA_BUILD_SERVER=ON -DLLAMA_BUILD_APP=OFF -DLLAMA_BUILD_TOOLS=ON -DLLAMA_OPENSSL=OFF \
  -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF "${cpu_flags[@]}" "${launcher[@]}" "${extra[@]}" >&2
cmake --build "$out" --target "${targets[@]}" -j"$(nproc)" >&2
# A build whose CPU library still carries AMX code against the request would fault on some VMs.
if [ "$amx" = OFF ] && [ "$variant" = cpu ] && command -v objdump >/dev/null \
   && objdump -d "$out/bin/libggml-cpu.so" | grep -q -m1 'tileloadd'; then
  die "$out/bin/libggml-cpu.so contains AMX instructions although FLIPSCOPE_LLAMA_AMX=OFF"
fi
printf '%s\n' "$src" > "$out/.flipscope-src"
printf '%s\n' "$commit" > "$out/.flipscope-commit"
printf '%s\n' "$options" > "$out/.flipscope-options"
touch "$stamp"
printf '%s\n' "$out"
