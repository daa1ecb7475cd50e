// Versions, backends and devices of the linked llama.cpp / ggml.
#include <llama.h>
#include <ggml.h>
#include <ggml-backend.h>

#include <fmt/format.h>

#include "engine/engine.h"

// Defined in llama.cpp's common library (build-info.cpp), set from the build's commit.
extern int LLAMA_BUILD_NUMBER;
extern char const* LLAMA_COMMIT;

namespace flipscope {

std::string LlamaVersion() { return fmt::format("b{}-{}", LLAMA_BUILD_NUMBER, LLAMA_COMMIT); }

std::string GgmlVersion() { return fmt::format("{} ({})", ggml_version(), ggml_commit()); }

std::vector<std::string> Backends() {
  EnsureLlamaInit();
  std::vector<std::string> out;
  for (size_t i = 0; i < ggml_backend_reg_count(); ++i) out.emplace_back(ggml_backend_reg_name(ggml_backend_reg_get(i)));
  return out;
}

nlohmann::json Devices() {
  EnsureLlamaInit();
  nlohmann::json out = nlohmann::json::array();
  for (size_t i = 0; i < ggml_backend_dev_count(); ++i) {
    ggml_backend_dev_t d = ggml_backend_dev_get(i);
    size_t free = 0, total = 0;
    ggml_backend_dev_memory(d, &free, &total);
    out.push_back({{"name", ggml_backend_dev_name(d)},
                   {"description", ggml_backend_dev_description(d)},
                   {"memory_total", total}});
  }
  return out;
}

}  // namespace flipscope
