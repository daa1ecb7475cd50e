// The history page from a small history.json written here: every step's figures in its table,
// the per-window charts drawn from the windows (flip rate = flips / probes), the move toward or
// away from exact computed from the KL means, text escaped, and the forks section with or
// without followed forks.
#include <gtest/gtest.h>

#include "report/internal.h"

namespace flipscope {
namespace {

using nlohmann::json;

json Step(const std::string& base, const std::string& cand, int flips, int bit, double kl,
          const json& windows = json::array()) {
  return {{"base", base},
          {"cand", cand},
          {"probes", 100},
          {"flips", flips},
          {"flip_rate", flips / 100.0},
          {"flip_rate_ci", {0.0, 0.1}},
          {"confident_flips", 0},
          {"bit_identical", bit},
          {"kl_mean", kl},
          {"kl_p99", kl * 3},
          {"kl_max", kl * 9},
          {"windows", windows},
          {"flip_list", json::array()}};
}

json Doc() {
  json w = json::array({{{"begin", 0}, {"end", 2048}, {"probes", 60}, {"flips", 3}, {"kl_mean", 1e-3}},
                        {{"begin", 2048}, {"end", 4096}, {"probes", 40}, {"flips", 1}, {"kl_mean", 2e-4}}});
  json same = json::array({{{"begin", 0}, {"end", 4096}, {"probes", 100}, {"flips", 0}, {"kl_mean", 0.0}}});
  json doc = {{"model", "m<1>.gguf"}, {"workload", "w.json"}, {"n_tokens", 4096},
              {"flags", "-fa on"},    {"cpu", "portable"},    {"changed_most", 0}};
  for (const char* r : {"0.3.35", "0.3.36", "0.3.37"})
    doc["versions"].push_back(
        {{"release", r},
         {"capture", std::string(r) + ".safetensors"},
         {"llama_source", {{"release", r}, {"commit", std::string("c") + r}, {"build", "cpu=portable"}}},
         {"kernel_path", "CPU"},
         {"capture_seconds", 12.5},
         {"worker_build_seconds", 0}});
  doc["steps"] = {Step("0.3.35", "0.3.36", 4, 17, 5e-4, w), Step("0.3.36", "0.3.37", 0, 100, 0.0, same)};
  doc["steps"][0]["flip_list"] = {{{"position", 2080},
                                   {"base_text", " <b>"},
                                   {"cand_text", "Port"},
                                   {"base_prob", 0.046},
                                   {"kl", 0.0198},
                                   {"class", "uncertain"}}};
  doc["from_first"] = {Step("0.3.35", "0.3.37", 4, 17, 5e-4)};
  doc["to_exact"] = {Step("exact", "0.3.35", 9, 0, 2e-3), Step("exact", "0.3.36", 7, 0, 1.5e-3),
                     Step("exact", "0.3.37", 7, 0, 1.5e-3)};
  return doc;
}

size_t Count(const std::string& hay, const std::string& needle) {
  size_t n = 0;
  for (size_t at = hay.find(needle); at != std::string::npos; at = hay.find(needle, at + 1)) ++n;
  return n;
}

TEST(HistoryHtml, StepsExactAndWindowsFromTheDocument) {
  const std::string page = RenderHistoryHtml(HistoryResult::FromJson(Doc()));
  // Every section, and the model's name escaped.
  for (const char* id : {"versions", "steps", "windows", "exact", "forks"})
    EXPECT_NE(page.find(std::string("<section id=\"") + id + "\""), std::string::npos) << id;
  EXPECT_NE(page.find("m&lt;1&gt;.gguf"), std::string::npos);
  EXPECT_EQ(page.find("m<1>"), std::string::npos);
  // Two steps and one from-first row; the unchanged step is marked bit for bit, the other not.
  EXPECT_NE(page.find("17 of 100"), std::string::npos);
  EXPECT_EQ(Count(page, "bit for bit"), 1u);
  EXPECT_NE(page.find("0.3.35 → 0.3.36"), std::string::npos);
  EXPECT_NE(page.find("0.3.36 → 0.3.37"), std::string::npos);
  // Per-window charts (flip rate and KL) and the exact chart: three SVGs, one series per step.
  EXPECT_EQ(Count(page, "<svg"), 3u);
  // The first window's flip rate as its point's tip: 3 flips of 60 probes.
  EXPECT_NE(page.find("tokens 0-2048: 3 flips of 60 probes"), std::string::npos);
  // Without the paired test in the file: the means' change (KL 2e-3 to 1.5e-3, 9 to 7 flips), no direction.
  EXPECT_NE(page.find("<td>-0.0005 KL, -2 flips</td>"), std::string::npos) << page;
  EXPECT_NE(page.find("<td>+0 KL, +0 flips</td>"), std::string::npos);
  EXPECT_EQ(page.find("toward exact ("), std::string::npos);
  // With it: the test's direction and interval.
  nlohmann::json with = Doc();
  with["to_exact"][1]["from_before"] = {
      {"probes", 100}, {"kl_change_mean", -5e-4}, {"kl_change_ci", {-8e-4, -2e-4}}, {"direction", "toward exact"}};
  const std::string tested = RenderHistoryHtml(HistoryResult::FromJson(with));
  EXPECT_NE(tested.find("toward exact (-0.0005 KL per probe, 95% -0.0008 to -0.0002; -2 flips)"), std::string::npos)
      << tested.substr(tested.find("history-exact"), 1500);
  // The step that changed most is named, its flip listed with its tokens escaped and spaces shown;
  // its forks were not followed.
  EXPECT_NE(page.find("<td>2,080</td><td><code class=\"t\">␠&lt;b&gt;</code></td><td><code class=\"t\">Port</code></td>"
                      "<td class=\"num\">0.046</td>"),
            std::string::npos)
      << page;
  EXPECT_NE(page.find("<strong>0.3.35 → 0.3.36</strong>, 4 flips"), std::string::npos);
  EXPECT_NE(page.find("were not followed"), std::string::npos);
  EXPECT_NE(page.find("--forks N"), std::string::npos) << "it says how to follow them";
  // A step with no flip has no fork to follow, and says so instead.
  json calm = Doc();
  for (json& s : calm["steps"]) s["flip_list"] = json::array();
  const std::string none = RenderHistoryHtml(HistoryResult::FromJson(calm));
  EXPECT_NE(none.find("there is no fork to follow"), std::string::npos);
  EXPECT_EQ(none.find("were not followed"), std::string::npos);
}

TEST(HistoryHtml, WithoutExactSaysHowToGetIt) {
  json doc = Doc();
  doc["to_exact"] = json::array();
  const std::string page = RenderHistoryHtml(HistoryResult::FromJson(doc));
  EXPECT_NE(page.find("No exact reference"), std::string::npos);
  EXPECT_EQ(Count(page, "<svg"), 2u);
}

TEST(HistoryHtml, FollowedForksAreShownWithTheirOutcome) {
  json doc = Doc();
  json rec = {{"position", 1234},
              {"span", "tool_call"},
              {"base_text", "<a>"},
              {"cand_text", "b"},
              {"verdict", "divergent"},
              {"outcome", "damage"},
              {"outcome_kind", "invalid_tool_call"},
              {"base_future", {{"text", "x"}, {"tokens", {1}}, {"probs", {0.5}}, {"pieces", {"x"}}}},
              {"cand_future", {{"text", "y"}, {"tokens", {2}}, {"probs", {0.5}}, {"pieces", {"y"}}}}};
  doc["forks"] = {{"how", "each side's futures decoded by its own release"},
                  {"counts", {{"outcomes", {{"damage", {{"total", 1}}}, {"repair", {{"total", 0}}}}}}},
                  {"records", json::array({rec})}};
  const std::string page = RenderHistoryHtml(HistoryResult::FromJson(doc));
  EXPECT_NE(page.find("each side&#39;s futures decoded by its own release"), std::string::npos) << page;
  EXPECT_EQ(Count(page, "<article class=\"branch\">"), 1u);
  EXPECT_NE(page.find("position 1,234"), std::string::npos);
  EXPECT_NE(page.find("&lt;a&gt;"), std::string::npos);
  EXPECT_NE(page.find("damage: invalid_tool_call"), std::string::npos);
  EXPECT_EQ(page.find("were not followed"), std::string::npos);
}

}  // namespace
}  // namespace flipscope
