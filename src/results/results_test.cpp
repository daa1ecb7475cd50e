#include "results/results.h"

#include <gtest/gtest.h>

#include "results/experiment_results.h"

namespace flipscope {
namespace {

using nlohmann::json;

// A comparison document as compare writes it (the fields a summary reads).
json Compare(double rate, int64_t flips, double kl, int64_t identical) {
  return {{"overall",
           {{"flip_rate", rate},
            {"flip_rate_ci", {rate / 2, rate * 2}},
            {"flips", flips},
            {"probes", 100},
            {"confident_flips", flips / 2},
            {"uncertain_flips", flips - flips / 2},
            {"same_top1_rate", 1 - rate},
            {"kl_base_cand", {{"mean", kl}, {"p99", 10 * kl}, {"max", 100 * kl}}}}},
          {"bit_identical", identical},
          {"probes_compared", 100}};
}

std::vector<ComparisonEntry> Entries(std::vector<double> rates) {
  std::vector<ComparisonEntry> out;
  for (size_t i = 0; i < rates.size(); ++i)
    out.push_back(
        {"q8", int(i),
         ComparisonFigures::Of(ComparisonFromJson(Compare(rates[i], int64_t(rates[i] * 100), 0.001 * double(i + 1), 90)))});
  return out;
}

TEST(MedianRepeatIndex, LowerMiddleByRateTiesInRepeatOrder) {
  EXPECT_EQ(MedianRepeatIndex({}), 0u);
  EXPECT_EQ(MedianRepeatIndex({0.3}), 0u);
  EXPECT_EQ(MedianRepeatIndex({0.3, 0.1}), 1u);       // even: the lower middle
  EXPECT_EQ(MedianRepeatIndex({0.2, 0.2, 0.2}), 1u);  // ties: in repeat order
  EXPECT_EQ(MedianRepeatIndex({0.5, 0.1, 0.3, 0.2}), 3u);
}

TEST(SummaryRow, MediansOverRepeatsAndTheMedianRepeatsCounts) {
  SummaryRow s = SummaryRow::Of("q8", Entries({0.04, 0.01, 0.03, 0.02}));
  EXPECT_EQ(s.repeats, 4);
  EXPECT_DOUBLE_EQ(s.median_flip_rate, 0.025);  // the mean of the two middle ones
  EXPECT_EQ(s.median_repeat, 3);                // 0.02: the lower middle
  EXPECT_EQ(s.flips, 2);
  ASSERT_TRUE(s.flip_rate_ci);
  EXPECT_DOUBLE_EQ((*s.flip_rate_ci)[1], 0.04);
  EXPECT_DOUBLE_EQ(s.kl_mean, 0.0025);  // median of 0.001..0.004
  EXPECT_EQ(s.bit_identical, 360);
  EXPECT_EQ(s.bit_identical_of, 400);
  EXPECT_FALSE(s.AllBitIdentical());
}

TEST(SummaryRow, JsonRoundTripKeepsEveryField) {
  SummaryRow s = SummaryRow::Of("q8", Entries({0.02, 0.01}));
  s.above_floor = true;
  s.load = 3;
  s.forks_known = true;
  s.forks = ForkCounts{1, 2, 8, 0.0025};
  s.exact_flip_rate = 0.01;
  s.exact_kl_mean = 2e-3;
  const json j = s.ToJson();
  EXPECT_TRUE(j["alone"].is_null());  // loaded, with no configuration alone to compare with
  EXPECT_EQ(SummaryRow::FromJson(j).ToJson(), j);
  SummaryRow bare = SummaryRow::Of("x", Entries({0.0}));
  bare.forks_known = true;  // forks not followed: the damage fields are null
  EXPECT_TRUE(bare.ToJson()["damage"].is_null());
  EXPECT_FALSE(bare.ToJson().contains("load"));
  EXPECT_EQ(SummaryRow::FromJson(bare.ToJson()).ToJson(), bare.ToJson());
  EXPECT_EQ(SummaryRow::FromJson(s.ToReferenceJson()).ToReferenceJson(), s.ToReferenceJson());
}

TEST(Floor, ThresholdIsTheIntervalsTopUnlessBitForBit) {
  Floor none = Floor::Of(std::nullopt, 1);
  EXPECT_EQ(none.Threshold(), 0.0);
  EXPECT_TRUE(none.ToJson()["flip_rate"].is_null());
  EXPECT_EQ(none.ToJson()["note"], "the baseline ran once: no repeat floor (set repeats >= 2 in [baseline])");
  SummaryRow noisy = SummaryRow::Of("baseline", Entries({0.02}));
  Floor f = Floor::Of(noisy, 2);
  EXPECT_DOUBLE_EQ(f.Threshold(), 0.04);
  EXPECT_EQ(Floor::FromJson(f.ToJson()).ToJson(), f.ToJson());
  noisy.bit_identical = noisy.bit_identical_of;
  EXPECT_EQ(Floor::Of(noisy, 2).Threshold(), 0.0);
}

TEST(ReadResults, ToleratesMissingAndMistypedParts) {
  EXPECT_TRUE(ExperimentResults::FromJson(json()).measured.summary.empty());
  const json doc = {{"summary", json::array({SummaryRow::Of("q8", Entries({0.01})).ToJson(), 7, "x"})},
                    {"floor", {{"repeats", "two"}, {"flip_rate", nullptr}}},
                    {"load_floor", json::array({{{"load", 3}, {"config", "q8-load3"}, {"flips", "many"}}})},
                    {"reference", {{"summary", "none"}}}};
  const ExperimentResults read = ExperimentResults::FromJson(doc);
  const Measurements& r = read.measured;
  ASSERT_EQ(r.summary.size(), 1u);
  ASSERT_NE(r.Row("q8"), nullptr);
  EXPECT_EQ(r.Row("q9"), nullptr);
  ASSERT_TRUE(r.floor);
  EXPECT_EQ(r.floor->repeats, 0);
  EXPECT_FALSE(r.floor->flip_rate);
  ASSERT_EQ(r.load_floor.size(), 1u);
  EXPECT_FALSE(r.load_floor[0].flips);
  EXPECT_TRUE(!read.reference || read.reference->summary.empty());
}

}  // namespace
}  // namespace flipscope

namespace flipscope {
namespace {

TEST(ReplayRows, WrittenAndReadBackAndToleratedWhenMistyped) {
  ReplayDistance d;
  d.config = "q8";
  d.figures = ComparisonFigures::Of(ComparisonFromJson(Compare(0.02, 2, 0.003, 7)));
  d.groups = {{"written", 60, 2, 0, 2.0 / 60, 0.004},
              {"tool_calls", 40, 1, 0, 0.025, 0.005},
              {"elsewhere", 40, 0, 7, 0, 0.001}};
  ReplayRanking k{{"baseline", "q8", "q4"}, {"baseline", "q4", "q8"}, true};
  json doc = {{"summary", json::array()},
              {"served",
               {{"summary", {SummaryRow::Of("q8@served", Entries({0.03})).ToJson()}},
                {"floor", Floor::Of(std::nullopt, 1).ToJson()},
                {"distance", {d.ToJson(), "not an object"}},
                {"ranking", k.ToJson()}}}};
  const ExperimentResults read = ExperimentResults::FromJson(json::parse(doc.dump()));
  ASSERT_TRUE(read.served);
  const ServedResults& rows = *read.served;
  ASSERT_EQ(rows.distance.size(), 1u);
  const ReplayDistance& back = rows.distance[0];
  EXPECT_EQ(back.config, "q8");
  EXPECT_EQ(back.figures.flips, 2);
  EXPECT_EQ(back.figures.probes, 100);
  EXPECT_EQ(back.figures.bit_identical, 7);
  EXPECT_DOUBLE_EQ(back.figures.kl_mean, 0.003);
  ASSERT_TRUE(back.figures.flip_rate_ci);
  EXPECT_DOUBLE_EQ((*back.figures.flip_rate_ci)[1], 0.04);
  ASSERT_EQ(back.groups.size(), 3u);
  EXPECT_EQ(back.groups[2].name, "elsewhere");
  EXPECT_EQ(back.groups[2].bit_identical, 7);
  EXPECT_DOUBLE_EQ(back.groups[0].flip_rate, 2.0 / 60);
  ASSERT_TRUE(rows.ranking);
  EXPECT_EQ(rows.ranking->served, k.served);
  EXPECT_TRUE(rows.ranking->changed);
  EXPECT_TRUE(rows.measured.floor);
  ASSERT_NE(rows.measured.Row(ServedName("q8")), nullptr);
  EXPECT_DOUBLE_EQ(rows.measured.Row(ServedName("q8"))->median_flip_rate, 0.03);
  EXPECT_EQ(rows.measured.Row(ServedName("q4")), nullptr);
  EXPECT_EQ(read.measured.Row("q8"), nullptr) << "served rows are not prefill rows";

  json bad = {
      {"served", {{"distance", {{{"config", 3}, {"groups", "x"}, {"flips", "two"}}}}, {"ranking", {{"prefill", 1}}}}}};
  const ExperimentResults tolerant_doc = ExperimentResults::FromJson(bad);
  ASSERT_TRUE(tolerant_doc.served);
  const ServedResults& tolerant = *tolerant_doc.served;
  ASSERT_EQ(tolerant.distance.size(), 1u);
  EXPECT_EQ(tolerant.distance[0].config, "");
  EXPECT_EQ(tolerant.distance[0].figures.flips, 0);
  EXPECT_TRUE(tolerant.distance[0].groups.empty());
  ASSERT_TRUE(tolerant.ranking);
  EXPECT_TRUE(tolerant.ranking->prefill.empty());
  EXPECT_FALSE(ExperimentResults::FromJson(json{{"served", 7}}).served);
}

// The interval the recipe and the report derive is compare's: the same figures as Python's
// (tests/data/make-results-sample.py wrote fa-off's 11 flips of 1,695 into the sample).
TEST(Ranking, WilsonIntervalAgreesWithAnIndependentComputation) {
  const Interval ci = Wilson95(11, 1695);
  EXPECT_NEAR(ci[0], 0.0036275872633607176, 1e-15);
  EXPECT_NEAR(ci[1], 0.01158363723703075, 1e-15);
  EXPECT_EQ(Wilson95(0, 0), (Interval{0, 1}));
}

// The damage interval holds the damage rate, and widens with fewer forks followed.
TEST(Ranking, DamageAndRepairIntervalsHoldTheirRates) {
  SummaryRow s;
  s.median_flip_rate = 58.0 / 800, s.flip_rate_ci = Wilson95(58, 800);
  s.forks = ForkCounts{3, 1, 24, 58.0 / 800 * 3 / 24 * 54 / 58, 4, 54};
  const Interval d = *s.DamageRateCi(), r = *s.RepairRateCi();
  EXPECT_LT(d[0], s.forks->damage_rate);
  EXPECT_GT(d[1], s.forks->damage_rate);
  EXPECT_LT(r[0], *s.RepairRate());
  EXPECT_GT(r[1], *s.RepairRate());
  EXPECT_DOUBLE_EQ(*s.RepairRate() * 3, s.forks->damage_rate);
  SummaryRow fewer = s;
  fewer.forks->followed = 8, fewer.forks->damage = 1;
  EXPECT_GT((*fewer.DamageRateCi())[1] - (*fewer.DamageRateCi())[0], d[1] - d[0]);
  EXPECT_FALSE(SummaryRow().DamageRateCi());
}

// Ties: overlapping intervals group at each key in turn, and memory orders a tie.
TEST(Ranking, OverlapsGroupKeyByKeyAndMemoryBreaksTies) {
  auto e = [](double v, double lo, double hi) { return Estimate{v, {lo, hi}}; };
  std::vector<RankInput> in{{"a", {e(0.02, 0.01, 0.03), e(0.5, 0.4, 0.6)}, 300},
                            {"b", {e(0.01, 0.00, 0.02), e(0.5, 0.4, 0.6)}, 200},
                            {"c", {e(0.01, 0.00, 0.02), e(0.9, 0.8, 1.0)}, 100},
                            {"d", {e(0.10, 0.08, 0.12), e(0.1, 0.0, 0.2)}, 50}};
  std::vector<std::pair<std::string, int>> got;
  for (const RankedRow& r : RankWithTies(in)) got.push_back({in[r.index].config, r.tie_group});
  // a, b, c tie on the first key; c is apart on the second; b needs less memory than a; d is last.
  const std::vector<std::pair<std::string, int>> want{{"b", 1}, {"a", 1}, {"c", 2}, {"d", 3}};
  EXPECT_EQ(got, want);
}

}  // namespace
}  // namespace flipscope
