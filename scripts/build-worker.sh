#!/usr/bin/env bash
# build-worker.sh RELEASE [TREE] : the capture worker of one llama-cpp-python release — this
# flipscope tree (TREE, default the one holding this script) built against the llama.cpp vendored
# in that release — built once into the cache and reused while the tree's sources are unchanged.
# Prints the worker binary. `flipscope history` runs each release's captures in its worker.
#
# llama.cpp is built by build-llama.sh with FLIPSCOPE_LLAMA_CPU (default portable: ggml's own
# x86-64 set, nothing of this machine's CPU) and without AMX, so every release of one history is
# built alike. The worker's build directory is keyed by tree path, release and CPU options; the
# stamp .flipscope-tree holds a hash of the sources it was built from.
# Exit 3 (with one line on stderr) when the tree does not compile or link against the release:
# its llama.cpp API is one the engine cannot drive. The compiler's output is in BUILD/build.log.
. "$(dirname "$0")/common.sh"
release=${1:?usage: build-worker.sh RELEASE [TREE]}
tree=$(cd "${2:-$(dirname "$0")/..}" && pwd)
export FLIPSCOPE_LLAMA_CPU=${FLIPSCOPE_LLAMA_CPU:-portable}
export FLIPSCOPE_LLAMA_AMX=OFF FLIPSCOPE_LLAMA_TARGETS=libs
src=$("$(dirname "$0")/fetch-llama.sh" "$release")
# The sources the worker is made of (tests and docs excluded), hashed in a stable order.
tree_hash=$(cd "$tree" && find CMakeLists.txt cmake src scripts -type f ! -name '*_test.cpp' -print0 \
  | LC_ALL=C sort -z | xargs -0 sha256sum | sha256sum | cut -c1-16)
key=$(printf '%s|%s|%s' "$tree" "$release" "$FLIPSCOPE_LLAMA_CPU" | sha256sum | cut -c1-12)
out="$FLIPSCOPE_CACHE/history/worker-$release-$key"
bin="$out/bin/flipscope-worker"
if [ -x "$bin" ] && [ "$(cat "$out/.flipscope-tree" 2>/dev/null)" = "$tree_hash" ]; then
  printf '%s\n' "$bin"; exit 0
fi
mkdir -p "$out"
launcher=()
if command -v ccache >/dev/null; then
  export CCACHE_DIR="${CCACHE_DIR:-$FLIPSCOPE_CACHE/ccache}"
  launcher=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
fi
log "building the capture worker for llama-cpp-python $release in $out (llama.cpp first, once: about 10 minutes on 2 cores)"
start=$(date +%s)
if ! { cmake -S "$tree" -B "$out" -G Ninja -DFLIPSCOPE_LLAMA_DIR="$src" -DFLIPSCOPE_LLAMA_RELEASE="$release" \
         -DFLIPSCOPE_LLAMA_CPU="$FLIPSCOPE_LLAMA_CPU" -DFLIPSCOPE_LLAMA_AMX=OFF -DFLIPSCOPE_BENCH=OFF "${launcher[@]}" \
       && cmake --build "$out" --target flipscope-worker -j"$(nproc)"; } > "$out/build.log" 2>&1; then
  printf '[setup] error: llama-cpp-python %s: flipscope does not build against its llama.cpp (%s); compiler output in %s\n' \
    "$release" "$(cat "$src/.flipscope-commit")" "$out/build.log" >&2
  exit 3
fi
printf '%s\n' "$tree_hash" > "$out/.flipscope-tree"
printf '%s\n' "$(( $(date +%s) - start ))" > "$out/.flipscope-build-seconds"
printf '%s\n' "$bin"
