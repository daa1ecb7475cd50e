// One side's pass on the tiny model: forking gives the futures a fresh re-prefill gives, and the
// row check tells a reproduced row from a different one.
#include <gtest/gtest.h>

#include "branch/branch.h"
#include "testing/tiny_model.h"
#include "util/util.h"

using namespace flipscope;

namespace {

Knobs CpuKnobs(const std::string& kv = "f16") {
  Knobs k;
  k.n_threads = 1;
  k.n_ctx = 256;
  k.n_batch = 64;  // several prefill chunks, so forks happen mid-pass
  k.flash_attn = FlashAttn::kOn;
  k.cache_type_k = k.cache_type_v = *FromName<KvCacheType>(kv);
  return k;
}

// The capture's view of a configuration: argmax and digest of each probe row (a plain prefill).
struct Plain {
  std::vector<int32_t> argmax;
  std::vector<uint64_t> digest;
};
Plain PlainRows(const Knobs& k, const std::vector<int32_t>& tokens, const std::vector<int32_t>& probes) {
  Plain p;
  auto e = LlamaEngine::Create(fixtures::DefaultTinyModel(), k);
  EXPECT_TRUE(e.ok()) << e.status().message();
  Status st = (*e)->Prefill(
      tokens, probes,
      [&](const Row& r) {
        p.argmax.push_back(ArgmaxLowest(r.logits));  // the engine leaves it to the sink (-1)
        p.digest.push_back(Digest64(r.logits.data(), r.logits.size_bytes()));
        return Status::Ok();
      },
      nullptr);
  EXPECT_TRUE(st.ok()) << st.message();
  return p;
}

std::vector<int32_t> Probes(int n, int stride) {
  std::vector<int32_t> p;
  for (int i = 0; i < n - 1; i += stride) p.push_back(i);
  return p;
}

}  // namespace

TEST(RunSide, ForkedFuturesEqualReprefilledOnesAndRowsReproduce) {
  auto tokens = fixtures::TinyTokens(200, 53);
  auto probes = Probes(200, 8);
  Knobs k = CpuKnobs();
  Plain plain = PlainRows(k, tokens, probes);
  SideInputs in;
  in.tokens = tokens;
  in.probes = probes;
  in.probe_digests = plain.digest;
  in.points = {16, 64, 72, 136, 192};  // 64 and 72 straddle a chunk boundary; 192 in the last chunk
  for (int32_t p : in.points) in.firsts.push_back(plain.argmax[size_t(p / 8)]);
  in.max_tokens = 12;
  auto e = LlamaEngine::Create(fixtures::DefaultTinyModel(), k, 2);
  ASSERT_TRUE(e.ok()) << e.status().message();
  auto forked = RunSide(**e, in);
  ASSERT_TRUE(forked.ok()) << forked.status().message();
  EXPECT_TRUE(forked->forked);
  in.allow_fork = false;
  auto fresh = RunSide(**e, in);
  ASSERT_TRUE(fresh.ok()) << fresh.status().message();
  EXPECT_FALSE(fresh->forked);
  for (size_t i = 0; i < in.points.size(); ++i) {
    EXPECT_EQ(forked->tokens[i].size(), 12u);
    EXPECT_EQ(forked->tokens[i][0], in.firsts[i]);
    EXPECT_EQ(forked->tokens[i], fresh->tokens[i]) << "point " << in.points[i];
    ASSERT_EQ(forked->probs[i].size(), forked->tokens[i].size());
    for (size_t t = 0; t < forked->probs[i].size(); ++t) {
      EXPECT_GT(forked->probs[i][t], 0.0f);
      EXPECT_LE(forked->probs[i][t], 1.0f);
    }
    EXPECT_TRUE(forked->reproduced[i]);
    EXPECT_TRUE(fresh->reproduced[i]);
  }
  EXPECT_EQ(forked->rows_checked, int64_t(probes.size()));
  EXPECT_EQ(forked->rows_reproduced, int64_t(probes.size()));
}

TEST(RunSide, RowsOfAnotherConfigurationDoNotReproduce) {
  auto tokens = fixtures::TinyTokens(150, 53);
  auto probes = Probes(150, 8);
  Plain q4 = PlainRows(CpuKnobs("q4_0"), tokens, probes);
  Plain f16 = PlainRows(CpuKnobs(), tokens, probes);
  ASSERT_NE(q4.digest, f16.digest);
  SideInputs in;
  in.tokens = tokens;
  in.probes = probes;
  in.probe_digests = q4.digest;  // the f16 engine cannot reproduce the q4_0 capture's rows
  in.points = {40, 80};
  in.firsts = {7, 9};
  in.max_tokens = 4;
  auto e = LlamaEngine::Create(fixtures::DefaultTinyModel(), CpuKnobs(), 2);
  ASSERT_TRUE(e.ok());
  auto pass = RunSide(**e, in);
  ASSERT_TRUE(pass.ok()) << pass.status().message();
  int64_t equal = 0;
  for (size_t i = 0; i < probes.size(); ++i) equal += q4.digest[i] == f16.digest[i];
  EXPECT_EQ(pass->rows_reproduced, equal);
  EXPECT_EQ(pass->reproduced[0], q4.digest[5] == f16.digest[5]);
  EXPECT_EQ(pass->reproduced[1], q4.digest[10] == f16.digest[10]);
}

TEST(RunSide, PointsMustBeProbes) {
  auto tokens = fixtures::TinyTokens(60, 53);
  auto probes = Probes(60, 8);
  SideInputs in;
  in.tokens = tokens;
  in.probes = probes;
  in.points = {9};
  in.firsts = {5};
  auto e = LlamaEngine::Create(fixtures::DefaultTinyModel(), CpuKnobs(), 2);
  ASSERT_TRUE(e.ok());
  auto pass = RunSide(**e, in);
  ASSERT_FALSE(pass.ok());
  EXPECT_EQ(pass.status().message(), "branch point 9 is not a probe position of the capture");
}
