// --verify-recipe against a real llama-server of this build: the recommended command, started as
// printed, reproduces the capture's greedy tokens; a flag it refuses is named on one line and the
// recipe is marked unverified.
#include <gtest/gtest.h>

#include <sys/wait.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "support/verify_recipe_test_util.h"
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
  const nlohmann::json v = ToJson(VerifyRecipe(ExperimentResults::FromJson(bad), vo, Log::Quiet()));
  EXPECT_EQ(v["status"], "unverified") << v.dump();
  const std::string why = v.value("error", "");
  EXPECT_EQ(why, "llama-server refuses the flag --no-such-flag");
  bad["recipe"]["verification"] = v;
  EXPECT_EQ(RecipeVerificationText(RecipeFromJson(bad["recipe"])),
            "The recommended command is unverified: llama-server refuses the flag --no-such-flag.");
  // A bad value of a flag it knows is named with llama.cpp's reason.
  bad["recipe"]["server_command"] = cmd + " -ctk f17";
  const nlohmann::json v2 = ToJson(VerifyRecipe(ExperimentResults::FromJson(bad), vo, Log::Quiet()));
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
  const std::string line = RecipeVerificationText(RecipeFromJson(recipe));
  EXPECT_NE(line.find("matched 1/2 probes"), std::string::npos) << line;
  EXPECT_NE(line.find("near-ties, where the capture's top two are within 0.1 nats"), std::string::npos) << line;
  EXPECT_NE(line.find("position 7 (served token 3, captured 4"), std::string::npos) << line;
  EXPECT_EQ(line.find("it did not"), std::string::npos) << line;
}

// Runs `flipscope run EXP -o out --verify-recipe -q` (the built CLI) in EXP's folder; its exit
// status and stdout; stderr goes to out.stderr beside it.
std::pair<int, std::string> RunCli(const std::string& exp) {
  const fs::path dir = fs::path(exp).parent_path();
  const std::string cmd = fmt::format("cd '{}' && '{}' run exp.toml -o out --verify-recipe -q 2> stderr.txt",
                                      dir.string(), FLIPSCOPE_CLI);
  std::string out;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return {-1, "popen failed"};
  char buf[4096];
  while (size_t n = fread(buf, 1, sizeof(buf), p)) out.append(buf, n);
  const int st = pclose(p);
  return {WIFEXITED(st) ? WEXITSTATUS(st) : -1, out};
}

std::string ReadText(const fs::path& path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

// flipscope's own error lines ("flipscope: error: ...") in a stderr text.
std::vector<std::string> ErrorLines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);)
    if (line.rfind("flipscope: error: ", 0) == 0) out.push_back(line);
  return out;
}

// The command line: the terminal and the report say the command matched N/N probes; a
// configuration llama-server refuses (-dev CPU: llama.cpp's library runs it, its server takes
// only accelerators for --device) is one error line naming the flag, exit status 1, and the
// report marks the recommended command unverified.
TEST(VerifyRecipe, TheCommandLineSaysWhetherTheServedCommandMatched) {
  const std::string body = "[probe]\nstride = 4\n[baseline]\nthreads = 1\nflash_attn = \"on\"\nctx_size = 512\n";
  const std::string exp = fixtures::MakeExperiment(
      "verify-cli", body + "[[variant]]\nname = \"kv-q8_0\"\ncache_type_k = \"q8_0\"\ncache_type_v = \"q8_0\"\n");
  const fs::path dir = fs::path(exp).parent_path();
  auto [rc, out] = RunCli(exp);
  ASSERT_EQ(rc, 0) << out << ReadText(dir / "stderr.txt");
  const nlohmann::json res = nlohmann::json::parse(ReadText(dir / "out" / "results.json"));
  const nlohmann::json& v = res["recipe"]["verification"];
  ASSERT_EQ(v["status"], "matched") << v.dump(1);
  const int n = v["probes_checked"];
  EXPECT_GT(n, 0);
  EXPECT_EQ(v["matched"], n);
  const std::string said = fmt::format("The recommended command was served by llama-server and matched {}/{} probes", n, n);
  EXPECT_NE(out.find(said), std::string::npos) << out;
  EXPECT_NE(ReadText(dir / "out" / "report.md").find(said), std::string::npos);
  EXPECT_TRUE(ErrorLines(ReadText(dir / "stderr.txt")).empty());

  const std::string bad = fixtures::MakeExperiment("verify-cli-refused", body + "device = \"CPU\"\n");
  const fs::path bad_dir = fs::path(bad).parent_path();
  auto [rc2, out2] = RunCli(bad);
  EXPECT_EQ(rc2, 1) << out2;
  const std::vector<std::string> errors = ErrorLines(ReadText(bad_dir / "stderr.txt"));
  ASSERT_EQ(errors.size(), 1u) << ReadText(bad_dir / "stderr.txt");
  EXPECT_EQ(errors[0],
            "flipscope: error: --verify-recipe: The recommended command is unverified: llama-server refuses -dev: "
            "invalid device: CPU.");
  const nlohmann::json res2 = nlohmann::json::parse(ReadText(bad_dir / "out" / "results.json"));
  EXPECT_NE(res2["recipe"]["server_command"].get<std::string>().find(" -dev CPU"), std::string::npos);
  EXPECT_EQ(res2["recipe"]["verification"]["status"], "unverified");
  EXPECT_NE(ReadText(bad_dir / "out" / "report.md")
                .find("The recommended command is unverified: llama-server refuses -dev: invalid device: CPU."),
            std::string::npos);
}

}  // namespace
}  // namespace flipscope
