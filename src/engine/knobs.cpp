// Knobs: JSON round trip, validation and llama.cpp flags.
#include <cmath>

#include <fmt/format.h>

#include "engine/engine.h"

namespace flipscope {

const std::vector<std::string>& KvCacheTypes() {
  static const std::vector<std::string> types = {"f32", "f16", "bf16", "q8_0", "q4_0",
                                                 "q4_1", "iq4_nl", "q5_0", "q5_1"};
  return types;
}

double KvTypeBytesPerElement(const std::string& t) {
  // Block sizes of ggml's types: bytes per block / elements per block.
  if (t == "f32") return 4;
  if (t == "f16" || t == "bf16") return 2;
  if (t == "q8_0") return 34.0 / 32;
  if (t == "q4_0") return 18.0 / 32;
  if (t == "q4_1") return 20.0 / 32;
  if (t == "iq4_nl") return 18.0 / 32;
  if (t == "q5_0") return 22.0 / 32;
  if (t == "q5_1") return 24.0 / 32;
  return std::nan("");
}

nlohmann::json Knobs::ToJson() const {
  return {{"flash_attn", flash_attn},     {"cache_type_k", cache_type_k},
          {"cache_type_v", cache_type_v}, {"ctx_size", n_ctx},
          {"batch_size", n_batch},        {"ubatch_size", n_ubatch},
          {"threads", n_threads},         {"n_gpu_layers", n_gpu_layers},
          {"split_mode", split_mode},     {"tensor_split", tensor_split},
          {"device", devices}};
}

Result<Knobs> Knobs::FromJson(const nlohmann::json& j) {
  Knobs k;
  if (!j.is_object()) return Status::Error("knobs must be an object");
  try {
    for (auto& [key, v] : j.items()) {
      if (key == "flash_attn") k.flash_attn = v.get<std::string>();
      else if (key == "cache_type_k") k.cache_type_k = v.get<std::string>();
      else if (key == "cache_type_v") k.cache_type_v = v.get<std::string>();
      else if (key == "ctx_size") k.n_ctx = v.get<int>();
      else if (key == "batch_size") k.n_batch = v.get<int>();
      else if (key == "ubatch_size") k.n_ubatch = v.get<int>();
      else if (key == "threads") k.n_threads = v.get<int>();
      else if (key == "n_gpu_layers") k.n_gpu_layers = v.get<int>();
      else if (key == "split_mode") k.split_mode = v.get<std::string>();
      else if (key == "tensor_split") k.tensor_split = v.get<std::vector<float>>();
      else if (key == "device") k.devices = v.get<std::string>();
      else return Status::Error("unknown knob '" + key + "'");
    }
  } catch (const nlohmann::json::exception& e) {
    return Status::Error(std::string("knob of the wrong type: ") + e.what());
  }
  return k;
}

Status Knobs::Validate() const {
  if (flash_attn != "on" && flash_attn != "off" && flash_attn != "auto")
    return Status::Error("-fa must be on, off or auto, not '" + flash_attn + "'");
  for (const auto* t : {&cache_type_k, &cache_type_v}) {
    bool known = false;
    for (const auto& name : KvCacheTypes()) known |= (name == *t);
    if (!known)
      return Status::Error(fmt::format("unknown KV cache type '{}' (one of {})", *t,
                                       fmt::join(KvCacheTypes(), ", ")));
  }
  bool v_quantized = cache_type_v != "f32" && cache_type_v != "f16" && cache_type_v != "bf16";
  if (v_quantized && flash_attn == "off")
    return Status::Error("a quantized V cache (-ctv " + cache_type_v +
                         ") needs flash attention; llama.cpp refuses it with -fa off");
  if (n_ctx < 0) return Status::Error("-c must be >= 0");
  if (n_batch < 1 || n_ubatch < 1) return Status::Error("-b and -ub must be >= 1");
  if (n_threads < 0) return Status::Error("-t must be >= 0");
  if (split_mode != "none" && split_mode != "layer" && split_mode != "row" && split_mode != "tensor")
    return Status::Error("-sm must be none, layer, row or tensor, not '" + split_mode + "'");
  return Status::Ok();
}

std::string Knobs::ToFlags() const {
  std::string s = fmt::format("-fa {} -ctk {} -ctv {} -b {} -ub {}", flash_attn, cache_type_k,
                              cache_type_v, n_batch, n_ubatch);
  if (n_ctx > 0) s += fmt::format(" -c {}", n_ctx);
  if (n_threads > 0) s += fmt::format(" -t {}", n_threads);
  if (n_gpu_layers >= 0) s += fmt::format(" -ngl {}", n_gpu_layers);
  if (split_mode != "layer") s += " -sm " + split_mode;
  if (!tensor_split.empty()) s += fmt::format(" -ts {}", fmt::join(tensor_split, ","));
  if (!devices.empty()) s += " -dev " + devices;
  return s;
}

int32_t ArgmaxLowest(std::span<const float> row) {
  int32_t best = 0;
  for (size_t i = 1; i < row.size(); ++i)
    if (row[i] > row[size_t(best)]) best = int32_t(i);  // strict: ties keep the lowest id
  return best;
}

}  // namespace flipscope
