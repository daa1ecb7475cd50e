// Served replay in the engine: the schedule of llama_decode calls, the knob, and the rows of a
// served pass with and without forks.
#include <gtest/gtest.h>

#include <cstring>

#include "engine/engine.h"
#include "engine/llama_internal.h"
#include "testing/tiny_model.h"
#include "util/util.h"

using namespace flipscope;

namespace {

std::vector<std::tuple<int, int, bool>> Calls(const std::vector<ReplayChunk>& chunks) {
  std::vector<std::tuple<int, int, bool>> out;
  for (const auto& c : chunks) out.emplace_back(c.begin, c.end, c.single);
  return out;
}

}  // namespace

TEST(PlanReplay, PrefillIsChunksFromZero) {
  std::vector<uint8_t> none;
  EXPECT_EQ(Calls(PlanReplay(10, 4, none)),
            (std::vector<std::tuple<int, int, bool>>{{0, 4, false}, {4, 8, false}, {8, 10, false}}));
}

TEST(PlanReplay, WrittenPairsAreSingleAndSegmentsChunkFromTheirStart) {
  //                               0  1  2  3  4  5  6  7  8  9
  const std::vector<uint8_t> w = {0, 0, 0, 1, 1, 1, 0, 0, 1, 1};
  // 3 and 4 predict written tokens from written ones; 5 predicts 6 (read); 8 predicts 9; 9 is the
  // last written token, fed with what follows (here nothing: it is prefilled alone).
  auto chunks = PlanReplay(10, 2, w);
  EXPECT_EQ(Calls(chunks), (std::vector<std::tuple<int, int, bool>>{{0, 2, false},
                                                                    {2, 3, false},
                                                                    {3, 4, true},
                                                                    {4, 5, true},
                                                                    {5, 7, false},
                                                                    {7, 8, false},
                                                                    {8, 9, true},
                                                                    {9, 10, false}}));
  const nlohmann::json j = ToJson(ServedPlanOf(chunks, 10, w));
  EXPECT_EQ(j["fed_singly"], 3);
  EXPECT_EQ(j["decode_calls"], 8);
  EXPECT_EQ(j["prefill_segments"], 3);
  EXPECT_EQ(j["prefill_chunks"], 5);
  EXPECT_EQ(j["written_tokens"], 5);
  EXPECT_EQ(j["written_runs"], 2);
}

TEST(PlanReplay, ServedWithNothingWrittenIsThePrefillPlan) {
  const std::vector<uint8_t> w(10, 0);
  EXPECT_EQ(Calls(PlanReplay(10, 4, w)), Calls(PlanReplay(10, 4, {})));
  EXPECT_EQ(ServedPlanOf(PlanReplay(10, 4, w), 10, w).fed_singly, 0);
}

TEST(PlanReplay, AFlagPastTheEndCountsAsNotWritten) {
  // A prefix of a longer transcript (DecodeFresh): its last position is single when the
  // transcript's next token is written.
  const std::vector<uint8_t> w = {0, 1, 1, 1};
  EXPECT_EQ(Calls(PlanReplay(3, 8, w)),
            (std::vector<std::tuple<int, int, bool>>{{0, 1, false}, {1, 2, true}, {2, 3, true}}));
  EXPECT_EQ(Calls(PlanReplay(4, 8, w)),
            (std::vector<std::tuple<int, int, bool>>{{0, 1, false}, {1, 2, true}, {2, 3, true}, {3, 4, false}}));
}

TEST(ReplayKnob, SpellingsJsonFlagsAndLoad) {
  Knobs k;
  EXPECT_EQ(k.ToJson()["replay"], "prefill");
  ASSERT_TRUE(SetKnobFromText(k, *FindKnob("replay"), "served").ok());
  EXPECT_EQ(k.replay, Replay::kServed);
  EXPECT_EQ(k.ToJson()["replay"], "served");
  // Not a llama.cpp setting: a launch command has no flag for it.
  EXPECT_EQ(k.ToFlags().find("replay"), std::string::npos) << k.ToFlags();
  Status bad = SetKnobFromText(k, *FindKnob("replay"), "decode");
  EXPECT_EQ(bad.message(), "'decode' is not prefill or served");
  auto back = Knobs::FromJson(k.ToJson());
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->replay, Replay::kServed);
  EXPECT_EQ(Knobs::FromJson(nlohmann::json::object())->replay, Replay::kPrefill);  // older manifests
  k.load = 2;
  Status st = k.Validate();
  EXPECT_FALSE(st.ok());
  // The library names the fields; the CLI maps a leading field to its flag.
  EXPECT_NE(st.message().find("replay served does not run under load > 0"), std::string::npos) << st.message();
}

TEST(ServedReplay, NeedsToKnowWhatTheModelWrote) {
  Knobs k;
  k.n_threads = 1;
  k.replay = Replay::kServed;
  auto e = LlamaEngine::Create(fixtures::DefaultTinyModel(), k);
  ASSERT_TRUE(e.ok()) << e.status().message();
  std::vector<int32_t> tokens = {1, 5, 9, 13}, probes = {0, 1, 2};
  Status st = (*e)->Prefill(
      tokens, probes, [](const Row&) { return Status::Ok(); }, nullptr);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("--replay served"), std::string::npos) << st.message();
}

// Forks decode in their own sequence after their chunk: a served pass that follows forks hands
// over the rows of one that does not, bit for bit, and records the same schedule.
TEST(ServedReplay, ForksDoNotChangeTheRows) {
  Knobs k;
  k.n_threads = 1;
  k.n_batch = 16;
  k.n_ubatch = 8;
  k.replay = Replay::kServed;
  std::vector<int32_t> tokens, probes;
  std::vector<uint8_t> written;
  for (int i = 0; i < 120; ++i) {
    tokens.push_back(5 + (i * 37) % 290);
    probes.push_back(i);
    written.push_back((i / 20) % 2);  // runs of 20 read, 20 written tokens
  }
  auto rows = [&](bool forks, nlohmann::json* record, int* n_forks) {
    auto e = LlamaEngine::Create(fixtures::DefaultTinyModel(), k, 2);
    EXPECT_TRUE(e.ok()) << e.status().message();
    (*e)->SetWritten(written);
    std::vector<uint64_t> out;
    RowSink sink = [&](const Row& r) {
      out.push_back(Digest64(r.logits.data(), r.logits.size_bytes()));
      return Status::Ok();
    };
    Status st = forks ? (*e)->Prefill({.tokens = tokens,
                                       .probes = probes,
                                       .sink = sink,
                                       .plan = [](const Row& r) { return r.position % 7 == 3 ? 11 : -1; },
                                       .max_tokens = 4,
                                       .planned_sink =
                                           [&](const ForkRequest&, const Future& f) {
                                             ++*n_forks;
                                             EXPECT_FALSE(f.tokens.empty());
                                             return Status::Ok();
                                           }})
                      : (*e)->Prefill(tokens, probes, sink, nullptr);
    EXPECT_TRUE(st.ok()) << st.message();
    const std::optional<ServedPlan> plan = (*e)->ServedRecord();
    EXPECT_TRUE(plan.has_value());
    if (plan) *record = ToJson(*plan);
    return out;
  };
  nlohmann::json plain_record, fork_record;
  int n_forks = 0;
  auto plain = rows(false, &plain_record, &n_forks);
  auto forked = rows(true, &fork_record, &n_forks);
  ASSERT_EQ(plain.size(), tokens.size());
  EXPECT_EQ(plain, forked);
  EXPECT_EQ(n_forks, 17);                     // 3, 10, ..., 115
  EXPECT_EQ(plain_record["fed_singly"], 57);  // 3 runs of 20 written tokens, 19 pairs each
  EXPECT_EQ(plain_record["written_runs"], 3);
  EXPECT_EQ(plain_record["prefill_segments"], 4);  // [0,20) [39,60) [79,100) [119,120)
  EXPECT_EQ(fork_record["fed_singly"], plain_record["fed_singly"]);
  EXPECT_GT(plain_record["decode_s"].get<double>(), 0);
}
