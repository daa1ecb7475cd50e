# Shared settings for the set-up scripts: pinned versions, their SHA-256, cache locations.
# Sourced, not run.
set -euo pipefail
FLIPSCOPE_CACHE="${FLIPSCOPE_CACHE:-$HOME/.cache/flipscope}"
LLAMA_CPP_PYTHON_VERSION="0.3.36"
LLAMA_CPP_PYTHON_SHA256="832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e"
# The llama.cpp commit vendored by that sdist (its .git/modules/vendor/llama.cpp/HEAD).
LLAMA_CPP_COMMIT="0c1e57098bba43ac29e6e3b677cdceebdd22334f"
LLAMA_SRC_DEFAULT="$FLIPSCOPE_CACHE/llama/$LLAMA_CPP_PYTHON_VERSION/src"
# The CUDA compiler wheels of the exact engine's CUDA pass (scripts/fetch-cuda.sh), one release.
CUDA_WHEELS_VERSION="13.5.37"
CUDA_NVCC_SHA256="f5c4f7ead5d964fb4af42bbf1e6d3ec3c1e6e9d83b53749f691d387e7fcaa3a7"
CUDA_NVVM_SHA256="c41bfa362e407405163f103c2229f0765f8cc2ed7d148b754dc77f228bf7e070"
CUDA_RUNTIME_SHA256="df2b79a8852f10d1fef8c848489c49eebb5754051bf870202a862831412b179d"
CUDA_CRT_SHA256="e898b7f73d3035fa89915a3f7bf3b54a73e90249746111aed295822c4729bb29"
DL_DIR="$FLIPSCOPE_CACHE/dl"
MODELS_DIR="$FLIPSCOPE_CACHE/models"
VENV="$FLIPSCOPE_CACHE/venv"

log() { printf '[setup] %s\n' "$*" >&2; }
die() { printf '[setup] error: %s\n' "$*" >&2; exit 1; }

# verify_sha256 FILE EXPECTED: exits non-zero naming the file when the digest differs.
verify_sha256() {
  local got
  got=$(sha256sum "$1" | cut -d' ' -f1)
  [ "$got" = "$2" ] || die "$1: SHA-256 $got, expected $2 (remove it to download again)"
}

# pip_download SPEC SHA256 [PIP_ARGS]: downloads one distribution into DL_DIR once and verifies it
# (an empty SHA256 skips the check: the caller records the hash of a first download).
pip_download() {
  local spec=$1 sha=$2 name file
  mkdir -p "$DL_DIR"
  name=$(printf '%s' "${spec%%==*}" | tr '-' '_')
  file=$(ls "$DL_DIR"/"$name"-"${spec##*==}"[.-]* 2>/dev/null | head -n1 || true)
  if [ -z "$file" ]; then
    log "downloading $spec"
    python3 -m pip download -q --no-deps ${3:-} "$spec" -d "$DL_DIR" >&2
    file=$(ls "$DL_DIR"/"$name"-"${spec##*==}"[.-]* | head -n1)
  fi
  [ -z "$sha" ] || verify_sha256 "$file" "$sha"
  printf '%s\n' "$file"
}
