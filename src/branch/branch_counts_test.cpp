// The branch stage's counting: the summary of verdicts and outcomes, and the branch points of two
// captures' greedy tokens.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "branch/branch.h"

using namespace flipscope;

TEST(Summary, CountsEveryVerdictAndOutcome) {
  nlohmann::json records = nlohmann::json::array(
      {{{"verdict", "benign"}, {"outcome", "benign"}, {"outcome_kind", nullptr}},
       {{"verdict", "invalid_tool_call"}, {"outcome", "both_fail"}, {"outcome_kind", "invalid_tool_call"}},
       {{"verdict", "invalid_tool_call"}, {"outcome", "damage"}, {"outcome_kind", "invalid_tool_call"}},
       {{"verdict", "literal_mutated"}, {"outcome", "repair"}, {"outcome_kind", "literal_mutated"}}});
  std::vector<ForkRecord> typed;
  for (const auto& r : records) typed.push_back(ForkRecordFromJson(r));
  auto c = ToJson(CountVerdicts(typed));
  nlohmann::json kinds = {{"invalid_tool_call", 0}, {"literal_mutated", 0}, {"wrong_command", 0}};
  nlohmann::json damage = kinds, repair = kinds;
  damage["total"] = damage["invalid_tool_call"] = 1;
  repair["total"] = repair["literal_mutated"] = 1;
  EXPECT_EQ(
      c, (nlohmann::json{
             {"invalid_tool_call", 2},
             {"literal_mutated", 1},
             {"wrong_command", 0},
             {"divergent", 0},
             {"benign", 1},
             {"total", 4},
             {"outcomes",
              {{"damage", damage}, {"repair", repair}, {"both_fail", 1}, {"different_but_fine", 0}, {"benign", 1}}}}));
  std::string text = SummaryText(BranchCountsFromJson(c));
  EXPECT_NE(text.find("4 branches"), std::string::npos);
  EXPECT_NE(
      text.find("     1 damage: the candidate breaks what the reference's future got right (1 invalid_tool_call)"),
      std::string::npos)
      << text;
  EXPECT_NE(text.find("     1 repair: the candidate gets right what the reference's future broke (1 literal_mutated)"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("     2 structurally invalid branches"), std::string::npos) << text;
  // A subset of the branch points says how it was picked.
  BranchCounts some = BranchCountsFromJson(c);
  some.branch_points = 21;
  EXPECT_NE(SummaryText(some).find("4 branches: the first 4 of 21 branch points"), std::string::npos);
  EXPECT_NE(SummaryText(some, ForkPick::kSpread).find("4 branches: 4 of 21 branch points, spread over the session"),
            std::string::npos)
      << SummaryText(some, ForkPick::kSpread);
}

// The one rule for branch points: positions both captures probe, where the argmax differ, in order.
TEST(Flips, OnlyCommonProbesWhereTheGreedyTokensDiffer) {
  const std::vector<int32_t> pb = {0, 2, 4, 6, 8}, ab = {1, 2, 3, 4, 5};
  const std::vector<int32_t> pc = {2, 3, 4, 8, 9}, ac = {9, 7, 3, 6, 1};
  auto f = Flips(pb, ab, pc, ac);
  ASSERT_EQ(f.size(), 2u);  // 2 (2 vs 9) and 8 (5 vs 6); 4 agrees, 0/3/6/9 are probed by one side only
  EXPECT_EQ(f[0].position, 2);
  EXPECT_EQ(f[0].base_token, 2);
  EXPECT_EQ(f[0].cand_token, 9);
  EXPECT_EQ(f[1].position, 8);
  EXPECT_TRUE(Flips(pb, ab, pb, ab).empty());
}
