// What the --verify-recipe tests share: an experiment run with the recipe verified, and the check
// that every sampled probe matched.
#pragma once

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <filesystem>

#include "experiment/experiment.h"
#include "support/experiment_test_util.h"
#include "report/report.h"

namespace flipscope::fixtures {

// Runs an experiment with --verify-recipe and returns results.json's content.
inline nlohmann::json RunVerified(const std::string& exp_path) {
  RunOptions ro;
  ro.outdir = (std::filesystem::path(exp_path).parent_path() / "out").string();
  ro.log.bars = false;
  ro.verify_recipe = true;
  auto e = ParseExperiment(exp_path);
  EXPECT_TRUE(e.ok()) << e.status().message();
  if (!e.ok()) return {};
  auto r = fixtures::RunToJson(*e, ro);
  EXPECT_TRUE(r.ok()) << r.status().message();
  return r.ok() ? *r : nlohmann::json();
}

inline void ExpectMatched(const nlohmann::json& res) {
  const auto& v = res["recipe"]["verification"];
  ASSERT_TRUE(v.is_object()) << res["recipe"].dump();
  ASSERT_EQ(v["status"], "matched") << v.dump(1);
  EXPECT_GT(v["probes_checked"].get<int>(), 0);
  EXPECT_EQ(v["matched"], v["probes_checked"]);
  EXPECT_EQ(v["command"], res["recipe"]["server_command"]);
  const std::string line = RecipeVerificationText(RecipeFromJson(res["recipe"]));
  EXPECT_NE(line.find(fmt::format("matched {}/{} probes", v["matched"].get<int>(), v["probes_checked"].get<int>())),
            std::string::npos)
      << line;
}

}  // namespace flipscope::fixtures
