// The recipe: rank configurations by fidelity against memory and say which one to run.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "experiment/steps.h"
#include "util/util.h"

namespace flipscope {
namespace {

// A configuration that is within the repeat floor alone (or is the baseline) but flips above it
// when other sequences share its batches: its alone figures do not hold on a busy server.
nlohmann::json LoadWarnings(const nlohmann::json& results) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& s : results["summary"]) {
    if (!s.contains("alone") || !s["alone"].is_string() || !s.value("above_floor", false)) continue;
    const std::string alone = s["alone"];
    bool fine_alone = alone == results["baseline"];
    for (const auto& a : results["summary"])
      if (a["config"] == alone) fine_alone = !a.value("above_floor", true);
    if (!fine_alone) continue;
    out.push_back(
        fmt::format("{} is within the repeat floor alone, but under load {} ({}) it flips {} of {} probes "
                    "({:.3f}%): on a server that batches requests its figures do not hold",
                    alone, s["load"].get<int>(), s["config"].get<std::string>(), s["flips"].get<int64_t>(),
                    s["probes"].get<int64_t>(), 100 * s["median_flip_rate"].get<double>()));
  }
  return out;
}

}  // namespace

namespace {

// A configuration's KV bytes per token; -1 when unknown (a server configuration).
double Kv(const nlohmann::json& c) {
  auto it = c.find("kv_bytes_per_token");
  return it != c.end() && it->is_number() ? it->get<double>() : -1.0;
}

// The launch command a server configuration ran, as recorded in its capture's manifest; null otherwise.
nlohmann::json LaunchCommand(const nlohmann::json& c) {
  const nlohmann::json* j = &c;
  for (const char* key : {"engine", "launch", "run", "command"}) {
    if (!j->is_object() || !j->contains(key)) return nullptr;
    j = &(*j)[key];
  }
  return j->is_string() ? *j : nlohmann::json(nullptr);
}

}  // namespace

nlohmann::json MakeRecipe(const nlohmann::json& results, const Experiment& /*exp*/) {
  const auto& settings = results["settings"];
  std::optional<double> budget;
  if (!settings["memory_budget_bytes"].is_null()) budget = settings["memory_budget_bytes"].get<double>();
  const int64_t n_ctx_train = results["model"].value("n_ctx_train", int64_t(0));

  // Context that fits: (budget - weights) / KV bytes per token, capped at the training context.
  auto context_at = [&](double weights, double kv_per_token) -> nlohmann::json {
    if (!budget || kv_per_token <= 0) return nullptr;
    double left = *budget - weights;
    if (left <= 0) return 0;
    return std::min<int64_t>(int64_t(left / kv_per_token), n_ctx_train);
  };

  // damage_key: the damaging flips per probe that following the forks measured; where they were
  // not followed, every flip counts as possible damage (the flip rate), so that an unmeasured
  // configuration never ranks above a measured one with the same flips.
  struct Row {
    std::string name;
    double rate, kl, kv, weights;
    bool above;
    nlohmann::json flags, model;
    int load = 0;  // > 0: the floor under load of another configuration, never one to run
    double damage_key = 0;
    nlohmann::json launch = nullptr;  // a server configuration's launch command (kv < 0: memory unknown)
    nlohmann::json damage = nullptr, repair = nullptr, followed = nullptr, damage_rate = nullptr;
    double exact_rate = INFINITY, exact_kl = INFINITY;  // distance to the exact reference, when present
  };
  std::vector<Row> rows;
  for (const auto& s : results["summary"]) {
    for (const auto& c : results["configs"]) {
      if (c["name"] != s["config"]) continue;
      Row r{c["name"],  s["median_flip_rate"], s["kl_mean"], Kv(c), c.value("model_file_size", 0.0), s["above_floor"],
            c["flags"], c["model_path"]};
      r.launch = LaunchCommand(c);
      r.damage = s.value("damage", nlohmann::json(nullptr));
      r.repair = s.value("repair", nlohmann::json(nullptr));
      r.followed = s.value("branches_followed", nlohmann::json(nullptr));
      r.damage_rate = s.value("damage_rate", nlohmann::json(nullptr));
      r.damage_key = r.damage_rate.is_number() ? r.damage_rate.get<double>() : r.rate;
      r.load = s.value("load", 0);
      rows.push_back(std::move(r));
    }
  }
  // The baseline belongs in the ranking even when it ran once (no comparison of its own).
  const auto& base = results["configs"][0];
  if (std::none_of(rows.begin(), rows.end(), [&](const Row& r) { return r.name == base["name"]; })) {
    rows.push_back({base["name"], 0.0, 0.0, Kv(base), base.value("model_file_size", 0.0), false, base["flags"],
                    base["model_path"]});
    rows.back().launch = LaunchCommand(base);
  }
  // With the exact reference the ranking is by distance to the true function (then damage): the
  // baseline is one more cashier, and may not be the closest.
  const nlohmann::json& exact =
      results.contains("reference") ? results["reference"].value("summary", nlohmann::json()) : nlohmann::json();
  for (auto& r : rows)
    for (const auto& e : exact.is_array() ? exact : nlohmann::json::array())
      if (e["config"] == r.name && e["median_flip_rate"].is_number()) {
        r.exact_rate = e["median_flip_rate"].get<double>();
        r.exact_kl = e["kl_mean"].get<double>();
      }
  const bool by_exact = std::any_of(rows.begin(), rows.end(), [](const Row& r) { return std::isfinite(r.exact_rate); });
  std::sort(rows.begin(), rows.end(), [by_exact](const Row& a, const Row& b) {
    if (by_exact)
      return std::tie(a.exact_rate, a.exact_kl, a.damage_key, a.kv) <
             std::tie(b.exact_rate, b.exact_kl, b.damage_key, b.kv);
    return std::tie(a.damage_key, a.rate, a.kl, a.kv) < std::tie(b.damage_key, b.rate, b.kl, b.kv);
  });
  nlohmann::json ranking = nlohmann::json::array();
  for (auto& r : rows)
    ranking.push_back(
        {{"config", r.name},
         {"median_flip_rate", r.rate},
         {"damage", r.damage},
         {"repair", r.repair},
         {"branches_followed", r.followed},
         {"damage_rate", r.damage_rate},
         {"kl_mean", r.kl},
         {"exact_flip_rate", std::isfinite(r.exact_rate) ? nlohmann::json(r.exact_rate) : nlohmann::json()},
         {"exact_kl_mean", std::isfinite(r.exact_kl) ? nlohmann::json(r.exact_kl) : nlohmann::json()},
         {"kv_bytes_per_token", r.kv < 0 ? nlohmann::json(nullptr) : nlohmann::json(r.kv)},
         {"weights_bytes", r.weights},
         {"context_at_budget", context_at(r.weights, r.kv)},
         {"above_floor", r.above}});

  // Recommended: the configuration indistinguishable from the baseline (not above the floor)
  // that needs the least memory per token and whose followed forks found no damage; the baseline
  // when every change costs fidelity.
  const Row* best = nullptr;
  for (auto& r : rows) {
    // A server's KV memory is its own affair (unknown here): it is recommended only when nothing else is.
    if (r.load > 0 || r.above || r.kv < 0 || (r.damage.is_number() && r.damage.get<int64_t>() > 0)) continue;
    double mem = r.kv * double(n_ctx_train) + r.weights;
    if (!best || mem < best->kv * double(n_ctx_train) + best->weights) best = &r;
  }
  if (!best) best = &rows.front();
  std::string reason =
      best->kv < 0 ? std::string(
                         "no configuration with a known KV-cache size qualifies; a server's KV memory is its own "
                         "(see its launch command): the lowest damage and flip rate")
      : best->name == base["name"].get<std::string>()
          ? "every variant that saves memory flips choices above the repeat floor; stay on the baseline"
          : fmt::format(
                "its flip rate ({:.3f}%) is within the baseline's repeat floor and it needs {} per token "
                "of KV cache",
                100 * best->rate, HumanBytes(best->kv));

  nlohmann::json kv_types = nlohmann::json::array();
  ModelInfo shape;
  shape.n_layer = results["model"]["n_layer"];
  shape.n_head_kv = results["model"]["n_head_kv"];
  shape.head_dim_k = results["model"]["head_dim_k"];
  shape.head_dim_v = results["model"]["head_dim_v"];
  for (const auto& t : KvCacheTypes()) {
    Knobs k;
    k.cache_type_k = k.cache_type_v = t;
    double per = KvBytesPerToken(shape, k);
    kv_types.push_back({{"type", t}, {"bytes_per_token", per}, {"context_at_budget", context_at(best->weights, per)}});
  }
  nlohmann::json ctx = context_at(best->weights, best->kv);
  int64_t c = ctx.is_number() ? ctx.get<int64_t>() : n_ctx_train;
  std::string flags = best->flags.get<std::string>();
  // The capture's flags carry the context it ran with; the recipe states the context to serve.
  auto pos = flags.find(" -c ");
  if (pos != std::string::npos) flags.erase(pos, flags.find(' ', pos + 4) - pos);
  std::string model = best->model.get<std::string>();
  std::string server_command = fmt::format("llama-server -m {} -c {} {}", model, c, flags);
  std::string cli_command = fmt::format("llama-cli -m {} -c {} {}", model, c, flags);
  if (best->kv < 0) server_command = cli_command = best->launch.is_string() ? best->launch.get<std::string>() : flags;
  return {{"recommended", best->name},
          {"warnings", LoadWarnings(results)},
          {"reason", reason},
          {"ranking", ranking},
          {"kv_types", kv_types},
          {"memory_budget_bytes", budget ? nlohmann::json(*budget) : nlohmann::json(nullptr)},
          {"context", c},
          {"server_command", server_command},
          {"cli_command", cli_command}};
}

}  // namespace flipscope
