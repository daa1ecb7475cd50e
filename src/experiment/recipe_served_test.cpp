// The recipe under served replay, on made-up results: every ranked row of one replay (served twins
// against the served baseline), ranked_by saying so, a configuration without a served twin listed
// as not ranked, an earlier version's replay-only variant never ranked, and the recommendation's
// confidence lowered by a prefill-vs-served distance above the repeat floor.
#include <gtest/gtest.h>

#include "checkpoint/model_info.h"
#include "compare/compare.h"
#include "experiment/experiment.h"
#include "results/experiment_results.h"
#include "results/results.h"
#include "support/recipe_test_util.h"

using namespace flipscope;
using nlohmann::json;

namespace {

// A made-up configuration: its flips of `probes` against its baseline and its KV bytes per token.
struct ServedMade {
  std::string name;
  int64_t flips = 0;
  double kv = 1000;
  int64_t probes = 800;
};

json ServedSummaryOf(const ServedMade& m) {
  SummaryRow s = fixtures::RecipeSummary(m.name, m.flips, m.probes, m.flips > 0);  // against a bit-identical floor
  return s.ToJson();
}

// Its entry; a name with a KV cache type in it (kv-q8_0@served) ran with that cache, so that its
// memory, as the recipe computes it from the knobs, is smaller.
json ConfigOf(const ServedMade& m, Replay replay, const json& changes) {
  Knobs k;
  k.replay = replay;
  json knobs = k.ToJson();
  for (const char* type : {"q8_0", "q4_0"})
    if (m.name.find(type) != std::string::npos) knobs["cache_type_k"] = knobs["cache_type_v"] = type;
  return {{"name", m.name},         {"status", "ok"}, {"kv_bytes_per_token", m.kv}, {"model_file_size", 1000.0},
          {"model_path", "m.gguf"}, {"knobs", knobs}, {"changes", changes}};
}

// Measurements of a bit-identical baseline (2 repeats, 0 flips) and the variants, all under `replay`;
// names get `suffix` ("@served" for the twins).
json Measured(const std::vector<ServedMade>& made, Replay replay, const std::string& suffix) {
  Floor floor;
  floor.repeats = 2, floor.flip_rate = 0, floor.bit_identical = true, floor.flips = 0, floor.probes = 800;
  json r = {{"configs", json::array()}, {"summary", json::array()}, {"floor", floor.ToJson()}};
  for (ServedMade m : made) {
    m.name += suffix;
    r["configs"].push_back(ConfigOf(m, replay, json::object()));
    r["summary"].push_back(ServedSummaryOf(m));
  }
  return r;
}

// replay = "both" results: prefill figures, the served twins' (the configurations named in
// `served`), and each configuration's prefill-vs-served distance (flips of 816).
json BothOf(const std::vector<ServedMade>& prefill, const std::vector<ServedMade>& served,
            const std::map<std::string, int64_t>& distance) {
  json r = Measured(prefill, Replay::kPrefill, "");
  r["settings"] = {{"memory_budget_bytes", nullptr}};
  r["baseline"] = prefill.front().name;
  r["served"] = Measured(served, Replay::kServed, "@served");
  r["served"]["baseline"] = prefill.front().name + "@served";
  r["served"]["distance"] = json::array();
  for (const auto& [name, flips] : distance) {
    auto [lo, hi] = compare::WilsonInterval(flips, 816);
    r["served"]["distance"].push_back({{"config", name},
                                       {"flips", flips},
                                       {"probes", 816},
                                       {"flip_rate", double(flips) / 816},
                                       {"flip_rate_ci", {lo, hi}},
                                       {"kl_mean", 0.002}});
  }
  return r;
}

ModelInfo ServedRecipeModel() { return fixtures::RecipeModel(); }

const json* RowOf(const json& recipe, const std::string& name) {
  for (const json& r : recipe["ranking"])
    if (r["config"] == name) return &r;
  return nullptr;
}

}  // namespace

// Like with like: kv-q8_0 is bit-identical to the baseline prefilled but flips served; ranked by
// its served twin against the served baseline it is above the floor, and the baseline stays.
TEST(RecipeServed, EveryConfigurationIsRankedByItsServedTwinAgainstTheServedBaseline) {
  const json results = BothOf({{"baseline"}, {"kv-q8_0", 0, 530}, {"kv-q4_0", 60, 280}},
                              {{"baseline"}, {"kv-q8_0", 30, 530}, {"kv-q4_0", 70, 280}},
                              {{"baseline", 0}, {"kv-q8_0", 0}, {"kv-q4_0", 0}});
  const json recipe = MakeRecipe(results, ServedRecipeModel());
  EXPECT_EQ(recipe["ranked_by"],
            "served replay (every ranked row: each configuration's served twin against baseline@served)");
  ASSERT_EQ(recipe["ranking"].size(), 3u) << recipe["ranking"].dump();
  for (const json& row : recipe["ranking"]) EXPECT_EQ(row["replay"], "served") << row["config"];
  EXPECT_DOUBLE_EQ((*RowOf(recipe, "kv-q8_0"))["median_flip_rate"].get<double>(), 30.0 / 800);
  EXPECT_EQ((*RowOf(recipe, "kv-q8_0"))["above_floor"], true);
  EXPECT_EQ(recipe["recommended"], "baseline") << recipe["reason"];
  EXPECT_NE(recipe["reason"].get<std::string>().find("(measured under served replay)"), std::string::npos);
  EXPECT_EQ(recipe["not_ranked"], json::array());
  // Each row carries its own prefill-vs-served distance beside it.
  EXPECT_EQ((*RowOf(recipe, "kv-q4_0"))["served_distance"]["probes"], 816);
  EXPECT_EQ((*RowOf(recipe, "kv-q4_0"))["served_distance"]["of"], "kv-q4_0");
  // Prefill figures alone would have recommended kv-q8_0: the served ranking is not a relabelling.
  json prefill_only = results;
  prefill_only.erase("served");
  const json p = MakeRecipe(prefill_only, ServedRecipeModel());
  EXPECT_EQ(p["recommended"], "kv-q8_0");
  EXPECT_EQ(p["ranked_by"], "prefill replay (every ranked row)");
}

// A configuration measured prefilled but without a served twin (loaded, skipped) is listed as not
// ranked with its reason, never ranked on prefill figures among served ones.
TEST(RecipeServed, AConfigurationWithoutAServedTwinIsNotRankedBesideServedRows) {
  json results = BothOf({{"baseline"}, {"kv-q8_0", 0, 530}, {"loaded", 0, 1000}, {"refused", 0, 280}},
                        {{"baseline"}, {"kv-q8_0", 0, 530}}, {{"baseline", 0}, {"kv-q8_0", 0}});
  results["served"]["skipped"] = {{{"config", "loaded"},
                                   {"reason",
                                    "runs under load: served replay does not run "
                                    "under --load yet"}}};
  results["served"]["configs"].push_back({{"name", "refused@served"}, {"status", "refused"}, {"reason", "no cache"}});
  const json recipe = MakeRecipe(results, ServedRecipeModel());
  ASSERT_EQ(recipe["ranking"].size(), 2u) << recipe["ranking"].dump();
  for (const json& row : recipe["ranking"]) EXPECT_EQ(row["replay"], "served") << row["config"];
  EXPECT_EQ(RowOf(recipe, "loaded"), nullptr);
  EXPECT_EQ(RowOf(recipe, "refused"), nullptr);
  ASSERT_EQ(recipe["not_ranked"].size(), 2u) << recipe["not_ranked"].dump();
  EXPECT_EQ(recipe["not_ranked"][0]["config"], "loaded");
  EXPECT_NE(recipe["not_ranked"][0]["reason"].get<std::string>().find("not captured under served replay: runs under "
                                                                      "load"),
            std::string::npos)
      << recipe["not_ranked"][0];
  EXPECT_NE(recipe["not_ranked"][1]["reason"].get<std::string>().find("its served twin refused: no cache"),
            std::string::npos)
      << recipe["not_ranked"][1];
  EXPECT_EQ(recipe["recommended"], "kv-q8_0");
}

// The recommended llama-server command computes what it reads by prefill and what it writes by
// decode: where its two replays part above the repeat floor, the confidence is not high, and the
// line says why with the figure; where they agree it stays high.
TEST(RecipeServed, ConfidenceIsLoweredByAServedDistanceAboveTheFloor) {
  const std::vector<ServedMade> made = {{"baseline"}, {"kv-q8_0", 0, 530}};
  const json far = MakeRecipe(BothOf(made, made, {{"baseline", 26}, {"kv-q8_0", 26}}), ServedRecipeModel());
  ASSERT_EQ(far["recommended"], "kv-q8_0");
  EXPECT_EQ(far["basis"]["confidence"], "medium") << far["basis"];
  const std::string why = far["basis"]["why"];
  EXPECT_NE(why.find("its prefill and served replays"), std::string::npos) << why;
  EXPECT_NE(why.find("3.19% of greedy choices (26 of 816), above the bit-identical repeat floor"), std::string::npos)
      << why;
  EXPECT_EQ(why.find('\n'), std::string::npos);
  const json near = MakeRecipe(BothOf(made, made, {{"baseline", 0}, {"kv-q8_0", 0}}), ServedRecipeModel());
  EXPECT_EQ(near["recommended"], "kv-q8_0");
  EXPECT_EQ(near["basis"]["confidence"], "high") << near["basis"];
  // Without its own distance, the baseline's speaks for it.
  const json base_only = MakeRecipe(BothOf(made, made, {{"baseline", 26}}), ServedRecipeModel());
  EXPECT_EQ(base_only["basis"]["confidence"], "medium");
  EXPECT_NE(base_only["basis"]["why"].get<std::string>().find("the baseline's prefill and served replays"),
            std::string::npos)
      << base_only["basis"];
}

// Results of an earlier version: a variant whose only change was replay = "served", compared with
// the prefill baseline and ranked. Read again it is not ranked; its figures are the baseline's
// distance, which lowers the confidence of the recommendation.
TEST(RecipeServed, AnEarlierReplayOnlyVariantIsNeverRanked) {
  json results = Measured({{"baseline"}, {"kv-q8_0", 0, 530}, {"kv-q4_0", 40, 280}}, Replay::kPrefill, "");
  results["settings"] = {{"memory_budget_bytes", nullptr}};
  results["baseline"] = "baseline";
  results["configs"].push_back(ConfigOf({"served", 26}, Replay::kServed, {{"replay", "served"}}));
  results["summary"].push_back(ServedSummaryOf({"served", 26, 1000, 816}));
  const json recipe = MakeRecipe(results, ServedRecipeModel());
  EXPECT_EQ(recipe["ranked_by"], "prefill replay (every ranked row)");
  EXPECT_EQ(RowOf(recipe, "served"), nullptr) << recipe["ranking"].dump();
  for (const json& row : recipe["ranking"]) EXPECT_EQ(row["replay"], "prefill") << row["config"];
  ASSERT_EQ(recipe["not_ranked"].size(), 1u);
  EXPECT_NE(recipe["not_ranked"][0]["reason"].get<std::string>().find("not a setting to rank"), std::string::npos);
  EXPECT_EQ((*RowOf(recipe, "baseline"))["served_distance"]["flips"], 26);
  EXPECT_EQ(recipe["recommended"], "kv-q8_0");
  EXPECT_EQ(recipe["basis"]["confidence"], "medium") << recipe["basis"];
  EXPECT_NE(recipe["basis"]["why"].get<std::string>().find("(26 of 816)"), std::string::npos) << recipe["basis"];
}

// With the exact reference, a ranking by served twins reads each twin's own distance to exact:
// here the prefill captures would rank kv-q4_0 closest to the truth, the served twins put it last.
TEST(RecipeServed, ServedTwinsAreRankedByTheirOwnDistanceToExact) {
  json results = BothOf({{"baseline"}, {"kv-q8_0", 0, 530}, {"kv-q4_0", 10, 280}},
                        {{"baseline"}, {"kv-q8_0", 0, 530}, {"kv-q4_0", 90, 280}},
                        {{"baseline", 0}, {"kv-q8_0", 0}, {"kv-q4_0", 80}});
  auto exact_rows = [](const std::vector<std::pair<std::string, int64_t>>& flips) {
    json rows = json::array();
    for (const auto& [name, n] : flips)
      rows.push_back(fixtures::RecipeSummary(name, n, 800, false).ToReferenceJson());
    return rows;
  };
  results["reference"] = {{"name", "exact"}, {"status", "ok"}};
  results["reference"]["summary"] = exact_rows({{"baseline", 40}, {"kv-q8_0", 40}, {"kv-q4_0", 4}});
  const json prefill_only = MakeRecipe(results, ServedRecipeModel());  // no served distances: flip rates
  EXPECT_EQ(prefill_only["ranking_mode"], "flip rate") << prefill_only["ranking_key"];
  results["reference"]["served_summary"] =
      exact_rows({{"baseline@served", 4}, {"kv-q8_0@served", 5}, {"kv-q4_0@served", 120}});
  const json recipe = MakeRecipe(results, ServedRecipeModel());
  EXPECT_EQ(recipe["ranking_mode"], "exact");
  EXPECT_DOUBLE_EQ((*RowOf(recipe, "kv-q4_0"))["exact_flip_rate"].get<double>(), 120.0 / 800);
  EXPECT_DOUBLE_EQ((*RowOf(recipe, "baseline"))["exact_flip_rate"].get<double>(), 4.0 / 800);
  EXPECT_EQ(recipe["ranking"].back()["config"], "kv-q4_0") << recipe["ranking"].dump();
  // The recommendation (kv-q8_0: no flip against the served baseline, less memory) rests first on
  // the distance that ranked it, its served twin's (5 of 800), not its prefill twin's (40).
  EXPECT_EQ(recipe["recommended"], "kv-q8_0") << recipe["reason"];
  EXPECT_EQ(recipe["basis"]["rests_on"].get<std::string>().rfind("0.62% against the exact reference", 0), 0u)
      << recipe["basis"]["rests_on"];
  // The reference's served rows read and write back as they were.
  const ExperimentResults typed = ExperimentResults::FromJson(results);
  ASSERT_TRUE(typed.reference.has_value());
  EXPECT_EQ(typed.reference->ToJson()["served_summary"], results["reference"]["served_summary"]);
  ASSERT_NE(typed.reference->Row("kv-q4_0@served", true), nullptr);
  EXPECT_EQ(typed.reference->Row("kv-q4_0@served", false), nullptr);
}
