#!/usr/bin/env bash
# Packs what a bare GPU machine needs into .gpu/ (ignored), in loads of at most 64 MiB (what one
# call carries, the working tree included): .gpu/a = the pinned llama.cpp tree (the sources a
# CUDA build needs), the flipscope binary built here with the libraries it links that a CUDA image
# lacks, and the model's first 16 MiB; .gpu/p01, .gpu/p02, ... = the rest of the model, 40 MiB
# each, so that a load and the working tree (about 16 MiB) stay under 64 MiB (SmolLM2's 98 MB: two
# more loads; Gemma 3 270M's 253 MB: six); .gpu/b = OpenBLAS and the
# gguf wheel for bench/gpu/exact-cashiers.sh. bench/gpu/remote.sh unpacks them there.
#   bench/gpu/pack.sh [BUILD_DIR] [MODEL]
set -euo pipefail
cd "$(dirname "$0")/../.."
. scripts/common.sh
build=${1:-build}
model=${2:-$MODELS_DIR/SmolLM2-135M-Instruct.Q4_1.gguf}
rm -rf .gpu && mkdir -p .gpu/a/lib .gpu/rest
tar -C "$LLAMA_SRC_DEFAULT" -cf - CMakeLists.txt cmake ggml src include common vendor tools licenses \
  scripts/ui-assets.cmake .flipscope-commit | gzip -6 > .gpu/a/llama-src.tar.gz
strip -s -o .gpu/a/flipscope "$build/bin/flipscope"  # symbols stay here: the load is 64 MiB
# Libraries from outside llama.cpp (fmt, xxHash, toml++): the GPU image has its own C++ runtime.
ldd "$build/bin/flipscope" | awk '/=> \/(usr\/)?lib/ {print $3}' | grep -E 'libfmt|libxxhash|libtomlplusplus' |
  xargs -I{} cp -L {} .gpu/a/lib/
head -c 16M "$model" > .gpu/a/model.part-00
tail -c +$((16 * 1024 * 1024 + 1)) "$model" | split -b 40M -d --numeric-suffixes=1 - .gpu/rest/model.part-
for part in .gpu/rest/model.part-*; do
  load=.gpu/p${part##*-}
  mkdir -p "$load" && mv "$part" "$load/"
done
rmdir .gpu/rest
sha256sum "$model" | cut -d' ' -f1 > .gpu/a/model.sha256
# .gpu/b: what the exact engine and the transformers cashiers need there (bench/gpu/exact-cashiers.sh):
# Debian's OpenBLAS with its Fortran runtime (the exact engine loads libopenblas.so.0 itself),
# libcrypto in case the image lacks OpenSSL 3, and the gguf wheel transformers reads GGUF with.
mkdir -p .gpu/b/blas .gpu/b/crypto
for lib in openblas-pthread/libopenblas.so.0 libgfortran.so.5 libquadmath.so.0; do
  cp -L "/usr/lib/x86_64-linux-gnu/$lib" .gpu/b/blas/
done
gzip -6 .gpu/b/blas/*
cp -L /usr/lib/x86_64-linux-gnu/libcrypto.so.3 .gpu/b/crypto/ && gzip -6 .gpu/b/crypto/*
cp "$FLIPSCOPE_CACHE"/vllm-*/wheels/gguf-*.whl .gpu/b/ 2>/dev/null ||
  python3 -m pip download -q --no-deps --only-binary=:all: -d .gpu/b gguf==0.17.1
du -sh .gpu/*
