// The branch stage end to end on tiny-model captures: f16 against a q4_0 KV cache flips the
// greedy token at some probes; both futures are decoded there and checked independently.
#include "branch/branch.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <set>

#include "capture/capture.h"
#include "support/branches.h"
#include "testing/futures.h"
#include "testing/tiny_model.h"
#include "util/util.h"

using namespace flipscope;
using flipscope::fixtures::RunBranchesJson;
namespace fs = std::filesystem;

namespace {

Knobs BranchKnobs(const std::string& kv) {
  Knobs k;
  k.n_threads = 1;
  k.n_ctx = 256;
  k.n_batch = 64;
  k.flash_attn = FlashAttn::kOn;
  k.cache_type_k = k.cache_type_v = *FromName<KvCacheType>(kv);
  return k;
}

// Writes a capture the way the capture stage does: a plain teacher-forced prefill, F32 rows.
// `spans`: the workload's spans for the manifest (none: a plain-text workload).
void WriteCapture(const std::string& path, const std::string& model, const Knobs& k, const std::vector<int32_t>& tokens,
                  int stride, const nlohmann::json& spans = nullptr) {
  auto e = LlamaEngine::Create(model, k);
  ASSERT_TRUE(e.ok()) << e.status().message();
  CaptureLayout layout;
  layout.tokens = tokens;
  for (int32_t p = 0; p + 1 < int32_t(tokens.size()); p += stride) layout.positions.push_back(p);
  layout.n_vocab = (*e)->n_vocab();
  nlohmann::json manifest = {
      {"model", {{"path", model}, {"sha256", *Sha256File(model)}}},
      {"engine", ToJson((*e)->Describe())},
      {"knobs", ToJson((*e)->Describe())["knobs"]},
      {"workload", {{"tool_call_form", "<tool_call> in content"}, {"tools", nlohmann::json::array()}}}};
  if (!spans.is_null()) manifest["workload"]["spans"] = spans;
  if (k.replay == Replay::kServed) {  // the capture stage's schedule: what the model wrote is fed singly
    auto sp = SpansFromJson(spans);
    ASSERT_TRUE(sp.ok()) << sp.status().message();
    std::vector<uint8_t> written(tokens.size());
    for (size_t p = 0; p < written.size(); ++p) written[p] = ModelWrites(*sp, int32_t(p)) ? 1 : 0;
    (*e)->SetWritten(std::move(written));
  }
  auto w = CaptureWriter::Create(path, layout, manifest);
  ASSERT_TRUE(w.ok()) << w.status().message();
  Status st = (*e)->Prefill(
      tokens, layout.positions, [&](const Row& r) { return (*w)->WriteRow(r.index, r.logits); }, nullptr);
  ASSERT_TRUE(st.ok()) << st.message();
  ASSERT_TRUE((*w)->Commit().ok());
}

struct Pair {
  std::string base, cand;
};
const Pair& Captures() {
  static Pair p = [] {
    Pair x{fixtures::TempPath("branch-base.safetensors"), fixtures::TempPath("branch-cand.safetensors")};
    WriteCapture(x.base, fixtures::DefaultTinyModel(), BranchKnobs("f16"), fixtures::TinyTokens(240), 2);
    WriteCapture(x.cand, fixtures::DefaultTinyModel(), BranchKnobs("q4_0"), fixtures::TinyTokens(240), 2);
    return x;
  }();
  return p;
}

BranchRequest Request(int max_tokens = 10) {
  BranchRequest r;
  r.base_path = Captures().base;
  r.cand_path = Captures().cand;
  r.options.max_tokens = max_tokens;
  r.options.log.bars = false;
  return r;
}

// Runs the independent numpy check over the captures and the output; returns its exit status and output.
int PythonCheck(const nlohmann::json& out, std::string* said, const Pair& captures = Captures()) {
  // Beside the captures: tests over other captures run their checks at the same time.
  std::string json_path = captures.base + ".check.json", log = captures.base + ".check.log";
  std::ofstream(json_path) << out.dump(1);
  std::string cmd = std::string(FLIPSCOPE_PYTHON) + " " + FLIPSCOPE_SOURCE_DIR + "/tests/ref/branch_check.py " +
                    captures.base + " " + captures.cand + " " + json_path + " > " + log + " 2>&1";
  int rc = std::system(cmd.c_str());
  *said = *ReadFile(log);
  return rc;
}

// The spans of a 240-token chat: a user message, then the assistant's (from position 120).
nlohmann::json UserThenAssistant() {
  return {
      {{"kind", "message"}, {"begin", 0}, {"end", 120}, {"index", 1}, {"role", "user"}, {"label", "message #1 user"}},
      {{"kind", "message"},
       {"begin", 120},
       {"end", 240},
       {"index", 2},
       {"role", "assistant"},
       {"label", "message #2 assistant"}}};
}

}  // namespace

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
  const Pair chat{fixtures::TempPath("branch-chat-base.safetensors"),
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

// `flipscope branch` writes the records the library returns (the run is deterministic), says how
// many, and refuses an output folder that does not exist in one line.
TEST(BranchCommand, WritesTheLibraryRecordsAndRefusesAMissingFolder) {
  auto out = RunBranchesJson(Request());
  ASSERT_TRUE(out.ok()) << out.status().message();
  const std::string exe = std::string(FLIPSCOPE_BINARY_DIR) + "/bin/flipscope";
  ASSERT_TRUE(fs::exists(exe)) << exe << " is not built";
  const std::string json_path = fixtures::TempPath("branch-cli.json"), log = fixtures::TempPath("branch-cli.log");
  std::string cmd = "FLIPSCOPE_NO_PROGRESS=1 " + exe + " branch -q " + Captures().base + " " + Captures().cand +
                    " -o " + json_path + " --max-tokens 10 > " + log + " 2>&1";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << *ReadFile(log);
  const size_t n = (*out)["records"].size();
  EXPECT_NE(ReadFile(log)->find(std::to_string(n) + " branches"), std::string::npos) << *ReadFile(log);
  auto written = nlohmann::json::parse(*ReadFile(json_path));
  auto library = nlohmann::json::parse(out->dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
  EXPECT_EQ(written["records"], library["records"]);
  cmd =
      exe + " branch -q " + Captures().base + " " + Captures().cand + " -o /nonexistent/dir/x.json > " + log + " 2>&1";
  EXPECT_NE(std::system(cmd.c_str()), 0);
  EXPECT_EQ(*ReadFile(log), "flipscope: error: /nonexistent/dir/x.json: the folder /nonexistent/dir does not exist\n");
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

TEST(RunBranches, ChangedOrMissingModelNamesTheExpectedHash) {
  std::string model = fixtures::TempPath("branch-moved.gguf");
  fs::copy_file(fixtures::DefaultTinyModel(), model, fs::copy_options::overwrite_existing);
  std::string sha = *Sha256File(model);
  std::string base = fixtures::TempPath("branch-moved.safetensors");
  WriteCapture(base, model, BranchKnobs("f16"), fixtures::TinyTokens(40), 4);
  BranchRequest r = Request();
  r.base_path = base;
  r.cand_path = base;
  fixtures::TinyModelOptions other;
  other.seed = 7;
  ASSERT_TRUE(fixtures::WriteTinyModel(model, other).ok());
  auto out = RunBranchesJson(r);
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().message(),
            base + ": the model file " + model + " has changed: sha256 " + *Sha256File(model) + ", expected " + sha);
  fs::remove(model);
  out = RunBranchesJson(r);
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().message(),
            base + ": the model file " + model + " cannot be read (expected sha256 " + sha + ")");
}

TEST(RunBranches, RefusesCapturesOfDifferentTokensAndBadOptions) {
  std::string other = fixtures::TempPath("branch-other.safetensors");
  WriteCapture(other, fixtures::DefaultTinyModel(), BranchKnobs("f16"), fixtures::TinyTokens(240, 41), 2);
  BranchRequest r = Request();
  r.cand_path = other;
  auto out = RunBranchesJson(r);
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find(other + ": fed different tokens than " + Captures().base +
                                        " (first difference at position 1: "),
            std::string::npos)
      << out.status().message();
  r = Request();
  // A bad name is refused where it is read (the CLI reads --at).
  EXPECT_EQ(ParseName<BranchAt>("everywhere", "at").status().message(), "at must be flips or ranges, not 'everywhere'");
  r.options.at = BranchAt::kRanges;
  EXPECT_EQ(RunBranchesJson(r).status().message(), "at ranges needs ranges A-B,... or tool_calls");
  r.options.ranges = "9-3";
  EXPECT_EQ(RunBranchesJson(r).status().message(), "ranges: '9-3' is not tool_calls or a range A-B (0 <= A <= B)");
  // The same rule as capture's --full: a range that starts past the last scored position is an error.
  r.options.ranges = "5000-6000";
  EXPECT_NE(RunBranchesJson(r).status().message().find("ranges: range 5000-6000 starts past the workload's last scored "
                                                       "position "),
            std::string::npos)
      << RunBranchesJson(r).status().message();
  r = Request();
  r.base_path = "/nonexistent/base.safetensors";
  EXPECT_NE(RunBranchesJson(r).status().message().find("/nonexistent/base.safetensors"), std::string::npos);
}

TEST(Summary, CountsEveryVerdictAndOutcome) {
  nlohmann::json records = nlohmann::json::array(
      {{{"verdict", "benign"}, {"outcome", "benign"}, {"outcome_kind", nullptr}},
       {{"verdict", "invalid_tool_call"}, {"outcome", "both_fail"}, {"outcome_kind", "invalid_tool_call"}},
       {{"verdict", "invalid_tool_call"}, {"outcome", "damage"}, {"outcome_kind", "invalid_tool_call"}},
       {{"verdict", "literal_mutated"}, {"outcome", "repair"}, {"outcome_kind", "literal_mutated"}}});
  std::vector<ForkRecord> typed;
  for (const auto& r : records) typed.push_back(ForkRecordFromJson(r));
  auto c = ToJson(CountVerdicts(typed));
  nlohmann::json kinds = {{"invalid_tool_call", 0}, {"literal_mutated", 0}, {"wrong_command", 0}};
  nlohmann::json damage = kinds, repair = kinds;
  damage["total"] = damage["invalid_tool_call"] = 1;
  repair["total"] = repair["literal_mutated"] = 1;
  EXPECT_EQ(
      c, (nlohmann::json{
             {"invalid_tool_call", 2},
             {"literal_mutated", 1},
             {"wrong_command", 0},
             {"divergent", 0},
             {"benign", 1},
             {"total", 4},
             {"outcomes",
              {{"damage", damage}, {"repair", repair}, {"both_fail", 1}, {"different_but_fine", 0}, {"benign", 1}}}}));
  std::string text = SummaryText(BranchCountsFromJson(c));
  EXPECT_NE(text.find("4 branches"), std::string::npos);
  EXPECT_NE(
      text.find("     1 damage: the candidate breaks what the reference's future got right (1 invalid_tool_call)"),
      std::string::npos)
      << text;
  EXPECT_NE(text.find("     1 repair: the candidate gets right what the reference's future broke (1 literal_mutated)"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("     2 structurally invalid branches"), std::string::npos) << text;
}

// The one rule for branch points: positions both captures probe, where the argmax differ, in order.
TEST(Flips, OnlyCommonProbesWhereTheGreedyTokensDiffer) {
  const std::vector<int32_t> pb = {0, 2, 4, 6, 8}, ab = {1, 2, 3, 4, 5};
  const std::vector<int32_t> pc = {2, 3, 4, 8, 9}, ac = {9, 7, 3, 6, 1};
  auto f = Flips(pb, ab, pc, ac);
  ASSERT_EQ(f.size(), 2u);  // 2 (2 vs 9) and 8 (5 vs 6); 4 agrees, 0/3/6/9 are probed by one side only
  EXPECT_EQ(f[0].position, 2);
  EXPECT_EQ(f[0].base_token, 2);
  EXPECT_EQ(f[0].cand_token, 9);
  EXPECT_EQ(f[1].position, 8);
  EXPECT_TRUE(Flips(pb, ab, pb, ab).empty());
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
