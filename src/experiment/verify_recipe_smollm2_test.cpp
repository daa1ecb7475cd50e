// --verify-recipe on the real SmolLM2: the recommended command, started as printed by this
// build's llama-server, reproduces the capture's greedy tokens at the sampled probes.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "support/verify_recipe_test_util.h"

namespace flipscope {
namespace {

namespace fs = std::filesystem;

TEST(VerifyRecipe, TheRecommendedCommandServesTheCapturedTokensOnSmolLM2) {
  const std::string model = fixtures::SmolLM2Path();
  if (model.empty()) GTEST_SKIP() << "SmolLM2 is not in the cache";
  auto p = fixtures::MakeExperiment("verify-smollm2", "");
  // The real model and a longer text in place of the tiny ones.
  std::ofstream(p) << "model = \"" << model << "\"\nworkload = \"work.txt\"\nwindow = 256\n"
                   << "[probe]\nstride = 16\n[baseline]\nthreads = 1\nctx_size = 2048\n"
                   << "[[variant]]\nname = \"kv-q8_0\"\ncache_type_k = \"q8_0\"\ncache_type_v = \"q8_0\"\n";
  std::ofstream w(fs::path(p).parent_path() / "work.txt");
  for (int i = 0; i < 40; ++i)
    w << "Step " << i << ": run `ssh admin@10.0.0." << i << " -p " << (5432 + i)
      << "` and check that the service answers on its port before the next host. ";
  w.close();
  fixtures::ExpectMatched(fixtures::RunVerified(p));
}

}  // namespace
}  // namespace flipscope
