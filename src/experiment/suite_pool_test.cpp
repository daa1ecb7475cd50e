// The suite's pooled figures on constructed sessions: the per-session table, the concentration
// flag where one session holds every flip (and none where flips spread), the kinds of text and
// the depth windows pooled across sessions.
#include <gtest/gtest.h>

#include "checkpoint/model_info.h"
#include "experiment/suite_internal.h"
#include "support/recipe_test_util.h"

using namespace flipscope;
using nlohmann::json;

namespace {

// A session of n probes every 8 tokens, `flips` of them flipping (the first ones), with the
// baseline and one variant "kv" measured.
SessionMeasure Session(const std::string& name, int n, int flips, double weight = 1) {
  SessionMeasure m;
  m.session.name = name;
  m.session.weight = weight;
  ConfigEntry base, kv;
  base.name = "baseline", base.status = ConfigStatus::kOk, base.captures = {"b0", "b1"};
  kv.name = "kv", kv.status = ConfigStatus::kOk, kv.captures = {"k0"};
  m.results.measured.configs = {base, kv};
  SummaryRow row;
  row.config = "kv", row.median_repeat = 0;
  m.results.measured.summary = {row};
  ProbeSeries s, floor;
  for (int i = 0; i < n; ++i) {
    s.position.push_back(8 * i);
    s.flip.push_back(i < flips ? 1 : 0);
    s.kl.push_back(i < flips ? 0.5 : 0.001);
    s.kind.push_back(i % 2 ? TextKind::kToolCallArguments : TextKind::kAssistantProse);
    floor.position.push_back(8 * i), floor.flip.push_back(0), floor.kl.push_back(0),
        floor.kind.push_back(TextKind::kUser);
  }
  m.series["kv"] = s;
  m.floor = floor;
  m.floor_bit_identical = true;
  return m;
}

SuiteResults Pool(const std::vector<SessionMeasure>& sessions) {
  Experiment exp;
  exp.baseline.name = "baseline";
  PoolOptions o;
  o.window = 1024;
  o.replicates = 500;
  SuiteResults out;
  out.baseline = "baseline";
  PoolSessions(sessions, exp, o, out);
  return out;
}

}  // namespace

TEST(SuitePool, OneSessionHoldingEveryFlipIsFlaggedWithItsShare) {
  const SuiteResults s = Pool({Session("netops", 400, 0), Session("db", 400, 24), Session("support", 400, 0)});
  const SuiteConfig* kv = s.Config("kv");
  ASSERT_NE(kv, nullptr);
  ASSERT_EQ(kv->sessions.size(), 3u);
  EXPECT_EQ(kv->sessions[1].session, "db");
  EXPECT_EQ(kv->sessions[1].flips, 24);
  EXPECT_EQ(kv->sessions[0].flips, 0);
  EXPECT_DOUBLE_EQ(kv->flip_rate->value, 24.0 / 1200);
  ASSERT_TRUE(kv->concentration);
  EXPECT_EQ(kv->concentration->session, "db");
  EXPECT_EQ(kv->concentration->of, "flips");
  EXPECT_DOUBLE_EQ(kv->concentration->share, 1.0);
  // The clustered interval is wider than the naive one, which treats the probes as independent.
  ASSERT_TRUE(kv->flip_rate->naive_ci);
  EXPECT_GT(kv->flip_rate->ci[1] - kv->flip_rate->ci[0], (*kv->flip_rate->naive_ci)[1] - (*kv->flip_rate->naive_ci)[0]);
  // Bit-identical repeats in every session: any flip is above the floor.
  EXPECT_TRUE(kv->above_floor);
  ASSERT_TRUE(s.floor);
  EXPECT_EQ(s.floor->value, 0);
}

TEST(SuitePool, FlipsSpreadOverTheSessionsAreNotFlagged) {
  const SuiteResults s = Pool({Session("a", 400, 8), Session("b", 400, 8), Session("c", 400, 9)});
  EXPECT_FALSE(s.Config("kv")->concentration);
}

TEST(SuitePool, KindsAndDepthArePerSessionAndPooled) {
  const SuiteResults s = Pool({Session("a", 256, 10), Session("b", 128, 0)});
  const SuiteConfig* kv = s.Config("kv");
  int64_t pooled_args = -1, pooled_flips = -1;
  for (const KindRow& k : kv->kinds)
    if (k.session.empty() && k.kind == "tool-call arguments") pooled_args = k.probes, pooled_flips = k.flips;
  EXPECT_EQ(pooled_args, 128 + 64);
  EXPECT_EQ(pooled_flips, 5);  // the odd probes among the first 10
  // Windows of 1,024 tokens: probes every 8 tokens, so 128 per window; session a has 2 windows, b 1.
  int pooled_first = 0;
  for (const DepthRow& d : kv->depth)
    if (d.session.empty() && d.begin == 0) pooled_first = int(d.probes);
  EXPECT_EQ(pooled_first, 256);
  EXPECT_EQ(std::count_if(kv->depth.begin(), kv->depth.end(), [](const DepthRow& d) { return d.session == "a"; }), 2);
}

// Weights count in the kinds and depth rows as in the pooled flip rate: session b (weight 3, no
// flips) holds the pooled rates to a quarter of a's where counting its probes once would give half.
TEST(SuitePool, KindsAndDepthPooledHonourSessionWeights) {
  const SuiteResults s = Pool({Session("a", 200, 40, 1), Session("b", 200, 0, 3)});
  const SuiteConfig* kv = s.Config("kv");
  EXPECT_DOUBLE_EQ(kv->flip_rate->value, 40.0 / (200 + 3 * 200));
  const KindRow* args = nullptr;
  double kind_flips = 0, kind_probes = 0;
  for (const KindRow& k : kv->kinds) {
    if (!k.session.empty()) continue;
    if (k.kind == "tool-call arguments") args = &k;
    kind_flips += k.flip_rate * double(k.probes), kind_probes += double(k.probes);
  }
  ASSERT_NE(args, nullptr);
  // a: 100 argument probes, 20 flipping; b: 100 without a flip, counted 3 times.
  EXPECT_DOUBLE_EQ(args->flip_rate, 20.0 / (100 + 300));
  EXPECT_EQ(args->probes, 400);
  EXPECT_EQ(args->flips, 20);
  EXPECT_NEAR(args->kl_mean, (20 * 0.5 + 80 * 0.001 + 300 * 0.001) / 400, 1e-12);
  // The kinds' pooled rows add up to the pooled flip rate.
  EXPECT_NEAR(kind_flips / kind_probes, kv->flip_rate->value, 1e-12);
  // The first window of 1,024 tokens: 128 probes in each session, a's 40 flips among them.
  const DepthRow* first = nullptr;
  for (const DepthRow& d : kv->depth)
    if (d.session.empty() && d.begin == 0) first = &d;
  ASSERT_NE(first, nullptr);
  EXPECT_DOUBLE_EQ(first->flip_rate, 40.0 / (128 + 3 * 128));
  EXPECT_EQ(first->probes, 512);
  // Equal weights give the plain sums, as before.
  const SuiteResults even = Pool({Session("a", 200, 40, 1), Session("b", 200, 0, 1)});
  for (const DepthRow& d : even.Config("kv")->depth)
    if (d.session.empty() && d.begin == 0) EXPECT_DOUBLE_EQ(d.flip_rate, 40.0 / 256);
}

namespace {

// A variant of a recipe session: its flips of the session's probes, KV bytes per token (less is
// preferred at a tie), and the reason llama.cpp refused it ("" = measured).
struct Variant {
  std::string name;
  int flips = 0;
  double kv = 1000;
  std::string refused;
};

// A session whose results hold a baseline and the variants as the recipe reads them (summary rows
// of n probes), and their probe series as the pool reads them.
SessionMeasure RecipeSession(const std::string& name, const std::vector<Variant>& variants, int n = 400) {
  SessionMeasure m = Session(name, n, 0);
  json r = {{"settings", {{"memory_budget_bytes", nullptr}}},
            {"baseline", "baseline"},
            {"configs", json::array()},
            {"summary", json::array()}};
  std::vector<Variant> all = {{"baseline"}};
  all.insert(all.end(), variants.begin(), variants.end());
  for (const Variant& v : all) {
    json e = {{"name", v.name},
              {"status", v.refused.empty() ? "ok" : "refused"},
              {"kv_bytes_per_token", v.kv},
              {"model_file_size", 1000.0},
              {"model_path", "m.gguf"},
              {"captures", {v.name + "0"}}};
    if (!v.refused.empty()) e["reason"] = v.refused;
    r["configs"].push_back(e);
    if (!v.refused.empty()) continue;
    r["summary"].push_back(fixtures::RecipeSummary(v.name, v.flips, n, v.flips > 0).ToJson());
    if (v.name == "baseline") continue;
    ProbeSeries s = m.series["kv"];
    for (int i = 0; i < n; ++i) s.flip[size_t(i)] = i < v.flips ? 1 : 0;
    m.series[v.name] = s;
  }
  if (std::none_of(variants.begin(), variants.end(), [](const Variant& v) { return v.name == "kv"; }))
    m.series.erase("kv");
  m.results = ExperimentResults::FromJson(r);
  return m;
}

RecipeResult PooledRecipeOf(const std::vector<SessionMeasure>& sessions, SuiteResults* pooled = nullptr) {
  SuiteResults s = Pool(sessions);
  RecipeResult r = PooledRecipe(sessions, s, fixtures::RecipeModel());
  if (pooled) *pooled = s;
  return r;
}

}  // namespace

// "small" saves the most memory and never flips where it ran, but llama.cpp refused it in session
// b: ranked on a's figures alone it would be recommended. It is left out of the ranking, and the
// recipe says why, naming the session.
TEST(SuitePool, AConfigurationRefusedInOneSessionIsNotRanked) {
  const std::vector<SessionMeasure> sessions = {
      RecipeSession("a", {{"kv", 0, 800}, {"small", 0, 500}}),
      RecipeSession("b", {{"kv", 0, 800}, {"small", 0, 500, "a quantized V cache needs flash attention"}})};
  const RecipeResult r = PooledRecipeOf(sessions);
  EXPECT_EQ(r.recommended, "kv");
  EXPECT_EQ(r.Row("small"), nullptr);
  ASSERT_NE(r.NotRankedWhy("small"), nullptr);
  EXPECT_NE(r.NotRankedWhy("small")->find("refused in session 'b' (a quantized V cache needs flash attention)"),
            std::string::npos)
      << *r.NotRankedWhy("small");
  EXPECT_EQ(r.NotRankedWhy("kv"), nullptr);
  // Measured in both sessions, it is ranked and recommended.
  const RecipeResult both = PooledRecipeOf({RecipeSession("a", {{"kv", 0, 800}, {"small", 0, 500}}),
                                            RecipeSession("b", {{"kv", 0, 800}, {"small", 0, 500}})});
  EXPECT_EQ(both.recommended, "small");
  EXPECT_FALSE(both.not_ranked && !both.not_ranked->empty());
}

// The same where a session's own recipe left it out of its ranking (a served twin missing, say).
TEST(SuitePool, AConfigurationASessionsRecipeLeftOutIsNotRanked) {
  std::vector<SessionMeasure> sessions = {RecipeSession("a", {{"kv", 0, 800}, {"small", 0, 500}}),
                                          RecipeSession("b", {{"kv", 0, 800}, {"small", 0, 500}})};
  RecipeResult own;
  own.not_ranked = std::vector<RecipeNotRanked>{{"small", "its served twin failed: out of memory"}};
  sessions[1].results.recipe = own;
  const RecipeResult r = PooledRecipeOf(sessions);
  EXPECT_EQ(r.recommended, "kv");
  ASSERT_NE(r.NotRankedWhy("small"), nullptr);
  EXPECT_NE(r.NotRankedWhy("small")->find("not ranked in session 'b' (its served twin failed: out of memory)"),
            std::string::npos);
}

// The baseline is ranked on its repeats over every session (the pooled floor), not on the first
// session's alone.
TEST(SuitePool, TheBaselineIsRankedOnThePooledFloor) {
  SuiteResults pooled;
  const RecipeResult r =
      PooledRecipeOf({RecipeSession("a", {{"kv", 40, 500}}, 100), RecipeSession("b", {{"kv", 40, 500}}, 700)}, &pooled);
  ASSERT_TRUE(pooled.floor);
  const RecipeRankingRow* base = r.Row("baseline");
  ASSERT_NE(base, nullptr);
  ASSERT_TRUE(base->flip_rate_ci);
  EXPECT_DOUBLE_EQ((*base->flip_rate_ci)[1], pooled.floor->ci[1]);
  ASSERT_TRUE(r.basis);
  EXPECT_EQ(r.recommended, "baseline");
  EXPECT_EQ(r.basis->probes.value_or(-1), 800);
}
