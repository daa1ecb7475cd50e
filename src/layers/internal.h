// layers' internals shared by its files: the flips, the rows collected at them, the JSON.
#pragma once

#include <functional>
#include <span>
#include <vector>

#include "capture/capture.h"
#include "layers/layers.h"

namespace flipscope::layers {

// Probes of both captures whose stored argmax differ, ascending; the first max_flips (0 = all);
// *available counts them all.
std::vector<Flip> FindFlips(const CaptureReader& base, const CaptureReader& cand, int max_flips, int64_t* available);

// The row of position pos in a tapped tensor: rows are the ubatch's tokens, or only its outputs
// (the probes, ascending) after the last layer's row selection; an error otherwise.
Result<int64_t> RowOf(const TappedTensor& v, int32_t pos, std::span<const int32_t> probes);

// The point index the logits rows are handed over with (they come from the prefill, not the tap).
inline constexpr int kLogitsPoint = -1;
// Receives one row at flip `flip` of point `point` (layers.h: PointIndex, or kLogitsPoint).
using RowFn = std::function<Status(size_t flip, int point, std::span<const float> row)>;

// Keeps the base's rows at the flips and compares the candidate's against them as they arrive,
// dropping each base row once compared, so at most one side's flip rows are held.
class Collector {
 public:
  Collector(size_t n_flips, int n_points);
  // The exact engine's rows (FP64) at the flips, when it runs: first, so each side is compared
  // with them as its rows arrive. flip_of maps a position to its flip index.
  std::function<void(int point, int32_t position, std::span<const double> row)> KeepExact(
      std::function<size_t(int32_t)> flip_of);
  RowFn KeepBase();
  RowFn CompareCand();
  // The comparison of flip f at point p (PointIndex or kLogitsPoint).
  const RowDiff& diff(size_t f, int p) const { return diffs_[f][Slot(p)]; }
  // Side s's (0 base, 1 cand) comparison with the exact row of flip f at point p.
  const RowDiff& vs_exact(int side, size_t f, int p) const { return exact_diffs_[size_t(side)][f][size_t(p)]; }
  bool has_exact() const { return has_exact_; }
  size_t peak_bytes() const { return peak_; }

 private:
  size_t Slot(int p) const { return p == kLogitsPoint ? size_t(n_points_) : size_t(p); }
  void CompareExact(int side, size_t f, int p, std::span<const float> row);
  int n_points_;
  bool has_exact_ = false;
  std::vector<std::vector<std::vector<float>>> base_;    // [flip][slot]
  std::vector<std::vector<std::vector<double>>> exact_;  // [flip][point]
  std::vector<std::vector<RowDiff>> diffs_;              // [flip][slot]
  std::vector<std::vector<RowDiff>> exact_diffs_[2];     // [side][flip][point]
  size_t held_ = 0, peak_ = 0;
  void Hold(int64_t bytes);
};

// One record per flip: each point's comparison and the birth (docs/layers.md).
std::vector<LayersFlip> FlipRecords(const std::vector<Flip>& flips, const Collector& col, int n_layer,
                                    const LayersOptions& o, const std::function<std::string(int32_t)>& detok);

}  // namespace flipscope::layers
