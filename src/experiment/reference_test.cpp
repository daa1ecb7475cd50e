// reference = "exact" in an experiment on the tiny model: the exact engine captures the workload
// once (reused by a second run), every capture (the baseline's repeats too) is compared with it,
// the recipe ranks by the distance to it, and the report shows it beside the baseline figures.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>

#include "capture/capture.h"
#include "experiment/experiment.h"
#include "support/experiment_test_util.h"
#include "util/util.h"

using namespace flipscope;
namespace fs = std::filesystem;

namespace {

// Probes where two captures' greedy tokens differ, read straight from the files' argmax tensors.
int64_t ArgmaxDifferences(const std::string& a, const std::string& b) {
  auto ra = CaptureReader::Open(a);
  auto rb = CaptureReader::Open(b);
  EXPECT_TRUE(ra.ok() && rb.ok());
  if (!ra.ok() || !rb.ok()) return -1;
  EXPECT_TRUE(std::equal((*ra)->positions().begin(), (*ra)->positions().end(), (*rb)->positions().begin(),
                         (*rb)->positions().end()));
  int64_t n = 0;
  for (size_t i = 0; i < (*ra)->argmax().size(); ++i) n += (*ra)->argmax()[i] != (*rb)->argmax()[i];
  return n;
}

TEST(ExperimentReference, ADeviceOnlyForTheExactReference) {
  auto p = fixtures::MakeExperiment("reference-device-alone", "reference_device = \"CUDA0\"\n");
  EXPECT_NE(ParseExperiment(p).status().message().find("reference_device = \"CUDA0\" needs reference = \"exact\""),
            std::string::npos)
      << ParseExperiment(p).status().message();
  p = fixtures::MakeExperiment("reference-device", "reference = \"exact\"\nreference_device = \"CUDA0\"\n");
  auto exp = ParseExperiment(p);
  ASSERT_TRUE(exp.ok()) << exp.status().message();
  EXPECT_EQ(exp->reference_device, "CUDA0");
}

}  // namespace

TEST(ExperimentReference, EveryCaptureAgainstExactRankedAndReported) {
  auto p = fixtures::MakeExperiment(
      "reference",
      "reference = \"exact\"\n[probe]\nstride = 2\n[baseline]\nthreads = 1\nflash_attn = \"on\"\nctx_size = 512\n"
      "repeats = 2\n[[variant]]\nname = \"kv-q4_0\"\ncache_type_k = \"q4_0\"\ncache_type_v = \"q4_0\"\n"
      "[[variant]]\nname = \"kv-q8_0\"\ncache_type_k = \"q8_0\"\ncache_type_v = \"q8_0\"\n");
  auto e = ParseExperiment(p);
  ASSERT_TRUE(e.ok()) << e.status().message();
  RunOptions ro;
  ro.outdir = (fs::path(p).parent_path() / "out").string();
  ro.log.bars = false;
  auto r = fixtures::RunToJson(*e, ro);
  ASSERT_TRUE(r.ok()) << r.status().message();

  const auto& ref = (*r)["reference"];
  ASSERT_EQ(ref["status"], "ok") << ref.dump();
  const std::string exact = ref["captures"][0];
  auto er = CaptureReader::Open(exact);
  ASSERT_TRUE(er.ok());
  EXPECT_EQ((*er)->manifest().raw["engine"]["name"], "exact");
  // Every capture of every configuration, the baseline's two repeats included.
  ASSERT_EQ(ref["comparisons"].size(), 4u);
  for (const auto& c : ref["comparisons"]) {
    std::string cap;
    for (const auto& cfg : (*r)["configs"])
      if (cfg["name"] == c["config"]) cap = cfg["captures"][c["repeat"].get<size_t>()];
    EXPECT_EQ(c["compare"]["overall"]["flips"].get<int64_t>(), ArgmaxDifferences(exact, cap)) << cap;
  }
  // The median over repeats per configuration; the summary rows carry it too.
  ASSERT_EQ(ref["summary"].size(), 3u);
  for (const auto& s : (*r)["summary"])
    for (const auto& x : ref["summary"])
      if (x["config"] == s["config"]) {
        EXPECT_EQ(s["exact_flip_rate"], x["median_flip_rate"]);
      }

  // The recipe's ranking follows the distance to exact (damage is not measured here): each tie
  // group starts no closer than the one before, and its rows' intervals overlap its first's.
  EXPECT_EQ((*r)["recipe"]["ranking_mode"], "exact");
  double last = -1;
  int group = 0;
  nlohmann::json leader;
  for (const auto& row : (*r)["recipe"]["ranking"]) {
    ASSERT_TRUE(row["exact_flip_rate"].is_number()) << row.dump();
    ASSERT_TRUE(row["exact_flip_rate_ci"].is_array()) << row.dump();
    ASSERT_GE(row["tie_group"].get<int>(), group) << row.dump();
    if (row["tie_group"].get<int>() > group) {
      EXPECT_GE(row["exact_flip_rate"].get<double>(), last) << row.dump();
      last = row["exact_flip_rate"].get<double>(), group = row["tie_group"].get<int>(), leader = row;
    }
    EXPECT_LE(row["exact_flip_rate_ci"][0].get<double>(), leader["exact_flip_rate_ci"][1].get<double>()) << row.dump();
    EXPECT_LE(leader["exact_flip_rate_ci"][0].get<double>(), row["exact_flip_rate_ci"][1].get<double>()) << row.dump();
  }

  // A second run reuses the exact capture.
  const auto written = fs::last_write_time(exact);
  auto again = fixtures::RunToJson(*e, ro);
  ASSERT_TRUE(again.ok()) << again.status().message();
  EXPECT_EQ(fs::last_write_time(exact), written);
  EXPECT_EQ((*again)["reference"]["reused"][0], true);

  // The report: the section with one row per configuration, its chart, rendered by Chromium.
  auto html = ReadFile((fs::path(ro.outdir) / "report.html").string());
  ASSERT_TRUE(html.ok());
  EXPECT_NE(html->find("<section id=\"exact\"><h2>Against the exact reference</h2>"), std::string::npos);
  EXPECT_NE(html->find("id=\"fig-exact-flip-chart\""), std::string::npos);
  // It names the configuration closest to the truth: the one with the lowest flip rate against
  // exact (then KL), computed here from the reference's summary.
  const nlohmann::json* best = nullptr;
  for (const auto& x : ref["summary"])
    if (!best || std::pair{x["median_flip_rate"].get<double>(), x["kl_mean"].get<double>()} <
                     std::pair{(*best)["median_flip_rate"].get<double>(), (*best)["kl_mean"].get<double>()})
      best = &x;
  ASSERT_NE(best, nullptr);
  const std::string closest = "Closest to the exact reference: " + (*best)["config"].get<std::string>() + " (";
  EXPECT_NE(html->find(closest), std::string::npos) << closest;
  EXPECT_EQ(fixtures::CheckReportInChromium(ro.outdir), 0)
      << *ReadFile((fs::path(ro.outdir) / "chromium.log").string());
  auto md = ReadFile((fs::path(ro.outdir) / "report.md").string());
  ASSERT_TRUE(md.ok());
  EXPECT_NE(md->find("## Against the exact reference"), std::string::npos);
  EXPECT_NE(md->find(closest), std::string::npos) << closest;
}

TEST(ExperimentReference, OnlyExactAndNoClashingName) {
  auto p = fixtures::MakeExperiment("reference-bad", "reference = \"bf16\"\n");
  EXPECT_NE(ParseExperiment(p).status().message().find(":4: reference must be \"exact\""), std::string::npos)
      << ParseExperiment(p).status().message();
  p = fixtures::MakeExperiment("reference-clash",
                               "reference = \"exact\"\n[[variant]]\nname = \"exact\"\ncache_type_k = \"q8_0\"\n");
  EXPECT_NE(ParseExperiment(p).status().message().find("clashes with reference = \"exact\""), std::string::npos)
      << ParseExperiment(p).status().message();
}
