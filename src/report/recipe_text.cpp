// The recipe's sentences shared by the renderers: the key its ranking used and its ties, what its
// recommendation rests on, what its memory figures cover, and whether its launch command was
// served and reproduced the capture.
#include <fmt/format.h>

#include <map>

#include "report/internal.h"
#include "util/util.h"

namespace flipscope::report {

std::string RankingKeyText(const ExperimentResults& results) {
  const std::string key = results.recipe ? results.recipe->ranking_key.value_or("") : "";
  if (key.empty())  // results written before the recipe stated its key
    return "Ordered by the recipe of the flipscope version that wrote these results; it did not record its key.";
  std::string out = "Ordered by " + key + ".";
  if (const auto& lacking = results.recipe->lacking_forks; lacking && !lacking->empty())
    out += " To compare damage, follow the forks of every configuration that flips ([branch] without configs).";
  return out;
}

std::vector<std::string> TieLines(const ExperimentResults& results) {
  std::map<int, std::vector<std::string>> groups;
  for (const ConfigRow& row : RankedConfigs(results))
    if (row.tie_size > 1) groups[row.tie_group].push_back(row.name);
  std::vector<std::string> out;
  for (const auto& [group, names] : groups) {
    std::string list;
    for (const std::string& n : names) list += (list.empty() ? "" : ", ") + n;
    out.push_back(
        fmt::format("tie group {}: {}: indistinguishable on this workload (their 95% intervals overlap); "
                    "listed by the memory each needs, least first",
                    group, list));
  }
  return out;
}

std::string RecommendationBasis(const ExperimentResults& results) {
  if (!results.recipe || !results.recipe->basis) return "";
  const RecipeBasis& basis = *results.recipe->basis;
  return "It rests on " + basis.rests_on + ". Confidence: " + basis.confidence + " (" + basis.why + ").";
}

std::string RecipeBudgetText(const RecipeResult& recipe) {
  const auto& budget = recipe.memory_budget_bytes;
  if (!budget) return "no memory budget set: the context is the training context";
  return fmt::format(
      "memory budget {} for the weights ({}) and the KV cache together; the context is the largest "
      "whose KV cache fits in what the weights leave",
      HumanBytes(*budget), HumanBytes(recipe.weights_bytes.value_or(0)));
}

std::string RecipeMemoryLine(const RecipeResult& recipe) {
  if (!recipe.kv_cache) return "";
  const RecipeKvCache& kv = *recipe.kv_cache;
  std::string out = fmt::format(
      "KV cache of this command at -c {}: {}, as llama.cpp allocates it (one sequence; "
      "sliding-window layers keep their window unless --swa-full)",
      Count(Figure(recipe.context)), HumanBytes(kv.bytes));
  if (kv.swa_full && kv.bytes_without_swa_full != kv.bytes)
    out += fmt::format("; the capture kept every sliding-window cell (--swa-full), without which it would be {}",
                       HumanBytes(kv.bytes_without_swa_full));
  return out + ".";
}

std::string RecipeServerLabel(const RecipeResult& recipe) {
  return recipe.server_launch ? "launch command (as run)" : "llama-server";
}

std::string RecipeLaunchLine(const RecipeResult& recipe) {
  const std::string note = recipe.server_launch ? recipe.server_launch->note : "";
  if (note.empty()) return "";
  return "The recommended configuration is a server: this is " + note + ".";
}

std::string RecipeVerificationLine(const RecipeResult& recipe) {
  if (!recipe.verification && recipe.server_launch && !recipe.server_launch->command.value_or("").empty())
    return "This command served the recommended configuration's own captures in this run.";
  if (!recipe.verification)
    return "The recommended command has not been served (flipscope run --verify-recipe starts it and checks it).";
  const RecipeVerification& v = *recipe.verification;
  if (v.status == "unverified") return "The recommended command is unverified: " + v.error.value_or("") + ".";
  const int64_t checked = v.probes_checked.value_or(0), matched = v.matched.value_or(0);
  const int64_t compared = v.logprobs_compared.value_or(0);
  std::string out = fmt::format(
      "The recommended command was served by llama-server and matched {}/{} probes (a sample of {} of the capture's "
      "{}: "
      "the greedy token equal{}",
      matched, checked, checked, Count(Figure(v.probes_total)),
      compared > 0
          ? fmt::format("; the top {} log-probabilities, each relative to its top-1, within {:.2g} of the capture's at "
                        "{} of the {} probes where llama-server returned them, at most {:.2g} apart",
                        v.top_k.value_or(0), v.tolerance.value_or(0), v.logprobs_within_tolerance.value_or(0), compared,
                        v.max_logprob_diff.value_or(0))
          : "");
  out += ")";
  // Where the served token differed: "position 12 (served token 5, captured 7), ...".
  auto where = [](const std::vector<RecipeProbeNote>& notes) {
    std::string list;
    for (const RecipeProbeNote& m : notes)
      list += fmt::format("{}position {} ({})", list.empty() ? "" : ", ", m.position, m.why);
    return list;
  };
  if (const std::string ties = where(v.near_ties); !ties.empty())
    out += fmt::format(
        "; near-ties, where the capture's top two are within {:.2g} nats and the server's batching of the "
        "prompt can choose either: {}",
        v.near_tie.value_or(0), ties);
  if (!v.mismatches.empty()) out += "; it did not at " + where(v.mismatches);
  return out + ".";
}

}  // namespace flipscope::report

namespace flipscope {

std::string RecipeVerificationText(const RecipeResult& recipe) { return report::RecipeVerificationLine(recipe); }

}  // namespace flipscope
