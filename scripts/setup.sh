#!/usr/bin/env bash
# One idempotent set-up for a fresh Debian 12 machine where only apt and pip reach the network:
# Debian packages, a Python venv with the test tools, llama.cpp's source, the models, the CUDA
# compiler (PyPI's NVIDIA wheels).
. "$(dirname "$0")/common.sh"
here=$(cd "$(dirname "$0")" && pwd)

APT_PACKAGES=(build-essential cmake ninja-build ccache pkg-config git unzip curl
  libcli11-dev nlohmann-json3-dev libfmt-dev libcurl4-openssl-dev libssl-dev libxxhash-dev
  libtomlplusplus-dev libgtest-dev libgmock-dev libbenchmark-dev libopenblas-dev
  clang libclang-rt-14-dev chromium python3-venv)
missing=()
for p in "${APT_PACKAGES[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if [ ${#missing[@]} -gt 0 ]; then
  log "installing Debian packages: ${missing[*]}"
  sudo=""; [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get update -qq
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
fi

# Python for the independent checks in the tests (numpy, safetensors, gguf) and the Python capture
# writers (xxhash: the row digest), pinned. The marker holds the list, so a changed list reinstalls.
PIP_PACKAGES="numpy==2.1.3 safetensors==0.4.5 gguf==0.17.1 xxhash==3.5.0"
if [ ! -x "$VENV/bin/python" ] || [ "$(cat "$VENV/.flipscope-ok" 2>/dev/null)" != "$PIP_PACKAGES" ]; then
  log "setting up $VENV"
  [ -x "$VENV/bin/python" ] || python3 -m venv "$VENV"
  # shellcheck disable=SC2086
  "$VENV/bin/pip" install -q $PIP_PACKAGES >&2
  echo "$PIP_PACKAGES" >"$VENV/.flipscope-ok"
fi

# llama.cpp's source; CMake builds it at configure time with the chosen CPU options (cmake/llama.cmake).
"$here/fetch-llama.sh" >/dev/null
"$here/fetch-models.sh" >/dev/null
# nvcc and the CUDA runtime, so that the exact engine's CUDA pass is compiled on every build.
"$here/fetch-cuda.sh" >/dev/null
log "set-up complete"
