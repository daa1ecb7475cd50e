// The forks followed during `flipscope run`'s captures are judged exactly as `flipscope branch`
// judges the same two captures: one decode, one budget rule, one notion of "ended". On real
// models (SmolLM2 and Gemma 3) over a netops session with tool calls, with a token budget short
// enough that futures inside tool calls are let run past it; with free futures and with futures
// decoded under the tool-call grammar.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "branch/branch.h"
#include "experiment/experiment.h"
#include "support/branches.h"
#include "support/experiment_test_util.h"
#include "testing/tiny_model.h"
#include "util/util.h"

namespace flipscope {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

constexpr int kMaxTokens = 8, kMaxCallTokens = 32, kMaxBranches = 10;

// Runs a baseline (repeated, so its second repeat forks) against a 4-bit KV cache with [branch],
// then `flipscope branch` over the same two captures, and requires equal records and counts.
// How a case follows its forks ([branch] and flipscope branch alike).
struct Following {
  std::string decoding = "auto";
  ForkPick pick = ForkPick::kFirst;
  int max_branches = kMaxBranches;
  ForkScope where = ForkScope::kAssistant;
};

void RunEqualsBranch(const std::string& name, const std::string& model, const std::string& chat_template,
                     const Following& f = {}) {
  const std::string& decoding = f.decoding;
  const ForkPick pick = f.pick;
  const int max_branches = f.max_branches;
  ASSERT_FALSE(model.empty()) << name << " is not in the model cache (scripts/fetch-models.sh)";
  const fs::path dir = fixtures::TempPath("forks-" + name);
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string session = (dir / "session.json").string();
  const std::string gen = fmt::format("{} {}/examples/gen_session.py --seed 4 --target-tokens 1800 -o {}",
                                      FLIPSCOPE_PYTHON, FLIPSCOPE_SOURCE_DIR, session);
  ASSERT_EQ(std::system(gen.c_str()), 0) << gen;
  std::ofstream(dir / "exp.toml") << fmt::format(
      "model = \"{}\"\nworkload = \"session.json\"\n{}window = 1024\n"
      "[probe]\nstride = 16\nfull = \"tool_calls\"\n"
      "[baseline]\nthreads = 1\nflash_attn = \"on\"\nrepeats = 2\n"
      "[[variant]]\nname = \"kv-q4_0\"\ncache_type_k = \"q4_0\"\ncache_type_v = \"q4_0\"\n"
      "[branch]\nmax_tokens = {}\nmax_call_tokens = {}\nmax_branches = {}\ndecoding = \"{}\"\npick = "
      "\"{}\"\nfork_where = \"{}\"\n",
      model, chat_template.empty() ? "" : "chat_template = \"" + chat_template + "\"\n", kMaxTokens, kMaxCallTokens,
      max_branches, decoding, NameOf(pick), NameOf(f.where));
  auto exp = ParseExperiment((dir / "exp.toml").string());
  ASSERT_TRUE(exp.ok()) << exp.status().message();
  RunOptions ro;
  ro.outdir = (dir / "out").string();
  ro.log = Log::Quiet();
  auto r = fixtures::RunToJson(*exp, ro);
  ASSERT_TRUE(r.ok()) << r.status().message();
  // When it does not, say what the run found: each configuration's error and flips.
  ASSERT_EQ((*r)["branches"].size(), 1u) << name << ": the 4-bit KV cache must flip for this test to mean anything; "
                                         << (*r)["configs"].dump().substr(0, 4000);
  const json& run = (*r)["branches"][0];
  // The run's futures are the captures' own, not a pass of the branch stage.
  const std::string base0 = (*r)["configs"][0]["captures"][0], cand = (*r)["configs"][1]["captures"][0];
  EXPECT_EQ(run["branch_config"]["cand"]["decoded_during_capture"], cand);
  EXPECT_EQ(run["branch_config"]["base"]["decoded_during_capture"], (*r)["configs"][0]["captures"][1]);

  BranchRequest req;
  req.base_path = base0;
  req.cand_path = cand;
  req.options.max_tokens = kMaxTokens;
  req.options.max_call_tokens = kMaxCallTokens;
  req.options.max_branches = max_branches;
  req.options.decoding = *FromName<DecodingMode>(decoding);
  req.options.pick = pick;
  req.options.fork_where = f.where;
  req.options.log = Log::Quiet();
  auto own = fixtures::RunBranchesJson(req);
  ASSERT_TRUE(own.ok()) << own.status().message();
  EXPECT_TRUE((*own)["config"]["cand"]["decoded_during_capture"].is_null());
  const json& a = run["records"];
  const json& b = (*own)["records"];
  ASSERT_EQ(a.size(), b.size());
  ASSERT_GT(a.size(), 0u);
  // Field for field (records hold no timings; those are in "config"), then whole.
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].size(), b[i].size()) << name << " position " << b[i]["position"];
    for (auto it = b[i].begin(); it != b[i].end(); ++it)
      EXPECT_EQ(a[i].value(it.key(), json()), *it) << name << " position " << b[i]["position"] << ": " << it.key();
  }
  EXPECT_EQ(a, b);
  EXPECT_EQ(run["counts"], (*own)["counts"]);
  EXPECT_EQ(run["branch_config"]["teacher_forced_only"], (*own)["config"]["teacher_forced_only"]);
  EXPECT_EQ(run["branch_config"]["pick"], NameOf(pick));
  if (pick == ForkPick::kSpread) {
    // Spread means each fork within its share of the session: at most ceil(N (p + 1) / n) up to p;
    // and here (flips from the start on) not the first N.
    const int64_t n = (*own)["config"]["n_tokens"];
    for (size_t i = 0; i < b.size(); ++i)
      EXPECT_LE(int64_t(i) + 1, (max_branches * (b[i]["position"].get<int64_t>() + 1) + n - 1) / n)
          << name << ": fork " << i << " at " << b[i]["position"];
    int64_t available = 0;
    const std::vector<Flip> first =
        FirstNFlips(CaptureReader::Open(base0).value()->positions(), CaptureReader::Open(base0).value()->argmax(),
                    CaptureReader::Open(cand).value()->positions(), CaptureReader::Open(cand).value()->argmax(),
                    max_branches, &available);
    ASSERT_EQ(int(b.size()), max_branches);
    EXPECT_NE(b.back()["position"], first.back().position) << name << ": the spread forks are the first ones";
  }

  // What makes the comparison mean something: a fork inside a tool call, and a future there that
  // the call extension let run past the token budget.
  int in_call = 0, extended = 0, constrained = 0;
  for (const json& rec : b) {
    const bool call = rec["span"].is_string() && rec["span"].get<std::string>().rfind("tool call", 0) == 0;
    in_call += call;
    for (const char* side : {"base_future", "cand_future"}) {
      extended += int(rec[side]["tokens"].size()) > kMaxTokens;
      constrained += rec[side]["decoding"] == "grammar";
    }
  }
  EXPECT_GT(in_call, 0) << name << ": no fork inside a tool call";
  EXPECT_GT(extended, 0) << name << ": no future was let run past the budget";
  // Both ways decode what was asked: every future under the grammar, or none.
  const std::string used = decoding == "grammar" ? "grammar" : "free";
  EXPECT_EQ((*own)["config"]["decoding"]["used"], used);
  EXPECT_EQ(run["branch_config"]["decoding"], (*own)["config"]["decoding"]);
  EXPECT_EQ(constrained, used == "grammar" ? int(2 * b.size()) : 0) << name;
  std::printf("%s: %zu forks (%d inside tool calls, %d futures extended), %s teacher-forced only\n%s", name.c_str(),
              b.size(), in_call, extended, (*own)["counts"]["teacher_forced_only"].dump().c_str(),
              SummaryText(BranchCountsFromJson((*own)["counts"])).c_str());
}

TEST(ForksDuringCaptures, RecordsEqualTheBranchStageOnSmolLM2) {
  RunEqualsBranch("smollm2", fixtures::SmolLM2Path(), "");
}

TEST(ForksDuringCaptures, RecordsEqualTheBranchStageOnGemma3) {
  RunEqualsBranch("gemma3", fixtures::Gemma3Path(), "gemma");
}

// Three forks spread over the session (flips everywhere, fork_where = "all") instead of the first three.
TEST(ForksDuringCaptures, SpreadRecordsEqualTheBranchStageOnSmolLM2) {
  RunEqualsBranch("smollm2-spread", fixtures::SmolLM2Path(), "",
                  {.pick = ForkPick::kSpread, .max_branches = 3, .where = ForkScope::kAll});
}

// Under the tool-call grammar of the <tool_call> form (neither template renders calls itself).
TEST(ForksDuringCaptures, GrammarRecordsEqualTheBranchStageOnSmolLM2) {
  RunEqualsBranch("smollm2-grammar", fixtures::SmolLM2Path(), "", {.decoding = "grammar"});
}

TEST(ForksDuringCaptures, GrammarRecordsEqualTheBranchStageOnGemma3) {
  RunEqualsBranch("gemma3-grammar", fixtures::Gemma3Path(), "gemma", {.decoding = "grammar"});
}

}  // namespace
}  // namespace flipscope
