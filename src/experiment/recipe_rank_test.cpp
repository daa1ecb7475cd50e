// The recipe's ranking on made-up summaries: measured damage is compared only like with like,
// overlapping intervals are statistical ties, a tie is broken by memory, and the key it states
// is the key it used.
#include <gtest/gtest.h>

#include <random>

#include "checkpoint/model_info.h"
#include "compare/compare.h"
#include "experiment/experiment.h"
#include "experiment/steps.h"
#include "results/results.h"
#include "support/recipe_test_util.h"

using namespace flipscope;
using nlohmann::json;

namespace {

// A made-up configuration: its flips of `probes`, KV bytes per token, and what its forks found
// (followed < 0: not followed).
struct Made {
  std::string name;
  int64_t flips = 0, probes = 800;
  double kv = 1000;
  int64_t followed = -1, damage = 0, forkable = 0;
};

json SummaryOf(const Made& m, bool above) {
  SummaryRow s = fixtures::RecipeSummary(m.name, m.flips, m.probes, above);
  if (m.followed >= 0) {
    ForkCounts f;
    f.followed = m.followed, f.damage = m.damage, f.forkable = m.forkable ? m.forkable : m.flips;
    f.damage_rate = f.followed ? s.median_flip_rate * double(f.damage) / double(f.followed) : 0.0;
    s.forks = f;
  }
  return s.ToJson();
}

// Results of a bit-identical baseline (0 flips) and the given variants; exact: each row's flips
// against the exact reference (same probes).
json ResultsOf(const std::vector<Made>& made, const std::map<std::string, int64_t>& exact = {}) {
  json r = {{"settings", {{"memory_budget_bytes", nullptr}}},
            {"baseline", made.front().name},
            {"configs", json::array()},
            {"summary", json::array()}};
  for (const Made& m : made) {
    r["configs"].push_back({{"name", m.name},
                            {"status", "ok"},
                            {"kv_bytes_per_token", m.kv},
                            {"model_file_size", 1000.0},
                            {"model_path", "m.gguf"}});
    r["summary"].push_back(SummaryOf(m, m.flips > 0 && &m != &made.front()));
  }
  if (!exact.empty()) {
    r["reference"] = {{"summary", json::array()}};
    for (const auto& [name, flips] : exact) r["reference"]["summary"].push_back(SummaryOf({name, flips}, false));
  }
  return r;
}

ModelInfo Model() { return fixtures::RecipeModel(); }

// name -> {place (0-based), tie group} in the recipe's ranking.
std::map<std::string, std::pair<size_t, int>> Places(const json& recipe) {
  std::map<std::string, std::pair<size_t, int>> out;
  for (size_t i = 0; i < recipe["ranking"].size(); ++i)
    out[recipe["ranking"][i]["config"]] = {i, recipe["ranking"][i]["tie_group"].get<int>()};
  return out;
}

}  // namespace

// A baseline that ran once has no summary row; a variant as good that saves no memory (-ub 128:
// the same KV cache) must not be recommended in its place.
TEST(RecipeRanking, AVariantThatSavesNothingDoesNotReplaceTheBaseline) {
  json r = ResultsOf({{"baseline"}, {"ub-128"}, {"kv-q8_0", 12, 800, 530}});
  r["summary"].erase(0);
  const json once = MakeRecipe(r, Model());
  EXPECT_EQ(once["recommended"], "baseline");
  // Its reason does not speak of a floor that was not measured.
  EXPECT_NE(once["reason"].get<std::string>().find("with the baseline run once there is no repeat floor"),
            std::string::npos)
      << once["reason"];
  // One that saves memory and stays within the floor is.
  EXPECT_EQ(MakeRecipe(ResultsOf({{"baseline"}, {"ub-128"}, {"kv-q8_0", 0, 800, 530}}), Model())["recommended"],
            "kv-q8_0");
}

// The demo's defect (#4 kv-q4_0 above fa-off): only kv-q4_0's forks were followed.
TEST(RecipeRanking, MeasuredDamageIsNotRankedAgainstUnmeasuredFlips) {
  const json recipe = MakeRecipe(
      ResultsOf({{"baseline"}, {"fa-off", 11}, {"kv-q8_0", 11, 800, 530}, {"kv-q4_0", 58, 800, 280, 24, 3, 54}}),
      Model());
  EXPECT_EQ(recipe["ranking_mode"], "flip rate");
  EXPECT_EQ(recipe["lacking_forks"], json({"fa-off", "kv-q8_0"}));
  EXPECT_NE(recipe["ranking_key"].get<std::string>().find("damage is not compared, since the forks of fa-off and "
                                                          "kv-q8_0 were not followed"),
            std::string::npos)
      << recipe["ranking_key"];
  auto p = Places(recipe);
  EXPECT_LT(p["fa-off"].second, p["kv-q4_0"].second);
  EXPECT_LT(p["kv-q8_0"].second, p["kv-q4_0"].second);
  // The recommendation says what it rests on and how sure it is.
  EXPECT_EQ(recipe["recommended"], "baseline");
  EXPECT_EQ(recipe["basis"]["confidence"], "high") << recipe["basis"];
  EXPECT_NE(recipe["basis"]["rests_on"].get<std::string>().find("800 probes"), std::string::npos);
}

// Whatever the figures, a configuration with measured damage is never placed in a better tie
// group than one without forks that flips less.
TEST(RecipeRanking, MeasuredDamageNeverOutranksAnUnmeasuredOneWithFewerFlips) {
  std::mt19937 rng(30);
  for (int trial = 0; trial < 300; ++trial) {
    std::vector<Made> made{{"baseline"}};
    for (int i = 0; i < 5; ++i) {
      Made m{"v" + std::to_string(i), int64_t(rng() % 60), 800, double(200 + rng() % 800)};
      if (rng() % 2 && m.flips > 0) m.followed = 1 + rng() % m.flips, m.damage = rng() % (m.followed + 1);
      made.push_back(m);
    }
    const json recipe = MakeRecipe(ResultsOf(made), Model());
    auto p = Places(recipe);
    for (const Made& m : made)
      for (const Made& u : made) {
        if (m.followed >= 0 && u.followed < 0 && u.flips < m.flips) {
          EXPECT_GE(p[m.name].second, p[u.name].second) << recipe["ranking"].dump();
        }
      }
  }
}

TEST(RecipeRanking, OverlappingIntervalsAreATieBrokenByMemory) {
  // Every flipping configuration's forks followed: damage first, then flip rate.
  const json recipe = MakeRecipe(ResultsOf({{"baseline"},
                                            {"fa-off", 11, 800, 1000, 11, 0},
                                            {"kv-q8_0", 14, 800, 530, 14, 0},
                                            {"weights-q8_0", 13, 800, 1000, 13, 0},
                                            {"kv-q4_0", 58, 800, 280, 24, 9, 54},
                                            {"ub-256"}}),
                                 Model());
  EXPECT_EQ(recipe["ranking_mode"], "damage, flip rate");
  EXPECT_TRUE(recipe["lacking_forks"].empty());
  auto p = Places(recipe);
  // 11, 13 and 14 flips of 800 with no damage: one group, and kv-q8_0 needs the least memory.
  EXPECT_EQ(p["fa-off"].second, p["kv-q8_0"].second);
  EXPECT_EQ(p["fa-off"].second, p["weights-q8_0"].second);
  EXPECT_LT(p["kv-q8_0"].first, p["fa-off"].first);
  // The two that never flip are a tie of their own; kv-q4_0's damage sets it apart, last.
  EXPECT_EQ(p["baseline"].second, p["ub-256"].second);
  EXPECT_LT(p["baseline"].second, p["fa-off"].second);
  EXPECT_GT(p["kv-q4_0"].second, p["fa-off"].second);
  EXPECT_EQ(p["kv-q4_0"].first, 5u);
  // Damage and repair carry intervals as flip rates do.
  for (const json& row : recipe["ranking"])
    if (row["config"] == "kv-q4_0") {
      ASSERT_TRUE(row["damage_rate_ci"].is_array()) << row;
      EXPECT_LT(row["damage_rate_ci"][0].get<double>(), row["damage_rate"].get<double>());
      EXPECT_GT(row["damage_rate_ci"][1].get<double>(), row["damage_rate"].get<double>());
      EXPECT_TRUE(row["repair_rate_ci"].is_array()) << row;
    }
}

// A Gemma 3 experiment's exact-reference case: fa-off 9 and the baseline 10 flips of 398 against exact
// overlap, so neither is "most faithful"; the stated key is distance to exact.
TEST(RecipeRanking, WithTheExactReferenceTheStatedKeyIsDistanceToExact) {
  std::vector<Made> made{{"baseline"}, {"fa-off", 16, 398, 1000, 16, 0}, {"kv-q4_0", 40, 398, 280, 16, 1, 40}};
  made[0].probes = 398;
  const json recipe = MakeRecipe(ResultsOf(made, {{"baseline", 10}, {"fa-off", 9}, {"kv-q4_0", 44}}), Model());
  EXPECT_EQ(recipe["ranking_mode"], "exact, damage");
  EXPECT_EQ(recipe["ranking_key"].get<std::string>().rfind("distance to the exact reference", 0), 0u)
      << recipe["ranking_key"];
  auto p = Places(recipe);
  EXPECT_EQ(p["baseline"].second, p["fa-off"].second);
  EXPECT_LT(p["fa-off"].second, p["kv-q4_0"].second);
  for (const json& row : recipe["ranking"]) EXPECT_TRUE(row["exact_flip_rate_ci"].is_array()) << row;
}

// A recommended server configuration's command is its launch as run (the manifest's engine.launch),
// after its env's variables quoted for /bin/sh; one reached by URL, or an entry of another
// shape, has no launch command and says so.
TEST(RecipeRanking, AServerConfigurationsCommandIsItsLaunchAsRunWithItsEnv) {
  json r = ResultsOf({{"baseline", 0, 800, -1}, {"other", 3, 800, -1}});
  r["configs"][0]["engine"] = {
      {"launch",
       {{"asked", {{"command", "vllm serve m --port {port}"}, {"env", {{"A", "1"}, {"B", "two words"}}}}},
        {"run", {{"command", "vllm serve m --port 40001"}, {"url", "http://127.0.0.1:40001"}}}}}};
  r["configs"][1]["engine"] = {{"launch", "not an object"}};
  const json recipe = MakeRecipe(r, Model());
  ASSERT_EQ(recipe["recommended"], "baseline") << recipe.dump(1);
  EXPECT_EQ(recipe["server_command"], "A=1 B='two words' vllm serve m --port 40001");
  EXPECT_EQ(recipe["cli_command"], "");
  EXPECT_EQ(recipe["server_launch"]["asked"], "vllm serve m --port {port}");
  EXPECT_EQ(recipe["server_launch"]["as_run"], "vllm serve m --port 40001");
  const std::string note = recipe["server_launch"]["note"];
  EXPECT_NE(note.find("as it was run (its {port} filled in for http://127.0.0.1:40001), with the variables"),
            std::string::npos)
      << note;

  r["configs"][0]["engine"] = {{"url", "http://gpu-host:8000"}};  // a server flipscope did not start
  const json by_url = MakeRecipe(r, Model());
  EXPECT_EQ(by_url["server_launch"]["note"],
            "a server flipscope did not start (url): its launch command is not known here");
  EXPECT_FALSE(by_url["server_launch"].contains("command"));
}

// A llama configuration measured under ggml variables (its engine's env) is recommended with them:
// the same kernels, the same numbers.
TEST(RecipeRanking, TheGgmlVariablesAConfigurationRanUnderLeadItsCommand) {
  json r = ResultsOf({{"baseline"}, {"other", 3}});
  r["configs"][0]["engine"] = {{"engine", "llama"}, {"env", {{"GGML_CUDA_DISABLE_FUSION", "1"}}}};
  const json recipe = MakeRecipe(r, Model());
  ASSERT_EQ(recipe["recommended"], "baseline") << recipe.dump(1);
  const std::string server = recipe["server_command"], cli = recipe["cli_command"];
  EXPECT_EQ(server.rfind("GGML_CUDA_DISABLE_FUSION=1 llama-server -m m.gguf", 0), 0u) << server;
  EXPECT_EQ(cli.rfind("GGML_CUDA_DISABLE_FUSION=1 llama-cli -m m.gguf", 0), 0u) << cli;
  r["configs"][0]["engine"].erase("env");
  EXPECT_EQ(MakeRecipe(r, Model())["server_command"].get<std::string>().rfind("llama-server -m m.gguf", 0), 0u);
}

// The context the recipe states holds the session measured, or says why it cannot: a session
// measured at -c 4096 past the training context (1024) keeps -c 4096 and is flagged as outside
// the model's trained regime; a memory budget that leaves 2,048 tokens for a 3,000-token session
// says the command cannot hold it; a session inside the training context, no budget: no warning.
TEST(RecipeRanking, TheContextHoldsTheSessionMeasuredOrSaysWhyNot) {
  json r = ResultsOf({{"baseline"}, {"kv-q8_0", 12, 800, 530}});
  Knobs k;
  k.n_ctx = 4096;
  for (json& c : r["configs"]) c["knobs"] = k.ToJson();
  r["workload"] = {{"n_tokens", 3000}};
  auto has = [](const json& recipe, const std::string& text) {
    for (const json& w : recipe["warnings"])
      if (w.get<std::string>().find(text) != std::string::npos) return true;
    return false;
  };
  json recipe = MakeRecipe(r, Model());
  EXPECT_EQ(recipe["context"], 4096);
  EXPECT_NE(recipe["server_command"].get<std::string>().find(" -c 4096 "), std::string::npos) << recipe;
  EXPECT_TRUE(has(recipe, "-c 4096 is past the model's training context (1024), as measured")) << recipe["warnings"];
  EXPECT_FALSE(has(recipe, "holds fewer tokens"));

  r["settings"]["memory_budget_bytes"] = 1000.0 + KvCacheMemory(Model(), k, 2048, false).bytes;
  recipe = MakeRecipe(r, Model());
  EXPECT_EQ(recipe["context"], 2048);
  EXPECT_TRUE(has(recipe,
                  "-c 2048 holds fewer tokens than the session measured (3000): the memory budget leaves "
                  "no longer context"))
      << recipe["warnings"];

  k.n_ctx = 0;
  for (json& c : r["configs"]) c["knobs"] = k.ToJson();
  r["workload"]["n_tokens"] = 900;
  r["settings"]["memory_budget_bytes"] = nullptr;
  recipe = MakeRecipe(r, Model());
  EXPECT_EQ(recipe["context"], 1024);
  EXPECT_TRUE(recipe["warnings"].empty()) << recipe["warnings"];
}
