// The report's "Prefill against served replay" part, each configuration's replay in its label,
// and the recipe's ranking basis with the forks' reproduced counts.
#include <gtest/gtest.h>

#include "report/internal.h"
#include "report/report.h"

namespace flipscope {
namespace {

using nlohmann::json;

json Row(const std::string& config, double rate, int64_t flips, bool above) {
  return {{"config", config},     {"repeats", 1},       {"median_flip_rate", rate},
          {"flips", flips},       {"probes", 200},      {"kl_mean", rate / 10},
          {"above_floor", above}, {"bit_identical", 0}, {"bit_identical_of", 200}};
}

json Document(bool changed) {
  json windows = {{{"index", 0}, {"begin", 0}, {"end", 64}, {"probes", 60}, {"flips", 1}, {"flip_rate", 1.0 / 60}},
                  {{"index", 1}, {"begin", 64}, {"end", 128}, {"probes", 140}, {"flips", 2}, {"flip_rate", 2.0 / 140}}};
  json distance = {{"config", "kv-q8"},
                   {"flips", 3},
                   {"probes", 200},
                   {"flip_rate", 0.015},
                   {"flip_rate_ci", {0.005, 0.043}},
                   {"kl_mean", 0.0021},
                   {"kl_p99", 0.03},
                   {"bit_identical", 17},
                   {"probes_compared", 200},
                   {"groups",
                    {{{"group", "written"}, {"probes", 120}, {"flips", 3}, {"flip_rate", 0.025}},
                     {{"group", "tool_calls"}, {"probes", 80}, {"flips", 2}, {"flip_rate", 0.025}},
                     {{"group", "elsewhere"}, {"probes", 80}, {"flips", 0}, {"flip_rate", 0.0}}}},
                   {"windows", windows}};
  return {{"name", "served"},
          {"baseline", "baseline"},
          {"configs",
           {{{"name", "baseline"}, {"status", "ok"}, {"knobs", {{"replay", "prefill"}}}},
            {{"name", "kv-q8"}, {"status", "ok"}, {"knobs", {{"replay", "prefill"}}}},
            {{"name", "kv-q4"}, {"status", "ok"}, {"knobs", {{"replay", "prefill"}}}}}},
          {"summary", {Row("kv-q8", 0.01, 2, true), Row("kv-q4", 0.02, 4, true)}},
          {"served",
           {{"baseline", "baseline@served"},
            {"summary", {Row("kv-q8@served", changed ? 0.03 : 0.005, 6, true), Row("kv-q4@served", 0.02, 4, false)}},
            {"distance", {distance}},
            {"skipped", {{{"config", "loaded"}, {"reason", "runs under load"}}}},
            {"ranking",
             {{"prefill", {"baseline", "kv-q8", "kv-q4"}},
              {"served", changed ? json{"baseline", "kv-q4", "kv-q8"} : json{"baseline", "kv-q8", "kv-q4"}},
              {"changed", changed}}}}},
          {"recipe",
           {{"recommended", "kv-q4"},
            {"ranked_by", "served replay where it was measured"},
            {"ranking",
             {{{"config", "baseline"}, {"forks_reproduced", nullptr}},
              {{"config", "kv-q4"}, {"replay", "served"}, {"forks_reproduced", {{"reproduced", 5}, {"of", 6}}}}}}}}};
}

TEST(ReportServed, SectionShowsTheDistanceWindowsAndRankingUnderEachReplay) {
  const json doc = Document(true);
  const std::string md = RenderMarkdown(ExperimentResults::FromJson(doc));
  EXPECT_NE(md.find("## Prefill against served replay"), std::string::npos) << md;
  EXPECT_NE(md.find("The ranking of configurations changes under served replay."), std::string::npos);
  EXPECT_NE(md.find("loaded was not captured served: runs under load."), std::string::npos);
  // The distance row: flips of probes, bit-identical rows, and the groups.
  EXPECT_NE(md.find("| kv-q8 | 3 / 200 | 1.500% |"), std::string::npos) << md;
  EXPECT_NE(md.find("17 of 200"), std::string::npos);
  EXPECT_NE(md.find("3 / 120 (2.500%) | 2 / 80 (2.500%) | 0 / 80 (0.000%)"), std::string::npos) << md;
  EXPECT_NE(md.find("1.429% (2 / 140)"), std::string::npos) << "the second window";
  // Ranks: kv-q8 is second under prefill and third under served.
  EXPECT_NE(md.find("| kv-q8 | 2 | 3 | 1.000% | 3.000% |"), std::string::npos) << md;
  // Every configuration's label names its replay; the recipe says what it ranked by.
  // kv-q4 is ranked by served replay: its row says so and shows its twin's figures.
  EXPECT_NE(md.find("kv-q4 (served replay) (recommended)"), std::string::npos) << md;
  EXPECT_NE(md.find("kv-q8 (prefill replay)"), std::string::npos);
  EXPECT_NE(md.find("Ranked by served replay where it was measured."), std::string::npos);
  EXPECT_NE(md.find("kv-q4 5 of 6"), std::string::npos);
  const std::string html = RenderHtml(ExperimentResults::FromJson(doc));
  EXPECT_NE(html.find("<section id=\"served\"><h2>Prefill against served replay</h2>"), std::string::npos);
  EXPECT_NE(html.find("<a href=\"#served\">"), std::string::npos);
  EXPECT_NE(html.find("prefill replay</span>"), std::string::npos);
  EXPECT_NE(html.find("served replay</span>"), std::string::npos);
  const std::string term = TerminalSummary(ExperimentResults::FromJson(doc), "");
  EXPECT_NE(term.find("prefill vs served, kv-q8: 3 / 200 flips (1.500%), 17 of 200 bit-identical"), std::string::npos)
      << term;
  EXPECT_NE(term.find("the ranking changes under served replay"), std::string::npos);
  EXPECT_NE(RenderMarkdown(ExperimentResults::FromJson(Document(false))).find("does not change under served replay"),
            std::string::npos);
}

// A recipe ranked by served twins: every row's figures are its twin's, its prefill-vs-served
// distance is a column beside it (never the order), a configuration without a twin is listed as
// not ranked with the reason, and the replay-only variant that asked for it is named.
TEST(ReportServed, DistanceIsShownBesideEachRowAndUnrankedRowsSayWhy) {
  json doc = Document(false);
  doc["configs"].push_back({{"name", "loaded"}, {"status", "ok"}, {"knobs", {{"replay", "prefill"}}}});
  doc["summary"].push_back(Row("loaded", 0.0, 0, false));
  doc["served"]["asked_by"] = "served";
  const json distance = {{"of", "kv-q8"}, {"flips", 3}, {"probes", 200}, {"flip_rate", 0.015}, {"kl_mean", 0.0021}};
  doc["recipe"] = {
      {"recommended", "kv-q4"},
      {"ranked_by", "served replay (every ranked row: each configuration's served twin against baseline@served)"},
      {"ranking",
       {{{"config", "kv-q4"}, {"replay", "served"}, {"tie_group", 1}},
        {{"config", "kv-q8"}, {"replay", "served"}, {"tie_group", 2}, {"served_distance", distance}}}},
      {"not_ranked", {{{"config", "loaded"}, {"reason", "not captured under served replay: runs under load"}}}}};
  const ExperimentResults r = ExperimentResults::FromJson(doc);
  const std::string md = RenderMarkdown(r);
  EXPECT_NE(md.find("| Prefill vs served (its own replays; not ranked) |"), std::string::npos) << md;
  // kv-q8's served twin: 0.500% (its prefill figure is 1.000%), then its distance last.
  EXPECT_NE(md.find("| 2 | kv-q8 (served replay) | 0.500% |"), std::string::npos) << md;
  EXPECT_NE(md.find("| 3 / 200 (1.500%) |\n"), std::string::npos) << md;
  EXPECT_NE(md.find("- **loaded** — not ranked: not captured under served replay: runs under load"), std::string::npos)
      << md;
  EXPECT_EQ(md.find("loaded (prefill replay)"), std::string::npos) << "never a ranked row among served ones";
  EXPECT_NE(md.find("The variant served changed only the replay"), std::string::npos) << md;
  const std::string term = TerminalSummary(r, "");
  EXPECT_NE(term.find("prefill vs served (not ranked)"), std::string::npos) << term;
  EXPECT_NE(term.find("replay of the ranking: served replay (every ranked row: each configuration's served twin "
                      "against baseline@served)"),
            std::string::npos)
      << term;
  EXPECT_NE(term.find("kv-q8 [served]"), std::string::npos) << term;
  EXPECT_NE(term.find("3 / 200 (1.500%)"), std::string::npos) << term;
  EXPECT_NE(term.find("loaded                   not ranked: not captured under served replay"), std::string::npos)
      << term;
  const std::string html = RenderHtml(r);
  EXPECT_NE(html.find("Prefill vs served (its own replays; not ranked)"), std::string::npos);
  EXPECT_NE(html.find("not ranked</span>"), std::string::npos);
  // results.csv: the rank goes with the figures it rests on, the twin's row.
  const std::string csv = RenderCsv(r);
  EXPECT_NE(csv.find("\r\n2,kv-q8@served,"), std::string::npos) << csv;
  EXPECT_NE(csv.find("\r\n,kv-q8,"), std::string::npos) << csv;
}

// One comparison of `config` with a single flip at `position` and one window of flip rate `rate`.
json Comparison(const std::string& config, int64_t position, double rate) {
  const json flip = {{"position", position}, {"window", 0},        {"span", "tool call #1"},
                     {"base_text", "a"},     {"base_prob", 0.6},   {"cand_text", "b"},
                     {"cand_prob", 0.4},     {"kl", 0.01},         {"class", "moderate"},
                     {"context", "x"},       {"base_margin", 0.2}, {"cand_prob_of_base_token", 0.3}};
  return {{"config", config},
          {"repeat", 0},
          {"compare",
           {{"probes_compared", 200},
            {"overall", {{"probes", 200}, {"flips", 1}, {"flip_rate", rate}, {"confident_flips", 0}}},
            {"windows",
             {{{"index", 0},
               {"begin", 0},
               {"end", 128},
               {"probes", 200},
               {"flips", 1},
               {"flip_rate", rate},
               {"kl_mean", 0.001}}}},
            {"flips", {flip}}}}};
}

// Ranked by served replay, the flips and the per-window figures are the served twins' (the ones the
// ranking used), and the report says which replay they are; ranked by prefill, the prefill ones.
TEST(ReportServed, FlipsAndWindowsShowTheReplayOfTheRanking) {
  json doc = Document(false);
  doc["comparisons"] = {Comparison("kv-q8", 55, 0.125), Comparison("kv-q4", 56, 0.25)};
  doc["served"]["comparisons"] = {Comparison("kv-q8@served", 77, 0.375), Comparison("kv-q4@served", 78, 0.5)};
  for (const char* twin : {"baseline@served", "kv-q8@served", "kv-q4@served"})
    doc["served"]["configs"].push_back({{"name", twin}, {"status", "ok"}, {"knobs", {{"replay", "served"}}}});
  doc["recipe"] = {
      {"recommended", "kv-q8"},
      {"ranked_by",
       "served replay (every ranked row: each configuration's served twin against "
       "baseline@served)"},
      {"ranking", {{{"config", "kv-q8"}, {"replay", "served"}}, {{"config", "kv-q4"}, {"replay", "served"}}}}};
  ExperimentResults r = ExperimentResults::FromJson(doc);
  std::string md = RenderMarkdown(r);
  const std::string flips = md.substr(md.find("## Flips"));
  EXPECT_NE(flips.find("Served replay, the replay the ranking used"), std::string::npos) << flips;
  EXPECT_NE(flips.find("| 77 |"), std::string::npos) << flips;
  EXPECT_EQ(flips.find("| 55 |"), std::string::npos) << "the prefill flip is not shown: " << flips;
  const std::string windows = md.substr(md.find("## Flip rate per window"));
  EXPECT_NE(windows.find("Served replay, the replay the ranking used"), std::string::npos);
  EXPECT_NE(windows.find("| 0 (0–128) | 37.500% | 50.000% |"), std::string::npos) << windows;
  std::string html = RenderHtml(r);
  const std::string section = html.substr(html.find("<section id=\"flips\">"));
  EXPECT_NE(section.find("Served replay, the replay the ranking used"), std::string::npos);
  EXPECT_NE(section.find(">77<"), std::string::npos);
  EXPECT_EQ(section.find(">55<"), std::string::npos);
  const std::string charts = html.substr(html.find("<section id=\"charts\">"));
  EXPECT_NE(charts.find("37.500%"), std::string::npos);
  EXPECT_EQ(charts.substr(0, charts.find("</section>")).find("12.500%"), std::string::npos);

  // Ranked by prefill: the prefill figures, and the report says so.
  doc["recipe"]["ranked_by"] = "prefill replay";
  for (json& row : doc["recipe"]["ranking"]) row["replay"] = "prefill";
  r = ExperimentResults::FromJson(doc);
  md = RenderMarkdown(r);
  EXPECT_NE(md.find("Prefill replay, the replay the ranking used"), std::string::npos);
  EXPECT_NE(md.substr(md.find("## Flips")).find("| 55 |"), std::string::npos);
  EXPECT_NE(md.find("| 0 (0–128) | 12.500% | 25.000% |"), std::string::npos) << md;
}

TEST(ReportServed, NoServedPartNoSection) {
  json doc = Document(false);
  doc.erase("served");
  EXPECT_EQ(RenderMarkdown(ExperimentResults::FromJson(doc)).find("Prefill against served"), std::string::npos);
  const std::string html = RenderHtml(ExperimentResults::FromJson(doc));
  EXPECT_EQ(html.find("id=\"served\""), std::string::npos);
  EXPECT_EQ(html.find("href=\"#served\""), std::string::npos);
  doc["served"] = "garbage";
  EXPECT_EQ(report::ReplaySentence(ExperimentResults::FromJson(doc)), "");
  EXPECT_TRUE(report::ReplayDistanceTable(ExperimentResults::FromJson(doc)).rows.empty());
}

}  // namespace
}  // namespace flipscope
