// The branch stage end to end on tiny-model captures: f16 against a q4_0 KV cache flips the
// greedy token at some probes; both futures are decoded there and checked independently.
#include "branch/branch.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <set>

#include "capture/capture.h"
#include "support/branch_captures.h"
#include "support/branches.h"
#include "testing/futures.h"
#include "testing/tiny_model.h"
#include "util/util.h"

using namespace flipscope;
using flipscope::fixtures::BranchKnobs;
using flipscope::fixtures::CapturePair;
using flipscope::fixtures::Captures;
using flipscope::fixtures::PythonCheck;
using flipscope::fixtures::Request;
using flipscope::fixtures::RunBranchesJson;
using flipscope::fixtures::UserThenAssistant;
using flipscope::fixtures::WriteCapture;
namespace fs = std::filesystem;

TEST(RunBranches, FlipsOfAQuantizedKvCacheCheckedIndependently) {
  auto out = RunBranchesJson(Request());
  ASSERT_TRUE(out.ok()) << out.status().message();
  const auto& records = (*out)["records"];
  ASSERT_GT(records.size(), 0u) << "f16 against q4_0 should flip somewhere on 120 probes";
  EXPECT_EQ((*out)["config"]["branch_points"], records.size());
  EXPECT_TRUE((*out)["config"]["base"]["forked"].get<bool>());
  // Same machine, same knobs: every recomputed row is the captured one.
  EXPECT_EQ((*out)["config"]["base"]["rows_reproduced"], (*out)["config"]["base"]["rows_checked"]);
  EXPECT_EQ((*out)["config"]["cand"]["rows_reproduced"], (*out)["config"]["cand"]["rows_checked"]);
  for (const auto& r : records) EXPECT_TRUE(r["reproduced"].get<bool>()) << r["position"];
  std::string said;
  EXPECT_EQ(PythonCheck(*out, &said), 0) << said;
}

// Forks only where the model writes: a user message then an assistant one; flips predicting a
// user token are teacher-forced only, counted apart, and never use up --max-branches.
TEST(RunBranches, ForksOnlyWhereTheModelWritesTheNextToken) {
  const nlohmann::json spans = UserThenAssistant();
  const CapturePair chat{fixtures::TempPath("branch-chat-base.safetensors"),
                         fixtures::TempPath("branch-chat-cand.safetensors")};
  WriteCapture(chat.base, fixtures::DefaultTinyModel(), BranchKnobs("f16"), fixtures::TinyTokens(240), 2, spans);
  WriteCapture(chat.cand, fixtures::DefaultTinyModel(), BranchKnobs("q4_0"), fixtures::TinyTokens(240), 2, spans);
  BranchRequest r = Request();
  r.base_path = chat.base;
  r.cand_path = chat.cand;
  r.options.fork_where = ForkScope::kAll;
  auto all = RunBranchesJson(r);
  ASSERT_TRUE(all.ok()) << all.status().message();
  std::vector<int> reads, writes;  // flip positions whose next token is the user's / the assistant's
  for (const auto& rec : (*all)["records"])
    (rec["position"].get<int>() + 1 < 120 ? reads : writes).push_back(rec["position"]);
  ASSERT_FALSE(reads.empty()) << "the tiny model must flip in the user's message for this test to mean anything";
  ASSERT_GE(writes.size(), 2u) << "and twice in the assistant's";
  EXPECT_EQ((*all)["counts"]["teacher_forced_only"], 0);

  r.options.fork_where = ForkScope::kAssistant;
  r.options.max_branches = int(writes.size()) - 1;  // the first N of the forkable flips, not of all flips
  auto out = RunBranchesJson(r);
  ASSERT_TRUE(out.ok()) << out.status().message();
  std::vector<int> forked, read;
  for (const auto& rec : (*out)["records"]) forked.push_back(rec["position"]);
  for (const auto& e : (*out)["config"]["teacher_forced_only"]) read.push_back(e["position"]);
  EXPECT_EQ(forked, std::vector<int>(writes.begin(), writes.end() - 1));
  EXPECT_EQ(read, reads);
  EXPECT_EQ((*out)["config"]["teacher_forced_only"][0]["span"], "message #1 user");
  EXPECT_EQ((*out)["counts"]["teacher_forced_only"], reads.size());
  EXPECT_EQ((*out)["counts"]["branch_points"], writes.size());
  EXPECT_EQ((*out)["counts"]["total"], writes.size() - 1);
  const std::string text = SummaryText(BranchCountsFromJson((*out)["counts"]));
  EXPECT_NE(text.find(fmt::format("{} branches: the first {} of {} branch points", writes.size() - 1, writes.size() - 1,
                                  writes.size())),
            std::string::npos)
      << text;
  EXPECT_NE(text.find(fmt::format("{:>6} teacher-forced only", reads.size())), std::string::npos) << text;
  std::string said;
  EXPECT_EQ(PythonCheck(*out, &said, chat), 0) << said;
  // A bad name is refused where it is read (the CLI reads --fork-where, the experiment fork_where).
  EXPECT_EQ(ParseName<ForkScope>("tools", "fork_where").status().message(),
            "fork_where must be assistant or all, not 'tools'");
}

// A served capture is followed on its own schedule: the fresh pass feeds what the model wrote
// one token per decode step again, so its rows are the served capture's bit for bit (a prefill
// pass would not reproduce them) and the forks start from the served cache.
TEST(RunBranches, FollowsAServedCaptureOnItsOwnSchedule) {
  const nlohmann::json spans = UserThenAssistant();
  const std::string base = fixtures::TempPath("branch-served-base.safetensors"),
                    prefill = fixtures::TempPath("branch-served-prefill.safetensors"),
                    served = fixtures::TempPath("branch-served-cand.safetensors");
  Knobs k = BranchKnobs("q4_0");
  WriteCapture(base, fixtures::DefaultTinyModel(), BranchKnobs("f16"), fixtures::TinyTokens(240), 2, spans);
  WriteCapture(prefill, fixtures::DefaultTinyModel(), k, fixtures::TinyTokens(240), 2, spans);
  k.replay = Replay::kServed;
  WriteCapture(served, fixtures::DefaultTinyModel(), k, fixtures::TinyTokens(240), 2, spans);
  auto a = CaptureReader::Open(prefill), b = CaptureReader::Open(served);
  ASSERT_TRUE(a.ok() && b.ok());
  const auto da = (*a)->digest(), db = (*b)->digest();
  ASSERT_FALSE(std::equal(da.begin(), da.end(), db.begin(), db.end()))
      << "served and prefill rows must differ for this test to tell the schedules apart";

  BranchRequest r = Request();
  r.base_path = base;
  r.cand_path = served;
  r.options.fork_where = ForkScope::kAll;
  auto out = RunBranchesJson(r);
  ASSERT_TRUE(out.ok()) << out.status().message();
  const auto& cand = (*out)["config"]["cand"];
  EXPECT_GT(cand["rows_checked"].get<int>(), 0);
  EXPECT_EQ(cand["rows_reproduced"], cand["rows_checked"]);
  EXPECT_EQ(cand["knobs"]["replay"], "served");
  ASSERT_FALSE((*out)["records"].empty());
  EXPECT_EQ(cand["branches_reproduced"], (*out)["records"].size());
}

// The fallback for models whose cache cannot be forked re-prefills each prefix. Its batch shapes
// differ from the teacher-forced pass, so the kernels may round differently (repacked weights,
// AMX, tiled attention); what holds on every kernel path is ExpectSameGreedyFuture's guarantee.
TEST(RunBranches, ReprefillingGivesTheForkedRecords) {
  auto forked = RunBranchesJson(Request(6));
  BranchRequest slow = Request(6);
  slow.options.allow_fork = false;
  auto fresh = RunBranchesJson(slow);
  ASSERT_TRUE(forked.ok()) << forked.status().message();
  ASSERT_TRUE(fresh.ok()) << fresh.status().message();
  EXPECT_TRUE((*forked)["config"]["base"]["forked"].get<bool>());
  EXPECT_FALSE((*fresh)["config"]["base"]["forked"].get<bool>());
  const auto& a = (*forked)["records"];
  const auto& b = (*fresh)["records"];
  ASSERT_EQ(a.size(), b.size());
  ASSERT_GT(a.size(), 0u);
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i]["position"], b[i]["position"]);
    for (const char* side : {"base_future", "cand_future"})
      fixtures::ExpectSameGreedyFuture(
          a[i][side]["tokens"].get<std::vector<int>>(), a[i][side]["probs"].get<std::vector<double>>(),
          b[i][side]["tokens"].get<std::vector<int>>(), b[i][side]["probs"].get<std::vector<double>>(),
          a[i]["position"].dump() + " " + side);
  }
}

TEST(RunBranches, RangesAndMaxBranches) {
  BranchRequest r = Request(4);
  r.options.at = BranchAt::kRanges;
  r.options.ranges = "10-19,200-201";
  auto out = RunBranchesJson(r);
  ASSERT_TRUE(out.ok()) << out.status().message();
  std::vector<int> got;
  for (const auto& rec : (*out)["records"]) got.push_back(rec["position"]);
  EXPECT_EQ(got, (std::vector<int>{10, 12, 14, 16, 18, 200}));  // the probed ones (stride 2)
  ASSERT_EQ((*out)["config"]["warnings"].size(), 1u);
  EXPECT_NE((*out)["config"]["warnings"][0].get<std::string>().find("6 of the 12 positions"), std::string::npos);
  r.options.max_branches = 2;
  out = RunBranchesJson(r);
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)["records"].size(), 2u);
  EXPECT_EQ((*out)["config"]["branch_points"], 6);
  EXPECT_EQ((*out)["counts"]["total"], 2);
  std::string said;
  EXPECT_EQ(PythonCheck(*out, &said), 0) << said;
}

// A history's path: captures of token ids (no spans in their manifests), the transcript given
// with the request, and each side's futures decoded while it was captured (OwnForks, as
// `capture --fork-at` does in each version's worker): the same records as the branch stage's own
// pass over the same captures and transcript; with decoded_only, no pass of this binary's.
TEST(RunBranches, TakesTheTranscriptAndEachSidesFuturesItIsGiven) {
  const std::string dir = fixtures::TempPath("branch-given");
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string tokens = dir + "/work.tokens";
  std::ofstream(tokens) << fmt::format("{}\n", fmt::join(fixtures::TinyTokens(240), " "));
  auto capture = [&](const std::string& kv, std::set<int32_t> points, std::shared_ptr<DecodedFutures> out) {
    CaptureRequest req;
    req.model_path = fixtures::DefaultTinyModel();
    req.workload_path = tokens;
    req.workload.format = WorkloadFormat::kTokens;
    req.out_path = dir + "/" + kv + ".safetensors";
    req.knobs = BranchKnobs(kv);
    req.plan.stride = 2;
    req.log.bars = false;
    if (!points.empty()) req.forks = OwnForks(std::move(points), 10, out);
    auto m = RunCapture(req);
    EXPECT_TRUE(m.ok()) << m.status().message();
    return req.out_path;
  };
  BranchRequest r = Request();
  r.base_path = capture("f16", {}, nullptr);
  r.cand_path = capture("q4_0", {}, nullptr);
  const nlohmann::json spans = UserThenAssistant();
  ManifestWorkload t;
  t.spans = *SpansFromJson(spans);
  t.tool_call_form = "<tool_call> in content";
  r.transcript = t;
  r.options.max_call_tokens = 0;  // as the workers decode: max_tokens each, free
  r.options.decoding = DecodingMode::kFree;
  auto own = RunBranchesJson(r);  // this binary's own pass on each side
  ASSERT_TRUE(own.ok()) << own.status().message();
  std::set<int32_t> points;
  for (const auto& rec : (*own)["records"]) points.insert(rec["position"].get<int32_t>());
  // Forks only in the assistant's message: the spans given were used (the manifests have none).
  ASSERT_GE(points.size(), 2u)
      << "f16 against q4_0 must flip in the assistant's message for this test to mean anything";
  EXPECT_GE(*points.begin() + 1, 120);
  EXPECT_GT((*own)["counts"]["teacher_forced_only"].get<int>(), 0);

  r.decoded_only = true;  // a history: never this binary's pass
  auto refused = RunBranchesJson(r);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("no futures decoded by its own version"), std::string::npos)
      << refused.status().message();

  for (int side = 0; side < 2; ++side) {
    auto d = std::make_shared<DecodedFutures>();
    const std::string path = capture(side == 0 ? "f16" : "q4_0", points, d);
    ASSERT_EQ(d->at.size(), points.size());
    ASSERT_TRUE(WriteDecoded(path, path, *d).ok());
    r.decoded[side] = ReadDecoded(path, path);
    ASSERT_TRUE(r.decoded[side]) << path;
    EXPECT_EQ(r.decoded[side]->at.size(), points.size());
  }
  auto given = RunBranchesJson(r);
  ASSERT_TRUE(given.ok()) << given.status().message();
  for (const char* side : {"base", "cand"})
    EXPECT_FALSE((*given)["config"][side]["decoded_during_capture"].is_null()) << side;
  ASSERT_EQ((*given)["records"].size(), (*own)["records"].size());
  for (size_t i = 0; i < (*own)["records"].size(); ++i) {
    const auto &a = (*own)["records"][i], &b = (*given)["records"][i];
    EXPECT_EQ(a["position"], b["position"]);
    EXPECT_EQ(a["base_future"]["tokens"], b["base_future"]["tokens"]) << a["position"];
    EXPECT_EQ(a["cand_future"]["tokens"], b["cand_future"]["tokens"]) << a["position"];
    EXPECT_EQ(a["verdict"], b["verdict"]);
    EXPECT_EQ(a["outcome"], b["outcome"]);
  }
  EXPECT_EQ((*given)["counts"], (*own)["counts"]);
}
