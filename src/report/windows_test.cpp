// A final window with too few probes is merged into the one before it, so that its interval does
// not dominate the flip-rate chart; a window of ordinary size is left alone.
#include <gtest/gtest.h>

#include "report/internal.h"

namespace flipscope {
namespace {

using nlohmann::json;

json Window(int index, int begin, int end, int probes, int flips) {
  const Interval ci = Wilson95(flips, probes);
  return {{"index", index},     {"begin", begin},           {"end", end},
          {"probes", probes},   {"flips", flips},           {"flip_rate", double(flips) / probes},
          {"flip_rate_ci", ci}, {"kl_mean", 0.001 * flips}, {"kl_p99", 0.5}};
}

json ResultsWithLastWindow(int last_probes, int last_flips) {
  json windows = {Window(0, 0, 2048, 100, 1), Window(1, 2048, 4096, 120, 2),
                  Window(2, 4096, 4200, last_probes, last_flips)};
  return {{"configs", {{{"name", "q4"}, {"status", "ok"}}}},
          {"comparisons", {{{"config", "q4"}, {"repeat", 0}, {"compare", {{"windows", windows}}}}}}};
}

// The comparisons of a results document, as the report reads them.
std::vector<ComparisonRecord> Comparisons(const json& doc) {
  return ExperimentResults::FromJson(doc).measured.comparisons;
}

TEST(ReportWindows, AShortFinalWindowIsMergedIntoItsNeighbour) {
  const json r = ResultsWithLastWindow(5, 2);  // 5 probes: 40% flips, an interval up to ~77%
  const auto rate = report::WindowSeries(Comparisons(r), "q4", report::WindowFigure::kFlipRate);
  ASSERT_EQ(rate.size(), 2u);
  EXPECT_DOUBLE_EQ(rate[1].value, 4.0 / 125);
  EXPECT_EQ(rate[1].begin, 2048);
  EXPECT_EQ(rate[1].end, 4200);
  EXPECT_EQ(rate[1].merged_probes, 5);
  const auto hi = report::WindowSeries(Comparisons(r), "q4", report::WindowFigure::kFlipRateHi);
  ASSERT_EQ(hi.size(), 2u);
  EXPECT_DOUBLE_EQ(hi[1].value, Wilson95(4, 125)[1]);
  EXPECT_LT(hi[1].value, 0.1);
  EXPECT_DOUBLE_EQ(report::WindowSeries(Comparisons(r), "q4", report::WindowFigure::kKlMean)[1].value,
                   (0.002 * 120 + 0.002 * 5) / 125);
  // A percentile cannot be merged: the merged window has none.
  EXPECT_EQ(report::WindowSeries(Comparisons(r), "q4", report::WindowFigure::kKlP99).size(), 1u);
  EXPECT_EQ(rate[0].merged_probes, 0);
}

TEST(ReportWindows, AFinalWindowOfOrdinarySizeStays) {
  const json r = ResultsWithLastWindow(40, 2);  // a third of the others' 110: not merged
  const auto rate = report::WindowSeries(Comparisons(r), "q4", report::WindowFigure::kFlipRate);
  ASSERT_EQ(rate.size(), 3u);
  EXPECT_DOUBLE_EQ(rate[2].value, 2.0 / 40);
  EXPECT_EQ(rate[2].merged_probes, 0);
}

}  // namespace
}  // namespace flipscope
