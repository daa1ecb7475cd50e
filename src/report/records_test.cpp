// A branch group with more records than the page shows in full: the first ones keep both futures
// token by token, the next ones are one summary row each, and the page says how many it left to
// results.json; a group within the limit is unchanged.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include "report/internal.h"
#include "support/count_of.h"

namespace flipscope {
namespace {

using fixtures::CountOf;

using nlohmann::json;

json Record(int i) {
  json fut = {{"text", "ab"}, {"pieces", {"a", "b"}}, {"probs", {0.5, 0.6}}, {"tokens", {1, 2}}};
  return {{"position", 1000 + i},
          {"span", fmt::format("tool call #{}", i)},
          {"base_text", "x<"},
          {"cand_text", "y&"},
          {"verdict", "divergent"},
          {"outcome", "damage"},
          {"outcome_kind", "wrong_command"},
          {"outcome_reason", fmt::format("reason <{}>", i)},
          {"base_future", fut},
          {"cand_future", fut}};
}

json WithRecords(int n) {
  json records = json::array();
  for (int i = 0; i < n; ++i) records.push_back(Record(i));
  return {{"branches", {{{"config", "kv-q4_0"}, {"records", records}}}}};
}

TEST(ReportRecords, FirstSixteenInFullTheNextAsRowsTheRestCounted) {
  const std::string html = report::HtmlBranchesSection(ExperimentResults::FromJson(WithRecords(16 + 200 + 7)));
  EXPECT_EQ(CountOf(html, "<article class=\"branch\">"), 16u);
  EXPECT_EQ(CountOf(html, "<table class=\"records\">"), 1u);
  EXPECT_NE(html.find("kv-q4_0 — 207 more branch records, one line each"), std::string::npos);
  // The rows are the 17th to the 216th records, escaped; the last 7 are only counted.
  EXPECT_EQ(html.find("reason &lt;15&gt;</td>"), std::string::npos);
  EXPECT_NE(html.find("reason &lt;16&gt;</td>"), std::string::npos);
  EXPECT_NE(html.find("reason &lt;215&gt;</td>"), std::string::npos);
  EXPECT_EQ(html.find("reason &lt;216&gt;"), std::string::npos);
  EXPECT_NE(html.find("<td>1,016</td><td>tool call #16</td>"), std::string::npos);
  EXPECT_NE(html.find("<p>7 more branch records are listed in results.json.</p>"), std::string::npos);
  EXPECT_EQ(CountOf(html, "<span class=\"badge bad\">damage: wrong_command</span></td>"), 200u);
}

TEST(ReportRecords, AGroupWithinTheLimitIsShownWhole) {
  const std::string html = report::HtmlBranchesSection(ExperimentResults::FromJson(WithRecords(16)));
  EXPECT_EQ(CountOf(html, "<article class=\"branch\">"), 16u);
  EXPECT_EQ(html.find("<table class=\"records\">"), std::string::npos);
  EXPECT_EQ(html.find("more branch records"), std::string::npos);
}

}  // namespace
}  // namespace flipscope
