// tiny_model: writes one of the tests' tiny deterministic GGUF models to a file, for the Python
// checks (tests/ref/exact_ref.py --tiny) that need a model of a given architecture.
#include <CLI/CLI.hpp>
#include <cstdio>

#include "testing/tiny_model.h"

int main(int argc, char** argv) {
  CLI::App app{"Write a tiny deterministic GGUF model"};
  flipscope::fixtures::TinyModelOptions o;
  std::string path;
  app.add_option("--arch", o.arch, "llama, qwen2, qwen3, qwen3moe, qwen35, phi3 or gemma2")
      ->check(CLI::IsMember({"llama", "qwen2", "qwen3", "qwen3moe", "qwen35", "phi3", "gemma2"}));
  app.add_option("--n-layer", o.n_layer, "layers");
  app.add_option("--rope-dims", o.rope_dims, "rotated dimensions per head (0: the head width)");
  app.add_option("--rope-sections", o.rope_sections, "multi-section rope: four section sizes")->expected(4);
  app.add_option("--full-attention-interval", o.full_attention_interval, "qwen35: every N-th layer full attention");
  app.add_option("--n-embd", o.n_embd, "embedding width");
  app.add_option("--n-head", o.n_head, "attention heads");
  app.add_option("--n-head-kv", o.n_head_kv, "key/value heads");
  app.add_option("--n-ff", o.n_ff, "MLP width");
  app.add_option("--ssm-state", o.ssm_state, "qwen35: DeltaNet head width (the state is its square)");
  app.add_option("--ssm-groups", o.ssm_groups, "qwen35: DeltaNet key heads");
  app.add_option("--ssm-v-heads", o.ssm_v_heads, "qwen35: DeltaNet value heads");
  app.add_option("--head-dim", o.head_dim, "per-head width (0: n_embd / n_head)");
  app.add_flag("--fused-qkv", o.fused_qkv, "one attn_qkv tensor instead of three");
  app.add_option("--matrix-type", o.matrix_type, "f32, f16 or q8_0")->check(CLI::IsMember({"f32", "f16", "q8_0"}));
  app.add_option("--weight-scale", o.weight_scale, "multiplies every matrix");
  app.add_option("--seed", o.seed, "the weights' seed");
  app.add_option("--sliding-window", o.sliding_window, "sliding window in tokens (written when > 0)");
  app.add_option("--attn-softcap", o.attn_softcap, "attention logit soft-capping (written when > 0)");
  app.add_option("--final-softcap", o.final_softcap, "final logit soft-capping (written when > 0)");
  app.add_option("-o,--output", path, "GGUF file to write")->required();
  CLI11_PARSE(app, argc, argv);
  flipscope::Status st = flipscope::fixtures::WriteTinyModel(path, o);
  if (!st.ok()) std::fprintf(stderr, "tiny_model: error: %s\n", st.message().c_str());
  return st.ok() ? 0 : 1;
}
