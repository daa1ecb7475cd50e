// The exact engine's forward pass on a CUDA device (cuda_pass.cpp; device_off.cpp in a build
// without CUDA). The same function as forward.cpp, computed the same way: layer after layer over
// every token, each layer's weights widened to FP64 for it, every product in FP64 (cuBLAS DGEMM),
// attention over query blocks, qwen35's DeltaNet scan and qwen3moe's routed experts in FP64.
#pragma once

#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <vector>

#include "exact/internal.h"

namespace flipscope::exact {

class DevicePass {
 public:
  virtual ~DevicePass() = default;
  // The device, its driver, the CUDA runtime, cuBLAS and the route, for the manifest.
  virtual nlohmann::json Describe() const = 0;
  // HiddenAtProbes (internal.h) computed on the device: the final-normed rows at probes.
  virtual Result<std::vector<double>> HiddenAtProbes(const Model& m, const ExactOptions& o, int threads,
                                                     std::span<const int32_t> tokens, std::span<const int32_t> probes,
                                                     const std::function<void(int64_t)>& layers_done,
                                                     PassTimes* times) = 0;
  // Logits (internal.h) of n_rows hidden rows, computed on the device.
  virtual Status Logits(const Model& m, const double* h, int64_t n_rows, double* logits) = 0;
  // Device memory in use (GiB): the pass keeps its buffers, so after a pass this is its peak.
  virtual double MemoryInUseGiB() const = 0;
};

// Whether this build holds the CUDA pass.
bool BuiltWithCuda();
// Opens the device `name` names ("CUDA0", "CUDA1", ...); an error says why it cannot: a build
// without CUDA, another name, no driver or device, no cuBLAS.
Result<std::unique_ptr<DevicePass>> OpenDevice(const std::string& name, const Model& m);

}  // namespace flipscope::exact
