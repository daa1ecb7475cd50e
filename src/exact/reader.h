// The exact engine's GGUF reader for loading: hyperparameters by key, tensors checked for shape
// and dequantized once (the check), weights left in the file. Internal to the exact engine.
#pragma once

#include <fmt/format.h>
#include <gguf.h>

#include <set>
#include <string>
#include <vector>

#include "exact/internal.h"

namespace flipscope::exact {

// One GGUF being loaded: its keys under `arch.`, its tensors, and the names read so far (`used`:
// a tensor never read is a graph feature the engine does not implement).
struct Reader {
  const std::string& path;
  gguf_context* g;
  ggml_context* meta;
  const uint8_t* data;  // start of the tensor data section
  std::string arch;
  std::set<std::string> used;
  DequantTallies* tally;
  int threads = 1;  // the dequantization check's

  int64_t Key(const std::string& k) const { return gguf_find_key(g, (arch + "." + k).c_str()); }
  // An integer hyperparameter; def < 0 makes it required.
  Result<int64_t> Int(const std::string& k, int64_t def = -1) const {
    int64_t id = Key(k);
    if (id < 0) {
      if (def < 0) return Status::Error(fmt::format("{}: missing key {}.{}", path, arch, k));
      return def;
    }
    switch (gguf_get_kv_type(g, id)) {
      case GGUF_TYPE_UINT32:
        return int64_t(gguf_get_val_u32(g, id));
      case GGUF_TYPE_INT32:
        return int64_t(gguf_get_val_i32(g, id));
      case GGUF_TYPE_UINT64:
        return int64_t(gguf_get_val_u64(g, id));
      default:
        return Status::Error(
            fmt::format("{}: key {}.{} is not a single integer (per-layer values are not supported)", path, arch, k));
    }
  }
  double Float(const std::string& k, double def) const {
    int64_t id = Key(k);
    if (id < 0) return def;
    return gguf_get_kv_type(g, id) == GGUF_TYPE_FLOAT64 ? gguf_get_val_f64(g, id) : double(gguf_get_val_f32(g, id));
  }

  // Tensor `name` dequantized, after checking its shape {ne0, ne1, ne2} (ne1 = 1 for vectors,
  // ne2 > 1 for experts).
  Result<std::vector<float>> Floats(const std::string& name, int64_t ne0, int64_t ne1, int64_t ne2 = 1) {
    ggml_tensor* t = ggml_get_tensor(meta, name.c_str());
    if (!t) return Status::Error(fmt::format("{}: missing tensor {}", path, name));
    if (t->ne[0] != ne0 || t->ne[1] != ne1 || t->ne[2] != ne2 || t->ne[3] != 1)
      return Status::Error(fmt::format("{}: tensor {} has shape [{}, {}, {}, {}], expected [{}, {}, {}]", path, name,
                                       t->ne[0], t->ne[1], t->ne[2], t->ne[3], ne0, ne1, ne2));
    used.insert(name);
    int64_t id = gguf_find_tensor(g, name.c_str());
    std::vector<float> out;
    Status st = DequantizeChecked(t->type, data + gguf_get_tensor_offset(g, id), ne0 * ne1 * ne2, out, *tally, threads);
    if (!st.ok()) return st.Prefixed(path + ": tensor " + name);
    return out;
  }
  Result<std::vector<double>> Vec(const std::string& name, int64_t n) {
    FS_ASSIGN_OR_RETURN(auto f, Floats(name, n, 1));
    return std::vector<double>(f.begin(), f.end());
  }
  // The weight of a linear map from `in` to `out` features: ggml's [ne0 = in, ne1 = out], left
  // in the file's encoding (dequantized once here for the check, then dropped).
  // n > 1: n such maps (experts) stacked, as one Weight of n * out rows.
  Result<Weight> Mat(const std::string& name, int64_t in, int64_t out, int64_t n = 1) {
    FS_RETURN_IF_ERROR(Floats(name, in, out, n).status());
    return InFile(name, out * n, in);
  }
  // Tensor `name` where the file holds it, as `rows` rows of `cols`; its shape was checked by Floats.
  Weight InFile(const std::string& name, int64_t rows, int64_t cols) const {
    ggml_tensor* t = ggml_get_tensor(meta, name.c_str());
    return Weight{t->type, data + gguf_get_tensor_offset(g, gguf_find_tensor(g, name.c_str())), rows, cols};
  }
  bool Has(const std::string& name) const { return ggml_get_tensor(meta, name.c_str()) != nullptr; }
  // An integer array hyperparameter (INT32, UINT32 or BOOL elements); empty when the key is absent,
  // an error when it is not such an array.
  Result<std::vector<int64_t>> Ints(const std::string& k) const {
    int64_t id = Key(k);
    if (id < 0) return std::vector<int64_t>{};
    if (gguf_get_kv_type(g, id) != GGUF_TYPE_ARRAY)
      return Status::Error(fmt::format("{}: key {}.{} is not an array", path, arch, k));
    const size_t n = gguf_get_arr_n(g, id);
    const void* d = gguf_get_arr_data(g, id);
    std::vector<int64_t> out(n);
    switch (gguf_get_arr_type(g, id)) {
      case GGUF_TYPE_INT32:
        for (size_t i = 0; i < n; ++i) out[i] = static_cast<const int32_t*>(d)[i];
        return out;
      case GGUF_TYPE_UINT32:
        for (size_t i = 0; i < n; ++i) out[i] = static_cast<const uint32_t*>(d)[i];
        return out;
      case GGUF_TYPE_BOOL:
        for (size_t i = 0; i < n; ++i) out[i] = static_cast<const int8_t*>(d)[i] != 0;
        return out;
      default:
        return Status::Error(fmt::format("{}: key {}.{} is not an array of integers", path, arch, k));
    }
  }
};

}  // namespace flipscope::exact
