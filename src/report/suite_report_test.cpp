// The suite's report on a made-up suite: the matrix counts the baseline's own cell and the
// refused ones, the recipe states what it left out of the ranking and why, the recommendation is
// bold only in Markdown, and every section a suite adds is on the page.
#include <gtest/gtest.h>

#include "report/report.h"

using namespace flipscope;

namespace {

SuiteResults Made() {
  SuiteResults s;
  s.name = "two sessions";
  s.baseline = "baseline";
  s.window = 512;
  s.sessions = {{"a", "a.json", "sessions/a", 1, 900}, {"b", "b.json", "sessions/b", 2, 700}};
  s.matrix_cells = {"fa-off", "kv-q8_0", "fa-off+kv-q8_0"};
  s.matrix_baseline_cell = "fa-on+kv-f16";
  s.configs.push_back({"baseline", "ok"});
  SuiteConfig kv{"kv-q8_0", "ok"};
  kv.flip_rate = PooledFigure{0.02, {0.01, 0.04}, Interval{0.015, 0.03}};
  kv.kl_mean = PooledFigure{0.003, {0.002, 0.004}, std::nullopt};
  kv.sessions = {{"a", 50, 2, 0.04}, {"b", 60, 0, 0.0}};
  kv.concentration = Concentration{"a", "flips", 1.0};
  kv.kinds = {{"literal", "a", 10, 2, 0.01, 0.2}, {"literal", "", 30, 2, 0.01, 0.05}};
  kv.depth = {{"a", 0, 512, 50, 2, 0.003, 0.04}, {"", 0, 512, 170, 2, 0.003, 2.0 / 170}};
  s.configs.push_back(kv);
  SuiteConfig fa{"fa-off", "ok"};
  fa.flip_rate = PooledFigure{0.0, {0.0, 0.01}, Interval{0.0, 0.01}};
  fa.kl_mean = PooledFigure{0.001, {0.0, 0.002}, std::nullopt};
  s.configs.push_back(fa);
  s.configs.push_back({"fa-off+kv-q8_0", "refused", "in every session: a quantized V cache needs flash attention"});
  RecipeResult r;
  r.recommended = "baseline";
  r.reason = "every variant that saves memory flips choices above the repeat floor";
  r.not_ranked = std::vector<RecipeNotRanked>{{"fa-off", "failed in session 'b' (out of memory): not ranked"}};
  s.recipe = r;
  return s;
}

}  // namespace

TEST(SuiteReport, MatrixRecipeAndSectionsAgreeAcrossMarkdownPageAndTerminal) {
  const SuiteResults s = Made();
  const std::string md = RenderSuiteMarkdown(s), html = RenderSuiteHtml(s), term = SuiteSummary(s, "r.html");
  EXPECT_NE(md.find("Matrix: 4 cells, fa-on+kv-f16 the baseline, 1 refused."), std::string::npos) << md;
  EXPECT_NE(html.find("Matrix: 4 cells, fa-on+kv-f16 the baseline, 1 refused."), std::string::npos);
  EXPECT_NE(md.find("Recommended on the pooled figures: **baseline** — every variant"), std::string::npos);
  for (const std::string* plain : {&html, &term}) {
    EXPECT_EQ(plain->find("**"), std::string::npos) << *plain;
    EXPECT_NE(plain->find("Recommended on the pooled figures: baseline — every variant"), std::string::npos);
  }
  for (const std::string* any : {&md, &html, &term})
    EXPECT_NE(any->find("Not ranked: fa-off, failed in session "), std::string::npos) << *any;
  // The pooled table says it beside the configuration, and the per-session, kinds and depth
  // sections are there.
  EXPECT_NE(md.find("| — | fa-off | 0.00% [0.00% – 1.00%]"), std::string::npos) << md;
  for (const char* id : {"id=\"pooled\"", "id=\"sessions-kv-q8_0\"", "id=\"kinds-kv-q8_0\"", "id=\"depth\"",
                         "Concentrated: session a holds 100% of its flips."})
    EXPECT_NE(html.find(id), std::string::npos) << id;
  // The depth windows in Markdown too: a column per session and the pooled one.
  EXPECT_NE(md.find("| 0–512 | 4.00% (2 of 50) | — | 1.18% (2 of 170) |"), std::string::npos) << md;
  // A pooled kind row shows its weighted rate, not its rounded counts' ratio.
  EXPECT_NE(md.find("| literal | all (pooled) | 2 | 30 | 5.00% |"), std::string::npos) << md;
}
