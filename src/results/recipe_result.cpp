// The recipe's JSON document (results.json "recipe"): written from a RecipeResult, read back tolerantly.
#include "results/recipe_result.h"

#include "util/read.h"

namespace flipscope {
namespace {
using nlohmann::json;
using read::Get;
using read::Opt;
using read::OrNull;
using read::PutIf;
using read::Str;
using read::Sub;
using read::Values;

std::optional<std::array<double, 2>> OptInterval(const json& j, const char* key) { return read::Interval2(j, key); }

json DistanceJson(const RecipeServedDistance& d) {
  return {{"of", d.of},
          {"flips", d.flips},
          {"probes", d.probes},
          {"flip_rate", d.flip_rate},
          {"flip_rate_ci", OrNull(d.flip_rate_ci)},
          {"kl_mean", d.kl_mean}};
}
RecipeServedDistance DistanceFrom(const json& j) {
  RecipeServedDistance d;
  d.of = Str(j, "of"), d.flips = Get<int64_t>(j, "flips", 0), d.probes = Get<int64_t>(j, "probes", 0);
  d.flip_rate = Get(j, "flip_rate", 0.0), d.kl_mean = Get(j, "kl_mean", 0.0);
  d.flip_rate_ci = OptInterval(j, "flip_rate_ci");
  return d;
}

json RowJson(const RecipeRankingRow& r) {
  if (r.name_only) return r.config;
  json j = {{"config", r.config},
            {"tie_group", OrNull(r.tie_group)},
            {"replay", OrNull(r.replay)},
            {"median_flip_rate", r.median_flip_rate},
            {"flip_rate_ci", OrNull(r.flip_rate_ci)},
            {"damage", OrNull(r.damage)},
            {"repair", OrNull(r.repair)},
            {"branches_followed", OrNull(r.branches_followed)},
            {"damage_rate", OrNull(r.damage_rate)},
            {"damage_rate_ci", OrNull(r.damage_rate_ci)},
            {"repair_rate", OrNull(r.repair_rate)},
            {"repair_rate_ci", OrNull(r.repair_rate_ci)},
            {"kl_mean", r.kl_mean},
            {"exact_flip_rate", OrNull(r.exact_flip_rate)},
            {"exact_flip_rate_ci", OrNull(r.exact_flip_rate_ci)},
            {"exact_kl_mean", OrNull(r.exact_kl_mean)},
            {"memory_bytes", OrNull(r.memory_bytes)},
            {"kv_bytes_per_token", OrNull(r.kv_bytes_per_token)},
            {"weights_bytes", OrNull(r.weights_bytes)},
            {"context_at_budget", OrNull(r.context_at_budget)},
            {"above_floor", OrNull(r.above_floor)},
            {"forks_reproduced",
             r.forks_reproduced ? json{{"reproduced", r.forks_reproduced->reproduced}, {"of", r.forks_reproduced->of}}
                                : json(nullptr)}};
  if (r.served_distance) j["served_distance"] = DistanceJson(*r.served_distance);  // absent in early files
  read::KeepExtra(j, r.extra);
  return j;
}

RecipeRankingRow RowFrom(const json& j) {
  RecipeRankingRow r;
  if (j.is_string()) {
    r.config = j.get<std::string>(), r.name_only = true;
    return r;
  }
  r.config = Str(j, "config"), r.tie_group = Opt<int64_t>(j, "tie_group"), r.replay = Opt<std::string>(j, "replay");
  r.median_flip_rate = Get(j, "median_flip_rate", 0.0), r.kl_mean = Get(j, "kl_mean", 0.0);
  r.flip_rate_ci = OptInterval(j, "flip_rate_ci");
  r.damage = Opt<int64_t>(j, "damage"), r.repair = Opt<int64_t>(j, "repair");
  r.branches_followed = Opt<int64_t>(j, "branches_followed");
  r.damage_rate = Opt<double>(j, "damage_rate"), r.damage_rate_ci = OptInterval(j, "damage_rate_ci");
  r.repair_rate = Opt<double>(j, "repair_rate"), r.repair_rate_ci = OptInterval(j, "repair_rate_ci");
  r.exact_flip_rate = Opt<double>(j, "exact_flip_rate"), r.exact_flip_rate_ci = OptInterval(j, "exact_flip_rate_ci");
  r.exact_kl_mean = Opt<double>(j, "exact_kl_mean");
  r.memory_bytes = Opt<double>(j, "memory_bytes"), r.kv_bytes_per_token = Opt<double>(j, "kv_bytes_per_token");
  r.weights_bytes = Opt<double>(j, "weights_bytes"), r.context_at_budget = Opt<int64_t>(j, "context_at_budget");
  r.above_floor = Opt<bool>(j, "above_floor");
  if (const json& f = Sub(j, "forks_reproduced"); f.is_object())
    r.forks_reproduced = RecipeRankingRow::Reproduced{Get<int64_t>(f, "reproduced", 0), Get<int64_t>(f, "of", 0)};
  if (const json& d = Sub(j, "served_distance"); d.is_object()) r.served_distance = DistanceFrom(d);
  r.extra = read::Without(j, {"config",           "tie_group",         "replay",
                              "median_flip_rate", "flip_rate_ci",      "damage",
                              "repair",           "branches_followed", "damage_rate",
                              "damage_rate_ci",   "repair_rate",       "repair_rate_ci",
                              "kl_mean",          "exact_flip_rate",   "exact_flip_rate_ci",
                              "exact_kl_mean",    "memory_bytes",      "kv_bytes_per_token",
                              "weights_bytes",    "context_at_budget", "above_floor",
                              "forks_reproduced", "served_distance"});
  return r;
}

json BasisJson(const RecipeBasis& b) {
  json j = {
      {"rests_on", b.rests_on}, {"tie_group", b.tie_group},  {"tied_with", b.tied_with}, {"confidence", b.confidence},
      {"why", b.why},           {"probes", OrNull(b.probes)}};
  read::KeepExtra(j, b.extra);
  return j;
}
RecipeBasis BasisFrom(const json& j) {
  return {Str(j, "rests_on"),
          Str(j, "confidence"),
          Str(j, "why"),
          Get<int64_t>(j, "tie_group", 0),
          Values<std::string>(j, "tied_with"),
          Opt<int64_t>(j, "probes"),
          read::Without(j, {"rests_on", "tie_group", "tied_with", "confidence", "why", "probes"})};
}

json KvTypeJson(const RecipeKvType& t) {
  json j = {
      {"type", t.type}, {"bytes_per_token", t.bytes_per_token}, {"context_at_budget", OrNull(t.context_at_budget)}};
  PutIf(j, "bytes_at_context", t.bytes_at_context);  // absent in early files
  read::KeepExtra(j, t.extra);
  return j;
}
RecipeKvType KvTypeFrom(const json& j) {
  return {Str(j, "type"), Get(j, "bytes_per_token", 0.0), Opt<double>(j, "bytes_at_context"),
          Opt<int64_t>(j, "context_at_budget"),
          read::Without(j, {"type", "bytes_per_token", "bytes_at_context", "context_at_budget"})};
}

json LaunchJson(const RecipeServerLaunch& l) {
  json j = {{"note", l.note}};
  PutIf(j, "command", l.command), PutIf(j, "as_run", l.as_run);
  if (!l.asked.is_null() || l.command) j["asked"] = l.asked;
  PutIf(j, "env", l.env);
  read::KeepExtra(j, l.extra);
  return j;
}
RecipeServerLaunch LaunchFrom(const json& j) {
  RecipeServerLaunch l;
  l.command = Opt<std::string>(j, "command"), l.as_run = Opt<std::string>(j, "as_run"), l.asked = Sub(j, "asked");
  if (const json& env = Sub(j, "env"); env.is_object()) {
    auto& out = l.env.emplace();
    for (auto it = env.begin(); it != env.end(); ++it)
      if (it->is_string()) out[it.key()] = it->get<std::string>();
  }
  l.note = Str(j, "note");
  l.extra = read::Without(j, {"command", "as_run", "asked", "env", "note"});
  return l;
}

json NotesJson(const std::vector<RecipeProbeNote>& notes) {
  json a = json::array();
  for (const RecipeProbeNote& n : notes) a.push_back({{"position", n.position}, {"why", n.why}});
  return a;
}
std::vector<RecipeProbeNote> NotesFrom(const json& j) {
  return read::Each<RecipeProbeNote>(j, [](const json& n) {
    return RecipeProbeNote{Get<int64_t>(n, "position", -1), Str(n, "why")};
  });
}

constexpr std::initializer_list<const char*> kKeys = {
    "recommended",         "reason",  "warnings",       "ranked_by",   "ranking_key",   "ranking_mode",
    "lacking_forks",       "basis",   "ranking",        "kv_types",    "kv_cache",      "weights_bytes",
    "memory_budget_bytes", "context", "server_command", "cli_command", "server_launch", "verification",
    "not_ranked"};

}  // namespace

json ToJson(const RecipeVerification& v) {
  json j = {{"status", v.status}, {"command", v.command}};
  PutIf(j, "error", v.error), PutIf(j, "llama_server", v.llama_server), PutIf(j, "seconds", v.seconds);
  PutIf(j, "probes_total", v.probes_total), PutIf(j, "probes_checked", v.probes_checked);
  PutIf(j, "matched", v.matched), PutIf(j, "positions", v.positions), PutIf(j, "near_tie", v.near_tie);
  PutIf(j, "tolerance", v.tolerance), PutIf(j, "max_logprob_diff", v.max_logprob_diff), PutIf(j, "top_k", v.top_k);
  PutIf(j, "logprobs_compared", v.logprobs_compared);
  PutIf(j, "logprobs_within_tolerance", v.logprobs_within_tolerance);
  if (v.status != "unverified") j["mismatches"] = NotesJson(v.mismatches), j["near_ties"] = NotesJson(v.near_ties);
  read::KeepExtra(j, v.extra);
  return j;
}

RecipeVerification RecipeVerificationFromJson(const json& j) {
  RecipeVerification v;
  v.status = Str(j, "status"), v.command = Str(j, "command"), v.error = Opt<std::string>(j, "error");
  v.llama_server = Opt<std::string>(j, "llama_server"), v.seconds = Opt<double>(j, "seconds");
  v.probes_total = Opt<int64_t>(j, "probes_total"), v.probes_checked = Opt<int64_t>(j, "probes_checked");
  v.matched = Opt<int64_t>(j, "matched");
  if (Sub(j, "positions").is_array()) v.positions = Values<int64_t>(j, "positions");
  v.mismatches = NotesFrom(Sub(j, "mismatches")), v.near_ties = NotesFrom(Sub(j, "near_ties"));
  v.near_tie = Opt<double>(j, "near_tie"), v.tolerance = Opt<double>(j, "tolerance");
  v.max_logprob_diff = Opt<double>(j, "max_logprob_diff"), v.top_k = Opt<int64_t>(j, "top_k");
  v.logprobs_compared = Opt<int64_t>(j, "logprobs_compared");
  v.logprobs_within_tolerance = Opt<int64_t>(j, "logprobs_within_tolerance");
  v.extra = read::Without(j, {"status", "command", "error", "llama_server", "seconds", "probes_total", "probes_checked",
                              "matched", "positions", "mismatches", "near_ties", "near_tie", "tolerance",
                              "max_logprob_diff", "top_k", "logprobs_compared", "logprobs_within_tolerance"});
  return v;
}

const RecipeRankingRow* RecipeResult::Row(const std::string& config) const {
  for (const RecipeRankingRow& r : ranking)
    if (!r.name_only && r.config == config) return &r;
  return nullptr;
}

const std::string* RecipeResult::NotRankedWhy(const std::string& config) const {
  if (not_ranked)
    for (const RecipeNotRanked& n : *not_ranked)
      if (n.config == config) return &n.reason;
  return nullptr;
}

json ToJson(const RecipeResult& r) {
  json ranking = json::array(), kv_types = json::array();
  for (const RecipeRankingRow& row : r.ranking) ranking.push_back(RowJson(row));
  for (const RecipeKvType& t : r.kv_types) kv_types.push_back(KvTypeJson(t));
  json j = {{"recommended", r.recommended},
            {"reason", r.reason},
            {"warnings", r.warnings},
            {"ranked_by", OrNull(r.ranked_by)},
            {"ranking_key", OrNull(r.ranking_key)},
            {"ranking_mode", OrNull(r.ranking_mode)},
            {"lacking_forks", OrNull(r.lacking_forks)},
            {"basis", r.basis ? BasisJson(*r.basis) : json(nullptr)},
            {"ranking", std::move(ranking)},
            {"kv_types", std::move(kv_types)},
            {"kv_cache", r.kv_cache ? json{{"bytes", r.kv_cache->bytes},
                                           {"swa_full", r.kv_cache->swa_full},
                                           {"bytes_without_swa_full", r.kv_cache->bytes_without_swa_full}}
                                    : json(nullptr)},
            {"weights_bytes", OrNull(r.weights_bytes)},
            {"memory_budget_bytes", OrNull(r.memory_budget_bytes)},
            {"context", OrNull(r.context)},
            {"server_command", r.server_command},
            {"cli_command", r.cli_command},
            {"server_launch", r.server_launch ? LaunchJson(*r.server_launch) : json(nullptr)}};
  if (r.verification) j["verification"] = ToJson(*r.verification);
  if (r.not_ranked)  // absent in early files
    j["not_ranked"] = read::ArrayOf(*r.not_ranked, [](const RecipeNotRanked& n) {
      return json{{"config", n.config}, {"reason", n.reason}};
    });
  read::KeepExtra(j, r.extra);
  return j;
}

RecipeResult RecipeFromJson(const json& j) {
  RecipeResult r;
  r.recommended = Str(j, "recommended"), r.reason = Str(j, "reason"), r.warnings = Values<std::string>(j, "warnings");
  r.ranked_by = Opt<std::string>(j, "ranked_by"), r.ranking_key = Opt<std::string>(j, "ranking_key");
  r.ranking_mode = Opt<std::string>(j, "ranking_mode");
  if (Sub(j, "lacking_forks").is_array()) r.lacking_forks = Values<std::string>(j, "lacking_forks");
  if (Sub(j, "not_ranked").is_array())
    r.not_ranked = read::Each<RecipeNotRanked>(j["not_ranked"], [](const json& n) {
      return RecipeNotRanked{Str(n, "config"), Str(n, "reason")};
    });
  if (Sub(j, "basis").is_object()) r.basis = BasisFrom(j["basis"]);
  r.ranking = read::Each<RecipeRankingRow>(Sub(j, "ranking"), RowFrom);
  r.kv_types = read::Each<RecipeKvType>(Sub(j, "kv_types"), KvTypeFrom);
  if (const json& kv = Sub(j, "kv_cache"); kv.is_object())
    r.kv_cache =
        RecipeKvCache{Get(kv, "bytes", 0.0), Get(kv, "bytes_without_swa_full", 0.0), Get(kv, "swa_full", false)};
  r.weights_bytes = Opt<double>(j, "weights_bytes"), r.memory_budget_bytes = Opt<double>(j, "memory_budget_bytes");
  r.context = Opt<int64_t>(j, "context");
  r.server_command = Str(j, "server_command"), r.cli_command = Str(j, "cli_command");
  if (Sub(j, "server_launch").is_object()) r.server_launch = LaunchFrom(j["server_launch"]);
  if (Sub(j, "verification").is_object()) r.verification = RecipeVerificationFromJson(j["verification"]);
  r.extra = read::Without(j, kKeys);
  return r;
}

}  // namespace flipscope
