// The ranking as a reader sees it: the recipe is made anew over tests/data/results-sample.json
// (a hand-shaped Qwen3-8B experiment in which only kv-q4_0's forks were followed; a small file,
// where the demo would take minutes), the report is
// written, and headless Chromium (tests/ref/check_report_chromium.py) reads the ranking table's
// order, tie groups and tie labels and the stated key back from the rendered page.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>

#include "checkpoint/model_info.h"
#include "experiment/experiment.h"
#include "experiment/steps.h"
#include "report/report.h"
#include "util/util.h"

namespace flipscope {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// The page's facts as the checker prints them (its one JSON line); null when it printed none.
json CheckInChromium(const fs::path& html, std::string* out) {
  std::string cmd = std::string(FLIPSCOPE_PYTHON) + " " + FLIPSCOPE_SOURCE_DIR +
                    "/tests/ref/check_report_chromium.py " + html.string() + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return nullptr;
  char buf[4096];
  while (size_t n = fread(buf, 1, sizeof(buf), p)) out->append(buf, n);
  pclose(p);
  for (size_t at = 0; at < out->size();) {
    size_t end = out->find('\n', at);
    std::string line = out->substr(at, end == std::string::npos ? std::string::npos : end - at);
    if (!line.empty() && line[0] == '{') return json::parse(line, nullptr, false);
    at = end == std::string::npos ? out->size() : end + 1;
  }
  return nullptr;
}

// Qwen3-8B's KV shape: 36 layers, 8 KV heads of 128 (147,456 B/token at f16, as the sample says).
ModelInfo Qwen3() {
  ModelInfo m;
  m.n_ctx_train = 40960;
  m.n_layer = 36;
  m.n_head_kv = 8;
  m.head_dim_k = m.head_dim_v = 128;
  return m;
}

TEST(RankingInChromium, TheOrderAndTieLabelsAreTheRecipes) {
  auto text = ReadFile(std::string(FLIPSCOPE_SOURCE_DIR) + "/tests/data/results-sample.json");
  ASSERT_TRUE(text.ok()) << text.status().message();
  json results = json::parse(*text);
  // The sample predates the damage fields: kv-q4_0's forks, 61 followed.
  ExperimentResults typed = ExperimentResults::FromJson(results);
  AddDamage(typed.measured);
  results["summary"] = typed.ToJson()["summary"];
  results["recipe"] = MakeRecipe(results, Qwen3());
  const json& ranking = results["recipe"]["ranking"];
  fs::path dir = fs::path(FLIPSCOPE_BINARY_DIR) / "ranking_browser_test";
  fs::remove_all(dir);
  fs::create_directories(dir);
  ASSERT_TRUE(WriteReport(ExperimentResults::FromJson(results), dir.string()).ok());
  std::string out;
  const json page = CheckInChromium(dir / "report.html", &out);
  ASSERT_TRUE(page.is_object()) << out;
  const json& rows = page["ranking"];
  ASSERT_EQ(rows.size(), ranking.size()) << out;
  std::map<int, int> group_size;
  for (const json& r : ranking) ++group_size[r["tie_group"].get<int>()];
  for (size_t i = 0; i < rows.size(); ++i) {
    const int group = ranking[i]["tie_group"];
    EXPECT_EQ(rows[i]["config"], ranking[i]["config"]) << i;
    EXPECT_EQ(rows[i]["group"], std::to_string(group)) << i;
    EXPECT_EQ(rows[i]["tie"], group_size[group] > 1) << rows[i];
    EXPECT_EQ(rows[i]["rank"], std::to_string(group) + (group_size[group] > 1 ? "=" : "")) << rows[i];
  }
  // The sample's figures: only kv-q4_0's forks were followed, so the order is by flip rate alone.
  // threads-4 (0 of 1,695) and the baseline (2) overlap; kv-q8_0 (16) and fa-off (11) overlap,
  // and kv-q8_0 needs less memory; kv-q4_0 (73) stands alone, last.
  const std::vector<std::string> order{"threads-4", "baseline", "kv-q8_0", "fa-off", "kv-q4_0"};
  for (size_t i = 0; i < order.size() && i < rows.size(); ++i) EXPECT_EQ(rows[i]["config"], order[i]) << out;
  EXPECT_EQ(rows[2]["group"], rows[3]["group"]);
  EXPECT_NE(rows[3]["group"], rows[4]["group"]);
  const std::string key = page["ranking_key"];
  EXPECT_NE(key.find("damage is not compared, since the forks of fa-off and kv-q8_0 were not followed"),
            std::string::npos)
      << key;
  ASSERT_EQ(page["tie_notes"].size(), 2u) << out;
  EXPECT_NE(page["tie_notes"][1].get<std::string>().find("kv-q8_0, fa-off: indistinguishable on this workload"),
            std::string::npos)
      << page["tie_notes"];
  EXPECT_NE(page["headline"].get<std::string>().find("Most faithful, indistinguishable on this workload: threads-4"),
            std::string::npos)
      << page["headline"];
  // The terminal summary says the same: the same order, tie groups and key.
  const std::string term = TerminalSummary(ExperimentResults::FromJson(results), "");
  size_t at = 0;
  for (const json& r : ranking) {
    const int group = r["tie_group"];
    const std::string cell =
        std::to_string(group) + (group_size[group] > 1 ? "=" : "") + "  " + r["config"].get<std::string>();
    const size_t found = term.find(cell, at);
    EXPECT_NE(found, std::string::npos) << cell << "\n" << term;
    if (found != std::string::npos) at = found;
  }
  EXPECT_NE(term.find("tie group 2: kv-q8_0, fa-off: indistinguishable on this workload"), std::string::npos) << term;
  EXPECT_NE(term.find("ranked by: " + results["recipe"]["ranking_key"].get<std::string>()), std::string::npos) << term;
  std::printf("%s", term.c_str());
}

}  // namespace
}  // namespace flipscope
