// The typed results document: a results.json the experiment wrote reads back into
// ExperimentResults and writes out byte for byte as it was; reading tolerates any document.
#include "results/experiment_results.h"

#include <gtest/gtest.h>

#include <cmath>
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
  // Comparisons and a configuration's facts are typed: nothing of them is left as unknown.
  for (const ComparisonRecord& c : r.measured.comparisons) {
    ASSERT_TRUE(c.compare);
    EXPECT_TRUE(c.compare->extra.empty()) << c.compare->extra.dump();
    EXPECT_EQ(c.compare->overall.probes, c.entry.figures.probes);
    EXPECT_FALSE(c.compare->windows.empty());
  }
  const ConfigEntry& base = r.measured.configs[0];
  EXPECT_TRUE(base.description && base.flags && base.kv_bytes_per_token && base.model_file_size);
  EXPECT_EQ(base.repeats.value_or(0), 2);
  ASSERT_TRUE(base.capture_seconds && base.reused);
  EXPECT_EQ(base.capture_seconds->size(), 2u);
  for (const char* key : {"description", "flags", "repeats", "capture_seconds", "reused", "kv_bytes_per_token",
                          "model_file_size"})
    EXPECT_FALSE(base.fields.contains(key)) << key;
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
  EXPECT_TRUE(r.recipe.has_value());
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

  // A fact of another type than this version writes stays in fields and is written back as read;
  // an integer where a float is written is not turned into one.
  const json facts = {{"name", "b"},           {"model_file_size", "unknown"}, {"kv_bytes_per_token", 23040},
                      {"repeats", 2},          {"capture_seconds", {1.5, 2}},  {"reused", {false, true}},
                      {"flags", nullptr}};
  const ConfigEntry e = ConfigEntry::FromJson(facts);
  EXPECT_FALSE(e.model_file_size);
  EXPECT_FALSE(e.kv_bytes_per_token);
  EXPECT_FALSE(e.capture_seconds);
  EXPECT_FALSE(e.flags);
  EXPECT_EQ(e.repeats.value_or(0), 2);
  ASSERT_TRUE(e.reused);
  EXPECT_TRUE((*e.reused)[1]);
  json written = e.ToJson();
  written.erase("captures");
  EXPECT_EQ(written.dump(), facts.dump());

  // The run's settings: a budget in whole bytes is written back as the integer it was, one field
  // this version does not know is kept.
  const json settings = {{"window", 64}, {"confident", 0.9}, {"memory_budget_bytes", 8589934592ull}, {"later", 1}};
  const RunSettings rs = RunSettings::FromJson(settings);
  EXPECT_EQ(rs.window.value_or(0), 64);
  EXPECT_DOUBLE_EQ(rs.memory_budget_bytes.value_or(0), 8589934592.0);
  EXPECT_EQ(rs.ToJson().dump(), settings.dump());
  EXPECT_FALSE(RunSettings::FromJson(json{{"memory_budget_bytes", nullptr}}).memory_budget_bytes);

  // A compare document's field this version does not know is kept and written back.
  json cmp = {{"config", "b"}, {"repeat", 0}, {"compare", {{"future_figure", {1, 2}}, {"window", 64}}}};
  const ComparisonRecord c = ComparisonRecord::FromJson(cmp);
  ASSERT_TRUE(c.compare);
  EXPECT_EQ(c.compare->window, 64);
  EXPECT_EQ(c.ToJson()["compare"]["future_figure"], cmp["compare"]["future_figure"]);
}

// Found by fuzz_results: a number far outside an integer field's range (here a flip's position)
// was converted anyway, which is undefined; it now reads as the field's default.
TEST(ExperimentResults, NumbersOutsideAnIntegerFieldsRangeReadAsItsDefault) {
  const json doc = {{"window", 1e300},
                    {"probes_compared", -1e19},
                    {"bit_identical", 18446744073709551615ull},
                    {"base", {{"topk", 3e9}}},
                    {"flips", {{{"position", 1e300}, {"base_token", -3e9}, {"window", std::nan("")}}}}};
  const Comparison c = ComparisonFromJson(doc);
  EXPECT_EQ(c.window, 0);
  EXPECT_EQ(c.probes_compared, 0);
  EXPECT_EQ(c.bit_identical, 0);
  EXPECT_EQ(c.base_topk, 0);
  ASSERT_EQ(c.flips.size(), 1u);
  EXPECT_EQ(c.flips[0].position, 0);
  EXPECT_EQ(c.flips[0].base_token, -1);
  // In range, a float is truncated as before.
  EXPECT_EQ(ComparisonFromJson(json{{"window", 64.0}}).window, 64);
  EXPECT_EQ(ComparisonFromJson(json{{"window", -2.0}}).window, -2);
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
