// Tiny deterministic GGUF models for unit tests.
#include "testing/tiny_model.h"

#include <fmt/format.h>
#include <ggml.h>
#include <gguf.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>

#include "testing/tiny_model_parts.h"

namespace flipscope::fixtures {
namespace detail {

constexpr const char* kChatML =
    "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + "
    "'<|im_end|>' + '\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}";

Vocab MakeVocab() {
  // Types as in llama.cpp: 1 normal, 2 unknown, 3 control, 6 byte.
  Vocab v;
  v.Add("<unk>", 0, 2);
  v.Add("<s>", 0, 3);
  v.Add("</s>", 0, 3);
  v.Add("<|im_start|>", 0, 3);
  v.Add("<|im_end|>", 0, 3);
  for (int b = 0; b < 256; ++b) v.Add(fmt::format("<0x{:02X}>", b), 0, 6);
  const std::string sp = "\xe2\x96\x81";  // SentencePiece's word-start marker
  const std::string pieces[] = {sp,     sp + "the",  sp + "a", sp + "show", sp + "port", sp + "interface",
                                "user", "assistant", "system", "tool"};
  float score = -1;
  for (const auto& p : pieces) v.Add(p, score--, 1);
  for (char c = 'a'; c <= 'z'; ++c) v.Add(std::string(1, c), score--, 1);
  for (char c = '0'; c <= '9'; ++c) v.Add(std::string(1, c), score--, 1);
  return v;
}

int HeadDim(const TinyModelOptions& o) { return o.head_dim > 0 ? o.head_dim : o.n_embd / o.n_head; }

// Writes the model's metadata (o.arch of o's shapes, the vocabulary, ChatML when o asks) into g.
void SetMetadata(gguf_context* g, const TinyModelOptions& o, const Vocab& vocab) {
  const std::string a = o.arch;
  auto u32 = [&](const std::string& key, int v) { gguf_set_val_u32(g, (a + "." + key).c_str(), uint32_t(v)); };
  gguf_set_val_str(g, "general.architecture", a.c_str());
  gguf_set_val_str(g, "general.name", "flipscope-tiny");
  gguf_set_val_u32(g, "general.alignment", 32);
  u32("context_length", o.n_ctx_train);
  u32("embedding_length", o.n_embd);
  u32("block_count", o.n_layer);
  u32("feed_forward_length", o.n_ff);
  u32("attention.head_count", o.n_head);
  u32("attention.head_count_kv", o.n_head_kv);
  if (o.head_dim > 0) {
    u32("attention.key_length", o.head_dim);
    u32("attention.value_length", o.head_dim);
  }
  u32("rope.dimension_count", o.rope_dims > 0 ? o.rope_dims : HeadDim(o));
  // qwen35 requires sections; by default the rotated pairs split as Qwen 3.5's 11/11/10 of 32.
  std::vector<int> sections = o.rope_sections;
  if (sections.empty() && o.arch == "qwen35") {
    const int pairs = (o.rope_dims > 0 ? o.rope_dims : HeadDim(o)) / 2;
    sections = {(pairs + 2) / 3, (pairs + 1) / 3, pairs / 3, 0};
  }
  if (!sections.empty())
    gguf_set_arr_data(g, (a + ".rope.dimension_sections").c_str(), GGUF_TYPE_INT32, sections.data(), sections.size());
  if (o.arch == "qwen35") {
    u32("full_attention_interval", o.full_attention_interval);
    u32("ssm.conv_kernel", o.ssm_conv);
    u32("ssm.state_size", o.ssm_state);
    u32("ssm.group_count", o.ssm_groups);
    u32("ssm.time_step_rank", o.ssm_v_heads);
    u32("ssm.inner_size", o.ssm_state * o.ssm_v_heads);
  }
  gguf_set_val_f32(g, (a + ".attention.layer_norm_rms_epsilon").c_str(), 1e-5f);
  // gemma3's full-attention layers turn with their own base (its sliding ones keep 10000).
  gguf_set_val_f32(g, (a + ".rope.freq_base").c_str(), o.arch == "gemma3" ? 1e6f : 10000.0f);
  if (o.arch == "qwen3moe") {
    u32("expert_count", o.n_expert);
    u32("expert_used_count", o.n_expert_used);
    u32("expert_feed_forward_length", o.n_ff_exp);
  }
  if (o.sliding_window > 0) u32("attention.sliding_window", o.sliding_window);
  if (o.attn_softcap > 0) gguf_set_val_f32(g, (a + ".attn_logit_softcapping").c_str(), o.attn_softcap);
  if (o.final_softcap > 0) gguf_set_val_f32(g, (a + ".final_logit_softcapping").c_str(), o.final_softcap);
  if (!o.rope_scaling.empty()) {
    gguf_set_val_str(g, (a + ".rope.scaling.type").c_str(), o.rope_scaling.c_str());
    gguf_set_val_f32(g, (a + ".rope.scaling.factor").c_str(), 4.0f);
  }
  gguf_set_val_str(g, "tokenizer.ggml.model", "llama");
  gguf_set_val_str(g, "tokenizer.ggml.pre", "default");
  std::vector<const char*> tok_ptrs;
  for (auto& t : vocab.tokens) tok_ptrs.push_back(t.c_str());
  gguf_set_arr_str(g, "tokenizer.ggml.tokens", tok_ptrs.data(), tok_ptrs.size());
  gguf_set_arr_data(g, "tokenizer.ggml.scores", GGUF_TYPE_FLOAT32, vocab.scores.data(), vocab.scores.size());
  gguf_set_arr_data(g, "tokenizer.ggml.token_type", GGUF_TYPE_INT32, vocab.types.data(), vocab.types.size());
  gguf_set_val_u32(g, "tokenizer.ggml.bos_token_id", 1);
  gguf_set_val_u32(g, "tokenizer.ggml.eos_token_id", 4);  // <|im_end|> ends a turn
  gguf_set_val_u32(g, "tokenizer.ggml.unknown_token_id", 0);
  gguf_set_val_bool(g, "tokenizer.ggml.add_bos_token", true);
  if (o.chat_template) gguf_set_val_str(g, "tokenizer.chat_template", kChatML);
}

// Layer l of a qwen35 model (llama.cpp's src/models/qwen35.cpp): a full-attention layer (Q and its
// gate in one matrix, per-head Q/K norms) or a Gated DeltaNet layer (QKV mixed for the convolution,
// the output gate, the decay and the write strength per value head), then the SiLU-gated MLP.
void Qwen35Layer(const TinyModelOptions& o, int l, int n_vocab, std::vector<Spec>& specs) {
  (void)n_vocab;
  const int hd = HeadDim(o), q = hd * o.n_head, kv = hd * o.n_head_kv;
  const int key_dim = o.ssm_state * o.ssm_groups, value_dim = o.ssm_state * o.ssm_v_heads;
  auto b = fmt::format("blk.{}.", l);
  specs.push_back({b + "attn_norm.weight", o.n_embd, 1, false});
  if ((l + 1) % o.full_attention_interval == 0) {
    specs.push_back({b + "attn_q.weight", o.n_embd, 2 * q, true});
    specs.push_back({b + "attn_k.weight", o.n_embd, kv, true});
    specs.push_back({b + "attn_v.weight", o.n_embd, kv, true});
    specs.push_back({b + "attn_q_norm.weight", hd, 1, false});
    specs.push_back({b + "attn_k_norm.weight", hd, 1, false});
    specs.push_back({b + "attn_output.weight", q, o.n_embd, true});
  } else {
    specs.push_back({b + "attn_qkv.weight", o.n_embd, 2 * key_dim + value_dim, true});
    specs.push_back({b + "attn_gate.weight", o.n_embd, value_dim, true});
    specs.push_back({b + "ssm_conv1d.weight", o.ssm_conv, 2 * key_dim + value_dim, false});
    specs.push_back({b + "ssm_dt.bias", o.ssm_v_heads, 1, false});
    specs.push_back({b + "ssm_a", o.ssm_v_heads, 1, false});
    specs.push_back({b + "ssm_beta.weight", o.n_embd, o.ssm_v_heads, true});
    specs.push_back({b + "ssm_alpha.weight", o.n_embd, o.ssm_v_heads, true});
    specs.push_back({b + "ssm_norm.weight", o.ssm_state, 1, false});
    specs.push_back({b + "ssm_out.weight", value_dim, o.n_embd, true});
  }
  specs.push_back({b + "post_attention_norm.weight", o.n_embd, 1, false});
  specs.push_back({b + "ffn_gate.weight", o.n_embd, o.n_ff, true});
  specs.push_back({b + "ffn_up.weight", o.n_embd, o.n_ff, true});
  specs.push_back({b + "ffn_down.weight", o.n_ff, o.n_embd, true});
}

// The tensors of o.arch of o's shapes over n_vocab tokens, in file order.
std::vector<Spec> TensorSpecs(const TinyModelOptions& o, int n_vocab) {
  const int hd = HeadDim(o), q = hd * o.n_head, kv = hd * o.n_head_kv;
  const bool gemma = o.arch == "gemma2" || o.arch == "gemma3";
  std::vector<Spec> specs = {{"token_embd.weight", o.n_embd, n_vocab, true},
                             {"output_norm.weight", o.n_embd, 1, false}};
  if (!gemma) specs.push_back({"output.weight", o.n_embd, n_vocab, true});  // gemma ties it (gemma2 always)
  for (int l = 0; l < o.n_layer; ++l) {
    auto b = fmt::format("blk.{}.", l);
    if (o.arch == "qwen35") {
      Qwen35Layer(o, l, n_vocab, specs);
      continue;
    }
    specs.push_back({b + "attn_norm.weight", o.n_embd, 1, false});
    if (o.fused_qkv) {
      specs.push_back({b + "attn_qkv.weight", o.n_embd, q + 2 * kv, true});
      if (o.arch == "qwen2") specs.push_back({b + "attn_qkv.bias", q + 2 * kv, 1, false});
    } else {
      specs.push_back({b + "attn_q.weight", o.n_embd, q, true});
      specs.push_back({b + "attn_k.weight", o.n_embd, kv, true});
      specs.push_back({b + "attn_v.weight", o.n_embd, kv, true});
      if (o.arch == "qwen2")
        for (auto [name, n] : {std::pair{"attn_q", q}, {"attn_k", kv}, {"attn_v", kv}})
          specs.push_back({b + name + ".bias", n, 1, false});
    }
    if (o.arch == "qwen3" || o.arch == "qwen3moe" || o.arch == "gemma3") {
      specs.push_back({b + "attn_q_norm.weight", hd, 1, false});
      specs.push_back({b + "attn_k_norm.weight", hd, 1, false});
    }
    specs.push_back({b + "attn_output.weight", q, o.n_embd, true});
    if (gemma) specs.push_back({b + "post_attention_norm.weight", o.n_embd, 1, false});
    specs.push_back({b + "ffn_norm.weight", o.n_embd, 1, false});
    if (o.arch == "qwen3moe") {  // a router and n_expert SiLU-gated experts
      specs.push_back({b + "ffn_gate_inp.weight", o.n_embd, o.n_expert, true});
      specs.push_back({b + "ffn_gate_exps.weight", o.n_embd, o.n_ff_exp, true, o.n_expert});
      specs.push_back({b + "ffn_down_exps.weight", o.n_ff_exp, o.n_embd, true, o.n_expert});
      specs.push_back({b + "ffn_up_exps.weight", o.n_embd, o.n_ff_exp, true, o.n_expert});
      continue;
    }
    if (o.arch == "phi3") {  // one fused up projection, gate rows first
      specs.push_back({b + "ffn_up.weight", o.n_embd, 2 * o.n_ff, true});
    } else {
      specs.push_back({b + "ffn_gate.weight", o.n_embd, o.n_ff, true});
      specs.push_back({b + "ffn_up.weight", o.n_embd, o.n_ff, true});
    }
    specs.push_back({b + "ffn_down.weight", o.n_ff, o.n_embd, true});
    if (gemma) specs.push_back({b + "post_ffw_norm.weight", o.n_embd, 1, false});
  }
  return specs;
}

void Fill(const Spec& s, const TinyModelOptions& o, Rng& rng, float* v, int64_t n) {
  float scale = s.matrix ? o.weight_scale / std::sqrt(float(s.ne0)) : 0.0f;
  if (s.name == "output.weight") scale *= o.output_scale;
  // Norm weights near 1, biases near 0 (large enough to matter), matrices scaled to their width.
  const bool bias = s.name.ends_with(".bias");
  for (int64_t i = 0; i < n; ++i)
    v[i] = s.matrix ? rng.Uniform() * scale * 1.7f : bias ? 0.5f * rng.Uniform() : 1.0f + 0.1f * rng.Uniform();
  // qwen35's decay A (stored as -exp(A_log)) is negative, so that the state fades; its
  // convolution taps are small, F32 as in real files (ggml_ssm_conv reads F32).
  if (s.name.ends_with(".ssm_a"))
    for (int64_t i = 0; i < n; ++i) v[i] = -(0.5f + 0.4f * v[i]);
  if (s.name.ends_with(".ssm_conv1d.weight"))
    for (int64_t i = 0; i < n; ++i) v[i] = 2.5f * (v[i] - 1.0f);
}

// Adds the tensors of specs to g, made in ctx with seeded values (o's seed, scale, type, and its
// dropped, perturbed or renamed tensor).
void AddTensors(gguf_context* g, ggml_context* ctx, const std::vector<Spec>& specs, const TinyModelOptions& o) {
  ggml_type mtype = o.matrix_type == "f32" ? GGML_TYPE_F32 : o.matrix_type == "q8_0" ? GGML_TYPE_Q8_0 : GGML_TYPE_F16;
  Rng rng{o.seed};
  for (auto& s : specs) {
    if (s.name == o.drop_tensor) continue;
    std::vector<float> v(size_t(s.ne0 * s.ne1 * s.ne2));
    Fill(s, o, rng, v.data(), int64_t(v.size()));
    if (s.name == o.perturb_tensor && o.perturb_scale == 0) v[0] += 0.5f;
    if (s.name == o.perturb_tensor && o.perturb_scale != 0)
      for (auto& x : v) x *= 1.0f + o.perturb_scale;
    ggml_type t = s.matrix ? mtype : GGML_TYPE_F32;
    ggml_tensor* tensor = s.ne2 > 1    ? ggml_new_tensor_3d(ctx, t, s.ne0, s.ne1, s.ne2)
                          : s.ne1 == 1 ? ggml_new_tensor_1d(ctx, t, s.ne0)
                                       : ggml_new_tensor_2d(ctx, t, s.ne0, s.ne1);
    std::string name = s.name == o.rename_from ? o.rename_to : s.name;
    ggml_set_name(tensor, name.c_str());
    if (t == GGML_TYPE_F32)
      std::memcpy(tensor->data, v.data(), v.size() * 4);
    else if (t == GGML_TYPE_F16)
      ggml_fp32_to_fp16_row(v.data(), static_cast<ggml_fp16_t*>(tensor->data), int64_t(v.size()));
    else
      ggml_quantize_chunk(t, v.data(), tensor->data, 0, s.ne1 * s.ne2, s.ne0, nullptr);
    gguf_add_tensor(g, tensor);
  }
}

}  // namespace detail

using namespace detail;

Status WriteTinyModel(const std::string& path, const TinyModelOptions& o) {
  Vocab vocab = MakeVocab();
  gguf_context* g = gguf_init_empty();
  std::unique_ptr<gguf_context, void (*)(gguf_context*)> gguard(g, gguf_free);
  SetMetadata(g, o, vocab);
  const std::vector<Spec> specs = TensorSpecs(o, int(vocab.tokens.size()));
  size_t bytes = 0;
  for (auto& s : specs) bytes += size_t(s.ne0 * s.ne1 * s.ne2) * 4 + 1024;
  ggml_init_params ip = {bytes + (1 << 20), nullptr, false};
  ggml_context* ctx = ggml_init(ip);
  std::unique_ptr<ggml_context, void (*)(ggml_context*)> cguard(ctx, ggml_free);
  AddTensors(g, ctx, specs, o);
  // A per-process temporary name: parallel test processes write the same fixture at once.
  std::string tmp = path + ".tmp." + std::to_string(::getpid());
  if (!gguf_write_to_file(g, tmp.c_str(), false)) return Status::Error(path + ": cannot write the tiny model");
  std::filesystem::rename(tmp, path);
  return Status::Ok();
}

std::string TempPath(const std::string& name) {
  auto dir = std::filesystem::temp_directory_path() / "flipscope-tests";
  std::filesystem::create_directories(dir);
  return (dir / name).string();
}

std::string DefaultTinyModel() {
  static const std::string path = [] {
    std::string p = TempPath("tiny-default.gguf");
    if (Status st = WriteTinyModel(p); !st.ok()) {
      std::fprintf(stderr, "%s\n", st.message().c_str());
      std::abort();
    }
    return p;
  }();
  return path;
}

std::vector<int32_t> TinyTokens(int n, int mult) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) t[size_t(i)] = 5 + (i * mult) % 290;
  return t;
}

namespace {
std::string CachedModel(const char* file) {
  const char* home = std::getenv("HOME");
  std::string p = std::string(home ? home : "/root") + "/.cache/flipscope/models/" + file;
  return std::filesystem::exists(p) ? p : "";
}
}  // namespace

std::string SmolLM2Path() { return CachedModel("SmolLM2-135M-Instruct.Q4_1.gguf"); }
std::string Gemma3Path() { return CachedModel("gemma-3-270m-q4_k_m.gguf"); }

}  // namespace flipscope::fixtures
