// Comparisons of every configuration with the baseline, and their summary over repeats.
#include <fmt/format.h>

#include <algorithm>

#include "compare/compare.h"
#include "engine/engine.h"
#include "experiment/steps.h"

namespace flipscope {
namespace {

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// The comparisons of one configuration, in repeat order.
// A configuration's comparisons (the results' entries: config, repeat, compare), in results order.
std::vector<const nlohmann::json*> ComparisonsOf(const nlohmann::json& results, const std::string& name) {
  std::vector<const nlohmann::json*> out;
  for (const auto& c : results["comparisons"])
    if (c["config"] == name) out.push_back(&c);
  return out;
}

// Median over repeats of the figures that rank a configuration; the CI is the median repeat's.
nlohmann::json SummarizeConfig(const std::string& name, const std::vector<const nlohmann::json*>& entries) {
  std::vector<double> rates, kl, p99, mx;
  int64_t bit = 0, of = 0;
  for (auto* e : entries) {
    const auto& c = (*e)["compare"];
    const auto& o = c["overall"];
    rates.push_back(o["flip_rate"].get<double>());
    kl.push_back(o["kl_base_cand"]["mean"].get<double>());
    p99.push_back(o["kl_base_cand"]["p99"].get<double>());
    mx.push_back(o["kl_base_cand"]["max"].get<double>());
    bit += c["bit_identical"].get<int64_t>();
    of += c["probes_compared"].get<int64_t>();
  }
  double med = Median(rates);
  // The median repeat carries the interval, the counts and (in the report) the flip list: the
  // lower middle by flip rate, ties in repeat order. Its repeat number goes into the summary, so
  // every reader shows the same repeat.
  std::vector<size_t> order(entries.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return rates[a] < rates[b]; });
  const nlohmann::json& rep_entry = *entries[order[(order.size() - 1) / 2]];
  const auto& o = rep_entry["compare"]["overall"];
  return {{"config", name},
          {"repeats", entries.size()},
          {"median_flip_rate", med},
          {"median_repeat", rep_entry["repeat"]},
          {"flip_rates", rates},
          {"flip_rate_ci", o["flip_rate_ci"]},
          {"flips", o["flips"]},
          {"probes", o["probes"]},
          {"confident_flips", o["confident_flips"]},
          {"uncertain_flips", o["uncertain_flips"]},
          {"kl_mean", Median(kl)},
          {"kl_p99", Median(p99)},
          {"kl_max", Median(mx)},
          {"same_top1_rate", o["same_top1_rate"]},
          {"bit_identical", bit},
          {"bit_identical_of", of}};
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
  co.progress = false;
  if (auto detok = LoadDetokenizer(results["configs"][0]["model_path"].get<std::string>()); detok.ok())
    co.detokenize = *detok;
  return co;
}

Status CompareAll(const Experiment& exp, nlohmann::json& results) {
  results["comparisons"] = nlohmann::json::array();
  const auto& configs = results["configs"];
  std::string base0 = configs[0]["captures"][0];
  const CompareOptions co = OptionsOf(exp, results);
  for (const auto& c : configs) {
    if (c["status"] != "ok") continue;
    const auto& caps = c["captures"];
    bool is_base = c["name"] == results["baseline"];
    for (size_t r = is_base ? 1 : 0; r < caps.size(); ++r) {
      fmt::print(stderr, "  comparing {} (repeat {}) with the baseline\n", c["name"].get<std::string>(), r + 1);
      auto cmp = CompareFiles(base0, caps[r].get<std::string>(), co);
      if (!cmp.ok()) return cmp.status();
      results["comparisons"].push_back({{"config", c["name"]}, {"repeat", r}, {"compare", ToJson(*cmp)}});
    }
  }
  return Status::Ok();
}

Status CompareWithReference(const Experiment& exp, nlohmann::json& results) {
  auto& ref = results["reference"];
  const std::string exact = ref["captures"][0];
  const CompareOptions co = OptionsOf(exp, results);
  nlohmann::json against = {{"comparisons", nlohmann::json::array()}};
  for (const auto& c : results["configs"]) {
    if (c["status"] != "ok") continue;
    for (size_t r = 0; r < c["captures"].size(); ++r) {
      fmt::print(stderr, "  comparing {} (repeat {}) with the exact reference\n", c["name"].get<std::string>(), r + 1);
      auto cmp = CompareFiles(exact, c["captures"][r].get<std::string>(), co);
      if (!cmp.ok()) return cmp.status().Prefixed("against the exact reference");
      against["comparisons"].push_back({{"config", c["name"]}, {"repeat", r}, {"compare", ToJson(*cmp)}});
    }
  }
  ref["comparisons"] = against["comparisons"];
  ref["summary"] = nlohmann::json::array();
  for (const auto& c : results["configs"]) {
    auto entries = ComparisonsOf(against, c["name"]);
    if (entries.empty()) continue;
    auto s = SummarizeConfig(c["name"], entries);
    ref["summary"].push_back({{"config", s["config"]},
                              {"repeats", s["repeats"]},
                              {"median_flip_rate", s["median_flip_rate"]},
                              {"median_repeat", s["median_repeat"]},
                              {"flip_rate_ci", s["flip_rate_ci"]},
                              {"flips", s["flips"]},
                              {"probes", s["probes"]},
                              {"kl_mean", s["kl_mean"]},
                              {"kl_p99", s["kl_p99"]}});
    for (auto& row : results["summary"])
      if (row["config"] == c["name"]) {
        row["exact_flip_rate"] = s["median_flip_rate"];
        row["exact_kl_mean"] = s["kl_mean"];
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
// variants against its alone r0), side by side.
nlohmann::json LoadFloor(const Experiment& exp, const nlohmann::json& results) {
  nlohmann::json rows = nlohmann::json::array();
  for (const auto& v : exp.variants) {
    if (AloneOf(exp, v) != exp.baseline.name) continue;
    for (const auto& s : results["summary"])
      if (s["config"] == v.name)
        rows.push_back({{"load", v.knobs.load},
                        {"config", v.name},
                        {"repeats", s["repeats"]},
                        {"flips", s["flips"]},
                        {"probes", s["probes"]},
                        {"flip_rate", s["median_flip_rate"]},
                        {"flip_rate_ci", s["flip_rate_ci"]},
                        {"kl_mean", s["kl_mean"]},
                        {"bit_identical", s["bit_identical"] == s["bit_identical_of"]}});
  }
  if (rows.empty()) return nullptr;
  const auto& f = results["floor"];
  rows.insert(rows.begin(), nlohmann::json{{"load", 0},
                                           {"config", exp.baseline.name},
                                           {"repeats", f["repeats"]},
                                           {"flips", f.value("flips", nlohmann::json())},
                                           {"probes", f.value("probes", nlohmann::json())},
                                           {"flip_rate", f["flip_rate"]},
                                           {"flip_rate_ci", f.value("flip_rate_ci", nlohmann::json())},
                                           {"kl_mean", f.value("kl_mean", nlohmann::json())},
                                           {"bit_identical", f["bit_identical"]}});
  return rows;
}

}  // namespace

void Summarize(const Experiment& exp, nlohmann::json& results) {
  const std::string base = results["baseline"];
  auto floor_cmps = ComparisonsOf(results, base);
  nlohmann::json floor = {{"repeats", floor_cmps.size() + 1}};
  if (!floor_cmps.empty()) {
    auto s = SummarizeConfig(base, floor_cmps);
    floor["flip_rate"] = s["median_flip_rate"];
    floor["flip_rate_ci"] = s["flip_rate_ci"];
    floor["flips"] = s["flips"];
    floor["probes"] = s["probes"];
    floor["kl_mean"] = s["kl_mean"];
    floor["bit_identical"] = s["bit_identical"] == s["bit_identical_of"];
  } else {
    floor["flip_rate"] = nullptr;
    floor["bit_identical"] = nullptr;
    floor["note"] = "the baseline ran once: no repeat floor (set repeats >= 2 in [baseline])";
  }
  results["floor"] = floor;
  // A configuration is above the floor when its median flip rate exceeds the upper end of the
  // floor's 95% interval (or, when repeats are bit-for-bit identical, when it flips at all).
  bool exact = floor["bit_identical"].is_boolean() && floor["bit_identical"].get<bool>();
  double floor_hi = floor["flip_rate"].is_null() || exact ? 0.0 : floor["flip_rate_ci"][1].get<double>();
  results["summary"] = nlohmann::json::array();
  for (const auto& c : results["configs"]) {
    if (c["status"] != "ok") continue;
    auto cmps = ComparisonsOf(results, c["name"]);
    if (cmps.empty()) continue;
    auto s = SummarizeConfig(c["name"], cmps);
    s["above_floor"] = s["median_flip_rate"].get<double>() > floor_hi;
    for (const auto& v : exp.variants)
      if (v.name == c["name"] && v.knobs.load > 0) {
        const std::string alone = AloneOf(exp, v);
        s["load"] = v.knobs.load;
        s["alone"] = alone.empty() ? nlohmann::json(nullptr) : nlohmann::json(alone);
      }
    results["summary"].push_back(s);
  }
  if (auto rows = LoadFloor(exp, results); !rows.is_null()) results["load_floor"] = rows;
}

void AddDamage(nlohmann::json& results) {
  if (!results.contains("summary")) return;
  for (auto& s : results["summary"]) {
    s["damage"] = s["repair"] = s["branches_followed"] = s["damage_rate"] = nullptr;
    if (!results.contains("branches")) continue;
    for (const auto& b : results["branches"]) {
      if (b["config"] != s["config"]) continue;
      const auto& counts = b["counts"];
      const int64_t followed = counts.value("total", int64_t(0));
      const auto outcomes = counts.value("outcomes", nlohmann::json::object());
      const int64_t damage = outcomes.value("damage", nlohmann::json::object()).value("total", int64_t(0));
      s["damage"] = damage;
      s["repair"] = outcomes.value("repair", nlohmann::json::object()).value("total", int64_t(0));
      s["branches_followed"] = followed;
      // The followed forks are a sample of the flips: their damage share scales the flip rate.
      s["damage_rate"] = followed > 0 ? s["median_flip_rate"].get<double>() * double(damage) / double(followed) : 0.0;
    }
  }
}

}  // namespace flipscope
