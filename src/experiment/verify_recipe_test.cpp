// --verify-recipe against a real llama-server of this build: the recommended command, started as
// printed, reproduces the capture's greedy tokens; a flag it refuses is named on one line and the
// recipe is marked unverified.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "experiment/verify_recipe_test_util.h"
#include "experiment/steps.h"
#include "report/report.h"

namespace flipscope {
namespace {

namespace fs = std::filesystem;
using fixtures::ExpectMatched;
using fixtures::RunVerified;

TEST(VerifyRecipe, TheRecommendedCommandServesTheCapturedTokens) {
  auto p = fixtures::MakeExperiment(
      "verify", "[probe]\nstride = 4\n[baseline]\nthreads = 1\nflash_attn = \"on\"\nctx_size = 512\n"
                "[[variant]]\nname = \"kv-q8_0\"\ncache_type_k = \"q8_0\"\ncache_type_v = \"q8_0\"\n");
  const nlohmann::json res = RunVerified(p);
  ASSERT_TRUE(res.is_object());
  const std::string cmd = res["recipe"]["server_command"];
  EXPECT_NE(cmd.find(" -np 1 "), std::string::npos) << cmd;
  EXPECT_NE(cmd.find("-t 1"), std::string::npos) << cmd;
  ExpectMatched(res);
  // The tiny model's rows come out of the same kernels: the log-probabilities agree to float rounding.
  const auto& v0 = res["recipe"]["verification"];
  EXPECT_GT(v0["logprobs_compared"].get<int>(), 0);
  EXPECT_EQ(v0["logprobs_within_tolerance"], v0["logprobs_compared"]);
  // The report says so.
  std::ifstream md(fs::path(p).parent_path() / "out" / "report.md");
  std::string text((std::istreambuf_iterator<char>(md)), {});
  EXPECT_NE(text.find("The recommended command was served by llama-server and matched"), std::string::npos);

  // A flag this llama-server does not know: one line naming it, and the recipe unverified.
  nlohmann::json bad = res;
  bad["recipe"]["server_command"] = cmd + " --no-such-flag";
  VerifyOptions vo;
  vo.log_path = (fs::path(p).parent_path() / "out" / "bad.server.log").string();
  const nlohmann::json v = VerifyRecipe(bad, vo, Log::Quiet());
  EXPECT_EQ(v["status"], "unverified") << v.dump();
  const std::string why = v.value("error", "");
  EXPECT_EQ(why, "llama-server refuses the flag --no-such-flag");
  bad["recipe"]["verification"] = v;
  EXPECT_EQ(RecipeVerificationText(bad["recipe"]),
            "The recommended command is unverified: llama-server refuses the flag --no-such-flag.");
  // A bad value of a flag it knows is named with llama.cpp's reason.
  bad["recipe"]["server_command"] = cmd + " -ctk f17";
  const nlohmann::json v2 = VerifyRecipe(bad, vo, Log::Quiet());
  EXPECT_EQ(v2["status"], "unverified");
  EXPECT_NE(v2.value("error", "").find("llama-server refuses -ctk"), std::string::npos) << v2.dump();
  EXPECT_EQ(v2.value("error", "").find('\n'), std::string::npos);
}

// A served token the capture ranks just below its own top-1 (a near-tie the prompt's batching can
// flip) is told apart from one it ranks well below, and from one outside a truncated top-k.
TEST(VerifyRecipe, NearTiesAreToldApartFromMismatches) {
  using V = ServedChoiceVerdict;
  EXPECT_EQ(JudgeServedChoice(true, -1.0, -1.0, 0.1), V::kSame);
  EXPECT_EQ(JudgeServedChoice(false, std::log(0.313), std::log(0.310), 0.1), V::kNearTie);  // seen on Gemma 3
  EXPECT_EQ(JudgeServedChoice(false, std::log(0.6), std::log(0.3), 0.1), V::kDiffers);
  EXPECT_EQ(JudgeServedChoice(false, -0.5, -0.6, 0.1), V::kNearTie);
  EXPECT_EQ(JudgeServedChoice(false, -0.5, -0.61, 0.1), V::kDiffers);
  EXPECT_EQ(JudgeServedChoice(false, -0.5, NAN, 0.1), V::kDiffers);
  EXPECT_EQ(JudgeServedChoice(false, std::log(0.313), std::log(0.310), 0.0), V::kDiffers);

  nlohmann::json recipe = {{"verification",
                            {{"status", "matched"},
                             {"probes_checked", 2},
                             {"probes_total", 10},
                             {"matched", 1},
                             {"mismatches", nlohmann::json::array()},
                             {"near_tie", 0.1},
                             {"near_ties", {{{"position", 7}, {"why", "served token 3, captured 4, 0.0096 nats below it in the capture"}}}}}}};
  const std::string line = RecipeVerificationText(recipe);
  EXPECT_NE(line.find("matched 1/2 probes"), std::string::npos) << line;
  EXPECT_NE(line.find("near-ties, where the capture's top two are within 0.1 nats"), std::string::npos) << line;
  EXPECT_NE(line.find("position 7 (served token 3, captured 4"), std::string::npos) << line;
  EXPECT_EQ(line.find("it did not"), std::string::npos) << line;
}

}  // namespace
}  // namespace flipscope
