#!/usr/bin/env bash
# build-llama.sh SRC_DIR [cpu|cuda] : builds libllama, llama-common and the two llama.cpp tools
# flipscope uses (llama-perplexity, llama-quantize) once per (source, variant) and reuses the build.
# Prints the build directory. The key is the source path and its commit, so a user's own checkout
# gets its own build.
. "$(dirname "$0")/common.sh"
src=$(cd "$1" && pwd)
variant=${2:-cpu}
commit=$(cat "$src/.flipscope-commit" 2>/dev/null || git -C "$src" rev-parse HEAD 2>/dev/null || echo unknown)
key=$(printf '%s|%s|%s' "$src" "$commit" "$variant" | sha256sum | cut -c1-12)
out="$FLIPSCOPE_CACHE/llama/build-$variant-$key"
stamp="$out/.flipscope-built"
if [ -f "$stamp" ]; then printf '%s\n' "$out"; exit 0; fi
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
log "building llama.cpp ($variant, ${commit:0:12}) in $out; this takes about 10 minutes on 2 cores, once"
cmake -S "$src" -B "$out" -G Ninja -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=ON \
  -DLLAMA_BUILD_COMMIT="${commit:0:12}" -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
  -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_APP=OFF -DLLAMA_BUILD_TOOLS=ON -DLLAMA_OPENSSL=OFF \
  -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF -DGGML_NATIVE=ON "${launcher[@]}" "${extra[@]}" >&2
cmake --build "$out" --target llama llama-common llama-perplexity llama-quantize -j"$(nproc)" >&2
printf '%s\n' "$src" > "$out/.flipscope-src"
printf '%s\n' "$commit" > "$out/.flipscope-commit"
touch "$stamp"
printf '%s\n' "$out"
