// The flips, the rows collected at them and what is written about them.
#include <fmt/format.h>

#include <algorithm>

#include "compare/compare.h"
#include "layers/internal.h"

namespace flipscope::layers {
namespace {
using json = nlohmann::json;

constexpr const char* kPartKeys[] = {"attn_out", "attn_resid", "mlp_out", "layer_out"};

json DiffJson(const RowDiff& d) { return {{"rel", d.rel}, {"cosine", d.cosine}}; }

// The residual stream's relative differences: the embedding, then after each sub-block.
std::vector<double> Stream(const Collector& col, size_t f, int n_layer) {
  std::vector<double> s = {col.diff(f, 0).rel};
  for (int l = 0; l < n_layer; ++l) {
    s.push_back(col.diff(f, PointIndex(l, LayerPart::kAttnResid)).rel);
    s.push_back(col.diff(f, PointIndex(l, LayerPart::kLayerOut)).rel);
  }
  return s;
}

json Where(int at) {
  return {{"layer", at == 0 ? -1 : (at - 1) / 2},
          {"block", at == 0 ? "embedding" : (at % 2 == 1 ? "attention" : "mlp")}};
}

json BirthJson(std::span<const double> stream, int at) {
  if (at < 0) return nullptr;
  json b = Where(at);
  b["rel"] = stream[size_t(at)];
  b["level_before"] = at == 0 ? 0 : *std::max_element(stream.begin(), stream.begin() + at);
  return b;
}

// After the birth, the sub-block that multiplies the largest difference so far the most: where
// a difference that began elsewhere is amplified (null without a birth or a later growth).
json LargestJumpJson(std::span<const double> stream, int birth) {
  if (birth < 0) return nullptr;
  double level = *std::max_element(stream.begin(), stream.begin() + birth + 1), best = 1;
  int at = -1;
  for (size_t i = size_t(birth) + 1; i < stream.size(); ++i) {
    if (level > 0 && stream[i] / level > best) best = stream[i] / level, at = int(i);
    level = std::max(level, stream[i]);
  }
  if (at < 0) return nullptr;
  json j = Where(at);
  j["factor"] = best;
  return j;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : compare::Percentile(v, 50);
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
json VsExactJson(const Collector& col, int side, size_t f, int n_layer) {
  json layers = json::array();
  for (int l = 0; l < n_layer; ++l) {
    json one = {{"layer", l}};
    for (int k = 0; k < 4; ++k) one[kPartKeys[k]] = col.vs_exact(side, f, PointIndex(l, LayerPart(k))).rel;
    layers.push_back(one);
  }
  return {{"embedding", col.vs_exact(side, f, 0).rel},
          {"layers", layers},
          {"final_norm", col.vs_exact(side, f, PointCount(n_layer) - 1).rel}};
}

json FlipsJson(const std::vector<Flip>& flips, const Collector& col, int n_layer, const LayersOptions& o,
               const std::function<std::string(int32_t)>& detok) {
  json out = json::array();
  for (size_t f = 0; f < flips.size(); ++f) {
    json layers = json::array();
    for (int l = 0; l < n_layer; ++l) {
      json one = {{"layer", l}};
      for (int k = 0; k < 4; ++k) one[kPartKeys[k]] = DiffJson(col.diff(f, PointIndex(l, LayerPart(k))));
      layers.push_back(one);
    }
    std::vector<double> stream = Stream(col, f, n_layer);
    const int birth = BirthIndex(stream, o.jump, o.floor);
    json rec = {{"position", flips[f].position},
                {"base_token", flips[f].base_token},
                {"cand_token", flips[f].cand_token},
                {"embedding", DiffJson(col.diff(f, 0))},
                {"layers", layers},
                {"final_norm", DiffJson(col.diff(f, PointCount(n_layer) - 1))},
                {"logits", DiffJson(col.diff(f, kLogitsPoint))},
                {"birth", BirthJson(stream, birth)},
                {"largest_jump", LargestJumpJson(stream, birth)}};
    if (col.has_exact())
      rec["vs_exact"] = {{"base", VsExactJson(col, 0, f, n_layer)}, {"cand", VsExactJson(col, 1, f, n_layer)}};
    if (detok) {
      rec["base_text"] = detok(flips[f].base_token);
      rec["cand_text"] = detok(flips[f].cand_token);
    }
    out.push_back(std::move(rec));
  }
  return out;
}

json SummaryJson(const json& flips, int n_layer) {
  json births = {{"embedding", 0}, {"attention", 0}, {"mlp", 0}, {"none", 0}};
  json by_layer = json::array();
  for (int l = 0; l < n_layer; ++l) by_layer.push_back({{"layer", l}, {"attention", 0}, {"mlp", 0}});
  for (const json& f : flips) {
    const json& b = f["birth"];
    if (b.is_null()) {
      births["none"] = births["none"].get<int>() + 1;
      continue;
    }
    const std::string block = b["block"];
    births[block] = births[block].get<int>() + 1;
    if (int l = b["layer"]; l >= 0) by_layer[size_t(l)][block] = by_layer[size_t(l)][block].get<int>() + 1;
  }
  json jumps = {{"attention", 0}, {"mlp", 0}, {"none", 0}};
  for (const json& f : flips) {
    const std::string k = f["largest_jump"].is_null() ? "none" : f["largest_jump"]["block"].get<std::string>();
    jumps[k] = jumps[k].get<int>() + 1;
  }
  json median = json::object();
  for (const char* key : kPartKeys) {
    json per_layer = json::array();
    for (int l = 0; l < n_layer; ++l) {
      std::vector<double> v;
      for (const json& f : flips) v.push_back(f["layers"][size_t(l)][key]["rel"].get<double>());
      per_layer.push_back(Median(v));
    }
    median[key] = per_layer;
  }
  std::vector<double> logits;
  for (const json& f : flips) logits.push_back(f["logits"]["rel"].get<double>());
  json out = {{"flips", flips.size()},  {"births", births},     {"birth_layers", by_layer},
              {"largest_jumps", jumps}, {"median_rel", median}, {"median_logits_rel", Median(logits)}};
  if (!flips.empty() && flips[0].contains("vs_exact")) {
    // Per side, the median over flips of the residual stream's distance from the exact value.
    for (const char* side : {"base", "cand"}) {
      json per_layer = json::array();
      for (int l = 0; l < n_layer; ++l) {
        std::vector<double> v;
        for (const json& f : flips) v.push_back(f["vs_exact"][side]["layers"][size_t(l)]["layer_out"].get<double>());
        per_layer.push_back(Median(v));
      }
      out["vs_exact_median_layer_out"][side] = per_layer;
    }
  }
  return out;
}

}  // namespace flipscope::layers
