// testing: tiny deterministic GGUF models written through ggml's gguf writer, so unit tests load
// a real llama.cpp model in milliseconds.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "util/status.h"

namespace flipscope::fixtures {

struct TinyModelOptions {
  uint64_t seed = 1;  // weights are a pure function of the seed
  // llama; qwen2 (Q/K/V biases, NeoX rope); qwen3 (per-head Q/K RMS norms, NeoX rope); phi3
  // (fused gate-up, NeoX rope); gemma2 (post norms, tied output, GELU, soft-capping, sliding layers); gemma3 (gemma2's
  // layers with per-head Q/K norms, no caps, every sixth layer full attention with rope base 1e6);
  // qwen3moe (qwen3's attention, a softmax router over n_expert experts, n_expert_used per token);
  // qwen35 (below).
  std::string arch = "llama";
  int head_dim = 0;          // per-head width; 0 = n_embd / n_head (qwen3 models set their own)
  bool fused_qkv = false;    // one attn_qkv matrix (and bias) instead of three
  std::string rope_scaling;  // written as ARCH.rope.scaling.type (factor 4) when set
  int n_expert = 4, n_expert_used = 2, n_ff_exp = 32;  // qwen3moe's experts
  // qwen35 (Qwen 3.5 / 3.6): every full_attention_interval-th layer full attention (gated Q, per-head
  // Q/K norms, rope over rope_dims of each head with rope_sections as multi-section rope), the others
  // Gated DeltaNet: ssm_groups key heads and ssm_v_heads value heads of width ssm_state, a causal
  // convolution of ssm_conv taps.
  int full_attention_interval = 2, ssm_state = 16, ssm_groups = 2, ssm_v_heads = 4, ssm_conv = 4;
  int rope_dims = 0;               // ARCH.rope.dimension_count; 0 = the head width
  std::vector<int> rope_sections;  // ARCH.rope.dimension_sections (4 values), written when set
  int sliding_window = 0;          // ARCH.attention.sliding_window, written when > 0
  float attn_softcap = 0;          // ARCH.attn_logit_softcapping, written when > 0
  float final_softcap = 0;         // ARCH.final_logit_softcapping, written when > 0
  int n_layer = 2;
  int n_embd = 64;
  int n_head = 2;
  int n_head_kv = 1;
  int n_ff = 128;
  int n_ctx_train = 512;
  bool chat_template = true;        // embed a ChatML template
  std::string matrix_type = "f16";  // f32, f16 or q8_0 for the 2-D weights
  float weight_scale = 1.0f;        // multiplies every matrix (larger = peakier distributions)
  float output_scale = 1.0f;        // multiplies output.weight as well (peakier next-token distributions)
  int n_vocab = 0;                  // > the tiny vocabulary: padded with tokens <|seed_N|> (shaped models)
  // Tensor edits for checkpoint-diff tests: perturb one tensor, drop one, rename one.
  std::string perturb_tensor, drop_tensor, rename_from, rename_to;
  // With perturb_tensor: 0 adds 0.5 to its first value; otherwise every value is multiplied by
  // 1 + perturb_scale (a change large enough to flip greedy tokens).
  float perturb_scale = 0;
};

// Writes a model of o.arch with an SPM vocabulary (byte fallback, ChatML control
// tokens) to path; the same options always give the same bytes.
Status WriteTinyModel(const std::string& path, const TinyModelOptions& opts = {});

// Writes a model of o's architecture at any shape (a 27B one too) with seeded random weights,
// streamed tensor by tensor in o.matrix_type (f32, f16, bf16, q8_0 or q4_k) over `threads`: memory
// holds a slab of one tensor, not the model. Its values are a pure function of the seed and the
// shape (not of threads). Such files measure cost, never quality: their weights are noise.
Status WriteShapedModel(const std::string& path, const TinyModelOptions& o, int threads);

// A path under the system temp folder for a test's file (the folder is created).
std::string TempPath(const std::string& name);

// The default tiny model (WriteTinyModel with default options), written once per process under
// TempPath; its path. Aborts with the reason when it cannot be written.
std::string DefaultTinyModel();

// n ids of the tiny model's vocabulary, a fixed varied sequence: 5 + (i * mult) % 290.
std::vector<int32_t> TinyTokens(int n, int mult = 37);

// The real SmolLM2 model in the cache, or "" when set-up has not fetched it.
std::string SmolLM2Path();
std::string Gemma3Path();

}  // namespace flipscope::fixtures
