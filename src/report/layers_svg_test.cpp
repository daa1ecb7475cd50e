// The layers charts: one thin line per flip and panel, the median bold and equal to the middle
// flip's line, a flip's own chart with its line only, the page with one detail per flip.
#include <gtest/gtest.h>

#include <regex>

#include "report/internal.h"

using namespace flipscope;
using json = nlohmann::json;

namespace {

// Three flips over three layers whose every value is 1e-3, 1e-2 and 1e-1 respectively.
LayersResult Layers() {
  json flips = json::array();
  int i = 0;
  for (double v : {1e-3, 1e-1, 1e-2}) {
    json layers = json::array();
    for (int l = 0; l < 3; ++l)
      layers.push_back({{"layer", l},
                        {"attn_out", {{"rel", v}}},
                        {"attn_resid", {{"rel", v}}},
                        {"mlp_out", {{"rel", v}}},
                        {"layer_out", {{"rel", v}}}});
    flips.push_back({{"position", 10 * ++i},
                     {"layers", layers},
                     {"logits", {{"rel", v}}},
                     {"birth", {{"layer", 0}, {"block", "attention"}}},
                     {"largest_jump", nullptr},
                     {"base_text", "<a>"},
                     {"cand_text", "b"}});
  }
  json summary = {{"flips", 3},
                  {"births", {{"attention", 3}, {"mlp", 0}, {"embedding", 0}, {"none", 0}}},
                  {"birth_layers", json::array({{{"layer", 0}, {"attention", 3}, {"mlp", 0}}})},
                  {"largest_jumps", {{"attention", 0}, {"mlp", 0}, {"none", 3}}}};
  return LayersResultFromJson(
      {{"config", {{"n_layer", 3}, {"base", {{"flags", "-fa on"}}}, {"cand", {{"flags", "-fa off"}}}}},
       {"flips", flips},
       {"summary", summary}});
}

std::vector<std::string> Paths(const std::string& svg, const std::string& attrs) {
  std::vector<std::string> out;
  std::regex re("<path d=\"([^\"]+)\" fill=\"none\" " + attrs);
  for (auto it = std::sregex_iterator(svg.begin(), svg.end(), re); it != std::sregex_iterator(); ++it)
    out.push_back((*it)[1]);
  return out;
}

}  // namespace

TEST(LayersChart, ThinLinePerFlipAndTheMedianIsTheMiddleOne) {
  std::string svg = report::RenderLayersChart(Layers());
  auto thin = Paths(svg, "stroke=\"#0072B2\"");
  auto bold = Paths(svg, "stroke=\"#000\" stroke-width=\"2.6\"");
  ASSERT_EQ(thin.size(), 9u);  // 3 flips x 3 panels
  ASSERT_EQ(bold.size(), 3u);
  // Panel by panel the thin lines are flips 1e-3, 1e-1, 1e-2: the median is the third one.
  for (size_t panel = 0; panel < 3; ++panel) EXPECT_EQ(bold[panel], thin[panel * 3 + 2]) << panel;
  EXPECT_NE(thin[0], thin[1]);
}

TEST(LayersChart, AFlipsOwnChartAndThePage) {
  const LayersResult l = Layers();
  std::string one = report::RenderFlipLayersChart(l, 1);
  EXPECT_EQ(Paths(one, "stroke=\"#D55E00\"").size(), 3u);
  EXPECT_TRUE(Paths(one, "stroke=\"#000\"").empty());
  EXPECT_NE(one.find("position 20"), std::string::npos);
  std::string page = RenderLayersHtml(l);
  size_t details = 0;
  for (size_t at = page.find("<details>"); at != std::string::npos; at = page.find("<details>", at + 1)) ++details;
  EXPECT_EQ(details, 3u);
  EXPECT_EQ(page.find("<a>"), std::string::npos);  // token text is escaped
  EXPECT_NE(page.find("&lt;a&gt;"), std::string::npos);
}
