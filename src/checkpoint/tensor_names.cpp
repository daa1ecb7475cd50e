// Tensor naming: Hugging Face names to llama.cpp's GGUF names (the convention of
// convert_hf_to_gguf.py / gguf-py's tensor_mapping.py), and tensor components.
#include <cctype>
#include <span>
#include <string_view>
#include <utility>

#include "checkpoint/tensors.h"

namespace flipscope {
namespace {

bool StartsWith(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }
bool Contains(std::string_view s, std::string_view p) { return s.find(p) != std::string_view::npos; }

using NamePair = std::pair<std::string_view, std::string_view>;

// Per-layer modules: Hugging Face suffix (after model.layers.N.) -> GGUF suffix (after blk.N.).
constexpr NamePair kLayerCommon[] = {
    {"self_attn.q_proj", "attn_q"},
    {"self_attn.k_proj", "attn_k"},
    {"self_attn.v_proj", "attn_v"},
    {"self_attn.o_proj", "attn_output"},
    {"self_attn.q_norm", "attn_q_norm"},
    {"self_attn.k_norm", "attn_k_norm"},
    {"input_layernorm", "attn_norm"},
    {"mlp.gate_proj", "ffn_gate"},
    {"mlp.up_proj", "ffn_up"},
    {"mlp.down_proj", "ffn_down"},
    {"mlp.gate", "ffn_gate_inp"},  // MoE router
    {"mlp.shared_expert.gate_proj", "ffn_gate_shexp"},
    {"mlp.shared_expert.up_proj", "ffn_up_shexp"},
    {"mlp.shared_expert.down_proj", "ffn_down_shexp"},
    {"mlp.shared_experts.gate_proj", "ffn_gate_shexp"},
    {"mlp.shared_experts.up_proj", "ffn_up_shexp"},
    {"mlp.shared_experts.down_proj", "ffn_down_shexp"},
    {"mlp.shared_expert_gate", "ffn_gate_inp_shexp"},
};
// Llama-style blocks have one norm before the MLP.
constexpr NamePair kLayerLlama[] = {{"post_attention_layernorm", "ffn_norm"}};
// Gemma 2/3 wrap both sublayers in pre- and post-norms.
constexpr NamePair kLayerGemma[] = {
    {"post_attention_layernorm", "post_attention_norm"},
    {"pre_feedforward_layernorm", "ffn_norm"},
    {"post_feedforward_layernorm", "post_ffw_norm"},
};
constexpr NamePair kTopLevel[] = {
    {"model.embed_tokens", "token_embd"},
    {"model.norm", "output_norm"},
    {"lm_head", "output"},
};

std::string_view Lookup(std::span<const NamePair> table, std::string_view key) {
  for (const auto& [from, to] : table)
    if (from == key) return to;
  return {};
}

// Multimodal checkpoints nest the language model one level deeper.
std::string StripLanguageModelPrefix(const std::string& name) {
  for (std::string_view p : {"model.language_model.", "language_model.model."})
    if (StartsWith(name, p)) return "model." + name.substr(p.size());
  if (StartsWith(name, "language_model.")) return name.substr(15);
  return name;
}

}  // namespace

std::string GgufNameOf(const std::string& hf_name, const std::string& arch) {
  const std::string name = StripLanguageModelPrefix(hf_name);
  size_t dot = name.rfind('.');
  if (dot == std::string::npos) return "";
  const std::string_view stem(name.data(), dot), kind(name.data() + dot);  // kind: ".weight" / ".bias"
  if (auto top = Lookup(kTopLevel, stem); !top.empty()) return std::string(top) + std::string(kind);
  constexpr std::string_view layers = "model.layers.";
  if (!StartsWith(stem, layers)) return "";
  size_t i = layers.size(), j = i;
  while (j < stem.size() && std::isdigit(static_cast<unsigned char>(stem[j]))) ++j;
  if (j == i || j >= stem.size() || stem[j] != '.') return "";
  const std::string_view layer = stem.substr(i, j - i), module = stem.substr(j + 1);
  const bool gemma = StartsWith(arch, "gemma2") || StartsWith(arch, "gemma3");
  std::string_view gguf = Lookup(kLayerCommon, module);
  if (gguf.empty()) gguf = gemma ? Lookup(kLayerGemma, module) : Lookup(kLayerLlama, module);
  if (gguf.empty()) return "";  // e.g. per-expert tensors: GGUF stacks them into one *_exps tensor
  return "blk." + std::string(layer) + "." + std::string(gguf) + std::string(kind);
}

std::string TensorComponent(const std::string& name) {
  const std::string_view n = name;
  if (StartsWith(n, "v.") || StartsWith(n, "mm.") || Contains(n, "vision") || Contains(n, "visual") ||
      Contains(n, "multi_modal_projector") || Contains(n, "mmproj"))
    return "vision";
  if (Contains(n, "nextn") || Contains(n, "mtp")) return "MTP";
  if (Contains(n, "token_embd") || Contains(n, "embed_tokens") || Contains(n, "wte.") || Contains(n, "word_embeddings"))
    return "token embedding";
  if (n == "output.weight" || n == "output.bias" || Contains(n, "lm_head")) return "output head";
  if (Contains(n, "norm") || Contains(n, "ln_")) return "norms";
  if (Contains(n, "ffn") || Contains(n, "mlp") || Contains(n, "expert")) return "MLP / experts";
  if (Contains(n, "attn") || Contains(n, "attention")) return "attention";
  return "other";
}

}  // namespace flipscope
