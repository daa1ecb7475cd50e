// The sentence naming the configuration closest to the exact reference (ExactClosestSentence) on
// made-up summaries: the closest, those its interval does not tell apart, the baseline's distance,
// and the warning when the variant nearest the baseline is not the one nearest the truth.
#include <gtest/gtest.h>

#include "report/internal.h"

namespace flipscope {
namespace {

SummaryRow Row(const std::string& config, double rate, double lo, double hi, double kl) {
  SummaryRow s;
  s.config = config;
  s.median_flip_rate = rate;
  s.flip_rate_ci = Interval{lo, hi};
  s.kl_mean = kl;
  return s;
}

// Against exact: the given rows; against the baseline: the variants' given rates.
ExperimentResults Results(std::vector<SummaryRow> exact, std::vector<SummaryRow> vs_base) {
  ExperimentResults r;
  r.baseline = "f16";
  r.reference = ReferenceResults{};
  r.reference->summary = std::move(exact);
  r.measured.summary = std::move(vs_base);
  return r;
}

TEST(ExactClosest, NothingWithoutTheReference) { EXPECT_EQ(report::ExactClosestSentence(ExperimentResults{}), ""); }

TEST(ExactClosest, TheBaselineClosestAndTheVariantsInAgreement) {
  const auto r = Results(
      {Row("f16", 0.02, 0.01, 0.04, 1e-3), Row("q8", 0.03, 0.02, 0.05, 2e-3), Row("q4", 0.10, 0.08, 0.13, 5e-2)},
      {Row("q8", 0.01, 0.0, 0.02, 1e-3), Row("q4", 0.09, 0.07, 0.12, 4e-2)});
  const std::string s = report::ExactClosestSentence(r);
  EXPECT_EQ(s.find("Closest to the exact reference: f16 (2.000% of probes flip against it"), 0u) << s;
  EXPECT_NE(s.find("overlaps that of q8, so they are not told apart"), std::string::npos) << s;
  EXPECT_EQ(s.find("q4,"), std::string::npos) << s;                  // q4's interval starts above f16's
  EXPECT_EQ(s.find("the baseline f16 is"), std::string::npos) << s;  // it is the closest itself
  EXPECT_EQ(s.find("not the truth"), std::string::npos) << s;        // q8 is nearest both
}

TEST(ExactClosest, TheVariantNearestTheBaselineIsNotNearestTheTruth) {
  const auto r = Results(
      {Row("f16", 0.05, 0.03, 0.07, 4e-3), Row("q8", 0.06, 0.04, 0.08, 5e-3), Row("fa-off", 0.01, 0.0, 0.02, 1e-3)},
      {Row("q8", 0.01, 0.0, 0.02, 1e-3), Row("fa-off", 0.05, 0.03, 0.07, 4e-3)});
  const std::string s = report::ExactClosestSentence(r);
  EXPECT_EQ(s.find("Closest to the exact reference: fa-off"), 0u) << s;
  EXPECT_NE(s.find("the baseline f16 is 5.000% from it"), std::string::npos) << s;
  EXPECT_NE(s.find("Of the variants, q8 is closest to the baseline but fa-off to the exact reference: the baseline "
                   "is not the truth."),
            std::string::npos)
      << s;
  EXPECT_EQ(s.find("told apart"), std::string::npos) << s;  // no interval reaches down to fa-off's
}

// Ranked by served twins: the sentence reads the twins' own distances to exact (a prefill row
// closer to the truth is not the answer), names configurations without "@served", and calls a
// baseline named "baseline" the baseline once.
TEST(ExactClosest, UnderServedReplayTheTwinsOwnDistancesAnswer) {
  auto r = Results({Row("baseline", 0.05, 0.03, 0.07, 4e-3), Row("q8", 0.01, 0.0, 0.02, 1e-3)},
                   {Row("q8", 0.01, 0.0, 0.02, 1e-3)});
  r.baseline = "baseline";
  r.reference->served_summary = {Row("baseline@served", 0.01, 0.005, 0.02, 1e-3),
                                 Row("q8@served", 0.06, 0.04, 0.08, 5e-3)};
  r.served = ServedResults{};
  r.served->baseline = "baseline@served";
  r.served->measured.summary = {Row("q8@served", 0.05, 0.03, 0.07, 4e-3)};
  r.recipe = RecipeResult{};
  r.recipe->ranking.emplace_back().replay = "served";
  const std::string s = report::ExactClosestSentence(r);
  EXPECT_EQ(s.find("Closest to the exact reference under served replay: baseline (1.000%"), 0u) << s;
  EXPECT_EQ(s.find("@served"), std::string::npos) << s;
  EXPECT_EQ(s.find("baseline baseline"), std::string::npos) << s;
  // The table lists both replays' rows, each beside its own baseline.
  const report::TextTable t = report::ExactTable(r);
  ASSERT_EQ(t.rows.size(), 4u);
  EXPECT_EQ(t.rows[3][0], "q8@served");
  EXPECT_EQ(t.rows[3][7], "5.000%");
  // Ranked by prefill (no served ranking), the prefill rows answer.
  r.recipe->ranking.front().replay = "prefill";
  EXPECT_EQ(report::ExactClosestSentence(r).find("Closest to the exact reference: q8"), 0u);
}

}  // namespace
}  // namespace flipscope
