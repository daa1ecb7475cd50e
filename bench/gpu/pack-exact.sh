#!/usr/bin/env bash
# Packs what bench/gpu/exact-gpu.sh needs on a bare GPU machine into .gpu/ (ignored), in loads of
# at most 64 MiB with the working tree: .gpu/x = exact_gpu and tiny_model (stripped), the
# libraries they link that a CUDA image lacks, Debian's OpenBLAS for the CPU reference, and the
# model's first part; .gpu/y1, .gpu/y2, ... = the rest of the model.
#   bench/gpu/pack-exact.sh [BUILD_DIR] [MODEL]
set -euo pipefail
cd "$(dirname "$0")/../.."
. scripts/common.sh
build=${1:-build}
model=${2:-$MODELS_DIR/SmolLM2-135M-Instruct.Q4_1.gguf}
# exact_gpu is a benchmark: a plain build leaves it out (make bench builds them all).
cmake --build "$build" --target exact_gpu tiny_model
rm -rf .gpu/x .gpu/y* && mkdir -p .gpu/x/lib .gpu/x/blas .gpu/rest
strip -s -o .gpu/x/exact_gpu "$build/bench/exact_gpu"
strip -s -o .gpu/x/tiny_model "$build/bin/tiny_model"
ldd "$build/bench/exact_gpu" | awk '/=> \// {print $3}' | grep -E 'libfmt|libxxhash|libllama|libggml|libgomp' |
  xargs -I{} cp -L {} .gpu/x/lib/
for lib in openblas-pthread/libopenblas.so.0 libgfortran.so.5 libquadmath.so.0; do
  cp -L "/usr/lib/x86_64-linux-gnu/$lib" .gpu/x/blas/
done
gzip -6 .gpu/x/blas/* .gpu/x/lib/libllama*
used=$(du -sm .gpu/x | cut -f1)
first=$((40 - used))
head -c ${first}M "$model" > .gpu/x/model.part-00
tail -c +$((first * 1024 * 1024 + 1)) "$model" | split -b 44M -d --numeric-suffixes=1 - .gpu/rest/model.part-
for part in .gpu/rest/model.part-*; do
  load=.gpu/y${part##*-}
  mkdir -p "$load" && mv "$part" "$load/"
done
rmdir .gpu/rest
sha256sum "$model" | cut -d' ' -f1 > .gpu/x/model.sha256
du -sh .gpu/x .gpu/y*
