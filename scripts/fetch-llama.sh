#!/usr/bin/env bash
# Extracts the llama.cpp tree vendored in the pinned llama-cpp-python sdist into the cache.
# Idempotent: does nothing when the tree is already there. Prints the source directory.
. "$(dirname "$0")/common.sh"
dest="$LLAMA_SRC_DEFAULT"
if [ ! -f "$dest/.flipscope-extracted" ]; then
  sdist=$(pip_download "llama-cpp-python==$LLAMA_CPP_PYTHON_VERSION" "$LLAMA_CPP_PYTHON_SHA256" "--no-binary :all:")
  mkdir -p "$FLIPSCOPE_CACHE/llama"  # a fresh machine has no cache yet
  tmp=$(mktemp -d "$FLIPSCOPE_CACHE/llama/extract.XXXXXX")
  log "extracting llama.cpp from $(basename "$sdist")"
  tar -xzf "$sdist" -C "$tmp" "llama_cpp_python-$LLAMA_CPP_PYTHON_VERSION/vendor/llama.cpp"
  rm -rf "$dest"
  mkdir -p "$(dirname "$dest")"
  mv "$tmp/llama_cpp_python-$LLAMA_CPP_PYTHON_VERSION/vendor/llama.cpp" "$dest"
  rm -rf "$tmp" "$dest/.git"
  printf '%s\n' "$LLAMA_CPP_COMMIT" > "$dest/.flipscope-commit"
  touch "$dest/.flipscope-extracted"
fi
printf '%s\n' "$dest"
