// [layers] in an experiment on the tiny model: each listed variant's flips recomputed layer by
// layer (the layers stage's own document in results.json), kept for a resumed run, skipped with a
// reason for a loaded configuration, and shown in report.html and report.md.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>

#include "experiment/experiment.h"
#include "support/experiment_test_util.h"
#include "util/util.h"

using namespace flipscope;
namespace fs = std::filesystem;

TEST(ExperimentLayers, VariantsFlipsAreRecomputedKeptAndReported) {
  auto p = fixtures::MakeExperiment(
      "layers",
      "[probe]\nstride = 2\n[baseline]\nthreads = 1\nflash_attn = \"on\"\nctx_size = 512\n"
      "[[variant]]\nname = \"kv-q4_0\"\ncache_type_k = \"q4_0\"\ncache_type_v = \"q4_0\"\n"
      "[[variant]]\nname = \"kv-q4_0-load\"\ncache_type_k = \"q4_0\"\ncache_type_v = \"q4_0\"\nload = 2\n"
      "[layers]\nmax_flips = 3\n");
  auto e = ParseExperiment(p);
  ASSERT_TRUE(e.ok()) << e.status().message();
  RunOptions ro;
  ro.outdir = (fs::path(p).parent_path() / "out").string();
  ro.log.bars = false;
  auto r = fixtures::RunToJson(*e, ro);
  ASSERT_TRUE(r.ok()) << r.status().message();
  const auto& layers = (*r)["layers"];
  ASSERT_EQ(layers.size(), 2u) << "the tiny model's 4-bit KV cache must flip for this test to mean anything";

  // The variant's flips: the first three by position of its comparison with the baseline.
  const auto& entry = layers[0];
  EXPECT_EQ(entry["config"], "kv-q4_0");
  ASSERT_TRUE(entry.contains("result")) << entry.dump();
  std::vector<int> flips;
  for (const auto& cmp : (*r)["comparisons"])
    if (cmp["config"] == "kv-q4_0")
      for (const auto& f : cmp["compare"]["flips"]) flips.push_back(f["position"].get<int>());
  std::sort(flips.begin(), flips.end());
  const auto& got = entry["result"]["flips"];
  ASSERT_EQ(got.size(), std::min<size_t>(3, flips.size()));
  for (size_t i = 0; i < got.size(); ++i) EXPECT_EQ(got[i]["position"], flips[i]);
  EXPECT_EQ(entry["result"]["summary"]["flips"], got.size());
  // A result at all means every recomputed final row had its capture's digest (else an error).
  EXPECT_GT(entry["result"]["config"]["base"]["rows_checked"].get<int>(), 0);

  // A loaded configuration's batches hold other sequences: said, not computed.
  EXPECT_EQ(layers[1]["config"], "kv-q4_0-load");
  EXPECT_NE(layers[1].value("skipped", std::string()).find("under load"), std::string::npos) << layers[1].dump();

  // Kept beside the results and reused by a resumed run (the file is not rewritten).
  const fs::path kept = fs::path(ro.outdir) / "layers" / "kv-q4_0.json";
  ASSERT_TRUE(fs::exists(kept));
  const auto written = fs::last_write_time(kept);
  auto again = fixtures::RunToJson(*e, ro);
  ASSERT_TRUE(again.ok()) << again.status().message();
  EXPECT_EQ(fs::last_write_time(kept), written);
  // (Token texts may have gone through JSON's replacement of invalid UTF-8: compare the numbers.)
  EXPECT_EQ((*again)["layers"][0]["result"]["summary"], entry["result"]["summary"]);

  // The report: the section, the chart, each flip's own chart, linked from the flips table.
  auto html = ReadFile((fs::path(ro.outdir) / "report.html").string());
  ASSERT_TRUE(html.ok());
  EXPECT_NE(html->find("<section id=\"layers\"><h2>Where the flips are born</h2>"), std::string::npos);
  EXPECT_NE(html->find("aria-labelledby=\"layers-0-t layers-0-d\""), std::string::npos);
  const std::string anchor = "layers-0-p" + std::to_string(got[0]["position"].get<int>());
  EXPECT_NE(html->find("<details id=\"" + anchor + "\">"), std::string::npos);
  EXPECT_NE(html->find("href=\"#" + anchor + "\""), std::string::npos);
  EXPECT_NE(html->find("not looked into (runs under load"), std::string::npos);
  // A real headless Chromium renders it: every chart laid out with its lines, nothing fetched.
  EXPECT_EQ(fixtures::CheckReportInChromium(ro.outdir), 0)
      << *ReadFile((fs::path(ro.outdir) / "chromium.log").string());
  auto md = ReadFile((fs::path(ro.outdir) / "report.md").string());
  ASSERT_TRUE(md.ok());
  EXPECT_NE(md->find("## Where the flips are born"), std::string::npos);
}

TEST(ExperimentLayers, BadTablesNameTheLine) {
  auto p = fixtures::MakeExperiment(
      "layers-bad", "[[variant]]\nname = \"q8\"\ncache_type_k = \"q8_0\"\n[layers]\nconfigs = [\"q4\"]\n");
  EXPECT_NE(ParseExperiment(p).status().message().find("[layers] configs names 'q4', which is not a variant"),
            std::string::npos)
      << ParseExperiment(p).status().message();
  p = fixtures::MakeExperiment("layers-key", "[layers]\nmax_flip = 3\n");
  EXPECT_NE(ParseExperiment(p).status().message().find(":5: unknown key 'max_flip' in [layers]"), std::string::npos)
      << ParseExperiment(p).status().message();
  p = fixtures::MakeExperiment("layers-neg", "[layers]\nmax_flips = -1\n");
  EXPECT_NE(ParseExperiment(p).status().message().find("max_flips must be >= 0"), std::string::npos);
}
