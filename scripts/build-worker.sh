#!/usr/bin/env bash
# build-worker.sh RELEASE|SRC_DIR [TREE] : a capture worker — this flipscope tree (TREE, default the
# one holding this script) built against one llama.cpp — built once into the cache and reused
# while the tree's sources are unchanged. Prints the worker binary. `flipscope history` and
# `flipscope bisect` run each version's captures in its worker.
#   RELEASE  a llama-cpp-python release: the llama.cpp vendored in it (scripts/fetch-llama.sh).
#   SRC_DIR  a llama.cpp source tree (a path, with a slash): one commit of a checkout, its commit
#            read by git. FLIPSCOPE_WORKER_DIR and FLIPSCOPE_LLAMA_BUILD_DIR, when set, say where
#            the worker and the llama.cpp libraries are built (flipscope bisect puts both beside
#            the commit's worktree, so that ccache hits from one commit to the next).
#
# llama.cpp is built by build-llama.sh with FLIPSCOPE_LLAMA_CPU (default portable: ggml's own
# x86-64 set, nothing of this machine's CPU) and without AMX, so every version of one history is
# built alike. The worker's build directory is keyed by tree path, version and CPU options; the
# stamp .flipscope-tree holds a hash of the sources it was built from; .flipscope-build-seconds
# (and, for SRC_DIR, .flipscope-llama-seconds: the libraries alone) the time of the build.
# Exit 3 (with one line on stderr) when the tree does not compile or link against it: its
# llama.cpp API is one the engine cannot drive; exit 4 when SRC_DIR's llama.cpp itself does not
# build. The compiler's output is in BUILD/build.log.
. "$(dirname "$0")/common.sh"
version=${1:?usage: build-worker.sh RELEASE|SRC_DIR [TREE]}
tree=$(cd "${2:-$(dirname "$0")/..}" && pwd)
export FLIPSCOPE_LLAMA_CPU=${FLIPSCOPE_LLAMA_CPU:-portable}
export FLIPSCOPE_LLAMA_AMX=OFF FLIPSCOPE_LLAMA_TARGETS=libs
if [[ "$version" == */* ]]; then
  [ -d "$version" ] || die "llama.cpp source '$version': no such directory"
  src=$(cd "$version" && pwd)
  release=""
  commit=$(git -C "$src" rev-parse HEAD 2>/dev/null) || die "$src: not a git checkout of llama.cpp"
  name="llama.cpp ${commit:0:12}"
  key=$(printf '%s|%s|%s|%s' "$tree" "$src" "$commit" "$FLIPSCOPE_LLAMA_CPU" | sha256sum | cut -c1-12)
  out="${FLIPSCOPE_WORKER_DIR:-$FLIPSCOPE_CACHE/history/worker-src-$key}"
  # One commit text compiled into every commit's libllama, so that ccache hits across commits
  # (build-llama.sh); the manifests record the real commit.
  export FLIPSCOPE_LLAMA_BUILD_COMMIT=${FLIPSCOPE_LLAMA_BUILD_COMMIT:-checkout}
else
  release=$version
  src=$("$(dirname "$0")/fetch-llama.sh" "$release")
  commit=$(cat "$src/.flipscope-commit")
  name="llama-cpp-python $release"
  key=$(printf '%s|%s|%s' "$tree" "$release" "$FLIPSCOPE_LLAMA_CPU" | sha256sum | cut -c1-12)
  out="$FLIPSCOPE_CACHE/history/worker-$release-$key"
fi
# The sources the worker is made of (tests and docs excluded), hashed in a stable order.
tree_hash=$(cd "$tree" && find CMakeLists.txt cmake src scripts -type f ! -name '*_test.cpp' -print0 \
  | LC_ALL=C sort -z | xargs -0 sha256sum | sha256sum | cut -c1-16)
bin="$out/bin/flipscope-worker"
if [ -x "$bin" ] && [ "$(cat "$out/.flipscope-tree" 2>/dev/null)" = "$tree_hash" ]; then
  printf '%s\n' "$bin"; exit 0
fi
mkdir -p "$out"
# One build of a worker folder at a time (a bisect and a build started by hand, two histories):
# the second waits for the first, then finds the worker built.
exec 9>"$out/.flipscope-lock"
flock 9
if [ -x "$bin" ] && [ "$(cat "$out/.flipscope-tree" 2>/dev/null)" = "$tree_hash" ]; then
  printf '%s\n' "$bin"; exit 0
fi
launcher=()
if command -v ccache >/dev/null; then
  export CCACHE_DIR="${CCACHE_DIR:-$FLIPSCOPE_CACHE/ccache}"
  launcher=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
fi
# A worker folder configured from another flipscope tree (a checkout moved or another one: a
# commit's folder is shared by every tree that bisects that checkout) is configured afresh; its
# objects stay, and ccache holds the rest.
if [ -f "$out/CMakeCache.txt" ] && ! grep -qxF "CMAKE_HOME_DIRECTORY:INTERNAL=$tree" "$out/CMakeCache.txt"; then
  rm -rf "$out/CMakeCache.txt" "$out/CMakeFiles"
fi
log "building the capture worker for $name in $out (llama.cpp first, once: about 10 minutes on 2 cores)"
start=$(date +%s)
: > "$out/build.log"
# One "[setup] step" line per step on stderr: a caller (flipscope history, bisect) says each one
# with its elapsed time, while the compilers' output goes to build.log.
steps=2
[ -n "$release" ] || steps=3
step=0
step() { step=$((step + 1)); log "step $step of $steps: $*"; }
if [ -z "$release" ]; then
  # The libraries first, on their own: a llama.cpp that does not build is told apart from a tree
  # that does not compile against it, and each part's time is kept.
  step "building llama.cpp's libraries (output in $out/build.log)"
  if ! "$(dirname "$0")/build-llama.sh" "$src" cpu >> "$out/build.log" 2>&1; then
    printf '[setup] error: %s: llama.cpp does not build; its output in %s\n' "$name" "$out/build.log" >&2
    exit 4
  fi
  printf '%s\n' "$(( $(date +%s) - start ))" > "$out/.flipscope-llama-seconds"
fi
not_built() {
  printf '[setup] error: %s: flipscope does not build against its llama.cpp (%s); compiler output in %s\n' \
    "$name" "$commit" "$out/build.log" >&2
  exit 3
}
step "configuring the worker"
cmake -S "$tree" -B "$out" -G Ninja -DFLIPSCOPE_LLAMA_DIR="$src" -DFLIPSCOPE_LLAMA_RELEASE="$release" \
  -DFLIPSCOPE_LLAMA_CPU="$FLIPSCOPE_LLAMA_CPU" -DFLIPSCOPE_LLAMA_AMX=OFF -DFLIPSCOPE_BENCH=OFF "${launcher[@]}" \
  >> "$out/build.log" 2>&1 || not_built
what="the worker"
[ -z "$release" ] || what="the worker and its llama.cpp"
step "compiling $what (output in $out/build.log)"
cmake --build "$out" --target flipscope-worker -j"$(nproc)" >> "$out/build.log" 2>&1 || not_built
printf '%s\n' "$tree_hash" > "$out/.flipscope-tree"
printf '%s\n' "$(( $(date +%s) - start ))" > "$out/.flipscope-build-seconds"
printf '%s\n' "$bin"
