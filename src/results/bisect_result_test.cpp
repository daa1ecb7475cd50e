// The typed bisect.json: what the bisect writes reads back and writes out as it was; reading (an
// earlier run's file, to resume) tolerates any document.
#include "results/bisect_result.h"

#include <gtest/gtest.h>

namespace flipscope {
namespace {

using nlohmann::json;

// A finished bisect's document as `flipscope bisect` writes it: good captured, a step that does
// not build, a bad step with its comparison, and the outcome.
json Written() {
  const json figures = {{"probes", 38},
                        {"flips", 2},
                        {"confident_flips", 0},
                        {"bit_identical", 1},
                        {"flip_rate", 0.05},
                        {"flip_rate_ci", {0.01, 0.17}},
                        {"kl_mean", 0.003},
                        {"kl_median", 0.0},
                        {"kl_p99", 0.02},
                        {"kl_max", 0.04},
                        {"kernel_paths_differ", false},
                        {"flip_list",
                         {{{"position", 7},
                           {"base_token", 1},
                           {"cand_token", 2},
                           {"base_text", "a"},
                           {"cand_text", "b"},
                           {"base_prob", 0.5},
                           {"kl", 0.04},
                           {"class", "uncertain"}}}}};
  const std::string good(40, 'a'), skip(40, 'c'), bad(40, 'd');
  json doc = {{"header",
               {{"llama_src", "/src/llama.cpp"},
                {"good", good},
                {"bad", bad},
                {"criterion", "not-bit-identical"},
                {"model", "m.gguf"},
                {"model_sha256", "12"},
                {"workload", "w.json"},
                {"workload_sha256", "34"},
                {"max_tokens", 0},
                {"n_tokens", 300},
                {"tokens_sha256", "56"},
                {"flags", "-fa on"},
                {"probe_plan", {{"stride", 8}, {"full", "tool_calls"}}},
                {"cpu", "portable"}}},
              {"commits", {{{"commit", skip}, {"subject", "x"}}, {{"commit", bad}, {"subject", "y"}}}},
              {"good_capture",
               {{"commit", good},
                {"capture", "c/a.safetensors"},
                {"build_seconds", 60.5},
                {"llama_build_seconds", 50.0},
                {"build_log", "b.log"},
                {"capture_seconds", 3.25},
                {"reused", false}}},
              {"steps",
               {{{"index", 0},
                 {"commit", skip},
                 {"subject", "x"},
                 {"capture", "c/c.safetensors"},
                 {"build_seconds", 9.0},
                 {"llama_build_seconds", 9.0},
                 {"build_log", "c.log"},
                 {"error", "does not compile"},
                 {"mark", "skip"}},
                {{"index", 1},
                 {"commit", bad},
                 {"subject", "y"},
                 {"capture", "c/d.safetensors"},
                 {"reused", true},
                 {"comparison", figures},
                 {"mark", "bad"}}}},
              {"result",
               {{"candidates", {{{"commit", bad}, {"subject", "y"}, {"mark", "bad"}}}},
                {"first_bad",
                 {{"commit", bad},
                  {"subject", "y"},
                  {"files", {"ggml/x.c"}},
                  {"stat", " ggml/x.c | 2 +-\n"},
                  {"comparison", figures}}},
                {"steps", 2},
                {"builds", 1},
                {"step_seconds", 9.0}}}};
  return doc;
}

TEST(BisectResult, WhatTheBisectWritesRoundTrips) {
  const json doc = Written();
  const BisectResult b = BisectResult::FromJson(doc);
  EXPECT_EQ(b.ToJson().dump(2), doc.dump(2));
  EXPECT_EQ(ToJson(b.header), doc["header"]);
  EXPECT_EQ(b.header.n_tokens, 300);
  EXPECT_EQ(b.header.probe_plan.full, "tool_calls");
  ASSERT_EQ(b.commits.size(), 2u);
  ASSERT_TRUE(b.good_capture);
  EXPECT_EQ(b.good_capture->build_seconds, 60.5);
  ASSERT_EQ(b.steps.size(), 2u);
  EXPECT_EQ(b.steps[0].error, "does not compile");
  EXPECT_FALSE(b.steps[0].comparison);
  ASSERT_TRUE(b.steps[1].comparison);
  EXPECT_EQ(b.steps[1].comparison->bit_identical, 1);
  EXPECT_EQ(b.steps[1].comparison->flip_list.size(), 1u);
  EXPECT_EQ(b.StepOf(std::string(40, 'd')), &b.steps[1]);
  EXPECT_EQ(b.StepOf("nothing"), nullptr);
  ASSERT_TRUE(b.result && b.result->first_bad);
  EXPECT_EQ(b.result->first_bad->files, std::vector<std::string>{"ggml/x.c"});
  EXPECT_EQ(b.result->builds, 1);
}

// An earlier run's file is outside input: a mistyped step reads with defaults (an index that is
// no number reads as none, and the bisect then refuses the step) instead of throwing.
TEST(BisectResult, ReadingNeverFails) {
  json doc = Written();
  doc["steps"][0]["index"] = "zero";
  doc["steps"][1]["comparison"] = 5;
  doc["result"] = "done";
  const BisectResult b = BisectResult::FromJson(doc);
  EXPECT_FALSE(b.steps[0].index);
  EXPECT_FALSE(b.steps[1].comparison);
  EXPECT_FALSE(b.result);
  for (const json& j : {json(), json(1), json::array(), json({{"steps", {1, nullptr}}, {"header", 3}})}) {
    const BisectResult r = BisectResult::FromJson(j);
    EXPECT_FALSE(r.good_capture);
    (void)r.ToJson();
  }
}

}  // namespace
}  // namespace flipscope
