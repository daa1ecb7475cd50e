// exact: the function a GGUF file defines, computed in FP64. The weights are dequantized through
// ggml's own type traits (checked against an FP64 decode of the block formats), and every operation
// of llama.cpp's graph for the architecture (llama, qwen2, qwen3, phi3, gemma2, gemma3) runs in double precision
// through a BLAS. Its logits are the reference every configuration's logits are measured against (docs/exact.md).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <span>
#include <string>

#include "engine/engine.h"
#include "util/status.h"

namespace flipscope {

// How the exact engine runs; none of these change its results beyond FP64 rounding order.
struct ExactOptions {
  int n_threads = 0;      // BLAS threads; 0 = all hardware threads
  int query_block = 256;  // queries per attention block (bounds the score matrix to block x context)
  int token_chunk = 512;  // tokens per projection / MLP chunk (bounds the activations)
  int probe_group = 64;   // probe rows per vocabulary projection (bounds the logits buffer)
  // Where the pass runs: "" (or "CPU", "none") the CPU; "CUDA0", "CUDA1", ... a CUDA device (a build
  // with FLIPSCOPE_CUDA). The same function, computed the same way (docs/exact.md).
  std::string device{};
  int device_chunk = 8192;     // tokens per projection / MLP chunk on a device
  int device_query_block = 0;  // queries per attention block on a device (0: scores of about 1 GiB)
  // For the agreement check only: a deliberate error in the device pass ("drop-bias": Q/K/V
  // biases left out; "rope-mode": the other rope pairing), which the check must catch.
  std::string device_mutation{};
};

// One probe row in FP64: the logits at position p, predicting token p+1.
struct RowF64 {
  int64_t index = 0;
  int32_t position = 0;
  std::span<const double> logits;
};
using RowF64Sink = std::function<Status(const RowF64&)>;

// One row of the forward pass at a watched position, in FP64. point: 0 the embedding (llama: layer
// 0's attention norm of it, where llama.cpp's graph first names it), 1 + 4l + k in layer l (k: 0
// what attention adds to the residual stream, 1 the residual after it, 2 what the MLP adds, 3 the
// residual after the layer), 1 + 4 n_layer the final norm.
using PointSink = std::function<void(int point, int32_t position, std::span<const double> row)>;

// The FP64 operations of one pass (a multiply-add counts as 2), by part: what the throughput
// figures of docs/exact.md divide by. Attention counts the scores and values each query needs.
struct ExactWork {
  double matmul = 0, attention = 0, scan = 0, logits = 0;
  double total() const { return matmul + attention + scan + logits; }
};

// The FP64 forward pass over a GGUF model as an Engine: rows are handed over as F32 (the capture
// format's native dtype), or as FP64 through PrefillF64.
class ExactEngine : public Engine {
 public:
  // Loads and dequantizes the model; refuses, in one line naming the file and the architecture,
  // anything but llama, qwen2, qwen3, phi3, gemma2 and gemma3 (and tensors or options of those it does not implement).
  static Result<std::unique_ptr<ExactEngine>> Create(const std::string& model_path, const ExactOptions& opts = {});
  ~ExactEngine() override;
  int32_t n_vocab() const override;
  // Teacher-forced FP64 forward; sink gets each probe row rounded to F32.
  Status Prefill(std::span<const int32_t> tokens, std::span<const int32_t> probes, const RowSink& sink,
                 const ProgressFn& progress) override;
  // The same forward, rows in FP64.
  Status PrefillF64(std::span<const int32_t> tokens, std::span<const int32_t> probes, const RowF64Sink& sink,
                    const ProgressFn& progress);
  // The same forward over tokens, handing sink every point's row at the watched positions
  // (ascending, inside tokens); no logits. layers_done (may be empty) gets the layers done so far.
  Status ForwardPoints(std::span<const int32_t> tokens, std::span<const int32_t> watch, const PointSink& sink,
                       const ProgressFn& layers_done = {});
  // Engine "exact", the architecture, the BLAS, the dequantization route and its check.
  EngineDescription Describe() const override;
  std::optional<PassPartTimes> PartTimes() const override;
  // The operations of a pass over n_tokens tokens with n_probes probes.
  ExactWork Work(int64_t n_tokens, int64_t n_probes) const;
  // The device memory (bytes) a pass over n_tokens with n_probes probes plans to hold.
  int64_t DeviceBytes(int64_t n_tokens, int64_t n_probes) const;
  struct Impl;

 private:
  explicit ExactEngine(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Per ggml type of a GGUF: how many elements it holds and at how many ggml's float dequantization
// differs from an FP64 decode of the block format (0 everywhere: ggml's float is exact there).
// Types without an FP64 decoder here are listed with "checked": false.
Result<nlohmann::json> CheckDequantization(const std::string& model_path);

}  // namespace flipscope
