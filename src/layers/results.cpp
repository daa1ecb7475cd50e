// The flips, the rows collected at them and what is written about them.
#include <fmt/format.h>

#include <algorithm>

#include "compare/compare.h"
#include "layers/internal.h"

namespace flipscope::layers {
namespace {

// The residual stream's relative differences: the embedding, then after each sub-block.
std::vector<double> Stream(const Collector& col, size_t f, int n_layer) {
  std::vector<double> s = {col.diff(f, 0).rel};
  for (int l = 0; l < n_layer; ++l) {
    s.push_back(col.diff(f, PointIndex(l, LayerPart::kAttnResid)).rel);
    s.push_back(col.diff(f, PointIndex(l, LayerPart::kLayerOut)).rel);
  }
  return s;
}

StreamPlace Where(int at) {
  return {at == 0 ? -1 : (at - 1) / 2, at == 0 ? "embedding" : (at % 2 == 1 ? "attention" : "mlp")};
}

// The birth of a flip at stream index `at` (none for -1), with its size and the level before it.
void SetBirth(std::span<const double> stream, int at, LayersFlip& f) {
  if (at < 0) return;
  f.birth = Where(at);
  f.birth_rel = stream[size_t(at)];
  f.birth_level_before = at == 0 ? 0 : *std::max_element(stream.begin(), stream.begin() + at);
}

// After the birth, the sub-block that multiplies the largest difference so far the most: where
// a difference that began elsewhere is amplified (none without a birth or a later growth).
void SetLargestJump(std::span<const double> stream, int birth, LayersFlip& f) {
  if (birth < 0) return;
  double level = *std::max_element(stream.begin(), stream.begin() + birth + 1), best = 1;
  int at = -1;
  for (size_t i = size_t(birth) + 1; i < stream.size(); ++i) {
    if (level > 0 && stream[i] / level > best) best = stream[i] / level, at = int(i);
    level = std::max(level, stream[i]);
  }
  if (at < 0) return;
  f.largest_jump = Where(at);
  f.largest_jump_factor = best;
}

}  // namespace

Result<int64_t> RowOf(const TappedTensor& v, int32_t pos, std::span<const int32_t> probes) {
  if (v.rows == v.n_tokens) return int64_t(pos - v.pos0);
  auto lo = std::lower_bound(probes.begin(), probes.end(), v.pos0);
  auto hi = std::lower_bound(probes.begin(), probes.end(), v.pos0 + v.n_tokens);
  if (v.rows == hi - lo) return int64_t(std::lower_bound(lo, hi, pos) - lo);
  return Status::Error(fmt::format("graph tensor {} has {} rows, neither the ubatch's {} tokens nor its {} outputs",
                                   v.name, v.rows, v.n_tokens, hi - lo));
}

std::vector<Flip> FindFlips(const CaptureReader& b, const CaptureReader& c, int max_flips, int64_t* available) {
  return FirstNFlips(b.positions(), b.argmax(), c.positions(), c.argmax(), max_flips, available);
}

Collector::Collector(size_t n_flips, int n_points)
    : n_points_(n_points),
      base_(n_flips, std::vector<std::vector<float>>(size_t(n_points) + 1)),
      diffs_(n_flips, std::vector<RowDiff>(size_t(n_points) + 1)) {}

void Collector::Hold(int64_t bytes) {
  held_ = size_t(int64_t(held_) + bytes);
  peak_ = std::max(peak_, held_);
}

std::function<void(int, int32_t, std::span<const double>)> Collector::KeepExact(
    std::function<size_t(int32_t)> flip_of) {
  has_exact_ = true;
  exact_.assign(base_.size(), std::vector<std::vector<double>>(size_t(n_points_)));
  for (auto& side : exact_diffs_) side.assign(base_.size(), std::vector<RowDiff>(size_t(n_points_)));
  return [this, flip_of](int p, int32_t position, std::span<const double> row) {
    exact_[flip_of(position)][size_t(p)].assign(row.begin(), row.end());
    Hold(int64_t(row.size_bytes()));
  };
}

void Collector::CompareExact(int side, size_t f, int p, std::span<const float> row) {
  if (!has_exact_ || p == kLogitsPoint) return;  // the exact pass stops at the final norm
  std::vector<double>& e = exact_[f][size_t(p)];
  if (e.size() == row.size()) exact_diffs_[size_t(side)][f][size_t(p)] = DiffRows(e, row);
  if (side == 1) {
    Hold(-int64_t(e.size() * sizeof(double)));
    std::vector<double>().swap(e);
  }
}

RowFn Collector::KeepBase() {
  return [this](size_t f, int p, std::span<const float> row) {
    base_[f][Slot(p)].assign(row.begin(), row.end());
    Hold(int64_t(row.size_bytes()));
    CompareExact(0, f, p, row);
    return Status::Ok();
  };
}

RowFn Collector::CompareCand() {
  return [this](size_t f, int p, std::span<const float> row) -> Status {
    std::vector<float>& b = base_[f][Slot(p)];
    if (b.size() != row.size())
      return Status::Error(
          fmt::format("the two configurations' rows differ in width ({} against {})", b.size(), row.size()));
    diffs_[f][Slot(p)] = DiffRows(b, row);
    Hold(-int64_t(b.size() * sizeof(float)));
    std::vector<float>().swap(b);
    CompareExact(1, f, p, row);
    return Status::Ok();
  };
}

// One side's relative differences from the exact rows at every point of flip f.
LayersFlip::VsExact VsExactOf(const Collector& col, int side, size_t f, int n_layer) {
  LayersFlip::VsExact v{col.vs_exact(side, f, 0).rel, col.vs_exact(side, f, PointCount(n_layer) - 1).rel, {}};
  for (int l = 0; l < n_layer; ++l) {
    std::array<double, 4> one{};
    for (int k = 0; k < 4; ++k) one[size_t(k)] = col.vs_exact(side, f, PointIndex(l, LayerPart(k))).rel;
    v.layers.push_back(one);
  }
  return v;
}

std::vector<LayersFlip> FlipRecords(const std::vector<Flip>& flips, const Collector& col, int n_layer,
                                    const LayersOptions& o, const std::function<std::string(int32_t)>& detok) {
  std::vector<LayersFlip> out;
  for (size_t f = 0; f < flips.size(); ++f) {
    LayersFlip rec;
    rec.position = flips[f].position, rec.base_token = flips[f].base_token, rec.cand_token = flips[f].cand_token;
    for (int l = 0; l < n_layer; ++l) {
      std::array<RowDiff, 4> one;
      for (int k = 0; k < 4; ++k) one[size_t(k)] = col.diff(f, PointIndex(l, LayerPart(k)));
      rec.layers.push_back(one);
    }
    rec.embedding = col.diff(f, 0);
    rec.final_norm = col.diff(f, PointCount(n_layer) - 1);
    rec.logits = col.diff(f, kLogitsPoint);
    std::vector<double> stream = Stream(col, f, n_layer);
    const int birth = BirthIndex(stream, o.jump, o.floor);
    SetBirth(stream, birth, rec);
    SetLargestJump(stream, birth, rec);
    if (col.has_exact())
      rec.vs_exact = std::array<LayersFlip::VsExact, 2>{VsExactOf(col, 0, f, n_layer), VsExactOf(col, 1, f, n_layer)};
    if (detok) rec.base_text = detok(flips[f].base_token), rec.cand_text = detok(flips[f].cand_token);
    out.push_back(std::move(rec));
  }
  return out;
}

}  // namespace flipscope::layers
