// Versions, backends, devices and the CPU kernel path of the linked llama.cpp / ggml.
#include <fmt/format.h>
#include <ggml-backend.h>
#include <ggml.h>
#include <llama.h>

#include <regex>

#include "engine/engine.h"

#ifndef FLIPSCOPE_LLAMA_BUILD_OPTIONS
#define FLIPSCOPE_LLAMA_BUILD_OPTIONS "unknown"
#endif
#ifndef FLIPSCOPE_LLAMA_RELEASE
#define FLIPSCOPE_LLAMA_RELEASE ""
#endif
#ifndef FLIPSCOPE_LLAMA_COMMIT
#define FLIPSCOPE_LLAMA_COMMIT "unknown"
#endif

namespace flipscope {

std::vector<std::string> Backends() {
  EnsureLlamaInit();
  std::vector<std::string> out;
  for (size_t i = 0; i < ggml_backend_reg_count(); ++i)
    out.emplace_back(ggml_backend_reg_name(ggml_backend_reg_get(i)));
  return out;
}

std::vector<EngineDevice> Devices() {
  EnsureLlamaInit();
  std::vector<EngineDevice> out;
  for (size_t i = 0; i < ggml_backend_dev_count(); ++i) {
    ggml_backend_dev_t d = ggml_backend_dev_get(i);
    size_t free = 0, total = 0;
    ggml_backend_dev_memory(d, &free, &total);
    out.push_back({ggml_backend_dev_name(d), ggml_backend_dev_description(d), double(total)});
  }
  return out;
}

namespace {
// The CPU backend's feature list (ggml_backend_get_features): what ggml was compiled to use, as
// checked against this CPU at start-up.
std::vector<std::string> CpuFeatures() {
  EnsureLlamaInit();
  std::vector<std::string> out;
  ggml_backend_reg_t reg = ggml_backend_reg_by_name("CPU");
  if (!reg) return out;
  using GetFeatures = ggml_backend_feature* (*)(ggml_backend_reg_t);
  auto get = reinterpret_cast<GetFeatures>(ggml_backend_reg_get_proc_address(reg, "ggml_backend_get_features"));
  if (!get) return out;
  for (ggml_backend_feature* f = get(reg); f && f->name; ++f)
    out.push_back(std::string(f->value) == "1" ? f->name : fmt::format("{}={}", f->name, f->value));
  return out;
}
}  // namespace

WeightBufferSizes WeightBuffers(const std::string& load_log) {
  static const std::regex line(R"(([A-Za-z0-9_]+) model buffer size\s*=\s*([0-9.]+) MiB)");
  WeightBufferSizes out;
  for (auto it = std::sregex_iterator(load_log.begin(), load_log.end(), line); it != std::sregex_iterator(); ++it)
    out[(*it)[1].str()] = std::stod((*it)[2].str());
  return out;
}

std::vector<std::string> ExtraBufferTypes(const WeightBufferSizes& weight_buffers) {
  std::vector<std::string> extra;
  for (const auto& [type, mib] : weight_buffers) {
    // CPU and CPU_Mapped are plain host memory (the ordinary kernels); a GPU device's buffer is
    // named after it. The rest are ggml's extra CPU buffer types: CPU_REPACK, AMX, KleidiAI...
    bool plain = type == "CPU" || type == "CPU_Mapped" || ggml_backend_dev_by_name(type.c_str()) != nullptr;
    if (!plain) extra.push_back(type);
  }
  return extra;
}

EngineSource LlamaSource() {
  return {*FLIPSCOPE_LLAMA_RELEASE ? fmt::format("llama-cpp-python {}", FLIPSCOPE_LLAMA_RELEASE) : "",
          FLIPSCOPE_LLAMA_COMMIT, FLIPSCOPE_LLAMA_BUILD_OPTIONS};
}

KernelPathRecord KernelPath(const WeightBufferSizes& weight_buffers) {
  KernelPathRecord k;
  k.cpu_features = CpuFeatures();
  k.llama_build = FLIPSCOPE_LLAMA_BUILD_OPTIONS;
  k.weight_buffers = weight_buffers;
  k.extra_buffer_types = ExtraBufferTypes(weight_buffers);
  std::vector<std::string> held;
  for (const auto& [type, mib] : weight_buffers) held.push_back(type);
  k.summary = fmt::format("CPU {}; weights in {}", fmt::join(k.cpu_features, " "),
                          held.empty() ? std::string("?") : fmt::format("{}", fmt::join(held, ", ")));
  return k;
}

}  // namespace flipscope
