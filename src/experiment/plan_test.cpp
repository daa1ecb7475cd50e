// What a run says before and while it computes: each configuration's status line (its replay and
// its changes against the baseline), the stage lines of a piped run, and `run --dry-run`'s plan.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "capture/capture.h"
#include "experiment/experiment.h"
#include "experiment/steps.h"
#include "testing/chats.h"
#include "testing/tiny_model.h"
#include "util/util.h"

using namespace flipscope;
namespace fs = std::filesystem;

namespace {

// A folder with the tiny model, a chat (served replay needs the model's own turns) and exp.toml:
// a baseline of two repeats, a KV variant, a served-replay variant and one llama.cpp refuses,
// forks followed.
std::string MakePlanExperiment(const std::string& name) {
  fs::path dir = fixtures::TempPath("exp-plan-" + name);
  fs::remove_all(dir);
  fs::create_directories(dir);
  EXPECT_TRUE(fixtures::WriteTinyModel((dir / "tiny.gguf").string()).ok());
  std::ofstream(dir / "chat.json") << fixtures::kToolChat;
  std::ofstream(dir / "exp.toml") << "model = \"tiny.gguf\"\nworkload = \"chat.json\"\nwindow = 64\n"
                                     "[probe]\nstride = 2\n[baseline]\nthreads = 1\nflash_attn = \"on\"\n"
                                     "ctx_size = 2048\nbatch_size = 16\nubatch_size = 8\nrepeats = 2\n"
                                     "[[variant]]\nname = \"kv-q8_0\"\ncache_type_k = \"q8_0\"\n"
                                     "cache_type_v = \"q8_0\"\n"
                                     "[[variant]]\nname = \"served\"\nreplay = \"served\"\n"
                                     "[[variant]]\nname = \"refused\"\ncache_type_v = \"q4_0\"\n"
                                     "flash_attn = \"off\"\n"
                                     "[branch]\nmax_tokens = 8\nmax_branches = 2\n";
  return (dir / "exp.toml").string();
}

const ConfigPlan* Planned(const RunPlan& plan, const std::string& name) {
  auto it = std::find_if(plan.configs.begin(), plan.configs.end(),
                         [&](const ConfigPlan& c) { return c.line.rfind(name + " [", 0) == 0; });
  return it == plan.configs.end() ? nullptr : &*it;
}

}  // namespace

// The status line states the replay and only what a configuration changes, never the
// baseline's flags as if they were its own.
TEST(ConfigLine, StatesTheReplayAndTheChangesAgainstTheBaseline) {
  auto e = ParseExperiment(MakePlanExperiment("line"));
  ASSERT_TRUE(e.ok()) << e.status().message();
  // The replay-only variant is folded into served twins of every configuration (docs/served.md).
  ASSERT_EQ(e->variants.size(), 2u);
  EXPECT_EQ(ConfigLine(e->variants[0], e->baseline), "kv-q8_0 [prefill] -ctk q8_0 -ctv q8_0");
  auto served = e->baseline;
  served.name = "served", served.knobs.replay = Replay::kServed;
  EXPECT_EQ(ConfigLine(served, e->baseline), "served [served replay] (same knobs as baseline)");
  const std::string base = ConfigLine(e->baseline, e->baseline);
  EXPECT_EQ(base.rfind("baseline [prefill] ", 0), 0u) << base;
  EXPECT_NE(base.find("-fa on"), std::string::npos) << base;
  EXPECT_NE(base.find("(the baseline)"), std::string::npos) << base;
  // A served twin (replay = "both") against the served baseline: its KV change, served.
  std::vector<ServedSkip> skipped;
  const Experiment twin = ServedTwin(*e, &skipped);
  EXPECT_EQ(ConfigLine(twin.variants[0], twin.baseline), "kv-q8_0@served [served replay] -ctk q8_0 -ctv q8_0");
}

// --dry-run: the counts of what a run would compute and no capture made; after a run, what is
// cached is counted out and the time is estimated from the captures' recorded rates.
TEST(PlanRun, CountsWithoutCapturingThenEstimatesFromRecordedTimings) {
  const std::string path = MakePlanExperiment("dry");
  auto e = ParseExperiment(path);
  ASSERT_TRUE(e.ok()) << e.status().message();
  const std::string out = (fs::path(path).parent_path() / "out").string();
  auto plan = PlanRun(*e, out);
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  EXPECT_FALSE(fs::exists(fs::path(out))) << "a dry run makes no folder";
  // The baseline, kv-q8_0 and the refused one, and the served twins of the first two.
  ASSERT_GE(plan->configs.size(), 5u);
  const ConfigPlan *base = Planned(*plan, "baseline"), *kv = Planned(*plan, "kv-q8_0"),
                   *served = Planned(*plan, "kv-q8_0@served"), *refused = Planned(*plan, "refused");
  ASSERT_TRUE(base && kv && served && refused);
  EXPECT_EQ(refused->ToMake(), 0);
  EXPECT_NE(refused->refused.find("flash attention"), std::string::npos) << refused->refused;
  EXPECT_EQ(base->ToMake(), 2);
  EXPECT_EQ(kv->ToMake(), 1);
  EXPECT_EQ(base->decode_steps, 0);
  EXPECT_EQ(kv->decode_steps, 0);
  EXPECT_GT(served->decode_steps, 0);
  EXPECT_LT(served->decode_steps, plan->n_tokens);
  // Two forks per branched variant; the baseline's second repeat follows the one variant's.
  EXPECT_EQ(kv->forks.value_or(-1), 2);
  EXPECT_EQ(base->forks.value_or(-1), 2);
  for (const ConfigPlan& c : plan->configs) {
    if (!c.refused.empty()) continue;
    EXPECT_FALSE(c.seconds) << c.line;
    EXPECT_NE(c.basis.find("unknown until the first"), std::string::npos) << c.basis;
  }
  const std::string text = PlanText(*plan);
  EXPECT_NE(text.find("2 of 2 captures to make"), std::string::npos) << text;
  EXPECT_NE(text.find(fmt::format("{} served decode steps", served->decode_steps)), std::string::npos) << text;
  EXPECT_NE(text.find("total: 6 captures to make"), std::string::npos) << text;
  EXPECT_NE(text.find("refused, nothing to make: "), std::string::npos) << text;

  RunOptions ro;
  ro.outdir = out;
  ro.log = Log::Quiet();
  ASSERT_TRUE(RunExperiment(*e, ro).ok());
  auto again = PlanRun(*e, out);
  ASSERT_TRUE(again.ok()) << again.status().message();
  for (const ConfigPlan& c : again->configs) {
    EXPECT_EQ(c.ToMake(), 0) << c.line;
    if (!c.refused.empty()) continue;
    EXPECT_EQ(c.seconds.value_or(-1), 0.0) << c.line;
  }
  // One capture gone: it is to make again, at the baseline's recorded rate (its own is gone).
  fs::remove(CaptureFilePath(out, e->variants[0], 0));
  auto one = PlanRun(*e, out);
  ASSERT_TRUE(one.ok());
  kv = Planned(*one, "kv-q8_0");
  ASSERT_TRUE(kv);
  EXPECT_EQ(kv->ToMake(), 1);
  ASSERT_TRUE(kv->seconds) << kv->basis;
  EXPECT_GT(*kv->seconds, 0);
  EXPECT_NE(kv->basis.find("recorded by baseline-r"), std::string::npos) << kv->basis;
}

// A piped run (no terminal) is not silent: every capture's stage says when it starts and how
// long it took, served replay with its decode steps, under the configuration's status line.
TEST(RunExperiment, PipedRunLogsEveryStageUnderItsStatusLine) {
  const std::string path = MakePlanExperiment("log");
  auto e = ParseExperiment(path);
  ASSERT_TRUE(e.ok()) << e.status().message();
  std::vector<std::string> lines;
  RunOptions ro;
  ro.outdir = (fs::path(path).parent_path() / "out").string();
  ro.log.line = [&](std::string_view l) { lines.emplace_back(l); };
  testing::internal::CaptureStderr();
  ASSERT_TRUE(RunExperiment(*e, ro).ok());
  EXPECT_EQ(testing::internal::GetCapturedStderr(), "") << "no bar when stderr is not a terminal";
  auto has = [&](const std::string& prefix, const std::string& inside) {
    return std::any_of(lines.begin(), lines.end(), [&](const std::string& l) {
      return l.rfind(prefix, 0) == 0 && l.find(inside) != std::string::npos;
    });
  };
  EXPECT_TRUE(has("  capturing kv-q8_0 [prefill] -ctk q8_0 -ctv q8_0 (repeat 1 of 1)", ""));
  EXPECT_TRUE(has("  capturing kv-q8_0@served [served replay] -ctk q8_0 -ctv q8_0 (repeat 1 of 1)", ""));
  EXPECT_TRUE(has("    prefill: started, ", " tok"));
  EXPECT_TRUE(has("    prefill: ", " tok/s)"));
  EXPECT_TRUE(has("    served replay: ", " decode steps in "));
}

// The command line: `run --dry-run` prints the plan and computes nothing.
TEST(PlanRun, DryRunOnTheCommandLineMakesNoCapture) {
  const std::string path = MakePlanExperiment("cli");
  const fs::path dir = fs::path(path).parent_path();
  const std::string cmd =
      fmt::format("cd '{}' && '{}' run exp.toml -o out --dry-run 2>&1", dir.string(), FLIPSCOPE_CLI);
  std::string out;
  FILE* p = popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  char buf[4096];
  while (size_t n = fread(buf, 1, sizeof(buf), p)) out.append(buf, n);
  const int st = pclose(p);
  ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << out;
  EXPECT_NE(out.find("kv-q8_0 [prefill] -ctk q8_0 -ctv q8_0"), std::string::npos) << out;
  EXPECT_NE(out.find("1 of 1 capture to make"), std::string::npos) << out;
  EXPECT_NE(out.find("served decode steps"), std::string::npos) << out;
  EXPECT_NE(out.find("unknown until the first capture"), std::string::npos) << out;
  EXPECT_FALSE(fs::exists(dir / "out" / "captures")) << out;
}
