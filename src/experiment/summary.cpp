// Comparisons of every configuration with the baseline, and their summary over repeats.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "compare/compare.h"
#include "engine/engine.h"
#include "experiment/steps.h"
#include "results/results.h"

namespace flipscope {
namespace {

// A configuration's comparisons, in the order they were made.
std::vector<ComparisonEntry> ComparisonsOf(const std::vector<ComparisonEntry>& all, const std::string& name) {
  std::vector<ComparisonEntry> out;
  for (const ComparisonEntry& e : all)
    if (e.config == name) out.push_back(e);
  return out;
}

// The figures a summary is made of, straight from the comparison (not read back from its JSON).
ComparisonEntry EntryOf(const std::string& config, size_t repeat, const Comparison& c) {
  const OverallStats& o = c.overall;
  ComparisonFigures f;
  f.flip_rate = o.flip_rate;
  f.flip_rate_ci = Interval{o.flip_rate_ci.first, o.flip_rate_ci.second};
  f.flips = o.flips, f.probes = o.probes, f.confident_flips = o.confident_flips, f.uncertain_flips = o.uncertain_flips;
  f.kl_mean = o.kl_base_cand.mean, f.kl_p99 = o.kl_base_cand.p99, f.kl_max = o.kl_base_cand.max;
  if (std::isfinite(o.same_top1_rate)) f.same_top1_rate = o.same_top1_rate;
  f.bit_identical = c.bit_identical, f.probes_compared = c.probes_compared;
  return {config, int(repeat), f};
}

}  // namespace

double KvBytesPerToken(const ModelInfo& m, const Knobs& k) {
  double per_head_layer = double(m.n_layer) * m.n_head_kv;
  return per_head_layer *
         (m.head_dim_k * KvTypeBytesPerElement(k.cache_type_k) + m.head_dim_v * KvTypeBytesPerElement(k.cache_type_v));
}

// Comparison options of the experiment; token text from the baseline's vocabulary (every
// configuration shares it).
CompareOptions OptionsOf(const Experiment& exp, const nlohmann::json& results) {
  CompareOptions co;
  co.window = exp.window;
  co.confident = exp.confident;
  co.log.bars = false;
  if (auto detok = LoadDetokenizer(results["configs"][0]["model_path"].get<std::string>()); detok.ok())
    co.detokenize = *detok;
  return co;
}

Status CompareAll(const Experiment& exp, nlohmann::json& results, const Log& log,
                  std::vector<ComparisonEntry>* entries) {
  results["comparisons"] = nlohmann::json::array();
  const auto& configs = results["configs"];
  std::string base0 = configs[0]["captures"][0];
  const CompareOptions co = OptionsOf(exp, results);
  for (const auto& c : configs) {
    if (ReadConfigStatus(c) != ConfigStatus::kOk) continue;
    const auto& caps = c["captures"];
    bool is_base = c["name"] == results["baseline"];
    for (size_t r = is_base ? 1 : 0; r < caps.size(); ++r) {
      log.Info(fmt::format("  comparing {} (repeat {}) with the baseline", c["name"].get<std::string>(), r + 1));
      auto cmp = CompareFiles(base0, caps[r].get<std::string>(), co);
      if (!cmp.ok()) return cmp.status();
      results["comparisons"].push_back({{"config", c["name"]}, {"repeat", r}, {"compare", ToJson(*cmp)}});
      entries->push_back(EntryOf(c["name"], r, *cmp));
    }
  }
  return Status::Ok();
}

Status CompareWithReference(const Experiment& exp, nlohmann::json& results, const Log& log) {
  auto& ref = results["reference"];
  const std::string exact = ref["captures"][0];
  const CompareOptions co = OptionsOf(exp, results);
  nlohmann::json against = {{"comparisons", nlohmann::json::array()}};
  std::vector<ComparisonEntry> entries_vs_exact;
  for (const auto& c : results["configs"]) {
    if (ReadConfigStatus(c) != ConfigStatus::kOk) continue;
    for (size_t r = 0; r < c["captures"].size(); ++r) {
      log.Info(fmt::format("  comparing {} (repeat {}) with the exact reference", c["name"].get<std::string>(), r + 1));
      auto cmp = CompareFiles(exact, c["captures"][r].get<std::string>(), co);
      if (!cmp.ok()) return cmp.status().Prefixed("against the exact reference");
      against["comparisons"].push_back({{"config", c["name"]}, {"repeat", r}, {"compare", ToJson(*cmp)}});
      entries_vs_exact.push_back(EntryOf(c["name"], r, *cmp));
    }
  }
  ref["comparisons"] = against["comparisons"];
  ref["summary"] = nlohmann::json::array();
  for (const auto& c : results["configs"]) {
    auto entries = ComparisonsOf(entries_vs_exact, c["name"]);
    if (entries.empty()) continue;
    const SummaryRow s = SummaryRow::Of(c["name"], entries);
    ref["summary"].push_back(s.ToReferenceJson());
    for (auto& row : results["summary"])
      if (row["config"] == c["name"]) {
        row["exact_flip_rate"] = s.median_flip_rate;
        row["exact_kl_mean"] = s.kl_mean;
      }
  }
  return Status::Ok();
}

std::string AloneOf(const Experiment& exp, const ConfigSpec& c) {
  if (c.knobs.load == 0) return "";
  Knobs alone = c.knobs;
  alone.load = alone.load_seed = 0;
  auto same = [&](const ConfigSpec& o) {
    return o.knobs.load == 0 && o.model_path == c.model_path && o.requantize == c.requantize &&
           o.knobs.ToJson() == alone.ToJson();
  };
  if (same(exp.baseline)) return exp.baseline.name;
  for (const auto& v : exp.variants)
    if (same(v)) return v.name;
  return "";
}

namespace {

// The floor alone (load 0: the baseline's repeats) and under each load (the baseline's loaded
// variants against its alone r0), side by side; empty when no variant loads the baseline.
std::vector<LoadFloorRow> LoadFloor(const Experiment& exp, const Floor& floor, const std::vector<SummaryRow>& rows) {
  std::vector<LoadFloorRow> out;
  for (const auto& v : exp.variants) {
    if (AloneOf(exp, v) != exp.baseline.name) continue;
    for (const SummaryRow& s : rows)
      if (s.config == v.name)
        out.push_back({v.knobs.load, v.name, s.repeats, s.flips, s.probes, s.median_flip_rate, s.flip_rate_ci,
                       s.kl_mean, s.AllBitIdentical()});
  }
  if (out.empty()) return out;
  out.insert(out.begin(), LoadFloorRow{0, exp.baseline.name, floor.repeats, floor.flips, floor.probes, floor.flip_rate,
                                       floor.flip_rate_ci, floor.kl_mean, floor.bit_identical});
  return out;
}

}  // namespace

void Summarize(const Experiment& exp, nlohmann::json& results, const std::vector<ComparisonEntry>& comparisons) {
  const std::string base = results["baseline"];
  auto floor_cmps = ComparisonsOf(comparisons, base);
  const Floor floor = Floor::Of(floor_cmps.empty() ? std::nullopt : std::optional(SummaryRow::Of(base, floor_cmps)),
                                floor_cmps.size() + 1);
  results["floor"] = floor.ToJson();
  // A configuration is above the floor when its median flip rate exceeds the upper end of the
  // floor's 95% interval (or, when repeats are bit-for-bit identical, when it flips at all).
  const double floor_hi = floor.Threshold();
  std::vector<SummaryRow> rows;
  for (const auto& c : results["configs"]) {
    if (ReadConfigStatus(c) != ConfigStatus::kOk) continue;
    auto cmps = ComparisonsOf(comparisons, c["name"]);
    if (cmps.empty()) continue;
    SummaryRow s = SummaryRow::Of(c["name"], cmps);
    s.above_floor = s.median_flip_rate > floor_hi;
    for (const auto& v : exp.variants)
      if (v.name == s.config && v.knobs.load > 0) {
        s.load = v.knobs.load;
        s.alone = AloneOf(exp, v);
      }
    rows.push_back(std::move(s));
  }
  results["summary"] = nlohmann::json::array();
  for (const SummaryRow& s : rows) results["summary"].push_back(s.ToJson());
  if (auto load = LoadFloor(exp, floor, rows); !load.empty()) {
    results["load_floor"] = nlohmann::json::array();
    for (const LoadFloorRow& r : load) results["load_floor"].push_back(r.ToJson());
  }
}

void AddDamage(nlohmann::json& results) {
  if (!results.contains("summary")) return;
  for (auto& row : results["summary"]) {
    SummaryRow s = SummaryRow::FromJson(row);
    s.forks_known = true;
    s.forks.reset();
    for (const auto& b : results.value("branches", nlohmann::json::array())) {
      if (b["config"] != s.config) continue;
      const auto& counts = b["counts"];
      const auto outcomes = counts.value("outcomes", nlohmann::json::object());
      ForkCounts f;
      f.followed = counts.value("total", int64_t(0));
      f.damage = outcomes.value("damage", nlohmann::json::object()).value("total", int64_t(0));
      f.repair = outcomes.value("repair", nlohmann::json::object()).value("total", int64_t(0));
      f.teacher_forced_only = counts.value("teacher_forced_only", int64_t(0));
      f.forkable = counts.value("branch_points", f.followed);
      // The followed forks are a sample of the flips where the model writes, and only those can
      // do damage: their damage share scales the flip rate's share of such flips.
      const int64_t flips = f.forkable + f.teacher_forced_only;
      f.damage_rate = f.followed > 0 && flips > 0 ? s.median_flip_rate * double(f.damage) / double(f.followed) *
                                                        double(f.forkable) / double(flips)
                                                  : 0.0;
      s.forks = f;
    }
    row = s.ToJson();
  }
}

}  // namespace flipscope
