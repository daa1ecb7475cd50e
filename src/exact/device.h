// The exact engine's forward pass on a CUDA device (cuda_pass.cpp; device_off.cpp in a build
// without CUDA). The same function as forward.cpp, computed the same way: layer after layer over
// every token, each layer's weights widened to FP64 for it, every product in FP64 (cuBLAS DGEMM),
// attention over query blocks, qwen35's DeltaNet scan and qwen3moe's routed experts in FP64.
#pragma once

#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "exact/internal.h"
#include "records/engine_records.h"

namespace flipscope::exact {

class DevicePass {
 public:
  virtual ~DevicePass() = default;
  // The device, its driver, the CUDA runtime, cuBLAS and the route, for the manifest.
  virtual ExactDeviceFacts Describe() const = 0;
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

// The device memory a pass over n tokens holds, in doubles per buffer: the sizes the CUDA pass
// allocates (so the plan and the allocation cannot drift apart) and the total it checks against
// the device's free memory before it starts (device_plan.cpp; host code, in every build).
struct DevicePlan {
  int64_t chunk = 0;        // tokens per projection / MLP chunk
  int64_t query_block = 0;  // queries per attention block
  // Every token, for the whole pass: residual, Q, K, V, the attention output, qwen35's Q gate.
  int64_t h = 0, q = 0, k = 0, v = 0, attn = 0, qgate = 0;
  // One chunk: the normed input, the mixer's output, Q|K staging, the MLP's two halves.
  int64_t x = 0, o = 0, tmp = 0, gate = 0, up = 0;
  int64_t scores = 0;  // one query block x every key
  // qwen35's DeltaNet, one chunk (conv_state, conv_tmp, state: the scan's carried state).
  int64_t mixed = 0, z = 0, beta = 0, g = 0, conv = 0, conv_state = 0, conv_tmp = 0, state = 0, dn_out = 0;
  int64_t xs = 0, ed = 0;     // experts: the gathered rows, router logits / an expert's output
  int64_t layer = 0;          // the widest layer's matrices in FP64; two are held (running, next)
  int64_t rows = 0;           // the final rows at the probes, then a group of them for the logits
  int64_t logits = 0;         // one group's logits
  int64_t output_floats = 0;  // the output matrix, kept in float
  int64_t output_slice = 0;   // a slice of it widened for one product
  // Bytes of everything above.
  int64_t Bytes() const;
};

// The plan of a pass over n_tokens with n_probes probes: chunk and query block from the options
// (0 query block: scores of about 1 GiB, clamped to [256, 4096] queries), buffers from hp, and the
// widest of the layers' matrices.
DevicePlan PlanDevicePass(const Hparams& hp, const std::vector<Layer>& layers, int64_t n_tokens, int64_t n_probes,
                          const ExactOptions& o);
// Ok when the plan fits in free_bytes; else one line naming the device, the tokens, what the pass
// needs and what is free, and what would make it fit.
Status CheckDeviceMemory(const DevicePlan& plan, int64_t n_tokens, int64_t free_bytes, const std::string& device);

// Whether this build holds the CUDA pass.
bool BuiltWithCuda();
// Opens the device `name` names ("CUDA0", "CUDA1", ...); an error says why it cannot: a build
// without CUDA, another name, no driver or device, no cuBLAS.
Result<std::unique_ptr<DevicePass>> OpenDevice(const std::string& name, const Model& m);

}  // namespace flipscope::exact
