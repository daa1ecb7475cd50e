// Experiments with a load: the floor alone beside the floor under load, and the recipe's warning.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "experiment/experiment.h"
#include "support/experiment_test_util.h"
#include "experiment/steps.h"
#include "testing/tiny_model.h"

using namespace flipscope;
namespace fs = std::filesystem;

namespace {

// A summary row as Summarize writes it, with the fields the recipe reads.
nlohmann::json SummaryJson(const std::string& name, double rate, bool above) {
  return {{"config", name},       {"median_flip_rate", rate},      {"kl_mean", rate},
          {"above_floor", above}, {"flips", int64_t(rate * 1000)}, {"probes", 1000}};
}

}  // namespace

TEST(ExperimentLoad, TheFloorAloneAndUnderLoadSideBySide) {
  auto p = fixtures::MakeExperiment(
      "load",
      "[probe]\nstride = 4\n[baseline]\nthreads = 1\nflash_attn = \"on\"\nctx_size = 1024\nbatch_size = 16\n"
      "ubatch_size = 8\nrepeats = 2\n"
      "[[variant]]\nname = \"load-3\"\nload = 3\nrepeats = 2\n"
      "[[variant]]\nname = \"q8\"\ncache_type_k = \"q8_0\"\ncache_type_v = \"q8_0\"\n"
      "[[variant]]\nname = \"q8-load\"\ncache_type_k = \"q8_0\"\ncache_type_v = \"q8_0\"\nload = 3\n");
  auto e = ParseExperiment(p);
  ASSERT_TRUE(e.ok()) << e.status().message();
  EXPECT_EQ(AloneOf(*e, e->variants[0]), "baseline");
  EXPECT_EQ(AloneOf(*e, e->variants[2]), "q8");
  EXPECT_EQ(AloneOf(*e, e->variants[1]), "");
  RunOptions ro;
  ro.outdir = (fs::path(p).parent_path() / "out").string();
  ro.log.bars = false;
  auto r = fixtures::RunToJson(*e, ro);
  ASSERT_TRUE(r.ok()) << r.status().message();
  const auto& lf = (*r)["load_floor"];
  ASSERT_EQ(lf.size(), 2u) << lf.dump();
  EXPECT_EQ(lf[0]["load"], 0);
  EXPECT_EQ(lf[0]["bit_identical"], (*r)["floor"]["bit_identical"]);
  EXPECT_EQ(lf[1]["load"], 3);
  EXPECT_EQ(lf[1]["config"], "load-3");
  EXPECT_EQ(lf[1]["repeats"], 2);
  for (const auto& s : (*r)["summary"]) {
    if (s["config"] == "q8-load") {
      EXPECT_EQ(s["alone"], "q8");
    }
  }
  // A loaded configuration is a measurement of another one, never the one to run.
  EXPECT_NE((*r)["recipe"]["recommended"], "load-3");
  EXPECT_NE((*r)["recipe"]["recommended"], "q8-load");
  std::ifstream md(fs::path(ro.outdir) / "report.md");
  std::string text((std::istreambuf_iterator<char>(md)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("## Repeat floor alone and under load"), std::string::npos);
}

TEST(ExperimentLoad, TheRecipeWarnsWhenAConfigurationFineAloneFlipsUnderLoad) {
  nlohmann::json cfg = {
      {"kv_bytes_per_token", 100.0}, {"model_file_size", 1.0}, {"flags", "-fa on"}, {"model_path", "m"}};
  nlohmann::json results = {
      {"settings", {{"memory_budget_bytes", nullptr}}},
      {"model", {{"n_ctx_train", 1024}, {"n_layer", 1}, {"n_head_kv", 1}, {"head_dim_k", 8}, {"head_dim_v", 8}}},
      {"baseline", "baseline"},
      {"configs", nlohmann::json::array()},
      {"summary", nlohmann::json::array()}};
  for (const char* name : {"baseline", "load-3", "q8", "q8-load", "q4", "q4-load"}) {
    auto c = cfg;
    c["name"] = name;
    results["configs"].push_back(c);
  }
  auto loaded = [](nlohmann::json row, const char* alone) {
    row["load"] = 3;
    row["alone"] = alone;
    return row;
  };
  results["summary"] = {SummaryJson("baseline", 0, false), loaded(SummaryJson("load-3", 0.004, true), "baseline"),
                        SummaryJson("q8", 0, false),       loaded(SummaryJson("q8-load", 0.002, true), "q8"),
                        SummaryJson("q4", 0.05, true),     loaded(SummaryJson("q4-load", 0.06, true), "q4")};
  ModelInfo model;
  model.n_ctx_train = 1024;
  model.n_layer = model.n_head_kv = 1;
  model.head_dim_k = model.head_dim_v = 8;
  auto recipe = MakeRecipe(results, model);
  const auto& w = recipe["warnings"];
  ASSERT_EQ(w.size(), 2u) << w.dump();  // q4 flips alone already: no warning for it
  EXPECT_NE(w[0].get<std::string>().find("baseline is within the repeat floor alone, but under load 3 (load-3) it "
                                         "flips 4 of 1000 probes"),
            std::string::npos)
      << w[0];
  EXPECT_NE(w[1].get<std::string>().find("q8 is within"), std::string::npos) << w[1];
  const std::string rec = recipe["recommended"];
  EXPECT_TRUE(rec == "baseline" || rec == "q8") << rec;  // never a loaded one, though they save nothing
}
