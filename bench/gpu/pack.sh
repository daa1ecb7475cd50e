#!/usr/bin/env bash
# Packs what a bare GPU machine needs into .gpu/ (ignored), in two loads because one call carries at
# most 64 MiB: .gpu/a = the pinned llama.cpp tree (the sources a CUDA build needs), the flipscope
# binary built here with the libraries it links that a CUDA image lacks, and the model's first
# part; .gpu/b = the model's second part. bench/gpu/remote.sh unpacks them there.
#   bench/gpu/pack.sh [BUILD_DIR] [MODEL]
set -euo pipefail
cd "$(dirname "$0")/../.."
. scripts/common.sh
build=${1:-build}
model=${2:-$MODELS_DIR/SmolLM2-135M-Instruct.Q4_1.gguf}
rm -rf .gpu && mkdir -p .gpu/a/lib .gpu/b
tar -C "$LLAMA_SRC_DEFAULT" -cf - CMakeLists.txt cmake ggml src include common vendor tools licenses \
  .flipscope-commit | gzip -6 > .gpu/a/llama-src.tar.gz
strip -s -o .gpu/a/flipscope "$build/bin/flipscope"  # symbols stay here: the load is 64 MiB
# Libraries from outside llama.cpp (fmt, xxHash, toml++): the GPU image has its own C++ runtime.
ldd "$build/bin/flipscope" | awk '/=> \/(usr\/)?lib/ {print $3}' | grep -E 'libfmt|libxxhash|libtomlplusplus' |
  xargs -I{} cp -L {} .gpu/a/lib/
split -b 40M -d "$model" .gpu/a/model.part-
mv .gpu/a/model.part-0[1-9] .gpu/b/
sha256sum "$model" | cut -d' ' -f1 > .gpu/a/model.sha256
du -sh .gpu/a .gpu/b
