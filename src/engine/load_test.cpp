// The load: filler plans (pure) and a loaded prefill on a tiny generated model.
#include <gtest/gtest.h>

#include <set>

#include "engine/engine.h"
#include "testing/tiny_model.h"
#include "util/util.h"

using namespace flipscope;

namespace {

std::vector<FillerSource> Pool() { return {{"a", fixtures::TinyTokens(300)}, {"b", fixtures::TinyTokens(40)}}; }

// The rows at probes (digest per row, in order of arrival) and the engine's load record.
struct Rows {
  std::vector<int32_t> positions;
  std::vector<uint64_t> digests;
  nlohmann::json record;
};
Rows Prefill(const Knobs& k, const std::vector<int32_t>& tokens, const std::vector<int32_t>& probes) {
  auto e = LlamaEngine::Create(fixtures::DefaultTinyModel(), k);
  EXPECT_TRUE(e.ok()) << e.status().message();
  Rows out;
  Status st = (*e)->Prefill(
      tokens, probes,
      [&](const Row& r) {
        out.positions.push_back(r.position);
        out.digests.push_back(Digest64(r.logits.data(), r.logits.size_bytes()));
        return Status::Ok();
      },
      nullptr);
  EXPECT_TRUE(st.ok()) << st.message();
  const std::optional<EngineLoadRecord> record = (*e)->LoadRecord();
  out.record = record ? ToJson(*record) : nlohmann::json();
  return out;
}

Knobs Small(int load) {
  Knobs k;
  k.n_threads = 1;
  k.n_ctx = 512;
  k.n_batch = 24;  // several shared batches over a short workload
  k.n_ubatch = 16;
  k.load = load;
  k.load_seed = 7;
  return k;
}

}  // namespace

TEST(FillerPlan, IsAPureFunctionOfItsArgumentsAndStaysInBounds) {
  const auto pool = Pool();
  std::set<int> lengths, sources;
  bool warm_even = true, some_prefill_only = false;
  for (int slot = 1; slot <= 8; ++slot)
    for (int index = 0; index < 6; ++index) {
      FillerJob j = PlanFillerJob(3, slot, index, pool, 64);
      FillerJob again = PlanFillerJob(3, slot, index, pool, 64);
      EXPECT_EQ(j.Record(pool), again.Record(pool));
      const int src_len = int(pool[size_t(j.source)].tokens.size());
      EXPECT_GE(j.length, 2);
      EXPECT_LE(j.length + j.generate, 64);
      EXPECT_LE(j.offset + j.length, src_len);
      EXPECT_GE(j.chunk, 16);
      EXPECT_LE(j.chunk, 256);
      if (index == 0)
        warm_even &= j.warm == (slot % 2 == 0) && (!j.warm || j.generate > 0);
      else
        EXPECT_FALSE(j.warm);
      some_prefill_only |= j.generate == 0;
      lengths.insert(j.length);
      sources.insert(j.source);
    }
  EXPECT_TRUE(warm_even);
  EXPECT_TRUE(some_prefill_only);
  EXPECT_GT(lengths.size(), 10u);  // varied lengths
  EXPECT_EQ(sources.size(), 2u);
  // Another seed, other fillers.
  EXPECT_NE(PlanFillerJob(3, 1, 0, pool, 64).Record(pool), PlanFillerJob(4, 1, 0, pool, 64).Record(pool));
}

TEST(FillerPlan, CellsShareTheContextLeftByTheMeasuredSequence) {
  EXPECT_EQ(*FillerCells(0, 100, 90, 0), 0);
  EXPECT_EQ(*FillerCells(3, 1000, 400, 0), 200);
  EXPECT_EQ(*FillerCells(3, 1000, 400, 300), 100);
  auto tight = FillerCells(15, 1000, 900, 0);
  ASSERT_FALSE(tight.ok());
  EXPECT_NE(tight.status().message().find("raise -c or lower --load"), std::string::npos) << tight.status().message();
}

TEST(Knobs, LoadIsAKnobButNotALlamaCppFlag) {
  Knobs k;
  k.load = 3;
  auto back = Knobs::FromJson(k.ToJson());
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->load, 3);
  EXPECT_EQ(k.ToFlags(), Knobs().ToFlags());
  k.load = 65;
  EXPECT_FALSE(k.Validate().ok());
  ASSERT_NE(FindKnob("load"), nullptr);
}

TEST(LoadedPrefill, LoadZeroIsTheAlonePathAndLoadedRowsComeAtExactlyTheProbes) {
  const auto tokens = fixtures::TinyTokens(150);
  const std::vector<int32_t> probes = {0, 5, 23, 24, 47, 100, 148};
  Knobs alone = Small(0);
  Rows plain = Prefill(alone, tokens, probes);
  EXPECT_TRUE(plain.record.is_null());
  // Knobs read from JSON that never mentions the load run the same path.
  nlohmann::json j = alone.ToJson();
  j.erase("load");
  j.erase("load_seed");
  EXPECT_EQ(Prefill(*Knobs::FromJson(j), tokens, probes).digests, plain.digests);

  Rows loaded = Prefill(Small(3), tokens, probes);
  EXPECT_EQ(loaded.positions, probes);
  ASSERT_EQ(loaded.digests.size(), probes.size());
  // Reproducible: the same seed, the same fillers, the same rows.
  Rows again = Prefill(Small(3), tokens, probes);
  EXPECT_EQ(again.digests, loaded.digests);
  EXPECT_EQ(again.record, loaded.record);

  const auto& rec = loaded.record;
  ASSERT_TRUE(rec.is_object());
  EXPECT_EQ(rec["fillers"], 3);
  // Every shared batch carried the measured chunk, and fillers beside it.
  int64_t measured = 0, with_fillers = 0, decoding = 0;
  for (const auto& b : rec["batches"]) {
    measured += b[1].get<int64_t>();
    with_fillers += b[0].get<int>() + b[2].get<int>() > 0;
    decoding += b[0].get<int>();
  }
  EXPECT_EQ(measured, 150);
  EXPECT_EQ(with_fillers, int64_t(rec["batches"].size()));
  EXPECT_GT(decoding, 0);  // the warm fillers decode while the measured sequence is prefilled
}
