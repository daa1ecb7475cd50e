// The recipe: rank configurations by fidelity against memory and say which one to run.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "experiment/steps.h"
#include "results/experiment_results.h"
#include "results/results.h"
#include "util/read.h"
#include "util/util.h"

namespace flipscope {
namespace {

using nlohmann::json;

// A configuration's KV bytes per token; -1 when unknown (a server configuration).
double Kv(const ConfigEntry& c) { return c.kv_bytes_per_token.value_or(-1.0); }

// One configuration as the recipe weighs it.
struct RecipeRow {
  std::string name;
  const ConfigEntry* config = nullptr;  // its configs[] entry
  const SummaryRow* summary = nullptr;
  double rate = 0, kl = 0, kv = -1, weights = 0;
  Estimate flip{};                   // its flip rate (served where measured) and interval
  std::optional<Estimate> damage{};  // damaging flips per probe; null where its flips were not followed
  std::optional<Estimate> exact{};   // distance to the exact reference, when present
  double exact_kl = INFINITY;
  double memory = INFINITY;  // weights + KV at the training context; +inf when unknown
  int tie_group = 0;
  bool twin = false;                          // ranked by its served twin's figures (RankedReplay::twins)
  const SummaryRow* served = nullptr;         // its served twin's row: ranks in its place (none: ran once)
  std::optional<Knobs> knobs = std::nullopt;  // as captured (a llama configuration)
  bool swa_full = false;                      // its command keeps every sliding-window cell
  bool Above() const { return Ranked() && Ranked()->above_floor.value_or(false); }
  int Load() const { return summary ? summary->load.value_or(0) : 0; }
  // The row its figures come from: the served twin's when the ranking is by served twins, so
  // that flips and damage are of one replay.
  const SummaryRow* Ranked() const { return twin ? served : summary; }
  bool Damaged() const { return Forked() && Ranked()->forks->damage > 0; }
  bool Forked() const { return Ranked() && Ranked()->forks; }
};

// The memory budget (weights and KV cache together) and what context it leaves for a configuration.
struct Budget {
  std::optional<double> bytes;
  const ModelInfo* model = nullptr;
  int64_t cap = 0;  // the longest context the recipe states: see ContextCap
  // The largest context whose KV cache, as llama.cpp allocates it, fits in the budget once the
  // weights are subtracted, capped at `cap`; none without a budget or knobs.
  std::optional<int64_t> ContextAt(double weights, const std::optional<Knobs>& knobs, bool swa_full) const {
    if (!bytes || !knobs) return std::nullopt;
    const double left = *bytes - weights;
    if (left <= 0) return 0;
    return ContextFitting(*model, *knobs, left, swa_full, cap);
  }
};

// The longest context the recipe states: the training context, or the context the measurement
// itself ran at (-c) where that was longer, so that a recipe for a session measured past the
// training context can hold that session.
int64_t ContextCap(const std::vector<RecipeRow>& rows, const ModelInfo& model) {
  int64_t cap = model.n_ctx_train;
  for (const RecipeRow& r : rows)
    if (r.knobs) cap = std::max<int64_t>(cap, r.knobs->n_ctx);
  return cap;
}

// The memory a configuration needs at the training context: its weights and KV cache as
// llama.cpp allocates it; +inf for a server (its KV memory is its own).
double MemoryAt(const RecipeRow& r, const ModelInfo& model) {
  if (r.kv < 0) return INFINITY;
  const double kv =
      r.knobs ? KvCacheMemory(model, *r.knobs, model.n_ctx_train, r.swa_full).bytes : r.kv * double(model.n_ctx_train);
  return kv + r.weights;
}

// A rate and its interval from a summary row (the point itself when the row has no interval).
Estimate RateOf(const SummaryRow& s) {
  return {s.median_flip_rate, s.flip_rate_ci.value_or(Interval{s.median_flip_rate, s.median_flip_rate})};
}

// What following the forks found as a ranked figure. A configuration that never flips, and the
// baseline (the reference its futures are judged against), did no damage; its interval still
// reaches as far as its flip rate's. Null for one that flips without its forks followed.
std::optional<Estimate> DamageOf(const RecipeRow& r, bool is_baseline) {
  if (r.Forked()) return Estimate{r.Ranked()->forks->damage_rate, *r.Ranked()->DamageRateCi()};
  if (is_baseline || r.rate == 0) return Estimate{0, {0, r.flip.ci[1]}};
  return std::nullopt;
}

// Every measured configuration of the ranked replay, and the baseline even when it ran once; with
// the exact reference their distance to it. The others go to *not_ranked with the reason.
std::vector<RecipeRow> Rows(const ExperimentResults& results, const ModelInfo& model, const RankedReplay& by,
                            std::vector<RecipeNotRanked>* not_ranked) {
  std::vector<RecipeRow> rows;
  const std::vector<ConfigEntry>& configs = results.measured.configs;
  const std::string baseline = configs[0].name;
  auto add = [&](const ConfigEntry& c, const SummaryRow* s) {
    if (std::string why = NotRankedReason(results, by, c); !why.empty()) return not_ranked->push_back({c.name, why});
    RecipeRow r{c.name,
                &c,
                s,
                s ? s->median_flip_rate : 0.0,
                s ? s->kl_mean : 0.0,
                Kv(c),
                double(c.model_file_size.value_or(0))};
    if (s) r.flip = RateOf(*s);
    // Ranked by served twins: every row by its twin's figures against the served baseline (what a
    // deployment computed), never one row by prefill among them.
    if ((r.twin = by.twins)) {
      r.served = results.served->measured.Row(ServedName(r.name));
      r.rate = r.served ? r.served->median_flip_rate : 0.0, r.kl = r.served ? r.served->kl_mean : 0.0;
      r.flip = r.served ? RateOf(*r.served) : Estimate{};
    }
    r.damage = DamageOf(r, r.name == baseline);
    if (const Knobs* k = c.RanKnobs(); k && r.kv >= 0) r.knobs = *k;
    r.swa_full = CapturedSwaFull(c, model);
    r.memory = MemoryAt(r, model);
    // Its distance to the truth in the replay it is ranked by: a served twin's own, never its
    // prefill twin's (a run made before served twins were measured against exact has none).
    if (results.reference)
      if (const SummaryRow* e = results.reference->Row(r.twin ? ServedName(r.name) : r.name, r.twin))
        r.exact = RateOf(*e), r.exact_kl = e->kl_mean;
    rows.push_back(r);
  };
  for (const SummaryRow& s : results.measured.summary)
    for (const ConfigEntry& c : configs)
      if (c.name == s.config) add(c, &s);
  if (std::none_of(rows.begin(), rows.end(), [&](const RecipeRow& r) { return r.name == baseline; }))
    add(configs[0], nullptr);
  return rows;
}

// "a, b and c".
std::string Names(const std::vector<std::string>& names) {
  std::string out;
  for (size_t i = 0; i < names.size(); ++i) out += (i == 0 ? "" : i + 1 == names.size() ? " and " : ", ") + names[i];
  return out;
}

// How the rows were ranked: by which figures, and which configurations' forks were missing.
struct RankingKey {
  bool by_exact = false, by_damage = false;
  std::vector<std::string> lacking_forks;  // configurations that flip whose forks were not followed
  std::string Text() const {               // the key in words, as the report states it
    std::string key = by_exact ? "distance to the exact reference (flip rate against exact)" : "";
    if (by_damage)
      key +=
          std::string(key.empty() ? "" : ", then ") + "damage rate (damaging flips per probe, from the followed forks)";
    if (!by_exact) key += std::string(by_damage ? ", then " : "") + "flip rate against the baseline";
    key +=
        ", each with its 95% interval; configurations whose intervals overlap are a statistical tie, "
        "indistinguishable on this workload, ordered by the memory each needs (least first)";
    if (!by_damage && !lacking_forks.empty())
      key += "; damage is not compared, since the forks of " + Names(lacking_forks) + " were not followed";
    return key;
  }
};

// Measured damage is compared only when every configuration that flips had its forks followed;
// with the exact reference, distance to exact comes first (the baseline is one more cashier).
RankingKey Rank(std::vector<RecipeRow>& rows) {
  RankingKey key;
  key.by_exact = std::any_of(rows.begin(), rows.end(), [](const RecipeRow& r) { return r.exact.has_value(); });
  for (const RecipeRow& r : rows)
    if (!r.damage) key.lacking_forks.push_back(r.name);
  key.by_damage =
      key.lacking_forks.empty() && std::any_of(rows.begin(), rows.end(), [](const RecipeRow& r) { return r.Forked(); });
  std::vector<RankInput> in;
  for (const RecipeRow& r : rows) {
    RankInput i{r.name, {}, r.memory, key.by_exact ? r.exact_kl : r.kl};
    if (key.by_exact) i.keys.push_back(r.exact.value_or(Estimate{INFINITY, {INFINITY, INFINITY}}));
    if (key.by_damage) i.keys.push_back(*r.damage);
    if (!key.by_exact) i.keys.push_back(r.flip);
    in.push_back(std::move(i));
  }
  std::vector<RecipeRow> ranked;
  for (const RankedRow& o : RankWithTies(in)) {
    ranked.push_back(rows[o.index]);
    ranked.back().tie_group = o.tie_group;
  }
  rows = std::move(ranked);
  return key;
}

// How often a configuration's forks started from the token its capture's row chose, as the
// generation reproduced it (branch records' "reproduced"); none without forks.
std::optional<RecipeRankingRow::Reproduced> Reproduced(const Measurements& m, const std::string& config) {
  static const std::vector<BranchRecord> none;
  for (const BranchRecord& b : m.branches ? *m.branches : none) {
    if (b.config != config) continue;
    const auto& records = b.result.records;
    const int64_t yes = std::count_if(records.begin(), records.end(), [](const ForkRecord& r) { return r.reproduced; });
    return RecipeRankingRow::Reproduced{yes, int64_t(records.size())};
  }
  return std::nullopt;
}

std::optional<double> Finite(double v) { return std::isfinite(v) ? std::optional<double>(v) : std::nullopt; }

std::vector<RecipeRankingRow> Ranking(const ExperimentResults& results, const std::vector<RecipeRow>& rows,
                                      const Budget& budget, const RankedReplay& by) {
  std::vector<RecipeRankingRow> ranking;
  for (const RecipeRow& r : rows) {
    RecipeRankingRow o;
    o.config = r.name, o.tie_group = r.tie_group, o.replay = std::string(ToString(by.replay));
    o.median_flip_rate = r.rate, o.flip_rate_ci = r.flip.ci;
    if (r.Forked()) {  // what following the forks found; none where they were not followed
      const SummaryRow& s = *r.Ranked();
      o.damage = s.forks->damage, o.repair = s.forks->repair, o.branches_followed = s.forks->followed;
      o.damage_rate = s.forks->damage_rate, o.damage_rate_ci = r.damage->ci;
      o.repair_rate = *s.RepairRate(), o.repair_rate_ci = *s.RepairRateCi();
    }
    o.kl_mean = r.kl;
    if (r.exact) o.exact_flip_rate = r.exact->value, o.exact_flip_rate_ci = r.exact->ci;
    o.exact_kl_mean = Finite(r.exact_kl), o.memory_bytes = Finite(r.memory);
    if (r.kv >= 0) o.kv_bytes_per_token = r.kv;
    o.weights_bytes = r.weights, o.context_at_budget = budget.ContextAt(r.weights, r.knobs, r.swa_full);
    o.above_floor = r.Above();
    o.forks_reproduced = !r.twin    ? Reproduced(results.measured, r.name)
                         : r.served ? Reproduced(results.served->measured, r.served->config)
                                    : std::nullopt;
    o.served_distance = OwnServedDistance(results, r.name);  // shown beside it, never ranked
    ranking.push_back(std::move(o));
  }
  return ranking;
}

// The configuration indistinguishable from the baseline (not above the floor) that needs the
// least memory and whose followed forks found no damage; nullptr when none qualifies. A variant
// that saves nothing does not replace the baseline: at equal memory the baseline is kept.
// A server's KV memory is its own affair (unknown here): it is recommended only when nothing else is.
const RecipeRow* Recommend(const std::vector<RecipeRow>& rows, const std::string& baseline) {
  const RecipeRow* best = nullptr;
  for (const RecipeRow& r : rows) {
    if (r.Load() > 0 || r.Above() || r.kv < 0 || r.Damaged()) continue;
    if (!best || r.memory < best->memory || (r.memory == best->memory && r.name == baseline)) best = &r;
  }
  return best;
}

std::string Reason(const RecipeRow& best, const std::string& baseline) {
  if (best.kv < 0)
    return "no configuration with a known KV-cache size qualifies; a server's KV memory is its own "
           "(see its launch command): the lowest damage and flip rate";
  if (best.name == baseline && !best.Ranked())  // it ran once: no floor tells its own noise apart
    return "every variant that saves memory flips choices against the baseline, and with the baseline run once "
           "there is no repeat floor to call those flips noise; stay on the baseline";
  if (best.name == baseline)
    return "every variant that saves memory flips choices above the repeat floor; stay on the baseline";
  return fmt::format(
      "its flip rate ({:.3f}%) is within the baseline's repeat floor and it needs {} per token of KV cache",
      100 * best.rate, HumanBytes(best.kv));
}

std::string Pct(double v) { return fmt::format("{:.2f}%", 100 * v); }

// What the recommendation rests on (probes, forks, intervals, who it is tied with) and how sure
// it is: "high", "medium" (forks sampled, tied with a configuration above the floor, or its
// prefill and served replays part above the floor: served_caveat) or "low" (nothing qualified, no
// repeat floor, or its flips' futures unknown).
RecipeBasis Basis(const RecipeRow& best, const std::vector<RecipeRow>& rows, const RankingKey& key, bool fallback,
                  const std::string& served_caveat, const std::string& baseline) {
  const SummaryRow* s = best.Ranked();
  std::vector<std::string> tied;
  bool tied_above = false;
  for (const RecipeRow& r : rows)
    if (r.tie_group == best.tie_group && r.name != best.name) tied.push_back(r.name), tied_above |= r.Above();
  const bool is_baseline = best.name == baseline;
  std::string rests =
      s ? fmt::format("{} probes, flip rate {} (95%: {}–{}){}", s->probes, Pct(best.flip.value), Pct(best.flip.ci[0]),
                      Pct(best.flip.ci[1]), is_baseline ? " between its own repeats" : " against the baseline")
        : "one run of the baseline (no repeat floor)";
  // Ranked by the truth: its distance to it is what ranked it, so it leads.
  if (key.by_exact && best.exact)
    rests = fmt::format("{} against the exact reference (95%: {}–{}); ", Pct(best.exact->value), Pct(best.exact->ci[0]),
                        Pct(best.exact->ci[1])) +
            rests;
  std::string level = "high", why = best.Above() ? "it is the first ranked" : "it is within the repeat floor";
  if (best.Forked()) {
    const ForkCounts& f = *best.Ranked()->forks;
    rests += fmt::format("; {} of {} forks followed: {} damage (damage rate 95%: {}–{})", f.followed, f.forkable,
                         f.damage, Pct(best.damage->ci[0]), Pct(best.damage->ci[1]));
    why += f.damage == 0 ? " and its followed forks found no damage" : "";
    if (f.followed < f.forkable) level = "medium", why = "only a sample of its forks was followed";
  } else if (best.rate == 0 && !is_baseline) {  // the baseline's own futures are the reference's
    rests += "; no flips, so no forks to follow";
  }
  if (!key.by_damage)
    why += "; damage is not compared across configurations, since not every one's forks were followed";
  if (tied_above) level = "medium", why = "it is indistinguishable from a configuration above the repeat floor";
  // The command computes what it reads by prefill and what it writes by decode: where the two
  // paths part beyond noise, neither replay alone vouches for the whole command.
  if (!served_caveat.empty()) why = level == "high" ? served_caveat : why + "; " + served_caveat, level = "medium";
  if (!best.damage) level = "low", why = "its flips' futures were not followed";
  if (!s) level = "low", why = "the baseline ran once: there is no repeat floor";
  if (fallback) level = "low", why = "no configuration qualified; the first ranked is shown";
  if (!tied.empty()) rests += "; indistinguishable on this workload from " + Names(tied);
  RecipeBasis b;
  b.rests_on = rests, b.confidence = level, b.why = why, b.tie_group = best.tie_group, b.tied_with = tied;
  if (s) b.probes = s->probes;
  return b;
}

// Every KV cache type's bytes per token (of full-attention layers) for this model, its KV cache
// at the recommended context with the recommended -ub and --swa-full, and the context each leaves.
std::vector<RecipeKvType> KvTypes(const ModelInfo& model, const Budget& budget, const RecipeRow& best, int64_t n_ctx) {
  std::vector<RecipeKvType> out;
  for (const auto& t : KvCacheTypes()) {
    Knobs k = best.knobs.value_or(Knobs());
    k.cache_type_k = k.cache_type_v = t;
    out.push_back({std::string(NameOf(t)), KvBytesPerToken(model, k),
                   KvCacheMemory(model, k, n_ctx, best.swa_full).bytes,
                   budget.ContextAt(best.weights, k, best.swa_full)});
  }
  return out;
}

}  // namespace

json MakeRecipe(const json& results, const ModelInfo& model) {
  return ToJson(MakeRecipe(ExperimentResults::FromJson(results), model));
}

// The commands that run the recommended configuration at context c. A server configuration: the
// command that served its captures, as run, with its variables; one reached by URL has no command
// flipscope knows (its flags, where recorded).
void Commands(const ExperimentResults& results, const RecipeRow& best, const ModelInfo& model, int64_t c,
              RecipeResult& out) {
  const ConfigEntry& best_config = *best.config;
  out.server_command = LlamaCommand("llama-server", best_config, results.workload.facts, model, c);
  out.cli_command = LlamaCommand("llama-cli", best_config, results.workload.facts, model, c);
  if (best.kv >= 0) return;
  std::optional<RecipeServerLaunch> launch = ServerLaunch(best_config);
  out.server_command = launch ? *launch->command : best_config.flags.value_or("");
  out.cli_command = "";
  if (!launch) launch.emplace().note = "a server flipscope did not start (url): its launch command is not known here";
  out.server_launch = std::move(launch);
}

RecipeResult MakeRecipe(const ExperimentResults& results, const ModelInfo& model) {
  Budget budget{results.settings.memory_budget_bytes, &model};
  const RankedReplay by = RankedReplayOf(results);
  std::vector<RecipeNotRanked> not_ranked;
  std::vector<RecipeRow> rows = Rows(results, model, by, &not_ranked);
  budget.cap = ContextCap(rows, model);
  const RankingKey key = Rank(rows);
  const std::string baseline = results.measured.configs[0].name;
  const RecipeRow* qualified = Recommend(rows, baseline);
  const RecipeRow& best = qualified ? *qualified : rows.front();
  const std::optional<int64_t> ctx = budget.ContextAt(best.weights, best.knobs, best.swa_full);
  const int64_t c = ctx.value_or(budget.cap);
  RecipeResult out;
  out.recommended = best.name;
  out.warnings = LoadWarnings(results.measured, results.baseline);
  if (best.knobs)  // a server's context is its own
    for (std::string& w : ContextWarnings(c, results.workload.facts.n_tokens.value_or(0), model, ctx.has_value()))
      out.warnings.push_back(std::move(w));
  out.reason = Reason(best, baseline) + (by.twins ? " (measured under served replay)" : "");
  out.ranked_by = by.twins ? "served replay (every ranked row: each configuration's served twin against " +
                                 results.served->baseline + ")"
                           : std::string(ToString(by.replay)) + " replay (every ranked row)";
  out.not_ranked = std::move(not_ranked);
  out.ranking_key = key.Text();
  out.ranking_mode =
      key.by_exact ? (key.by_damage ? "exact, damage" : "exact") : (key.by_damage ? "damage, flip rate" : "flip rate");
  out.lacking_forks = key.lacking_forks;
  out.basis = Basis(best, rows, key, !qualified, ServedDistanceCaveat(results, best.name), baseline);
  out.ranking = Ranking(results, rows, budget, by);
  out.kv_types = KvTypes(model, budget, best, c);
  if (best.knobs)  // what the command allocates, and without --swa-full where that differs
    out.kv_cache = RecipeKvCache{KvCacheMemory(model, *best.knobs, c, best.swa_full).bytes,
                                 KvCacheMemory(model, *best.knobs, c, false).bytes, best.swa_full};
  out.weights_bytes = best.weights, out.memory_budget_bytes = budget.bytes, out.context = c;
  Commands(results, best, model, c, out);
  return out;
}

}  // namespace flipscope
