// The results document's typed rows: how they are computed from comparisons, written and read.
#include "results/results.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "util/read.h"

namespace flipscope {
namespace {

using nlohmann::json;

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

using read::Get;
using read::Opt;
using read::OrNull;
// The interval at key, when it is an array of two numbers.
std::optional<Interval> OptInterval(const json& j, const char* key) { return read::Interval2(j, key); }
// The value at key; null when absent.
const json& At(const json& j, const char* key) { return read::Sub(j, key); }

}  // namespace

ComparisonFigures ComparisonFigures::Of(const Comparison& c) {
  const OverallStats& o = c.overall;
  ComparisonFigures f;
  f.flip_rate = o.flip_rate;
  f.flip_rate_ci = Interval{o.flip_rate_ci.first, o.flip_rate_ci.second};
  f.flips = o.flips, f.probes = o.probes, f.confident_flips = o.confident_flips, f.uncertain_flips = o.uncertain_flips;
  // A figure an old document lacks (NaN when read) counts as 0, as it always did.
  auto finite = [](double v) { return std::isfinite(v) ? v : 0.0; };
  f.kl_mean = finite(o.kl_base_cand.mean), f.kl_p99 = finite(o.kl_base_cand.p99), f.kl_max = finite(o.kl_base_cand.max);
  if (std::isfinite(o.same_top1_rate)) f.same_top1_rate = o.same_top1_rate;
  f.bit_identical = c.bit_identical, f.probes_compared = c.probes_compared;
  return f;
}

size_t MedianRepeatIndex(const std::vector<double>& rates) {
  if (rates.empty()) return 0;
  std::vector<size_t> order(rates.size());
  std::iota(order.begin(), order.end(), size_t(0));
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return rates[a] < rates[b]; });
  return order[(order.size() - 1) / 2];
}

SummaryRow SummaryRow::Of(const std::string& config, const std::vector<ComparisonEntry>& entries) {
  SummaryRow s;
  s.config = config;
  s.repeats = int(entries.size());
  std::vector<double> kl, p99, mx;
  for (const ComparisonEntry& e : entries) {
    s.flip_rates.push_back(e.figures.flip_rate);
    kl.push_back(e.figures.kl_mean);
    p99.push_back(e.figures.kl_p99);
    mx.push_back(e.figures.kl_max);
    s.bit_identical += e.figures.bit_identical;
    s.bit_identical_of += e.figures.probes_compared;
  }
  s.median_flip_rate = Median(s.flip_rates);
  s.kl_mean = Median(kl);
  s.kl_p99 = Median(p99);
  s.kl_max = Median(mx);
  if (entries.empty()) return s;
  // The median repeat carries the interval, the counts and (in the report) the flip list.
  const ComparisonEntry& rep = entries[MedianRepeatIndex(s.flip_rates)];
  s.median_repeat = rep.repeat;
  s.flip_rate_ci = rep.figures.flip_rate_ci;
  s.flips = rep.figures.flips;
  s.probes = rep.figures.probes;
  s.confident_flips = rep.figures.confident_flips;
  s.uncertain_flips = rep.figures.uncertain_flips;
  s.same_top1_rate = rep.figures.same_top1_rate;
  return s;
}

json SummaryRow::ToJson() const {
  json j = {{"config", config},
            {"repeats", repeats},
            {"median_flip_rate", median_flip_rate},
            {"median_repeat", OrNull(median_repeat)},
            {"flip_rates", flip_rates},
            {"flip_rate_ci", OrNull(flip_rate_ci)},
            {"flips", flips},
            {"probes", probes},
            {"confident_flips", confident_flips},
            {"uncertain_flips", uncertain_flips},
            {"kl_mean", kl_mean},
            {"kl_p99", kl_p99},
            {"kl_max", kl_max},
            {"same_top1_rate", OrNull(same_top1_rate)},
            {"bit_identical", bit_identical},
            {"bit_identical_of", bit_identical_of}};
  if (above_floor) j["above_floor"] = *above_floor;
  if (load) {
    j["load"] = *load;
    j["alone"] = alone.empty() ? json(nullptr) : json(alone);
  }
  if (forks_known) {
    j["damage"] = forks ? json(forks->damage) : json(nullptr);
    j["repair"] = forks ? json(forks->repair) : json(nullptr);
    j["branches_followed"] = forks ? json(forks->followed) : json(nullptr);
    j["damage_rate"] = forks ? json(forks->damage_rate) : json(nullptr);
    j["forkable_flips"] = forks ? json(forks->forkable) : json(nullptr);
    j["teacher_forced_only"] = forks ? json(forks->teacher_forced_only) : json(nullptr);
    // Derived from the counts above (read back from them, never from these).
    j["damage_rate_ci"] = OrNull(DamageRateCi());
    j["repair_rate"] = forks ? json(*RepairRate()) : json(nullptr);
    j["repair_rate_ci"] = OrNull(RepairRateCi());
  }
  if (exact_flip_rate) j["exact_flip_rate"] = *exact_flip_rate;
  if (exact_kl_mean) j["exact_kl_mean"] = *exact_kl_mean;
  return j;
}

json SummaryRow::ToReferenceJson() const {
  return {{"config", config},
          {"repeats", repeats},
          {"median_flip_rate", median_flip_rate},
          {"median_repeat", OrNull(median_repeat)},
          {"flip_rate_ci", OrNull(flip_rate_ci)},
          {"flips", flips},
          {"probes", probes},
          {"kl_mean", kl_mean},
          {"kl_p99", kl_p99}};
}

SummaryRow SummaryRow::FromJson(const json& j) {
  SummaryRow s;
  s.config = Get<std::string>(j, "config", "");
  s.repeats = Get(j, "repeats", 0);
  s.median_flip_rate = Get(j, "median_flip_rate", 0.0);
  s.median_repeat = Opt<int>(j, "median_repeat");
  for (const json& r : At(j, "flip_rates").is_array() ? At(j, "flip_rates") : json::array())
    if (r.is_number()) s.flip_rates.push_back(r.get<double>());
  s.flip_rate_ci = OptInterval(j, "flip_rate_ci");
  s.flips = Get<int64_t>(j, "flips", 0);
  s.probes = Get<int64_t>(j, "probes", 0);
  s.confident_flips = Get<int64_t>(j, "confident_flips", 0);
  s.uncertain_flips = Get<int64_t>(j, "uncertain_flips", 0);
  s.kl_mean = Get(j, "kl_mean", 0.0);
  s.kl_p99 = Get(j, "kl_p99", 0.0);
  s.kl_max = Get(j, "kl_max", 0.0);
  s.same_top1_rate = Opt<double>(j, "same_top1_rate");
  s.bit_identical = Get<int64_t>(j, "bit_identical", 0);
  s.bit_identical_of = Get<int64_t>(j, "bit_identical_of", 0);
  s.above_floor = Opt<bool>(j, "above_floor");
  s.load = Opt<int>(j, "load");
  s.alone = Get<std::string>(j, "alone", "");
  s.forks_known = j.is_object() && j.contains("damage");
  if (auto damage = Opt<int64_t>(j, "damage")) {
    s.forks = ForkCounts{*damage, Get<int64_t>(j, "repair", 0), Get<int64_t>(j, "branches_followed", 0),
                         Get(j, "damage_rate", 0.0)};
    s.forks->teacher_forced_only = Get<int64_t>(j, "teacher_forced_only", 0);
    s.forks->forkable = Get<int64_t>(j, "forkable_flips", s.forks->followed);  // older results: followed
  }
  s.exact_flip_rate = Opt<double>(j, "exact_flip_rate");
  s.exact_kl_mean = Opt<double>(j, "exact_kl_mean");
  return s;
}

Floor Floor::Of(const std::optional<SummaryRow>& s, size_t n_captures) {
  Floor f;
  f.repeats = int(n_captures);
  if (!s) {
    f.note = "the baseline ran once: no repeat floor (set repeats >= 2 in [baseline])";
    return f;
  }
  f.flip_rate = s->median_flip_rate;
  f.flip_rate_ci = s->flip_rate_ci;
  f.flips = s->flips;
  f.probes = s->probes;
  f.kl_mean = s->kl_mean;
  f.bit_identical = s->AllBitIdentical();
  return f;
}

double Floor::Threshold() const {
  if (!flip_rate || bit_identical.value_or(false) || !flip_rate_ci) return 0.0;
  return (*flip_rate_ci)[1];
}

json Floor::ToJson() const {
  json j = {{"repeats", repeats}, {"flip_rate", OrNull(flip_rate)}, {"bit_identical", OrNull(bit_identical)}};
  if (!flip_rate) {
    j["note"] = note;
    return j;
  }
  j["flip_rate_ci"] = OrNull(flip_rate_ci);
  j["flips"] = OrNull(flips);
  j["probes"] = OrNull(probes);
  j["kl_mean"] = OrNull(kl_mean);
  return j;
}

Floor Floor::FromJson(const json& j) {
  Floor f;
  f.repeats = Get(j, "repeats", 0);
  f.flip_rate = Opt<double>(j, "flip_rate");
  f.flip_rate_ci = OptInterval(j, "flip_rate_ci");
  f.flips = Opt<int64_t>(j, "flips");
  f.probes = Opt<int64_t>(j, "probes");
  f.kl_mean = Opt<double>(j, "kl_mean");
  f.bit_identical = Opt<bool>(j, "bit_identical");
  f.note = Get<std::string>(j, "note", "");
  return f;
}

json LoadFloorRow::ToJson() const {
  return {{"load", load},
          {"config", config},
          {"repeats", repeats},
          {"flips", OrNull(flips)},
          {"probes", OrNull(probes)},
          {"flip_rate", OrNull(flip_rate)},
          {"flip_rate_ci", OrNull(flip_rate_ci)},
          {"kl_mean", OrNull(kl_mean)},
          {"bit_identical", OrNull(bit_identical)}};
}

LoadFloorRow LoadFloorRow::FromJson(const json& j) {
  LoadFloorRow r;
  r.load = Get(j, "load", 0);
  r.config = Get<std::string>(j, "config", "");
  r.repeats = Get(j, "repeats", 0);
  r.flips = Opt<int64_t>(j, "flips");
  r.probes = Opt<int64_t>(j, "probes");
  r.flip_rate = Opt<double>(j, "flip_rate");
  r.flip_rate_ci = OptInterval(j, "flip_rate_ci");
  r.kl_mean = Opt<double>(j, "kl_mean");
  r.bit_identical = Opt<bool>(j, "bit_identical");
  return r;
}

std::string ServedName(const std::string& config) { return config + "@served"; }

std::string UnservedName(const std::string& name) {
  constexpr std::string_view kSuffix = "@served";
  return name.ends_with(kSuffix) ? name.substr(0, name.size() - kSuffix.size()) : name;
}

json ReplayGroup::ToJson() const {
  return {{"group", name},          {"probes", probes},   {"flips", flips},
          {"flip_rate", flip_rate}, {"kl_mean", kl_mean}, {"bit_identical", bit_identical}};
}

ReplayGroup ReplayGroup::FromJson(const json& j) {
  ReplayGroup g;
  g.name = Get<std::string>(j, "group", "");
  g.probes = Get<int64_t>(j, "probes", 0);
  g.flips = Get<int64_t>(j, "flips", 0);
  g.flip_rate = Get(j, "flip_rate", 0.0);
  g.kl_mean = Get(j, "kl_mean", 0.0);
  g.bit_identical = Get<int64_t>(j, "bit_identical", 0);
  return g;
}

json ReplayDistance::ToJson() const {
  const ComparisonFigures& f = figures;
  json groups_json = json::array();
  for (const ReplayGroup& g : groups) groups_json.push_back(g.ToJson());
  json j = {{"config", config},
            {"flips", f.flips},
            {"probes", f.probes},
            {"flip_rate", f.flip_rate},
            {"flip_rate_ci", OrNull(f.flip_rate_ci)},
            {"confident_flips", f.confident_flips},
            {"kl_mean", f.kl_mean},
            {"kl_p99", f.kl_p99},
            {"kl_max", f.kl_max},
            {"bit_identical", f.bit_identical},
            {"probes_compared", f.probes_compared},
            {"groups", groups_json}};
  if (windows) j["windows"] = WindowsToJson(*windows);
  return j;
}

ReplayDistance ReplayDistance::FromJson(const json& j) {
  ReplayDistance d;
  d.config = Get<std::string>(j, "config", "");
  ComparisonFigures& f = d.figures;
  f.flips = Get<int64_t>(j, "flips", 0);
  f.probes = Get<int64_t>(j, "probes", 0);
  f.flip_rate = Get(j, "flip_rate", 0.0);
  f.flip_rate_ci = OptInterval(j, "flip_rate_ci");
  f.confident_flips = Get<int64_t>(j, "confident_flips", 0);
  f.kl_mean = Get(j, "kl_mean", 0.0);
  f.kl_p99 = Get(j, "kl_p99", 0.0);
  f.kl_max = Get(j, "kl_max", 0.0);
  f.bit_identical = Get<int64_t>(j, "bit_identical", 0);
  f.probes_compared = Get<int64_t>(j, "probes_compared", 0);
  const json& groups = At(j, "groups");
  if (groups.is_array())
    for (const json& g : groups)
      if (g.is_object()) d.groups.push_back(ReplayGroup::FromJson(g));
  if (j.is_object() && j.contains("windows")) d.windows = WindowsFromJson(j["windows"]);
  return d;
}

json ReplayRanking::ToJson() const { return {{"prefill", prefill}, {"served", served}, {"changed", changed}}; }

ReplayRanking ReplayRanking::FromJson(const json& j) {
  ReplayRanking r;
  for (const char* key : {"prefill", "served"}) {
    const json& names = At(j, key);
    if (!names.is_array()) continue;
    for (const json& n : names)
      if (n.is_string()) (std::string(key) == "prefill" ? r.prefill : r.served).push_back(n.get<std::string>());
  }
  r.changed = Get(j, "changed", false);
  return r;
}

std::optional<ConfigStatus> ReadConfigStatus(const json& config) {
  const json* status = config.is_object() && config.contains("status") ? &config["status"] : nullptr;
  if (!status || !status->is_string()) return std::nullopt;
  return FromName<ConfigStatus>(status->get<std::string>());
}

}  // namespace flipscope
