// The typed results document: a results.json the experiment wrote reads back into
// ExperimentResults and writes out byte for byte as it was; reading tolerates any document.
#include "results/experiment_results.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

namespace flipscope {
namespace {

using nlohmann::json;

// tests/data/results-v0.1.0.json: written by `flipscope run` 0.1.0 on the tiny test model, with
// every part a run can have (exact reference, repeats, a loaded variant, forks followed, layers,
// served replay, recipe).
std::string WrittenByV010() {
  std::ifstream in(std::string(FLIPSCOPE_SOURCE_DIR) + "/tests/data/results-v0.1.0.json", std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// As the experiment writes results.json.
std::string Dumped(const json& j) { return j.dump(1, ' ', false, json::error_handler_t::replace); }

TEST(ExperimentResults, AFileTheExperimentWroteRoundTripsByteForByte) {
  const std::string text = WrittenByV010();
  ASSERT_FALSE(text.empty());
  const ExperimentResults r = ExperimentResults::FromJson(json::parse(text));
  EXPECT_EQ(Dumped(r.ToJson()), text);
  // Every part was read into its type, not carried as unknown.
  EXPECT_TRUE(r.extra.empty()) << r.extra.dump();
  EXPECT_EQ(r.baseline, "baseline");
  ASSERT_GE(r.measured.configs.size(), 3u);
  EXPECT_TRUE(r.measured.configs[0].Ok());
  EXPECT_EQ(r.measured.configs[0].captures.size(), 2u);
  EXPECT_FALSE(r.measured.comparisons.empty());
  EXPECT_TRUE(r.measured.floor);
  EXPECT_FALSE(r.measured.summary.empty());
  ASSERT_TRUE(r.measured.branches);
  ASSERT_FALSE(r.measured.branches->empty());
  EXPECT_GT((*r.measured.branches)[0].Counts().followed, 0);
  ASSERT_TRUE(r.reference);
  EXPECT_EQ(r.reference->capture.name, "exact");
  EXPECT_FALSE(r.reference->summary.empty());
  ASSERT_TRUE(r.layers);
  EXPECT_FALSE(r.layers->empty());
  ASSERT_TRUE(r.served);
  EXPECT_FALSE(r.served->measured.summary.empty());
  EXPECT_FALSE(r.served->distance.empty());
  EXPECT_TRUE(r.served->ranking);
  EXPECT_TRUE(r.recipe.is_object());
}

TEST(ExperimentResults, UnknownAndMistypedPartsAreKeptAsRead) {
  const json doc = {{"future_part", {{"x", 1}}},
                    {"configs", {{{"name", "a"}, {"status", "paused"}, {"captures", {1, 2}}, {"note", "n"}}}}};
  const ExperimentResults r = ExperimentResults::FromJson(doc);
  EXPECT_EQ(r.extra["future_part"]["x"], 1);
  ASSERT_EQ(r.measured.configs.size(), 1u);
  EXPECT_FALSE(r.measured.configs[0].status) << "an unknown status is no status";
  EXPECT_TRUE(r.measured.configs[0].captures.empty());
  const json back = r.ToJson();
  EXPECT_EQ(back["future_part"], doc["future_part"]);
  EXPECT_EQ(back["configs"][0], doc["configs"][0]);
}

TEST(ExperimentResults, ReadingNeverFails) {
  for (const json& j : {json(), json(7), json::array(), json{{"configs", 3}, {"served", "x"}, {"layers", {1}}}}) {
    const ExperimentResults r = ExperimentResults::FromJson(j);
    EXPECT_TRUE(r.measured.configs.empty());
    EXPECT_FALSE(r.served);
  }
  const ExperimentResults r = ExperimentResults::FromJson(json{{"layers", {1, {{"config", "q"}, {"skipped", "why"}}}}});
  ASSERT_TRUE(r.layers);
  ASSERT_EQ(r.layers->size(), 1u);
  EXPECT_EQ(r.layers->at(0).skipped.value_or(""), "why");
}

}  // namespace
}  // namespace flipscope
