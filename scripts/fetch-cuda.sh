#!/usr/bin/env bash
# The CUDA compiler and runtime for the exact engine's CUDA pass (docs/exact.md), from PyPI's
# NVIDIA wheels (pip download --no-deps, pinned, SHA-256 verified): nvcc, its front end (nvvm),
# the runtime (linked statically) and its headers. cuBLAS is not needed to build: the engine loads
# it at run time. Extracts to $FLIPSCOPE_CACHE/cuda-VERSION and prints that folder; on a machine
# other than x86-64 Linux prints nothing (the build leaves the CUDA pass out). Idempotent.
. "$(dirname "$0")/common.sh"
[ "$(uname -sm)" = "Linux x86_64" ] || exit 0
dest="$FLIPSCOPE_CACHE/cuda-$CUDA_WHEELS_VERSION"
if [ ! -x "$dest/bin/nvcc" ]; then
  tmp="$dest.tmp.$$"
  rm -rf "$tmp" && mkdir -p "$tmp"
  for spec in "nvidia-cuda-nvcc:$CUDA_NVCC_SHA256" "nvidia-nvvm:$CUDA_NVVM_SHA256" \
      "nvidia-cuda-runtime:$CUDA_RUNTIME_SHA256" "nvidia-cuda-crt:$CUDA_CRT_SHA256"; do
    whl=$(pip_download "${spec%%:*}==$CUDA_WHEELS_VERSION" "${spec##*:}" "--only-binary=:all:")
    unzip -q -o "$whl" 'nvidia/cu13/*' -d "$tmp"
  done
  mv "$tmp/nvidia/cu13" "$dest.new" && rm -rf "$tmp" "$dest" && mv "$dest.new" "$dest"
  log "CUDA $CUDA_WHEELS_VERSION compiler in $dest"
fi
printf '%s\n' "$dest"
