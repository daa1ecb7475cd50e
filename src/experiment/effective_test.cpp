// No configuration's label contradicts what ran: with -fa auto, the knobs, flags, report and
// recipe of an experiment name the flash-attention kernel llama.cpp ran, and every knob a
// configuration set either ran as written or is explained in the capture's engine.resolved.
#include <gtest/gtest.h>

#include <filesystem>

#include "engine/engine.h"
#include "experiment/experiment.h"
#include "support/experiment_test_util.h"
#include "util/util.h"

using namespace flipscope;
namespace fs = std::filesystem;

TEST(RunExperiment, LabelsFollowTheEffectiveSettings) {
  auto p = fixtures::MakeExperiment(
      "effective",
      "[probe]\nstride = 4\n[baseline]\nthreads = 1\nctx_size = 400\nrepeats = 1\n"  // -fa auto, context rounded
      "[[variant]]\nname = \"kv-q8_0\"\ncache_type_k = \"q8_0\"\ncache_type_v = \"q8_0\"\n"
      "[[variant]]\nname = \"fa-off\"\nflash_attn = \"off\"\n");
  auto e = ParseExperiment(p);
  ASSERT_TRUE(e.ok()) << e.status().message();
  RunOptions ro;
  ro.outdir = (fs::path(p).parent_path() / "out").string();
  ro.log.bars = false;
  auto r = fixtures::RunToJson(*e, ro);
  ASSERT_TRUE(r.ok()) << r.status().message();
  ASSERT_EQ((*r)["configs"].size(), 3u);
  for (const auto& c : (*r)["configs"]) {
    ASSERT_EQ(c["status"], "ok") << c.dump();
    EXPECT_FALSE(c.contains("contradictions")) << c["contradictions"].dump();
    const auto& resolved = c["engine"]["resolved"];
    for (const auto& [key, asked] : c["changes"].items()) {
      if (!FindKnob(key)) continue;
      EXPECT_TRUE(c["knobs"][key] == asked || resolved.contains(key)) << c["name"] << ": " << key;
    }
    // The flags are the effective knobs: the flash-attention kernel is always explicit.
    auto knobs = Knobs::FromJson(c["knobs"]);
    ASSERT_TRUE(knobs.ok());
    EXPECT_EQ(c["flags"], knobs->ToFlags()) << c["name"];
    EXPECT_EQ(c["flags"].get<std::string>().find("-fa auto"), std::string::npos) << c["flags"];
    EXPECT_EQ(c["knobs"]["ctx_size"], 512) << c["name"];
  }
  const auto& base = (*r)["configs"][0];
  const auto& q8 = (*r)["configs"][1];
  const auto& off = (*r)["configs"][2];
  EXPECT_EQ(base["knobs"]["flash_attn"], "on");  // the CPU runs it: the device probe says so
  EXPECT_NE(base["engine"]["resolved"]["flash_attn"]["reason"].get<std::string>().find("device probe"),
            std::string::npos);
  EXPECT_EQ(q8["knobs"]["flash_attn"], "on");
  EXPECT_EQ(q8["engine"]["resolved"]["flash_attn"]["reason"], "quantized V cache (-ctv q8_0) requires it");
  EXPECT_EQ(off["knobs"]["flash_attn"], "off");
  EXPECT_FALSE(off["engine"]["resolved"].contains("flash_attn"));
  // The report says what llama.cpp decided; the recipe's command is explicit.
  auto html = ReadFile((fs::path(ro.outdir) / "report.html").string());
  ASSERT_TRUE(html.ok());
  EXPECT_NE(html->find("kv-q8_0: flash_attn auto ran as on: quantized V cache (-ctv q8_0) requires it"),
            std::string::npos);
  EXPECT_NE(html->find("baseline: batch_size 2048 ran as 400"), std::string::npos);
  EXPECT_EQ(html->find("fa-off: batch_size"), std::string::npos);  // said once, for the reference
  const std::string recipe = (*r)["recipe"].dump();
  EXPECT_EQ(recipe.find("-fa auto"), std::string::npos) << recipe;
  EXPECT_NE(recipe.find("-fa on"), std::string::npos) << recipe;
}
