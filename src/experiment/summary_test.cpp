// The median repeat: the summary and the report name the same repeat of a configuration, also
// for an even number of repeats, where "closest to the median" would tie.
#include <gtest/gtest.h>

#include "experiment/experiment.h"
#include "experiment/steps.h"
#include "report/internal.h"

using namespace flipscope;

namespace {

// One comparison entry of results.json with `flips` of 100 probes.
nlohmann::json ComparisonDoc(const std::string& config, int repeat, int flips) {
  const double rate = flips / 100.0;
  nlohmann::json overall = {{"flip_rate", rate},
                            {"flip_rate_ci", {rate / 2, rate * 2}},
                            {"flips", flips},
                            {"probes", 100},
                            {"confident_flips", 0},
                            {"uncertain_flips", flips},
                            {"same_top1_rate", 1 - rate},
                            {"kl_base_cand", {{"mean", rate / 10}, {"p99", rate}, {"max", rate * 3}}}};
  nlohmann::json list = nlohmann::json::array();
  for (int i = 0; i < flips; ++i) list.push_back({{"position", 10 * repeat + i}});
  return {
      {"config", config},
      {"repeat", repeat},
      {"compare", {{"overall", overall}, {"flips", list}, {"bit_identical", 100 - flips}, {"probes_compared", 100}}}};
}

}  // namespace

TEST(Summarize, TheSummaryAndTheReportShowTheSameMedianRepeat) {
  Experiment exp;
  exp.baseline.name = "baseline";
  for (const char* name : {"even", "odd"}) {
    ConfigSpec v;
    v.name = name;
    exp.variants.push_back(v);
  }
  nlohmann::json results = {{"baseline", "baseline"},
                            {"configs",
                             {{{"name", "baseline"}, {"status", "ok"}},
                              {{"name", "even"}, {"status", "ok"}},
                              {{"name", "odd"}, {"status", "ok"}}}},
                            {"comparisons",
                             {ComparisonDoc("baseline", 1, 0), ComparisonDoc("even", 0, 4), ComparisonDoc("even", 1, 2),
                              ComparisonDoc("odd", 0, 5), ComparisonDoc("odd", 1, 1), ComparisonDoc("odd", 2, 3)}}};
  // The comparisons with the figures CompareAll hands over (read from their compare documents).
  Measurements measured = Measurements::ReadFrom(results);
  Summarize(exp, measured);
  measured.WriteInto(results);
  // even: rates 4% and 2%, median 3%, both repeats equally close; the lower middle is repeat 1.
  const auto& even = results["summary"][1];
  ASSERT_EQ(even["config"], "even");
  EXPECT_DOUBLE_EQ(even["median_flip_rate"].get<double>(), 0.03);
  EXPECT_EQ(even["median_repeat"], 1);
  EXPECT_EQ(even["flips"], 2);
  const ComparisonRecord* shown = report::MedianComparison(measured, "even");
  ASSERT_NE(shown, nullptr);
  EXPECT_EQ(shown->entry.repeat, 1);
  EXPECT_EQ(shown->compare->flips.size(), even["flips"].get<size_t>());
  // odd: rates 5%, 1%, 3%: the middle one, repeat 2.
  const auto& odd = results["summary"][2];
  EXPECT_EQ(odd["median_repeat"], 2);
  EXPECT_EQ(odd["flips"], 3);
  EXPECT_EQ(report::MedianComparison(measured, "odd")->entry.repeat, 2);
  // A results file from before median_repeat existed: the report's own rule gives the same repeat.
  for (auto& s : results["summary"]) s.erase("median_repeat");
  EXPECT_EQ(report::MedianComparison(Measurements::ReadFrom(results), "even")->entry.repeat, 1);
}
