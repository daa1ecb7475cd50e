// layers: where a flip is born. Both captures are recomputed in their own configurations (their
// own chunking, checked by the final rows' digests) while llama.cpp's graph callback hands over
// each layer's attention output, MLP output and residual stream at the flip positions only; for
// every flip and layer the two configurations' rows are compared in FP64 (relative difference
// and cosine) and the first sub-block where the difference jumps is named. Output: docs/layers.md.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "results/layers_result.h"
#include "util/status.h"
#include "util/util.h"

namespace flipscope {

struct LayersOptions {
  int max_flips = 0;    // 0 = every flip; else the first N by position
  double jump = 4;      // a birth: the residual difference exceeds jump x the largest one before it
  double floor = 1e-5;  // and is at least this (relative differences below it are F32 rounding)
  Log log;              // status lines and progress bars (bars on a terminal only)
  // Also compare each side with the FP64 exact engine (the base's model file) at every point.
  bool exact = false;
  // Go on when a recomputed row differs from its capture's (its digest): the two recomputations
  // are compared with each other, each side counts its rows that differ, and only the flips the
  // recomputation still shows are attributed. For backends whose kernels change when the graph
  // callback reads the layers (CUDA's fused kernels); docs/layers.md.
  bool allow_drift = false;
};

struct LayersRequest {
  std::string base_path, cand_path;  // capture files of the llama engine, one workload
  LayersOptions options;
};

// The taps of an architecture (llama, gemma3); an error names the architecture otherwise.
Result<LayerTaps> TapsFor(const std::string& architecture);

// What is compared at one position: the embedding, per layer its four tensors, the final norm.
// Point k of layer l is 1 + 4l + k (k: 0 attention out, 1 residual after it, 2 MLP out,
// 3 residual after the layer); the final norm is last.
enum class LayerPart { kAttnOut = 0, kAttnResid = 1, kMlpOut = 2, kLayerOut = 3 };
inline int PointIndex(int layer, LayerPart part) { return 1 + 4 * layer + int(part); }
inline int PointCount(int n_layer) { return 2 + 4 * n_layer; }

// Two rows compared in FP64 (RowDiff, results/layers_result.h).
// Contract: a and b have the same length.
RowDiff DiffRows(std::span<const float> a, std::span<const float> b);
// The same with an FP64 reference row a (the exact engine's).
RowDiff DiffRows(std::span<const double> a, std::span<const float> b);

// Where a flip is born along the residual stream: stream[0] is the embedding's relative
// difference, stream[1 + 2l] the one after layer l's attention, stream[2 + 2l] after its MLP.
// Returns the first index whose difference is >= floor and > jump x the largest before it, or -1.
int BirthIndex(std::span<const double> stream, double jump, double floor);

// Recomputes both captures at their flips and compares every layer (the document: ToJson,
// docs/layers.md); fails when a recomputed final row does not have its capture's digest, unless
// options.allow_drift.
Result<LayersResult> RunLayers(const LayersRequest& req);

}  // namespace flipscope
