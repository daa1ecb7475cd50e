// The recipe's document: read from the files earlier versions wrote and written back to the same
// bytes; figures older files lack read as none and come back as null, never as a value.
#include "results/recipe_result.h"

#include <gtest/gtest.h>

#include "util/util.h"

namespace flipscope {
namespace {

using nlohmann::json;

// The recipe of a results file of the source tree (tests/data).
json Recipe(const std::string& relative) {
  auto text = ReadFile(std::string(FLIPSCOPE_SOURCE_DIR) + "/" + relative);
  return text.ok() ? json::parse(*text)["recipe"] : json();
}

std::string DumpRecipe(const json& j) { return j.dump(1, ' ', false, json::error_handler_t::replace); }

// j without the null members of its objects, at every depth (what none written as null adds).
json WithoutNulls(const json& j) {
  if (j.is_array()) {
    json out = json::array();
    for (const json& e : j) out.push_back(WithoutNulls(e));
    return out;
  }
  if (!j.is_object()) return j;
  json out = json::object();
  for (auto it = j.begin(); it != j.end(); ++it)
    if (!it->is_null()) out[it.key()] = WithoutNulls(*it);
  return out;
}

TEST(RecipeResult, ACurrentRecipeReadsAndWritesTheSameBytes) {
  const json doc = Recipe("tests/data/results-v0.1.0.json");
  ASSERT_TRUE(doc.is_object());
  const RecipeResult r = RecipeFromJson(doc);
  EXPECT_EQ(DumpRecipe(ToJson(r)), DumpRecipe(doc));
  EXPECT_EQ(r.recommended, doc["recommended"].get<std::string>());
  ASSERT_EQ(r.ranking.size(), doc["ranking"].size());
  const RecipeRankingRow* first = r.Row(doc["ranking"][0]["config"].get<std::string>());
  ASSERT_NE(first, nullptr);
  EXPECT_EQ(first->median_flip_rate, doc["ranking"][0]["median_flip_rate"].get<double>());
  EXPECT_EQ(first->tie_group, doc["ranking"][0]["tie_group"].get<int64_t>());
  ASSERT_TRUE(r.basis.has_value());
  EXPECT_EQ(r.basis->confidence, doc["basis"]["confidence"].get<std::string>());
  EXPECT_EQ(r.kv_types.size(), doc["kv_types"].size());
  EXPECT_EQ(r.Row("no such configuration"), nullptr);
}

// An early file: no basis, key or kv cache, ranking rows without tie groups or weights. Those read
// as none and come back as null; what the file holds comes back as it was (its budget, an
// integer there, as the same number written as a float).
TEST(RecipeResult, AnEarlyRecipeInventsNothing) {
  const json doc = Recipe("tests/data/results-sample.json");
  ASSERT_FALSE(doc.contains("basis"));
  const RecipeResult r = RecipeFromJson(doc);
  EXPECT_FALSE(r.basis.has_value());
  EXPECT_FALSE(r.ranking_key.has_value());
  EXPECT_FALSE(r.kv_cache.has_value());
  ASSERT_FALSE(r.ranking.empty());
  EXPECT_FALSE(r.ranking[0].weights_bytes.has_value());
  EXPECT_FALSE(r.ranking[0].above_floor.has_value());
  const json back = ToJson(r);
  for (auto it = doc.begin(); it != doc.end(); ++it)
    if (it.key() != "memory_budget_bytes") EXPECT_EQ(WithoutNulls(back[it.key()]), WithoutNulls(*it)) << it.key();
  EXPECT_EQ(back["memory_budget_bytes"].get<double>(), doc["memory_budget_bytes"].get<double>());
  EXPECT_TRUE(back["basis"].is_null());
  EXPECT_TRUE(back["ranking"][0]["weights_bytes"].is_null());
  EXPECT_EQ(DumpRecipe(ToJson(RecipeFromJson(back))), DumpRecipe(back));  // a fixed point
}

// A ranking of names alone (the first recipes) stays names; unknown fields are kept.
TEST(RecipeResult, NamesOnlyRankingsAndUnknownFieldsComeBack) {
  json doc = Recipe("tests/data/results-v0.1.0.json");
  doc["later"] = {{"x", 1}};
  doc["ranking"][0]["later"] = 2;
  doc["basis"]["later"] = 3;
  doc["kv_types"][0]["later"] = 4;
  EXPECT_EQ(DumpRecipe(ToJson(RecipeFromJson(doc))), DumpRecipe(doc));
  const json names = {{"recommended", "b"}, {"ranking", {"b", "a"}}};
  const RecipeResult r = RecipeFromJson(names);
  ASSERT_EQ(r.ranking.size(), 2u);
  EXPECT_TRUE(r.ranking[0].name_only);
  EXPECT_EQ(r.ranking[1].config, "a");
  EXPECT_EQ(r.Row("a"), nullptr);  // a name alone holds no figures
  EXPECT_EQ(ToJson(r)["ranking"], names["ranking"]);
}

// A server configuration's launch and a --verify-recipe check in each of their forms come back as
// they were written.
TEST(RecipeResult, LaunchesAndVerificationsComeBackAsWritten) {
  json doc = Recipe("tests/data/results-v0.1.0.json");
  const json launches[] = {{{"command", "CUDA_VISIBLE_DEVICES=1 vllm serve m --port 8001"},
                            {"as_run", "vllm serve m --port 8001"},
                            {"asked", "vllm serve m --port {port}"},
                            {"env", {{"CUDA_VISIBLE_DEVICES", "1"}}},
                            {"note", "the launch command flipscope ran"}},
                           {{"note", "a server flipscope did not start (url): its launch command is not known here"}}};
  const json checks[] = {
      {{"status", "differs"},
       {"command", "llama-server -m m.gguf"},
       {"llama_server", "/x/llama-server"},
       {"seconds", 1.5},
       {"probes_total", 90},
       {"probes_checked", 3},
       {"positions", {4, 40, 80}},
       {"matched", 1},
       {"mismatches", {{{"position", 40}, {"why", "served token 5, captured 7"}}}},
       {"near_ties", {{{"position", 80}, {"why", "served token 2, captured 3, 0.01 nats below it"}}}},
       {"near_tie", 0.1},
       {"top_k", 5},
       {"logprobs_compared", 3},
       {"logprobs_within_tolerance", 2},
       {"max_logprob_diff", 0.02},
       {"tolerance", 0.01}},
      {{"status", "unverified"},
       {"command", "llama-server -m m.gguf --x"},
       {"error", "llama-server refuses the flag --x"}}};
  for (const json& launch : launches)
    for (const json& check : checks) {
      doc["server_launch"] = launch, doc["verification"] = check;
      const RecipeResult r = RecipeFromJson(doc);
      ASSERT_TRUE(r.server_launch.has_value());
      ASSERT_TRUE(r.verification.has_value());
      EXPECT_EQ(r.verification->status, check["status"].get<std::string>());
      EXPECT_EQ(DumpRecipe(ToJson(r)), DumpRecipe(doc));
    }
}

}  // namespace
}  // namespace flipscope
