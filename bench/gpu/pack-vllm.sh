#!/usr/bin/env bash
# Packs vLLM for a bare GPU machine with no network (bench/gpu/vllm.md): the wheels of
# bench/gpu/vllm-wheels.txt for CPython 3.12, downloaded once into ~/.cache/flipscope/vllm-<version>,
# the vllm wheel without its FA2 kernels (305 MB of the 304 MB wheel's 433 MB unpacked; FA3 serves
# Hopper), tar'd (wheels are compressed already) and split into loads of 48 MiB: .gpu/v01,
# .gpu/v02, ... (a load and the 10.7 MB working tree stay under the 64 MiB one call carries).
# bench/gpu/remote-vllm.sh joins them there and installs with pip --no-index.
#   bench/gpu/pack-vllm.sh        (after bench/gpu/pack.sh, which empties .gpu/; needs zip)
set -euo pipefail
cd "$(dirname "$0")/../.."
list=bench/gpu/vllm-wheels.txt
version=$(grep -o '^vllm==[^ ]*' "$list" | cut -d= -f3)
cache=${FLIPSCOPE_CACHE:-$HOME/.cache/flipscope}/vllm-$version
mkdir -p "$cache/wheels"
grep -v '^#' "$list" | tr ' ' '\n' | grep . > "$cache/requirements.txt"
if [ ! -f "$cache/wheels.tar" ]; then
  platforms=()
  for tag in manylinux_2_28 manylinux_2_27 manylinux_2_24 manylinux_2_17 manylinux2014 manylinux1; do
    platforms+=(--platform "${tag}_x86_64")
  done
  # One wheel per package (pip refuses two versions of one package at install time).
  python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    "${platforms[@]}" --platform manylinux_2_31_x86_64 --platform any -d "$cache/wheels" -r "$cache/requirements.txt"
  rm -rf "$cache/pack" && mkdir -p "$cache/pack"
  for w in "$cache"/wheels/*.whl; do
    case "$(basename "$w")" in
      vllm-*) cp "$w" "$cache/pack/" && zip -q -d "$cache/pack/$(basename "$w")" 'vllm/vllm_flash_attn/_vllm_fa2_C.abi3.so' ;;
      *) ln "$w" "$cache/pack/" 2>/dev/null || cp "$w" "$cache/pack/" ;;
    esac
  done
  tar -C "$cache" -cf "$cache/wheels.tar.tmp" pack && mv "$cache/wheels.tar.tmp" "$cache/wheels.tar"
  rm -rf "$cache/pack"
fi
rm -rf .gpu/v[0-9]* && mkdir -p .gpu/vrest
split -b 48M -d --numeric-suffixes=1 "$cache/wheels.tar" .gpu/vrest/wheels.tar.part-
for part in .gpu/vrest/wheels.tar.part-*; do
  load=.gpu/v${part##*-}
  mkdir -p "$load" && mv "$part" "$load/"
done
rmdir .gpu/vrest
sha256sum "$cache/wheels.tar" | cut -d' ' -f1 > .gpu/v01/wheels.sha256
# The model conversion (remote-vllm.sh convert) reads GGUF through the gguf wheel, which travels in
# .gpu/b (pack.sh): .gpu/a is already near what one call carries.
du -sh .gpu/v*
