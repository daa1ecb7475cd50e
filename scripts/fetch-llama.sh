#!/usr/bin/env bash
# fetch-llama.sh [VERSION] : extracts the llama.cpp tree vendored in a llama-cpp-python sdist from
# PyPI into the cache and prints the source directory. Without VERSION: the pinned release, whose
# SHA-256 is known (common.sh). Another release is hashed on its first download and the hash is
# recorded beside the tree (sdist.sha256); a later run verifies the sdist against that record.
# The vendored llama.cpp commit (the sdist's .git/modules/vendor/llama.cpp/HEAD) is written to
# SRC/.flipscope-commit. Idempotent: does nothing when the tree is already there.
. "$(dirname "$0")/common.sh"
version=${1:-$LLAMA_CPP_PYTHON_VERSION}
[[ "$version" =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]] || die "llama-cpp-python '$version': expected a release like 0.3.36"
root="$FLIPSCOPE_CACHE/llama/$version"
dest="$root/src"
if [ "$version" = "$LLAMA_CPP_PYTHON_VERSION" ]; then
  sha=$LLAMA_CPP_PYTHON_SHA256
elif [ -f "$root/sdist.sha256" ]; then
  sha=$(cat "$root/sdist.sha256")
else
  sha=""  # first download: hashed below and recorded
fi
if [ ! -f "$dest/.flipscope-extracted" ]; then
  sdist=$(pip_download "llama-cpp-python==$version" "$sha" "--no-binary :all:") \
    || die "llama-cpp-python $version: no such sdist on PyPI (or the download failed)"
  mkdir -p "$root"
  [ -n "$sha" ] || sha256sum "$sdist" | cut -d' ' -f1 > "$root/sdist.sha256"
  tmp=$(mktemp -d "$FLIPSCOPE_CACHE/llama/extract.XXXXXX")
  log "extracting llama.cpp from $(basename "$sdist")"
  top="llama_cpp_python-$version"
  tar -xzf "$sdist" -C "$tmp" "$top/vendor/llama.cpp"
  if [ "$version" = "$LLAMA_CPP_PYTHON_VERSION" ]; then commit=$LLAMA_CPP_COMMIT
  else commit=$(tar -xzOf "$sdist" "$top/.git/modules/vendor/llama.cpp/HEAD" 2>/dev/null || echo unknown); fi
  rm -rf "$dest"
  mv "$tmp/$top/vendor/llama.cpp" "$dest"
  rm -rf "$tmp" "$dest/.git"
  printf '%s\n' "$commit" > "$dest/.flipscope-commit"
  touch "$dest/.flipscope-extracted"
fi
printf '%s\n' "$dest"
