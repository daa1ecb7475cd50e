// checkpoint: a model file's facts (`flipscope info`) and its requantization with llama.cpp.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "util/status.h"

namespace flipscope {

struct ModelInfo {
  std::string path, sha256;
  uint64_t file_size = 0;
  std::string architecture, name;
  uint64_t n_params = 0;
  int n_layer = 0;
  std::string layer_pattern;  // e.g. "5 local (SWA 512) : 1 global"; empty for uniform
  int64_t n_ctx_train = 0;
  int n_embd = 0, n_head = 0, n_head_kv = 0, head_dim_k = 0, head_dim_v = 0;
  int64_t n_vocab = 0;
  std::string tokenizer, pre_tokenizer;
  std::map<std::string, int> quant_types;  // ggml type name -> tensor count
  std::string file_type;                   // general.file_type as llama.cpp names it
  int32_t bos = -1, eos = -1, eot = -1;
  bool add_bos = false;
  bool has_chat_template = false;
  std::string chat_template_sha256;
  bool template_supports_tools = false, template_supports_tool_calls = false;
  // KV-cache elements per token (K + V, all layers, full-attention layers at full context).
  int64_t kv_elements_per_token = 0;
  // Sliding-window attention: the window and how many layers use it (llama.cpp gives those
  // layers a smaller KV cache); 0 and 0 for a model without it.
  int64_t n_swa = 0;
  int n_layer_swa = 0;

  nlohmann::json ToJson() const;
  // Reads ToJson()'s object back; a missing key or a wrong type leaves the default (the facts
  // recorded in a capture's manifest by any writer, or by an older flipscope).
  static ModelInfo FromJson(const nlohmann::json& j);
  // A human-readable table.
  std::string ToText() const;
};

// Reads a GGUF file's facts; errors name the file (missing, not GGUF, truncated, corrupt).
Result<ModelInfo> ReadModelInfo(const std::string& path);

// Checks that a file is a complete GGUF (magic, version, header, tensor data within the file).
Status CheckGguf(const std::string& path);

// ---- Requantization ----------------------------------------------------------------------------

// The weight types Requantize accepts (llama.cpp's names: F32, F16, BF16, Q8_0, Q6_K, ...).
std::vector<std::string> RequantizeTypes();
// Writes `in`'s weights converted to `type` by llama.cpp's quantizer to `out`, atomically
// (a temporary file, then rename); errors name the input file and llama.cpp's reason, or `out`
// when its folder does not exist (never the temporary name).
Status Requantize(const std::string& in, const std::string& type, const std::string& out);

}  // namespace flipscope
