// The layers document (docs/layers.md): written from a LayersResult, read back tolerantly; its
// summary is computed from the flips.
#include "results/layers_result.h"

#include <fmt/format.h>

#include <algorithm>

#include "results/comparison.h"
#include "util/read.h"

namespace flipscope {
namespace {
using nlohmann::json;
using read::Each;
using read::Get;
using read::Str;
using read::Sub;

// The top-level fields ToJson writes; any other field of a document read is kept in extra.
constexpr std::initializer_list<const char*> kLayersKnown = {"config", "flips", "summary", "max_flips", "exact"};

json DiffJson(const RowDiff& d) { return {{"rel", d.rel}, {"cosine", d.cosine}}; }
RowDiff DiffFrom(const json& j) { return {Get(j, "rel", 0.0), Get(j, "cosine", 1.0)}; }

json PlaceJson(const StreamPlace& p) { return {{"layer", p.layer}, {"block", p.block}}; }
StreamPlace PlaceFrom(const json& j) { return {Get(j, "layer", -1), Str(j, "block")}; }

// The drift counts are written only where the recomputation was allowed to drift, so that a
// document of an earlier version writes back as it was read.
json SideJson(const LayersSide& s, bool drift) {
  json j = {{"capture", s.capture}, {"model", s.model}, {"model_sha256", s.model_sha256},
            {"knobs", s.knobs},     {"flags", s.flags}, {"rows_checked", s.rows_checked},
            {"seconds", s.seconds}};
  if (drift) j["rows_identical"] = s.rows_identical, j["rows_top1_moved"] = s.rows_top1_moved;
  return j;
}
LayersSide SideFrom(const json& j) {
  LayersSide s{Str(j, "capture"),     Str(j, "model"), Str(j, "model_sha256"),
               Str(j, "flags"),       Sub(j, "knobs"), Get<int64_t>(j, "rows_checked", 0),
               Get(j, "seconds", 0.0)};
  // Without the counts the run refused any drift: every row checked had its digest.
  s.rows_identical = Get<int64_t>(j, "rows_identical", s.rows_checked);
  s.rows_top1_moved = Get<int64_t>(j, "rows_top1_moved", 0);
  return s;
}

json TapsJson(const LayerTaps& t) {
  return {{"embedding", t.embedding}, {"attn_out", t.attn_out},   {"attn_resid", t.attn_resid},
          {"mlp_out", t.mlp_out},     {"layer_out", t.layer_out}, {"final_norm", t.final_norm}};
}
LayerTaps TapsFrom(const json& j) {
  return {Str(j, "embedding"), Str(j, "attn_out"),  Str(j, "attn_resid"),
          Str(j, "mlp_out"),   Str(j, "layer_out"), Str(j, "final_norm")};
}

json ConfigJson(const LayersResult& r) {
  json c = {{"base", SideJson(r.base, r.allow_drift)},
            {"cand", SideJson(r.cand, r.allow_drift)},
            {"architecture", r.architecture},
            {"n_layer", r.n_layer},
            {"taps", TapsJson(r.taps)},
            {"jump", r.jump},
            {"floor", r.floor},
            {"flips_available", r.flips_available},
            {"flips_compared", r.flips_compared},
            {"exact", r.exact},
            {"rows_peak_bytes", r.rows_peak_bytes}};
  if (r.allow_drift) c["allow_drift"] = true;
  return c;
}
void ReadConfig(const json& c, LayersResult& r) {
  r.base = SideFrom(Sub(c, "base")), r.cand = SideFrom(Sub(c, "cand"));
  r.architecture = Str(c, "architecture"), r.n_layer = Get(c, "n_layer", 0);
  r.taps = TapsFrom(Sub(c, "taps"));
  r.jump = Get(c, "jump", 0.0), r.floor = Get(c, "floor", 0.0);
  r.flips_available = Get<int64_t>(c, "flips_available", 0);
  r.flips_compared = Get<int64_t>(c, "flips_compared", 0);
  r.exact = Sub(c, "exact");
  r.rows_peak_bytes = Get<int64_t>(c, "rows_peak_bytes", 0);
  r.allow_drift = Get(c, "allow_drift", false);
}

json VsExactJson(const LayersFlip::VsExact& v) {
  json layers = json::array();
  for (size_t l = 0; l < v.layers.size(); ++l) {
    json one = {{"layer", l}};
    for (int k = 0; k < 4; ++k) one[kLayerPartKeys[k]] = v.layers[l][size_t(k)];
    layers.push_back(one);
  }
  return {{"embedding", v.embedding}, {"layers", layers}, {"final_norm", v.final_norm}};
}
LayersFlip::VsExact VsExactFrom(const json& j) {
  LayersFlip::VsExact v{Get(j, "embedding", 0.0), Get(j, "final_norm", 0.0), {}};
  v.layers = Each<std::array<double, 4>>(Sub(j, "layers"), [](const json& l) {
    std::array<double, 4> a{};
    for (int k = 0; k < 4; ++k) a[size_t(k)] = Get(l, kLayerPartKeys[k], 0.0);
    return a;
  });
  return v;
}

json FlipJson(const LayersFlip& f, bool drift) {
  json layers = json::array();
  for (size_t l = 0; l < f.layers.size(); ++l) {
    json one = {{"layer", l}};
    for (int k = 0; k < 4; ++k) one[kLayerPartKeys[k]] = DiffJson(f.layers[l][size_t(k)]);
    layers.push_back(one);
  }
  json birth = nullptr, jump = nullptr;
  if (f.birth) birth = PlaceJson(*f.birth), birth["rel"] = f.birth_rel, birth["level_before"] = f.birth_level_before;
  if (f.largest_jump) jump = PlaceJson(*f.largest_jump), jump["factor"] = f.largest_jump_factor;
  json j = {{"position", f.position},           {"base_token", f.base_token},
            {"cand_token", f.cand_token},       {"embedding", DiffJson(f.embedding)},
            {"layers", layers},                 {"final_norm", DiffJson(f.final_norm)},
            {"logits", DiffJson(f.logits)},     {"birth", birth},
            {"largest_jump", jump}};
  if (f.vs_exact) j["vs_exact"] = {{"base", VsExactJson((*f.vs_exact)[0])}, {"cand", VsExactJson((*f.vs_exact)[1])}};
  if (f.base_text) j["base_text"] = *f.base_text;
  if (f.cand_text) j["cand_text"] = *f.cand_text;
  if (drift) j["reproduced"] = f.reproduced;
  return j;
}
LayersFlip LayersFlipFrom(const json& j) {
  LayersFlip f;
  f.position = Get<int32_t>(j, "position", 0);
  f.base_token = Get<int32_t>(j, "base_token", -1), f.cand_token = Get<int32_t>(j, "cand_token", -1);
  f.embedding = DiffFrom(Sub(j, "embedding")), f.final_norm = DiffFrom(Sub(j, "final_norm"));
  f.logits = DiffFrom(Sub(j, "logits"));
  f.layers = Each<std::array<RowDiff, 4>>(Sub(j, "layers"), [](const json& l) {
    std::array<RowDiff, 4> a;
    for (int k = 0; k < 4; ++k) a[size_t(k)] = DiffFrom(Sub(l, kLayerPartKeys[k]));
    return a;
  });
  if (const json& b = Sub(j, "birth"); b.is_object())
    f.birth = PlaceFrom(b), f.birth_rel = Get(b, "rel", 0.0), f.birth_level_before = Get(b, "level_before", 0.0);
  if (const json& lj = Sub(j, "largest_jump"); lj.is_object())
    f.largest_jump = PlaceFrom(lj), f.largest_jump_factor = Get(lj, "factor", 0.0);
  if (const json& v = Sub(j, "vs_exact"); v.is_object())
    f.vs_exact = std::array<LayersFlip::VsExact, 2>{VsExactFrom(Sub(v, "base")), VsExactFrom(Sub(v, "cand"))};
  f.base_text = read::Opt<std::string>(j, "base_text"), f.cand_text = read::Opt<std::string>(j, "cand_text");
  f.reproduced = Get(j, "reproduced", true);
  return f;
}

double LayersMedian(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : compare::Percentile(v, 50);
}

json SummaryJson(const LayersSummary& s, bool drift) {
  json by_layer = json::array();
  for (size_t l = 0; l < s.birth_layers.size(); ++l)
    by_layer.push_back({{"layer", l}, {"attention", s.birth_layers[l][0]}, {"mlp", s.birth_layers[l][1]}});
  json median = json::object();
  for (int k = 0; k < 4; ++k) median[kLayerPartKeys[k]] = s.median_rel[size_t(k)];
  json out = {{"flips", s.flips},
              {"births",
               {{"embedding", s.born_embedding}, {"attention", s.born_attention}, {"mlp", s.born_mlp}, {"none", s.born_none}}},
              {"birth_layers", by_layer},
              {"largest_jumps", {{"attention", s.jump_attention}, {"mlp", s.jump_mlp}, {"none", s.jump_none}}},
              {"median_rel", median},
              {"median_logits_rel", s.median_logits_rel}};
  if (drift) out["not_reproduced"] = s.not_reproduced;
  if (s.vs_exact_median_layer_out)
    out["vs_exact_median_layer_out"] = {{"base", (*s.vs_exact_median_layer_out)[0]},
                                        {"cand", (*s.vs_exact_median_layer_out)[1]}};
  return out;
}

// The births and largest jumps of a summary, counted over the flips.
void CountPlaces(const LayersResult& r, LayersSummary& s) {
  s.birth_layers.assign(size_t(std::max(r.n_layer, 0)), {0, 0});
  for (const LayersFlip& f : r.flips) {
    if (!f.reproduced) {
      ++s.not_reproduced;
      continue;
    }
    if (!f.birth) {
      ++s.born_none;
    } else {
      const bool mlp = f.birth->block == "mlp";
      ++(f.birth->block == "embedding" ? s.born_embedding : mlp ? s.born_mlp : s.born_attention);
      if (f.birth->layer >= 0 && f.birth->layer < r.n_layer) ++s.birth_layers[size_t(f.birth->layer)][mlp ? 1 : 0];
    }
    ++(!f.largest_jump ? s.jump_none : f.largest_jump->block == "mlp" ? s.jump_mlp : s.jump_attention);
  }
}

}  // namespace

LayersSummary Summarize(const LayersResult& r) {
  LayersSummary s;
  s.flips = int64_t(r.flips.size());  // not_reproduced of them are left out of the medians and counts
  CountPlaces(r, s);
  auto per_layer = [&](auto value) {
    std::vector<double> out;
    for (int l = 0; l < r.n_layer; ++l) {
      std::vector<double> v;
      for (const LayersFlip& f : r.flips)
        if (f.reproduced) v.push_back(value(f, size_t(l)));
      out.push_back(LayersMedian(v));
    }
    return out;
  };
  for (size_t k = 0; k < 4; ++k)
    s.median_rel[k] = per_layer([k](const LayersFlip& f, size_t l) { return l < f.layers.size() ? f.layers[l][k].rel : 0.0; });
  std::vector<double> logits;
  for (const LayersFlip& f : r.flips)
    if (f.reproduced) logits.push_back(f.logits.rel);
  s.median_logits_rel = LayersMedian(logits);
  if (!r.flips.empty() && r.flips[0].vs_exact) {
    // Per side, the median over flips of the residual stream's distance from the exact value.
    std::array<std::vector<double>, 2> sides;
    for (size_t side = 0; side < 2; ++side)
      sides[side] = per_layer([side](const LayersFlip& f, size_t l) {
        return f.vs_exact && l < (*f.vs_exact)[side].layers.size() ? (*f.vs_exact)[side].layers[l][3] : 0.0;
      });
    s.vs_exact_median_layer_out = sides;
  }
  return s;
}

std::string ReproductionText(const LayersResult& r) {
  const LayersSide* sides[] = {&r.base, &r.cand};
  if (sides[0]->rows_identical == sides[0]->rows_checked && sides[1]->rows_identical == sides[1]->rows_checked)
    return "every final row reproduced its capture's digest";
  std::string text = "recomputed rows with their capture's digest:";
  for (const LayersSide* side : sides)
    text += fmt::format(" {} {} of {} ({} greedy tokens moved),", side == sides[0] ? "base" : "cand",
                        side->rows_identical, side->rows_checked, side->rows_top1_moved);
  const auto kept = std::count_if(r.flips.begin(), r.flips.end(), [](const LayersFlip& f) { return f.reproduced; });
  return text + fmt::format(
                    " so the two recomputations were compared with each other; {} of {} flips reproduced, "
                    "only those attributed",
                    kept, r.flips.size());
}

json ToJson(const LayersResult& r) {
  json flips = json::array();
  for (const LayersFlip& f : r.flips) flips.push_back(FlipJson(f, r.allow_drift));
  json j = {
      {"config", ConfigJson(r)}, {"flips", std::move(flips)}, {"summary", SummaryJson(Summarize(r), r.allow_drift)}};
  if (r.max_flips) j["max_flips"] = *r.max_flips;
  if (r.exact_asked) j["exact"] = *r.exact_asked;
  read::KeepExtra(j, r.extra);
  return j;
}

LayersResult LayersResultFromJson(const json& j) {
  LayersResult r;
  ReadConfig(Sub(j, "config"), r);
  r.flips = Each<LayersFlip>(Sub(j, "flips"), LayersFlipFrom);
  r.max_flips = read::Opt<int64_t>(j, "max_flips");
  r.exact_asked = read::Opt<bool>(j, "exact");
  r.extra = read::Without(j, kLayersKnown);
  return r;
}

}  // namespace flipscope
