// suite.json: the suite's results, typed (results/suite_result.h), to JSON and back.
#include "results/suite_result.h"

#include "util/read.h"
#include "util/util.h"

namespace flipscope {

using nlohmann::json;
using namespace read;

namespace {

json IntervalJson(const Interval& i) { return json::array({i[0], i[1]}); }
Interval SuiteInterval(const json& j, std::string_view key) { return Interval2(j, key).value_or(Interval{0, 0}); }

json ToJson(const SuiteSessionRow& r) {
  json j = {{"session", r.session},
            {"probes", r.probes},
            {"flips", r.flips},
            {"flip_rate", r.flip_rate},
            {"kl_mean", r.kl_mean},
            {"above_floor", r.above_floor},
            {"damage_rate", OrNull(r.damage_rate)},
            {"damage", OrNull(r.damage)},
            {"followed", OrNull(r.followed)}};
  PutIf(j, "rank", r.rank);
  return j;
}
SuiteSessionRow SessionRowOf(const json& j) {
  return {Str(j, "session"),
          Get<int64_t>(j, "probes", 0),
          Get<int64_t>(j, "flips", 0),
          Get<double>(j, "flip_rate", 0),
          Get<double>(j, "kl_mean", 0),
          Opt<double>(j, "damage_rate"),
          Opt<int64_t>(j, "damage"),
          Opt<int64_t>(j, "followed"),
          Get<bool>(j, "above_floor", false),
          Opt<int>(j, "rank")};
}

json ToJson(const KindRow& r) {
  return {{"kind", r.kind},   {"session", r.session}, {"probes", r.probes},
          {"flips", r.flips}, {"kl_mean", r.kl_mean}, {"flip_rate", r.flip_rate}};
}
// Files without flip_rate (unweighted rows) read it as flips / probes.
double FlipRateOf(const json& j, int64_t flips, int64_t probes) {
  return Get<double>(j, "flip_rate", probes ? double(flips) / double(probes) : 0.0);
}
KindRow KindRowOf(const json& j) {
  KindRow r{Str(j, "kind"), Str(j, "session"), Get<int64_t>(j, "probes", 0), Get<int64_t>(j, "flips", 0),
            Get<double>(j, "kl_mean", 0)};
  r.flip_rate = FlipRateOf(j, r.flips, r.probes);
  return r;
}

json ToJson(const DepthRow& r) {
  return {{"session", r.session}, {"begin", r.begin},        {"end", r.end}, {"probes", r.probes}, {"flips", r.flips},
          {"kl_mean", r.kl_mean}, {"flip_rate", r.flip_rate}};
}
DepthRow DepthRowOf(const json& j) {
  DepthRow r{Str(j, "session"),           Get<int64_t>(j, "begin", 0),
             Get<int64_t>(j, "end", 0),   Get<int64_t>(j, "probes", 0),
             Get<int64_t>(j, "flips", 0), Get<double>(j, "kl_mean", 0)};
  r.flip_rate = FlipRateOf(j, r.flips, r.probes);
  return r;
}

json OptFigure(const std::optional<PooledFigure>& f) { return f ? f->ToJson() : json(nullptr); }
std::optional<PooledFigure> OptFigureOf(const json& j, std::string_view key) {
  const json& s = Sub(j, key);
  return s.is_object() ? std::optional(PooledFigure::FromJson(s)) : std::nullopt;
}

json ToJson(const SuiteConfig& c) {
  json j = {{"config", c.config},
            {"status", c.status},
            {"reason", c.reason},
            {"repeats", c.repeats},
            {"flip_rate", OptFigure(c.flip_rate)},
            {"kl_mean", OptFigure(c.kl_mean)},
            {"damage_rate", OptFigure(c.damage_rate)},
            {"probes", c.probes},
            {"flips", c.flips},
            {"above_floor", c.above_floor},
            {"sessions", ArrayOf(c.sessions, [](const auto& r) { return ToJson(r); })},
            {"concentration", nullptr},
            {"kinds", ArrayOf(c.kinds, [](const auto& r) { return ToJson(r); })},
            {"depth", ArrayOf(c.depth, [](const auto& r) { return ToJson(r); })}};
  if (c.concentration)
    j["concentration"] = {
        {"session", c.concentration->session}, {"of", c.concentration->of}, {"share", c.concentration->share}};
  return j;
}
SuiteConfig ConfigOf(const json& j) {
  SuiteConfig c;
  c.config = Str(j, "config"), c.status = Str(j, "status"), c.reason = Str(j, "reason");
  c.repeats = Int(j, "repeats", 0);
  c.flip_rate = OptFigureOf(j, "flip_rate"), c.kl_mean = OptFigureOf(j, "kl_mean");
  c.damage_rate = OptFigureOf(j, "damage_rate");
  c.probes = Get<int64_t>(j, "probes", 0), c.flips = Get<int64_t>(j, "flips", 0);
  c.above_floor = Get<bool>(j, "above_floor", false);
  c.sessions = Each<SuiteSessionRow>(Sub(j, "sessions"), SessionRowOf);
  if (const json& k = Sub(j, "concentration"); k.is_object())
    c.concentration = Concentration{Str(k, "session"), Str(k, "of"), Get<double>(k, "share", 0)};
  c.kinds = Each<KindRow>(Sub(j, "kinds"), KindRowOf);
  c.depth = Each<DepthRow>(Sub(j, "depth"), DepthRowOf);
  return c;
}

json ToJsonRow(const SuiteSessionRow& r) { return ToJson(r); }
json ToJsonConfig(const SuiteConfig& c) { return ToJson(c); }

}  // namespace

json PooledFigure::ToJson() const {
  json j = {{"value", value}, {"ci", IntervalJson(ci)}};
  if (naive_ci) j["naive_ci"] = IntervalJson(*naive_ci);
  return j;
}

PooledFigure PooledFigure::FromJson(const json& j) {
  return {Get<double>(j, "value", 0), SuiteInterval(j, "ci"), Interval2(j, "naive_ci")};
}

const SuiteConfig* SuiteResults::Config(const std::string& name) const {
  for (const SuiteConfig& c : configs)
    if (c.config == name) return &c;
  return nullptr;
}

json SuiteResults::ToJson() const {
  json j = {{"flipscope_version", flipscope_version},
            {"created", created},
            {"name", name},
            {"experiment_file", experiment_file},
            {"baseline", baseline},
            {"window", window},
            {"block", block},
            {"replicates", replicates}};
  j["sessions"] = ArrayOf(sessions, [](const SuiteSession& s) {
    return json{
        {"name", s.name}, {"workload", s.workload}, {"outdir", s.outdir}, {"weight", s.weight}, {"tokens", s.tokens}};
  });
  j["floor"] = OptFigure(floor);
  j["floor_sessions"] = ArrayOf(floor_sessions, [](const SuiteSessionRow& r) { return ToJsonRow(r); });
  j["configs"] = ArrayOf(configs, [](const SuiteConfig& c) { return ToJsonConfig(c); });
  j["matrix"] = {{"cells", matrix_cells}, {"baseline_cell", matrix_baseline_cell}};
  j["recipe"] = recipe ? flipscope::ToJson(*recipe) : json(nullptr);
  j["rank_differences"] = ArrayOf(rank_differences, [](const RankDifference& d) {
    return json{{"session", d.session}, {"recommended", d.recommended}, {"reversed", d.reversed}};
  });
  return j;
}

SuiteResults SuiteResults::FromJson(const json& j) {
  SuiteResults r;
  r.flipscope_version = Str(j, "flipscope_version"), r.created = Str(j, "created"), r.name = Str(j, "name");
  r.experiment_file = Str(j, "experiment_file"), r.baseline = Str(j, "baseline");
  r.window = Get<int64_t>(j, "window", 0), r.block = Int(j, "block", 0), r.replicates = Int(j, "replicates", 0);
  r.sessions = Each<SuiteSession>(Sub(j, "sessions"), [](const json& s) {
    return SuiteSession{Str(s, "name"), Str(s, "workload"), Str(s, "outdir"), Get<double>(s, "weight", 1),
                        Get<int64_t>(s, "tokens", 0)};
  });
  r.floor = OptFigureOf(j, "floor");
  r.floor_sessions = Each<SuiteSessionRow>(Sub(j, "floor_sessions"), SessionRowOf);
  r.configs = Each<SuiteConfig>(Sub(j, "configs"), ConfigOf);
  r.matrix_cells = Values<std::string>(Sub(j, "matrix"), "cells");
  r.matrix_baseline_cell = Str(Sub(j, "matrix"), "baseline_cell");
  if (const json& rc = Sub(j, "recipe"); rc.is_object()) r.recipe = RecipeFromJson(rc);
  r.rank_differences = Each<RankDifference>(Sub(j, "rank_differences"), [](const json& d) {
    return RankDifference{Str(d, "session"), Str(d, "recommended"), Values<std::string>(d, "reversed")};
  });
  return r;
}

Result<SuiteResults> ReadSuiteFile(const std::string& path) {
  auto text = ReadFile(path);
  if (!text.ok()) return text.status();
  const json doc = json::parse(*text, nullptr, false);
  if (doc.is_discarded() || !doc.is_object() || !Sub(doc, "sessions").is_array())
    return Status::Error(path + ": not a suite.json written by flipscope run");
  return SuiteResults::FromJson(doc);
}

}  // namespace flipscope
