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
std::vector<ComparisonEntry> ComparisonsOf(const std::vector<ComparisonRecord>& all, const std::string& name) {
  std::vector<ComparisonEntry> out;
  for (const ComparisonRecord& c : all)
    if (c.entry.config == name) out.push_back(c.entry);
  return out;
}

// A comparison's entry in comparisons[]. Its per-probe metrics are dropped: results.json does not
// hold them, so a record made here equals the one read back from the file.
ComparisonRecord RecordOf(const std::string& config, size_t repeat, Comparison c) {
  ComparisonEntry e{config, int(repeat), ComparisonFigures::Of(c)};
  c.probes = {};
  return {std::move(e), std::move(c)};
}

}  // namespace

double KvBytesPerToken(const ModelInfo& m, const Knobs& k) {
  double per_head_layer = double(m.n_layer) * m.n_head_kv;
  return per_head_layer *
         (m.head_dim_k * KvTypeBytesPerElement(k.cache_type_k) + m.head_dim_v * KvTypeBytesPerElement(k.cache_type_v));
}

// Comparison options of the experiment; token text from the baseline's vocabulary (every
// configuration shares it).
CompareOptions OptionsOf(const Experiment& exp, const Measurements& m) {
  CompareOptions co;
  co.window = exp.window;
  co.confident = exp.confident;
  co.log.bars = false;
  if (auto detok = LoadDetokenizer(m.configs[0].model_path.value_or("")); detok.ok()) co.detokenize = *detok;
  return co;
}

Status CompareAll(const Experiment& exp, Measurements& m, const Log& log) {
  m.comparisons.clear();
  const std::string base0 = m.configs[0].captures[0];
  const CompareOptions co = OptionsOf(exp, m);
  for (const ConfigEntry& c : m.configs) {
    if (!c.Ok()) continue;
    const bool is_base = c.name == exp.baseline.name;
    for (size_t r = is_base ? 1 : 0; r < c.captures.size(); ++r) {
      log.Info(fmt::format("  comparing {} (repeat {}) with the baseline", c.name, r + 1));
      auto cmp = CompareFiles(base0, c.captures[r], co);
      if (!cmp.ok()) return cmp.status();
      m.comparisons.push_back(RecordOf(c.name, r, std::move(*cmp)));
    }
  }
  return Status::Ok();
}

namespace {

// Every capture of m's configurations against the exact capture (as base) into *comparisons, the
// median over repeats per configuration into *summary, and each of m's summary rows' distance.
Status CompareEachWithExact(const std::string& exact, const CompareOptions& co, Measurements& m,
                            std::vector<ComparisonRecord>* comparisons, std::vector<SummaryRow>* summary,
                            const Log& log) {
  comparisons->clear();
  for (const ConfigEntry& c : m.configs) {
    if (!c.Ok()) continue;
    for (size_t r = 0; r < c.captures.size(); ++r) {
      log.Info(fmt::format("  comparing {} (repeat {}) with the exact reference", c.name, r + 1));
      auto cmp = CompareFiles(exact, c.captures[r], co);
      if (!cmp.ok()) return cmp.status().Prefixed("against the exact reference");
      comparisons->push_back(RecordOf(c.name, r, std::move(*cmp)));
    }
  }
  summary->clear();
  for (const ConfigEntry& c : m.configs) {
    auto entries = ComparisonsOf(*comparisons, c.name);
    if (entries.empty()) continue;
    const SummaryRow s = SummaryRow::Of(c.name, entries);
    summary->push_back(s);
    for (SummaryRow& row : m.summary)
      if (row.config == c.name) {
        row.exact_flip_rate = s.median_flip_rate;
        row.exact_kl_mean = s.kl_mean;
      }
  }
  return Status::Ok();
}

}  // namespace

Status CompareWithReference(const Experiment& exp, ExperimentResults& results, const Log& log) {
  ReferenceResults& ref = *results.reference;
  const std::string& exact = ref.capture.captures[0];
  return CompareEachWithExact(exact, OptionsOf(exp, results.measured), results.measured, &ref.comparisons, &ref.summary,
                              log);
}

Status CompareServedWithReference(const Experiment& exp, ExperimentResults& results, const Log& log) {
  ReferenceResults& ref = *results.reference;
  const std::string& exact = ref.capture.captures[0];
  // The truth is one function whichever way a configuration computed it: the served twins are
  // measured against the same exact capture, so that a ranking by served twins reads their own
  // distance to it, never their prefill twins'.
  Measurements& sv = results.served->measured;
  return CompareEachWithExact(exact, OptionsOf(exp, sv), sv, &ref.served_comparisons, &ref.served_summary, log);
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

void Summarize(const Experiment& exp, Measurements& m) {
  const std::string& base = exp.baseline.name;
  auto floor_cmps = ComparisonsOf(m.comparisons, base);
  m.floor = Floor::Of(floor_cmps.empty() ? std::nullopt : std::optional(SummaryRow::Of(base, floor_cmps)),
                      floor_cmps.size() + 1);
  // A configuration is above the floor when its median flip rate exceeds the upper end of the
  // floor's 95% interval (or, when repeats are bit-for-bit identical, when it flips at all).
  const double floor_hi = m.floor->Threshold();
  m.summary.clear();
  for (const ConfigEntry& c : m.configs) {
    if (!c.Ok()) continue;
    auto cmps = ComparisonsOf(m.comparisons, c.name);
    if (cmps.empty()) continue;
    SummaryRow s = SummaryRow::Of(c.name, cmps);
    s.above_floor = s.median_flip_rate > floor_hi;
    for (const auto& v : exp.variants)
      if (v.name == s.config && v.knobs.load > 0) {
        s.load = v.knobs.load;
        s.alone = AloneOf(exp, v);
      }
    m.summary.push_back(std::move(s));
  }
  m.load_floor = LoadFloor(exp, *m.floor, m.summary);
}

void AddDamage(Measurements& m) {
  static const std::vector<BranchRecord> none;
  for (SummaryRow& s : m.summary) {
    s.forks_known = true;
    s.forks.reset();
    for (const BranchRecord& b : m.branches ? *m.branches : none) {
      if (b.config != s.config) continue;
      ForkCounts f = b.Counts();
      // The followed forks are a sample of the flips where the model writes, and only those can
      // do damage: their damage share scales the flip rate's share of such flips.
      const int64_t flips = f.forkable + f.teacher_forced_only;
      f.damage_rate = f.followed > 0 && flips > 0 ? s.median_flip_rate * double(f.damage) / double(f.followed) *
                                                        double(f.forkable) / double(flips)
                                                  : 0.0;
      s.forks = f;
    }
  }
}

int64_t FirstRepeatFlips(const Measurements& m, const std::string& name) {
  int64_t flips = 0;
  for (const ComparisonRecord& c : m.comparisons)
    if (c.entry.config == name && c.entry.repeat == 0) flips = c.entry.figures.flips;
  return flips;
}

}  // namespace flipscope
