// The branch document: the branch stage's records, counts and settings read from the files
// earlier versions wrote and written back to the same bytes; older shapes read as what they say.
#include "results/branch_result.h"

#include <gtest/gtest.h>

#include "results/experiment_results.h"
#include "util/util.h"

namespace flipscope {
namespace {

using nlohmann::json;

// A file of the source tree (tests/data), parsed.
json ReadJson(const std::string& relative) {
  auto text = ReadFile(std::string(FLIPSCOPE_SOURCE_DIR) + "/" + relative);
  return text.ok() ? json::parse(*text) : json();
}

std::string Dump(const json& j) { return j.dump(1, ' ', false, json::error_handler_t::replace); }

// A file of the current shape (outcomes, decodings, side judgements): every branch group reads
// and writes back to the same bytes, with its records typed.
TEST(BranchResult, ACurrentFileReadsAndWritesTheSameBytes) {
  const json doc = ReadJson("tests/data/results-v0.1.0.json");
  ASSERT_TRUE(doc["branches"].is_array());
  for (const json& g : doc["branches"]) {
    const BranchRecord b = BranchRecord::FromJson(g);
    EXPECT_EQ(Dump(b.ToJson()), Dump(g));
    ASSERT_EQ(b.result.records.size(), g["records"].size());
    const ForkRecord& r = b.result.records.front();
    const json& rj = g["records"][0];
    EXPECT_EQ(r.position, rj["position"].get<int64_t>());
    EXPECT_EQ(r.verdict, rj["verdict"].get<std::string>());
    ASSERT_TRUE(r.attribution.has_value());
    EXPECT_EQ(r.attribution->outcome, rj["outcome"].get<std::string>());
    EXPECT_EQ(r.base_future.pieces.size(), rj["base_future"]["pieces"].size());
    EXPECT_EQ(r.base_future.probs, rj["base_future"]["probs"].get<std::vector<double>>());
    EXPECT_EQ(r.base_future.decoding, rj["base_future"]["decoding"].get<std::string>());
    EXPECT_EQ(b.result.counts.total, g["counts"]["total"].get<int64_t>());
    EXPECT_EQ(b.Counts().forkable, g["counts"]["branch_points"].get<int64_t>());
  }
}

// A file written before outcomes and decodings: those groups stay empty and are not invented on
// the way back; what the file holds comes back as it was.
TEST(BranchResult, AnOlderFileKeepsItsShape) {
  const json doc = ReadJson("tests/data/results-sample.json");
  const json& g = doc["branches"][0];
  ASSERT_FALSE(g["records"][0].contains("outcome"));
  const BranchRecord b = BranchRecord::FromJson(g);
  const ForkRecord& r = b.result.records.front();
  EXPECT_FALSE(r.attribution.has_value());
  EXPECT_FALSE(r.base_future.decoding.has_value());
  EXPECT_FALSE(b.result.counts.outcomes.has_value());
  EXPECT_FALSE(b.result.config.decoding.has_value());
  const json back = b.ToJson();
  EXPECT_FALSE(back["records"][0].contains("outcome"));
  EXPECT_FALSE(back["records"][0]["base_future"].contains("decoding"));
  EXPECT_FALSE(back["counts"].contains("outcomes"));
  EXPECT_EQ(back["records"], g["records"]);
  EXPECT_EQ(back["counts"], g["counts"]);
  EXPECT_EQ(Dump(BranchRecord::FromJson(back).ToJson()), Dump(back));  // a fixed point
}

// Fields of a later version are kept where they were; mistyped ones read as their defaults.
TEST(BranchResult, UnknownFieldsAreKeptAndMistypedOnesReadAsDefaults) {
  json g = ReadJson("tests/data/results-v0.1.0.json")["branches"][0];
  g["later"] = 1;
  g["records"][0]["later"] = {{"x", 2}};
  g["records"][0]["base"]["later"] = "y";
  g["records"][0]["base_future"]["later"] = true;
  g["counts"]["later"] = 3;
  g["branch_config"]["later"] = 4;
  const json back = BranchRecord::FromJson(g).ToJson();
  EXPECT_EQ(Dump(back), Dump(g));
  g["records"][0]["position"] = "seven";
  g["records"][0]["reconverge_at"] = 1e300;
  const ForkRecord r = BranchRecord::FromJson(g).result.records.front();
  EXPECT_EQ(r.position, 0);
  EXPECT_FALSE(r.reconverge_at.has_value());
}

TEST(BranchCounts, NamesAndCountsAgree) {
  BranchCounts c;
  for (const char* v : {"benign", "divergent", "invalid_tool_call", "literal_mutated", "wrong_command"}) {
    ASSERT_NE(c.OfVerdict(v), nullptr) << v;
    *c.OfVerdict(v) = int64_t(std::string(v).size());
  }
  EXPECT_EQ(c.OfVerdict("total"), nullptr);
  EXPECT_EQ(c.OfVerdict("unknown"), nullptr);
  const json j = ToJson(c);
  for (const auto& [name, n] : c.VerdictsByName()) EXPECT_EQ(j[name].get<int64_t>(), n) << name;
  // The listing follows the document's own order (by name).
  std::vector<std::string> names;
  for (const auto& [name, n] : c.VerdictsByName()) names.push_back(name);
  EXPECT_TRUE(std::is_sorted(names.begin(), names.end()));
  EXPECT_TRUE(c.OutcomesByName().empty());
  c.outcomes.emplace().damage.total = 2;
  EXPECT_EQ(c.OutcomesByName()[2], (std::pair<std::string, int64_t>{"damage", 2}));
  EXPECT_EQ(*c.outcomes->damage.Of("wrong_command"), 0);
  EXPECT_EQ(c.outcomes->damage.Of("total"), nullptr);
}

}  // namespace
}  // namespace flipscope
