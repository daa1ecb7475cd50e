// The history stage's pure parts: release parsing and the supported range, and the probe plan a
// worker is given over token ids.
#include <gtest/gtest.h>

#include <filesystem>
#include <iterator>
#include <map>

#include "history/history.h"
#include "history/internal.h"

namespace flipscope {
namespace {

TEST(Release, ParsesBareAndPipSpellings) {
  auto a = ParseRelease("0.3.35");
  ASSERT_TRUE(a.ok()) << a.status().message();
  EXPECT_EQ(a->ToString(), "0.3.35");
  auto b = ParseRelease("llama-cpp-python==0.3.36");
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->ToString(), "0.3.36");
  EXPECT_LT(*a, *b);
  EXPECT_LT(Release({0, 2, 90}), Release({0, 3, 1}));
}

TEST(Release, RejectsWhatIsNotAVersion) {
  for (const char* bad : {"", "0.3", "v0.3.36", "0.3.36rc1", "latest", "0.3.x", "llama-cpp-python>=0.3.3"}) {
    auto r = ParseRelease(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(r.status().message().find(std::string("'") + bad + "'"), std::string::npos) << r.status().message();
  }
}

TEST(Release, RefusesOutsideTheRangeNamingItAndTheRange) {
  const std::string range = OldestSupported().ToString() + " to " + NewestSupported().ToString();
  EXPECT_TRUE(CheckSupported(OldestSupported()).ok());
  EXPECT_TRUE(CheckSupported(NewestSupported()).ok());
  for (Release r : {Release{0, 2, 90}, Release{0, 3, 29}, Release{0, 3, 37}, Release{1, 0, 0}}) {
    Status s = CheckSupported(r);
    ASSERT_FALSE(s.ok()) << r.ToString();
    EXPECT_EQ(s.code(), StatusCode::kRefused);
    EXPECT_NE(s.message().find("llama-cpp-python " + r.ToString()), std::string::npos) << s.message();
    EXPECT_NE(s.message().find(range), std::string::npos) << s.message();
    EXPECT_EQ(s.message().find('\n'), std::string::npos);
  }
}

TEST(Release, HistoryListNeedsTwoDistinctSupportedReleases) {
  auto ok = ParseHistoryReleases({"0.3.36", "0.3.35"});
  ASSERT_TRUE(ok.ok()) << ok.status().message();
  ASSERT_EQ(ok->size(), 2u);
  EXPECT_EQ((*ok)[0].ToString(), "0.3.36");  // the order given is kept
  EXPECT_FALSE(ParseHistoryReleases({"0.3.36"}).ok());
  auto dup = ParseHistoryReleases({"0.3.35", "llama-cpp-python==0.3.35"});
  ASSERT_FALSE(dup.ok());
  EXPECT_NE(dup.status().message().find("0.3.35 is listed twice"), std::string::npos);
  auto old = ParseHistoryReleases({"0.3.35", "0.2.90"});
  ASSERT_FALSE(old.ok());
  EXPECT_EQ(old.status().code(), StatusCode::kRefused);
}

TEST(History, PositionRangesJoinRuns) {
  EXPECT_EQ(history::PositionRanges({}), "");
  EXPECT_EQ(history::PositionRanges({5}), "5-5");
  EXPECT_EQ(history::PositionRanges({1, 2, 3, 7, 9, 10}), "1-3,7-7,9-10");
}

// Over token ids (no spans) the worker's plan gives exactly the probes of the plan over the
// rendered workload with its tool-call spans.
TEST(History, WorkerPlanKeepsTheProbesOfToolCalls) {
  Workload w;
  w.tokens.assign(300, 1);
  w.spans = {{SpanKind::kMessage, 0, 300, 1, "assistant", "", ""},
             {SpanKind::kToolCall, 40, 47, 1, "assistant", "", ""},
             {SpanKind::kToolCall, 200, 260, 2, "assistant", "", ""}};
  for (std::string full : {"tool_calls", "tool_calls,100-104", "", "10-12"}) {
    ProbePlan plan{32, full};
    auto wp = history::WorkerPlan(plan, w);
    ASSERT_TRUE(wp.ok()) << wp.status().message();
    EXPECT_EQ(wp->stride, 32);
    auto want = PlanProbes(plan, 300, w.spans);
    auto got = PlanProbes(*wp, 300, {});
    ASSERT_TRUE(want.ok() && got.ok());
    EXPECT_EQ(*got, *want) << full << " -> " << wp->full;
  }
}

// A refused list is refused before anything is fetched, built or written.
TEST(History, RefusedReleasesWriteNothing) {
  HistoryRequest req;
  req.model_path = "/nonexistent/model.gguf";
  req.workload_path = "/nonexistent/session.json";
  req.out_dir = ::testing::TempDir() + "history-refused";
  req.releases = {"0.3.36", "0.2.90"};
  req.log = Log::Quiet();
  auto r = RunHistory(req);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kRefused);
  EXPECT_NE(r.status().message().find("llama-cpp-python 0.2.90"), std::string::npos) << r.status().message();
  EXPECT_FALSE(std::filesystem::exists(req.out_dir));
  req.releases = {"0.3.35", "0.3.36"};
  req.knobs.replay = Replay::kServed;
  r = RunHistory(req);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("prefill only"), std::string::npos) << r.status().message();
  EXPECT_FALSE(std::filesystem::exists(req.out_dir));
}

// The section says which way each step moved against exact, from the figures it is given.
TEST(History, MarkdownSaysWhichWayEachStepMoved) {
  auto step = [](const char* base, const char* cand, int64_t flips, double kl) {
    return nlohmann::json{{"base", base},
                          {"cand", cand},
                          {"probes", 100},
                          {"flips", flips},
                          {"flip_rate", flips / 100.0},
                          {"confident_flips", 0},
                          {"bit_identical", flips ? 0 : 100},
                          {"kl_mean", kl},
                          {"kl_p99", kl},
                          {"kl_max", kl},
                          {"windows", nlohmann::json::array()},
                          {"flip_list", nlohmann::json::array()}};
  };
  nlohmann::json doc = {{"model", "m.gguf"}, {"workload", "w.json"}, {"n_tokens", 3200},
                        {"flags", "-fa on"}, {"cpu", "portable"},    {"changed_most", 0}};
  doc["versions"] = {{{"release", "0.3.35"}, {"capture", "a"}},
                     {{"release", "0.3.36"}, {"capture", "b"}},
                     {{"release", "0.3.37"}, {"capture", "c"}}};
  doc["steps"] = {step("0.3.35", "0.3.36", 3, 1e-3), step("0.3.36", "0.3.37", 0, 0)};
  doc["from_first"] = {step("0.3.35", "0.3.37", 3, 1e-3)};
  doc["to_exact"] = {step("exact", "0.3.35", 9, 3e-3), step("exact", "0.3.36", 7, 2e-3),
                     step("exact", "0.3.37", 7, 2e-3)};
  // A file without the paired test: the means' change, no direction.
  std::string md = HistoryMarkdown(HistoryResult::FromJson(doc));
  EXPECT_NE(md.find("| 0.3.36 | 7 | 0.002 | -0.001 KL, -2 flips |"), std::string::npos) << md;
  // With it: the test's direction and interval.
  doc["to_exact"][1]["from_before"] = {
      {"probes", 100}, {"kl_change_mean", -1e-3}, {"kl_change_ci", {-1.5e-3, -5e-4}}, {"direction", "toward exact"}};
  doc["to_exact"][2]["from_before"] = {
      {"probes", 100}, {"kl_change_mean", 0}, {"kl_change_ci", {0, 0}}, {"direction", "no change"}};
  md = HistoryMarkdown(HistoryResult::FromJson(doc));
  EXPECT_NE(md.find("| 0.3.36 | 7 | 0.002 | toward exact (-0.001 KL per probe, 95% -0.0015 to -0.0005; -2 flips) |"),
            std::string::npos)
      << md;
  EXPECT_NE(md.find("| 0.3.37 | 7 | 0.002 | no change (+0 KL per probe, 95% +0 to +0; +0 flips) |"), std::string::npos)
      << md;
  EXPECT_NE(md.find("| 0.3.35 | 0.3.36 | 100 | 3 | 3.00% | 0 |"), std::string::npos) << md;
  EXPECT_NE(md.find("| 0.3.36 | 0.3.37 | 100 | 0 | 0.00% | 0 | 0 | 0 | 0 | 100 of 100 |"), std::string::npos) << md;
  EXPECT_NE(md.find("Flips of the step that changed most (0.3.35 -> 0.3.36)"), std::string::npos) << md;
  // Forks at that step whose flips all lie where the model reads: none followed, and it says why.
  doc["forks"] = {{"counts", {{"total", 0}, {"branch_points", 0}, {"teacher_forced_only", 3}}}, {"how", "h"}};
  md = HistoryMarkdown(HistoryResult::FromJson(doc));
  EXPECT_NE(md.find("Forks followed at this step: 0 of 0 forkable flips, 3 more teacher-forced only (the model "
                    "reads there); damage 0"),
            std::string::npos)
      << md;
}

// A direction only where the paired interval of the per-probe KL change excludes 0: a shift of
// every probe is one, the same mean change buried in noise is not.
TEST(History, DirectionNeedsThePairedIntervalToExcludeZero) {
  std::map<int32_t, double> before, shifted, noisy, same;
  for (int32_t p = 0; p < 200; ++p) {
    before[p] = 0.01 + 0.001 * (p % 7);
    shifted[p] = before[p] * 0.9;                     // every probe 10% closer
    noisy[p] = before[p] + (p % 2 ? 0.02 : -0.0199);  // mean change +5e-5, spread 0.02
    same[p] = before[p];
  }
  EXPECT_EQ(history::DirectionOf(before, shifted).direction, "toward exact");
  EXPECT_EQ(history::DirectionOf(shifted, before).direction, "away from exact");
  const KlDirection d = history::DirectionOf(before, noisy);
  EXPECT_EQ(d.direction, "no clear direction") << d.mean;
  EXPECT_GT(d.mean, 0);
  EXPECT_LT(d.ci[0], 0);
  EXPECT_EQ(history::DirectionOf(before, same).direction, "no change");
  // Only the probes both hold are paired.
  std::map<int32_t, double> half(before.begin(), std::next(before.begin(), 50));
  EXPECT_EQ(history::DirectionOf(half, shifted).probes, 50);
}

}  // namespace
}  // namespace flipscope
