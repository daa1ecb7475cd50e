// tiny_model: writes one of the tests' tiny deterministic GGUF models to a file, for the Python
// checks (tests/ref/exact_ref.py --tiny) that need a model of a given architecture; with --shape
// (or --stream), a model of a real shape with random weights, streamed, for the exact engine's
// cost (docs/exact.md): such a file measures cost, never quality.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <thread>

#include "testing/tiny_model.h"

namespace {

// The published shapes: Qwen 3.6 27B (hybrid: every fourth layer full attention, the others Gated
// DeltaNet) and a dense Llama 8B.
void ApplyShape(const std::string& shape, flipscope::fixtures::TinyModelOptions& o) {
  if (shape == "qwen36-27b") {
    o.arch = "qwen35";
    o.n_layer = 64, o.n_embd = 5120, o.n_head = 24, o.n_head_kv = 4, o.head_dim = 256, o.n_ff = 17408;
    o.rope_dims = 64, o.full_attention_interval = 4;
    o.ssm_state = 128, o.ssm_groups = 16, o.ssm_v_heads = 48, o.ssm_conv = 4;
    o.n_vocab = 248320, o.n_ctx_train = 262144;
  } else if (shape == "llama-8b") {
    o.arch = "llama";
    o.n_layer = 32, o.n_embd = 4096, o.n_head = 32, o.n_head_kv = 8, o.n_ff = 14336;
    o.n_vocab = 128256, o.n_ctx_train = 131072;
  }
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Write a tiny deterministic GGUF model, or one of a real shape with random weights"};
  flipscope::fixtures::TinyModelOptions o;
  std::string path, shape;
  bool stream = false;
  int threads = int(std::max(1u, std::thread::hardware_concurrency()));
  app.add_option("--arch", o.arch, "llama, qwen2, qwen3, qwen3moe, qwen35, phi3, gemma2 or gemma3")
      ->check(CLI::IsMember({"llama", "qwen2", "qwen3", "qwen3moe", "qwen35", "phi3", "gemma2", "gemma3"}));
  app.add_option("--shape", shape, "a real model's shape, streamed: qwen36-27b or llama-8b (sets the shape options)")
      ->check(CLI::IsMember({"qwen36-27b", "llama-8b"}));
  app.add_flag("--stream", stream, "stream the tensors to disk (any shape; implied by --shape)");
  app.add_option("-t,--threads", threads, "threads generating the weights (with --stream)");
  app.add_option("--n-layer", o.n_layer, "layers");
  app.add_option("--rope-dims", o.rope_dims, "rotated dimensions per head (0: the head width)");
  app.add_option("--rope-sections", o.rope_sections, "multi-section rope: four section sizes")->expected(4);
  app.add_option("--full-attention-interval", o.full_attention_interval, "qwen35: every N-th layer full attention");
  app.add_option("--n-embd", o.n_embd, "embedding width");
  app.add_option("--n-head", o.n_head, "attention heads");
  app.add_option("--n-head-kv", o.n_head_kv, "key/value heads");
  app.add_option("--n-ff", o.n_ff, "MLP width");
  app.add_option("--n-vocab", o.n_vocab, "vocabulary size (padded with <|seed_N|> tokens; with --stream)");
  app.add_option("--ssm-state", o.ssm_state, "qwen35: DeltaNet head width (the state is its square)");
  app.add_option("--ssm-groups", o.ssm_groups, "qwen35: DeltaNet key heads");
  app.add_option("--ssm-v-heads", o.ssm_v_heads, "qwen35: DeltaNet value heads");
  app.add_option("--head-dim", o.head_dim, "per-head width (0: n_embd / n_head)");
  app.add_flag("--fused-qkv", o.fused_qkv, "one attn_qkv tensor instead of three");
  app.add_option("--matrix-type", o.matrix_type, "f32, f16, q8_0 (streamed also bf16 and q4_k)")
      ->check(CLI::IsMember({"f32", "f16", "q8_0", "bf16", "q4_k"}));
  app.add_option("--weight-scale", o.weight_scale, "multiplies every matrix");
  app.add_option("--output-scale", o.output_scale, "multiplies output.weight too (peakier next-token distributions)");
  app.add_option("--seed", o.seed, "the weights' seed");
  app.add_option("--sliding-window", o.sliding_window, "sliding window in tokens (written when > 0)");
  app.add_option("--attn-softcap", o.attn_softcap, "attention logit soft-capping (written when > 0)");
  app.add_option("--final-softcap", o.final_softcap, "final logit soft-capping (written when > 0)");
  app.add_option("-o,--output", path, "GGUF file to write")->required();
  CLI11_PARSE(app, argc, argv);
  // The shape first, then any option given beside it wins.
  if (!shape.empty()) {
    flipscope::fixtures::TinyModelOptions given = o;
    ApplyShape(shape, o);
    if (app.count("--matrix-type")) o.matrix_type = given.matrix_type;
    if (app.count("--n-layer")) o.n_layer = given.n_layer;
    stream = true;
  }
  const bool tiny_types = o.matrix_type == "f32" || o.matrix_type == "f16" || o.matrix_type == "q8_0";
  flipscope::Status st = stream || !tiny_types ? flipscope::fixtures::WriteShapedModel(path, o, threads)
                                               : flipscope::fixtures::WriteTinyModel(path, o);
  if (!st.ok()) std::fprintf(stderr, "tiny_model: error: %s\n", st.message().c_str());
  return st.ok() ? 0 : 1;
}
