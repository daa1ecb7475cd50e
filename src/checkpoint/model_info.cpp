// ModelInfo's JSON and text: no llama.cpp library (the results model reads a run's model facts).
#include "checkpoint/model_info.h"

#include <fmt/format.h>

namespace flipscope {

nlohmann::json ModelInfo::ToJson() const {
  return {{"path", path},
          {"sha256", sha256},
          {"file_size", file_size},
          {"architecture", architecture},
          {"name", name},
          {"n_params", n_params},
          {"n_layer", n_layer},
          {"layer_pattern", layer_pattern},
          {"n_ctx_train", n_ctx_train},
          {"n_embd", n_embd},
          {"n_head", n_head},
          {"n_head_kv", n_head_kv},
          {"head_dim_k", head_dim_k},
          {"head_dim_v", head_dim_v},
          {"kv_elements_per_token", kv_elements_per_token},
          {"sliding_window", n_swa},
          {"sliding_window_layers", n_layer_swa},
          {"n_vocab", n_vocab},
          {"tokenizer", tokenizer},
          {"pre_tokenizer", pre_tokenizer},
          {"file_type", file_type},
          {"quant_types", quant_types},
          {"bos", bos},
          {"eos", eos},
          {"eot", eot},
          {"add_bos", add_bos},
          {"chat_template", has_chat_template},
          {"chat_template_sha256", chat_template_sha256},
          {"template_supports_tools", template_supports_tools},
          {"template_supports_tool_calls", template_supports_tool_calls}};
}

namespace {
// j[key] into *out when j holds it with out's JSON type; else *out stays as it is.
template <typename T>
void ReadField(const nlohmann::json& j, const char* key, T* out) {
  auto it = j.find(key);
  if (it == j.end()) return;
  try {
    *out = it->get<T>();
  } catch (const nlohmann::json::exception&) {
    // another type: the default stands
  }
}
}  // namespace

ModelInfo ModelInfo::FromJson(const nlohmann::json& j) {
  ModelInfo m;
  if (!j.is_object()) return m;
  ReadField(j, "path", &m.path);
  ReadField(j, "sha256", &m.sha256);
  ReadField(j, "file_size", &m.file_size);
  ReadField(j, "architecture", &m.architecture);
  ReadField(j, "name", &m.name);
  ReadField(j, "n_params", &m.n_params);
  ReadField(j, "n_layer", &m.n_layer);
  ReadField(j, "layer_pattern", &m.layer_pattern);
  ReadField(j, "n_ctx_train", &m.n_ctx_train);
  ReadField(j, "n_embd", &m.n_embd);
  ReadField(j, "n_head", &m.n_head);
  ReadField(j, "n_head_kv", &m.n_head_kv);
  ReadField(j, "head_dim_k", &m.head_dim_k);
  ReadField(j, "head_dim_v", &m.head_dim_v);
  ReadField(j, "kv_elements_per_token", &m.kv_elements_per_token);
  ReadField(j, "sliding_window", &m.n_swa);
  ReadField(j, "sliding_window_layers", &m.n_layer_swa);
  ReadField(j, "n_vocab", &m.n_vocab);
  ReadField(j, "tokenizer", &m.tokenizer);
  ReadField(j, "pre_tokenizer", &m.pre_tokenizer);
  ReadField(j, "file_type", &m.file_type);
  ReadField(j, "quant_types", &m.quant_types);
  ReadField(j, "bos", &m.bos);
  ReadField(j, "eos", &m.eos);
  ReadField(j, "eot", &m.eot);
  ReadField(j, "add_bos", &m.add_bos);
  ReadField(j, "chat_template", &m.has_chat_template);
  ReadField(j, "chat_template_sha256", &m.chat_template_sha256);
  ReadField(j, "template_supports_tools", &m.template_supports_tools);
  ReadField(j, "template_supports_tool_calls", &m.template_supports_tool_calls);
  return m;
}

std::string ModelInfo::ToText() const {
  std::string q;
  for (auto& [t, n] : quant_types) q += fmt::format("{}{} x{}", q.empty() ? "" : ", ", t, n);
  auto tok = [](int32_t id) { return id < 0 ? std::string("none") : std::to_string(id); };
  std::string s;
  s += fmt::format("{:<22}{}\n", "file", path);
  s += fmt::format("{:<22}{}\n", "sha256", sha256);
  s += fmt::format("{:<22}{} ({})\n", "architecture", architecture, name);
  s += fmt::format("{:<22}{} ({:.1f} M)\n", "parameters", n_params, double(n_params) / 1e6);
  s += fmt::format("{:<22}{}{}\n", "layers", n_layer, layer_pattern.empty() ? "" : " — " + layer_pattern);
  s += fmt::format("{:<22}{}\n", "training context", n_ctx_train);
  s += fmt::format("{:<22}{} heads, {} KV heads, head dim {}/{}\n", "attention", n_head, n_head_kv, head_dim_k,
                   head_dim_v);
  s += fmt::format("{:<22}{} ({}, pre-tokenizer {})\n", "vocabulary", n_vocab, tokenizer,
                   pre_tokenizer.empty() ? "none" : pre_tokenizer);
  s += fmt::format("{:<22}{}\n", "weight types", q);
  s += fmt::format("{:<22}BOS {}  EOS {}  EOT {}  add_bos {}\n", "special tokens", tok(bos), tok(eos), tok(eot),
                   add_bos);
  if (has_chat_template)
    s += fmt::format("{:<22}embedded, sha256 {}; tools {}, tool calls {}\n", "chat template",
                     chat_template_sha256.substr(0, 16), template_supports_tools ? "yes" : "no",
                     template_supports_tool_calls ? "yes" : "no");
  else
    s += fmt::format("{:<22}none embedded\n", "chat template");
  return s;
}

}  // namespace flipscope
