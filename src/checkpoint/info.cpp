// `info`: a model file's facts, read with ggml's GGUF reader and llama.cpp's vocabulary loader.
#include <chat.h>
#include <fmt/format.h>
#include <ggml.h>
#include <gguf.h>
#include <llama.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>

#include "checkpoint/model_info.h"
#include "runtime/runtime.h"
#include "util/util.h"

namespace flipscope {
namespace {

using GgufPtr = std::unique_ptr<gguf_context, void (*)(gguf_context*)>;
using GgmlPtr = std::unique_ptr<ggml_context, void (*)(ggml_context*)>;

// An integer metadata value of any integer type; def when absent (arrays: the first element).
int64_t GetInt(const gguf_context* g, const std::string& key, int64_t def = 0) {
  int64_t id = gguf_find_key(g, key.c_str());
  if (id < 0) return def;
  gguf_type t = gguf_get_kv_type(g, id);
  if (t == GGUF_TYPE_ARRAY) {
    if (gguf_get_arr_n(g, id) == 0) return def;
    gguf_type at = gguf_get_arr_type(g, id);
    const void* d = gguf_get_arr_data(g, id);
    if (at == GGUF_TYPE_INT32) return static_cast<const int32_t*>(d)[0];
    if (at == GGUF_TYPE_UINT32) return static_cast<const uint32_t*>(d)[0];
    return def;
  }
  switch (t) {
    case GGUF_TYPE_UINT8:
      return gguf_get_val_u8(g, id);
    case GGUF_TYPE_INT8:
      return gguf_get_val_i8(g, id);
    case GGUF_TYPE_UINT16:
      return gguf_get_val_u16(g, id);
    case GGUF_TYPE_INT16:
      return gguf_get_val_i16(g, id);
    case GGUF_TYPE_UINT32:
      return gguf_get_val_u32(g, id);
    case GGUF_TYPE_INT32:
      return gguf_get_val_i32(g, id);
    case GGUF_TYPE_UINT64:
      return int64_t(gguf_get_val_u64(g, id));
    case GGUF_TYPE_INT64:
      return gguf_get_val_i64(g, id);
    case GGUF_TYPE_BOOL:
      return gguf_get_val_bool(g, id);
    default:
      return def;
  }
}

std::string GetStr(const gguf_context* g, const std::string& key) {
  int64_t id = gguf_find_key(g, key.c_str());
  if (id < 0 || gguf_get_kv_type(g, id) != GGUF_TYPE_STRING) return "";
  return gguf_get_val_str(g, id);
}

// The period of a sliding-window pattern (period - 1 local layers, then 1 global), which llama.cpp
// fixes per architecture where the file does not say; 0 without a window.
int64_t SwaPeriod(const gguf_context* g, const std::string& arch) {
  int64_t period = GetInt(g, arch + ".attention.sliding_window_pattern", 0);
  if (period <= 0) {
    if (arch == "gemma3")
      period = 6;
    else if (arch == "gemma2")
      period = 2;
    else if (arch == "cohere2")
      period = 4;
  }
  return period;
}

// Layer kinds of sliding-window architectures whose pattern llama.cpp fixes per architecture.
std::string LayerPattern(const gguf_context* g, const std::string& arch, int n_layer, bool hybrid) {
  if (hybrid) return "hybrid: recurrent and attention layers";
  int64_t swa = GetInt(g, arch + ".attention.sliding_window", 0);
  if (swa <= 0) return "";
  int64_t period = SwaPeriod(g, arch);
  if (period <= 1) return fmt::format("sliding window {} on every layer", swa);
  int64_t global = n_layer / period;
  return fmt::format("{} local (SWA {}) : 1 global, repeating; {} global of {} layers", period - 1, swa, global,
                     n_layer);
}

// How many layers use the sliding window (llama.cpp's set_swa_pattern: the last of each period is
// global); 0 for a hybrid model, whose recurrent layers this does not describe.
int SwaLayers(const gguf_context* g, const std::string& arch, int n_layer, bool hybrid) {
  if (hybrid || GetInt(g, arch + ".attention.sliding_window", 0) <= 0) return 0;
  int64_t period = SwaPeriod(g, arch);
  return period <= 1 ? n_layer : n_layer - int(n_layer / period);
}

}  // namespace

Status CheckGguf(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return Status::Error(path + ": no such file");
  if (std::filesystem::is_directory(path, ec)) return Status::Error(path + ": is a directory, not a GGUF file");
  uint64_t size = std::filesystem::file_size(path, ec);
  FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) return Status::Error(path + ": cannot open for reading");
  char magic[4] = {0};
  size_t got = std::fread(magic, 1, 4, f);
  std::fclose(f);
  if (got < 4 || std::memcmp(magic, "GGUF", 4) != 0) return Status::Error(path + ": not a GGUF file (bad magic)");
  gguf_init_params ip = {true, nullptr};
  GgufPtr g(gguf_init_from_file(path.c_str(), ip), gguf_free);
  if (!g) return Status::Error(path + ": corrupt or truncated GGUF header");
  size_t data = gguf_get_data_offset(g.get());
  for (int64_t i = 0; i < gguf_get_n_tensors(g.get()); ++i) {
    uint64_t end = data + gguf_get_tensor_offset(g.get(), i) + gguf_get_tensor_size(g.get(), i);
    if (end > size)
      return Status::Error(fmt::format("{}: truncated: tensor '{}' ends at byte {}, the file has {}", path,
                                       gguf_get_tensor_name(g.get(), i), end, size));
  }
  return Status::Ok();
}

namespace {

// The facts of m read from the GGUF's metadata g and tensors (meta): architecture, shapes, the
// tokenizer's names, the file and quantization types, the parameter count.
void ReadGgufFacts(const gguf_context* g, ggml_context* meta, ModelInfo& m) {
  m.architecture = GetStr(g, "general.architecture");
  m.name = GetStr(g, "general.name");
  const std::string& a = m.architecture;
  m.n_layer = int(GetInt(g, a + ".block_count"));
  m.n_ctx_train = GetInt(g, a + ".context_length");
  m.n_embd = int(GetInt(g, a + ".embedding_length"));
  m.n_head = int(GetInt(g, a + ".attention.head_count"));
  m.n_head_kv = int(GetInt(g, a + ".attention.head_count_kv", m.n_head));
  int64_t head_dim = m.n_head > 0 ? m.n_embd / m.n_head : 0;
  m.head_dim_k = int(GetInt(g, a + ".attention.key_length", head_dim));
  m.head_dim_v = int(GetInt(g, a + ".attention.value_length", head_dim));
  m.kv_elements_per_token = int64_t(m.n_layer) * m.n_head_kv * (m.head_dim_k + m.head_dim_v);
  m.tokenizer = GetStr(g, "tokenizer.ggml.model");
  m.pre_tokenizer = GetStr(g, "tokenizer.ggml.pre");
  int64_t ft = GetInt(g, "general.file_type", -1);
  if (ft >= 0) {
    char buf[128];
    // llama.cpp names file types through llama_model_ftype_name; keep the number when unknown.
    std::snprintf(buf, sizeof(buf), "%lld", static_cast<long long>(ft));
    m.file_type = buf;
  }
  for (int64_t i = 0; i < gguf_get_n_tensors(g); ++i) m.quant_types[ggml_type_name(gguf_get_tensor_type(g, i))]++;
  for (ggml_tensor* t = ggml_get_first_tensor(meta); t; t = ggml_get_next_tensor(meta, t))
    m.n_params += uint64_t(ggml_nelements(t));
}

// The facts of m that llama.cpp itself reads from the model at path (vocabulary only): special
// tokens, the layer pattern and sliding windows, the embedded chat template and what it renders.
Status ReadLlamaFacts(const std::string& path, const gguf_context* g, ModelInfo& m) {
  llama_model_params mp = llama_model_default_params();
  mp.vocab_only = true;
  std::unique_ptr<llama_model, void (*)(llama_model*)> model(llama_model_load_from_file(path.c_str(), mp),
                                                             llama_model_free);
  if (!model) {
    std::string why = TakeLlamaLogTail();
    return Status::Error(path + ": llama.cpp could not read the vocabulary" + (why.empty() ? "" : " (" + why + ")"));
  }
  const std::string& a = m.architecture;
  const llama_vocab* v = llama_model_get_vocab(model.get());
  m.n_vocab = llama_vocab_n_tokens(v);
  m.bos = llama_vocab_bos(v);
  m.eos = llama_vocab_eos(v);
  m.eot = llama_vocab_eot(v);
  m.add_bos = llama_vocab_get_add_bos(v);
  m.layer_pattern = LayerPattern(g, a, m.n_layer, llama_model_is_hybrid(model.get()));
  m.n_layer_swa = SwaLayers(g, a, m.n_layer, llama_model_is_hybrid(model.get()));
  m.n_swa = m.n_layer_swa > 0 ? GetInt(g, a + ".attention.sliding_window", 0) : 0;
  const char* tmpl = llama_model_chat_template(model.get(), nullptr);
  if (!tmpl) return Status::Ok();
  m.has_chat_template = true;
  m.chat_template_sha256 = Sha256Hex(tmpl);
  try {
    auto tmpls = common_chat_templates_init(model.get(), "");
    auto caps = common_chat_templates_get_caps(tmpls.get());
    m.template_supports_tools = caps["supports_tools"];
    m.template_supports_tool_calls = caps["supports_tool_calls"];
  } catch (const std::exception& e) {
    return Status::Error(path + ": the embedded chat template does not parse: " + e.what());
  }
  return Status::Ok();
}

}  // namespace

Result<ModelInfo> ReadModelInfo(const std::string& path) {
  EnsureLlamaInit();
  FS_RETURN_IF_ERROR(CheckGguf(path));
  ggml_context* meta = nullptr;
  gguf_init_params ip = {true, &meta};
  GgufPtr g(gguf_init_from_file(path.c_str(), ip), gguf_free);
  if (!g) return Status::Error(path + ": corrupt GGUF header");
  GgmlPtr mg(meta, ggml_free);

  ModelInfo m;
  m.path = path;
  m.file_size = std::filesystem::file_size(path);
  FS_ASSIGN_OR_RETURN(m.sha256, Sha256File(path));
  ReadGgufFacts(g.get(), meta, m);
  // The vocabulary and chat template as llama.cpp itself reads them.
  FS_RETURN_IF_ERROR(ReadLlamaFacts(path, g.get(), m));
  return m;
}

}  // namespace flipscope
