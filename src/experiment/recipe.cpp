// The recipe: rank configurations by fidelity against memory and say which one to run.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "experiment/steps.h"
#include "results/results.h"
#include "util/util.h"

namespace flipscope {
namespace {

using nlohmann::json;

// A configuration that is within the repeat floor alone (or is the baseline) but flips above it
// when other sequences share its batches: its alone figures do not hold on a busy server.
json LoadWarnings(const ResultsRows& rows, const std::string& baseline) {
  json out = json::array();
  for (const SummaryRow& s : rows.summary) {
    if (!s.load || s.alone.empty() || !s.above_floor.value_or(false)) continue;
    const SummaryRow* alone = rows.Find(s.alone);
    const bool fine_alone = alone ? !alone->above_floor.value_or(true) : s.alone == baseline;
    if (!fine_alone) continue;
    out.push_back(
        fmt::format("{} is within the repeat floor alone, but under load {} ({}) it flips {} of {} probes "
                    "({:.3f}%): on a server that batches requests its figures do not hold",
                    s.alone, *s.load, s.config, s.flips, s.probes, 100 * s.median_flip_rate));
  }
  return out;
}

// A configuration's KV bytes per token; -1 when unknown (a server configuration).
double Kv(const json& c) {
  auto it = c.find("kv_bytes_per_token");
  return it != c.end() && it->is_number() ? it->get<double>() : -1.0;
}

// The launch command a server configuration ran, as recorded in its capture's manifest; null otherwise.
json LaunchCommand(const json& c) {
  const json* j = &c;
  for (const char* key : {"engine", "launch", "run", "command"}) {
    if (!j->is_object() || !j->contains(key)) return nullptr;
    j = &(*j)[key];
  }
  return j->is_string() ? *j : json(nullptr);
}

// One configuration as the recipe weighs it.
struct RecipeRow {
  std::string name;
  const json* config = nullptr;  // its configs[] entry
  const SummaryRow* summary = nullptr;
  double rate = 0, kl = 0, kv = -1, weights = 0;
  // The damaging flips per probe that following the forks measured; where they were not
  // followed every flip counts as possible damage, so that an unmeasured configuration never
  // ranks above a measured one with the same flips.
  double damage_key = 0;
  double exact_rate = INFINITY, exact_kl = INFINITY;  // distance to the exact reference, when present
  const SummaryRow* served = nullptr;  // its served twin's row (replay = "both"): ranks in its place
  std::optional<Knobs> knobs = std::nullopt;          // as captured (a llama configuration)
  bool swa_full = false;                              // its command keeps every sliding-window cell
  bool Above() const {
    const SummaryRow* s = served ? served : summary;
    return s && s->above_floor.value_or(false);
  }
  int Load() const { return summary ? summary->load.value_or(0) : 0; }
  bool Damaged() const { return summary && summary->forks && summary->forks->damage > 0; }
};

// The memory budget (weights and KV cache together) and what context it leaves for a configuration.
struct Budget {
  std::optional<double> bytes;
  const ModelInfo* model = nullptr;
  // The largest context whose KV cache, as llama.cpp allocates it, fits in the budget once the
  // weights are subtracted, capped at the training context; null without a budget or knobs.
  json ContextAt(double weights, const std::optional<Knobs>& knobs, bool swa_full) const {
    if (!bytes || !knobs) return nullptr;
    const double left = *bytes - weights;
    if (left <= 0) return 0;
    return ContextFitting(*model, *knobs, left, swa_full);
  }
};

// Every measured configuration, and the baseline even when it ran once; with the exact
// reference their distance to it.
std::vector<RecipeRow> Rows(const json& results, const ResultsRows& typed, const ModelInfo& model) {
  std::vector<RecipeRow> rows;
  auto add = [&](const json& c, const SummaryRow* s) {
    RecipeRow r{
        c["name"], &c, s, s ? s->median_flip_rate : 0.0, s ? s->kl_mean : 0.0, Kv(c), c.value("model_file_size", 0.0)};
    // Measured under served replay too: its served figures rank it (what a deployment computed).
    if ((r.served = typed.FindServed(r.name))) r.rate = r.served->median_flip_rate, r.kl = r.served->kl_mean;
    r.damage_key = s && s->forks ? s->forks->damage_rate : r.rate;
    if (auto k = Knobs::FromJson(c.value("knobs", json())); k.ok() && r.kv >= 0) r.knobs = *k;
    r.swa_full = CapturedSwaFull(c, model);
    for (const SummaryRow& e : typed.reference)
      if (e.config == r.name) r.exact_rate = e.median_flip_rate, r.exact_kl = e.kl_mean;
    rows.push_back(r);
  };
  for (const SummaryRow& s : typed.summary)
    for (const auto& c : results["configs"])
      if (c["name"] == s.config) add(c, &s);
  const json& base = results["configs"][0];
  if (std::none_of(rows.begin(), rows.end(), [&](const RecipeRow& r) { return r.name == base["name"]; }))
    add(base, nullptr);
  return rows;
}

// With the exact reference the ranking is by distance to the true function (then damage): the
// baseline is one more cashier, and may not be the closest. Without it, by damage then fidelity.
void Rank(std::vector<RecipeRow>& rows) {
  const bool by_exact =
      std::any_of(rows.begin(), rows.end(), [](const RecipeRow& r) { return std::isfinite(r.exact_rate); });
  std::sort(rows.begin(), rows.end(), [by_exact](const RecipeRow& a, const RecipeRow& b) {
    if (by_exact)
      return std::tie(a.exact_rate, a.exact_kl, a.damage_key, a.kv) <
             std::tie(b.exact_rate, b.exact_kl, b.damage_key, b.kv);
    return std::tie(a.damage_key, a.rate, a.kl, a.kv) < std::tie(b.damage_key, b.rate, b.kl, b.kv);
  });
}

// The replay a configuration's captures ran (its knobs; a capture without one was a prefill).
std::string ReplayOf(const json& config) {
  const json& knobs = config.value("knobs", json());
  return knobs.is_object() && knobs.value("replay", json()).is_string() ? knobs["replay"].get<std::string>()
                                                                        : "prefill";
}

// How often a configuration's forks started from the token its capture's row chose, as the
// generation reproduced it (branch records' "reproduced"): {"reproduced", "of"}; null without forks.
json Reproduced(const json& results, const std::string& config) {
  for (const auto& b : results.value("branches", json::array())) {
    if (!b.is_object() || b.value("config", std::string()) != config) continue;
    int64_t yes = 0, of = 0;
    for (const auto& r : b.value("records", json::array()))
      if (r.is_object() && r.contains("reproduced") && r["reproduced"].is_boolean())
        ++of, yes += r["reproduced"].get<bool>();
    return {{"reproduced", yes}, {"of", of}};
  }
  return nullptr;
}

json RankingJson(const json& results, const std::vector<RecipeRow>& rows, const Budget& budget) {
  auto finite = [](double v) { return std::isfinite(v) ? json(v) : json(); };
  json ranking = json::array();
  for (const RecipeRow& r : rows) {
    // What following the forks found; null where they were not followed.
    json damage, repair, followed, damage_rate;
    if (r.summary && r.summary->forks) {
      const ForkCounts& f = *r.summary->forks;
      damage = f.damage, repair = f.repair, followed = f.followed, damage_rate = f.damage_rate;
    }
    ranking.push_back({{"config", r.name},
                       {"replay", r.served ? "served" : ReplayOf(*r.config)},
                       {"median_flip_rate", r.rate},
                       {"damage", damage},
                       {"repair", repair},
                       {"branches_followed", followed},
                       {"damage_rate", damage_rate},
                       {"kl_mean", r.kl},
                       {"exact_flip_rate", finite(r.exact_rate)},
                       {"exact_kl_mean", finite(r.exact_kl)},
                       {"kv_bytes_per_token", r.kv < 0 ? json(nullptr) : json(r.kv)},
                       {"weights_bytes", r.weights},
                       {"context_at_budget", budget.ContextAt(r.weights, r.knobs, r.swa_full)},
                       {"above_floor", r.Above()},
                       {"forks_reproduced", Reproduced(results, r.name)}});
  }
  return ranking;
}

// The configuration indistinguishable from the baseline (not above the floor) that needs the
// least memory and whose followed forks found no damage; the first ranked when none qualifies.
// A server's KV memory is its own affair (unknown here): it is recommended only when nothing else is.
const RecipeRow& Recommend(const std::vector<RecipeRow>& rows, const ModelInfo& model) {
  const RecipeRow* best = nullptr;
  auto memory = [&](const RecipeRow& r) {
    const double kv = r.knobs ? KvCacheMemory(model, *r.knobs, model.n_ctx_train, r.swa_full).bytes
                              : r.kv * double(model.n_ctx_train);
    return kv + r.weights;
  };
  for (const RecipeRow& r : rows) {
    if (r.Load() > 0 || r.Above() || r.kv < 0 || r.Damaged()) continue;
    if (!best || memory(r) < memory(*best)) best = &r;
  }
  return best ? *best : rows.front();
}

std::string Reason(const RecipeRow& best, const std::string& baseline) {
  if (best.kv < 0)
    return "no configuration with a known KV-cache size qualifies; a server's KV memory is its own "
           "(see its launch command): the lowest damage and flip rate";
  if (best.name == baseline)
    return "every variant that saves memory flips choices above the repeat floor; stay on the baseline";
  return fmt::format(
      "its flip rate ({:.3f}%) is within the baseline's repeat floor and it needs {} per token of KV cache",
      100 * best.rate, HumanBytes(best.kv));
}

// Every KV cache type's bytes per token (of full-attention layers) for this model, its KV cache
// at the recommended context with the recommended -ub and --swa-full, and the context each leaves.
json KvTypes(const ModelInfo& model, const Budget& budget, const RecipeRow& best, int64_t n_ctx) {
  json out = json::array();
  for (const auto& t : KvCacheTypes()) {
    Knobs k = best.knobs.value_or(Knobs());
    k.cache_type_k = k.cache_type_v = t;
    out.push_back({{"type", t},
                   {"bytes_per_token", KvBytesPerToken(model, k)},
                   {"bytes_at_context", KvCacheMemory(model, k, n_ctx, best.swa_full).bytes},
                   {"context_at_budget", budget.ContextAt(best.weights, k, best.swa_full)}});
  }
  return out;
}

}  // namespace

json MakeRecipe(const json& results, const ModelInfo& model) {
  const json& budget_json = results["settings"]["memory_budget_bytes"];
  const Budget budget{budget_json.is_number() ? std::optional(budget_json.get<double>()) : std::nullopt, &model};
  const ResultsRows typed = ReadResults(results);
  std::vector<RecipeRow> rows = Rows(results, typed, model);
  Rank(rows);
  const std::string baseline = results["configs"][0]["name"];
  const RecipeRow& best = Recommend(rows, model);
  const json ctx = budget.ContextAt(best.weights, best.knobs, best.swa_full);
  const int64_t c = ctx.is_number() ? ctx.get<int64_t>() : model.n_ctx_train;
  std::string server_command = LlamaCommand("llama-server", *best.config, results, model, c);
  std::string cli_command = LlamaCommand("llama-cli", *best.config, results, model, c);
  json kv_cache = nullptr;  // what the command allocates, and without --swa-full where that differs
  if (best.knobs)
    kv_cache = {{"bytes", KvCacheMemory(model, *best.knobs, c, best.swa_full).bytes},
                {"swa_full", best.swa_full},
                {"bytes_without_swa_full", KvCacheMemory(model, *best.knobs, c, false).bytes}};
  if (best.kv < 0) {
    const json launch = LaunchCommand(*best.config);
    const json flags = best.config->contains("flags") ? (*best.config)["flags"] : json();
    server_command = cli_command = launch.is_string() ? launch.get<std::string>()
                                   : flags.is_string() ? flags.get<std::string>()
                                                       : "";
  }
  return {{"recommended", best.name},
          {"warnings", LoadWarnings(typed, results["baseline"])},
          {"reason", Reason(best, baseline) + (best.served ? " (measured under served replay)" : "")},
          {"ranked_by", std::any_of(rows.begin(), rows.end(), [](const RecipeRow& r) { return r.served; })
                            ? "served replay where it was measured (replay = \"both\"), else prefill"
                            : ReplayOf(results["configs"][0]) + " replay"},
          {"ranking", RankingJson(results, rows, budget)},
          {"kv_types", KvTypes(model, budget, best, c)},
          {"kv_cache", kv_cache},
          {"weights_bytes", best.weights},
          {"memory_budget_bytes", budget.bytes ? json(*budget.bytes) : json(nullptr)},
          {"context", c},
          {"server_command", server_command},
          {"cli_command", cli_command}};
}

}  // namespace flipscope
