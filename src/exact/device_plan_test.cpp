// The device pass's memory plan (device_plan.cpp) without a GPU: the attention tiling, the chunk,
// the buffers of the published shapes at their lengths, and the refusal when they do not fit.
#include <gtest/gtest.h>

#include "exact/device.h"

namespace flipscope::exact {
namespace {

constexpr double kGiB = double(int64_t(1) << 30);
const uint8_t kSomeBytes[1] = {0};  // a weight's data only has to be non-null for the plan

Weight W(int64_t rows, int64_t cols) { return Weight{GGML_TYPE_Q4_K, kSomeBytes, rows, cols}; }

// Qwen 3.6 27B's shape (tiny_model --shape qwen36-27b): 64 layers, every fourth full attention
// with a gated Q, the others Gated DeltaNet.
struct Qwen27 {
  Hparams hp;
  std::vector<Layer> layers;
  Qwen27() {
    hp.arch = "qwen35", hp.n_layer = 64, hp.n_embd = 5120, hp.n_head = 24, hp.n_head_kv = 4;
    hp.head_k = hp.head_v = 256, hp.n_ff = 17408, hp.n_vocab = 248320, hp.attn_gate = true;
    hp.ssm_state = 128, hp.ssm_k_heads = 16, hp.ssm_v_heads = 48, hp.ssm_conv = 4;
    for (int il = 0; il < 64; ++il) {
      Layer L;
      L.gate = W(17408, 5120), L.up = W(17408, 5120), L.down = W(5120, 17408);
      if (il % 4 == 3) {
        L.wq = W(2 * 6144, 5120), L.wk = W(1024, 5120), L.wv = W(1024, 5120), L.wo = W(5120, 6144);
      } else {
        L.recurrent = true;
        L.ssm_qkv = W(10240, 5120), L.ssm_z = W(6144, 5120), L.ssm_beta = W(48, 5120);
        L.ssm_alpha = W(48, 5120), L.ssm_out = W(5120, 6144);
      }
      layers.push_back(L);
    }
  }
};

TEST(DevicePlan, AttentionBlocksKeepTheScoresNearOneGiB) {
  const Qwen27 m;
  ExactOptions o;
  // 2^27 doubles of scores (1 GiB) per block, between 256 and 4096 queries.
  EXPECT_EQ(PlanDevicePass(m.hp, m.layers, 8192, 1, o).query_block, 4096);
  EXPECT_EQ(PlanDevicePass(m.hp, m.layers, 100000, 1, o).query_block, 1342);
  EXPECT_EQ(PlanDevicePass(m.hp, m.layers, 1000000, 1, o).query_block, 256);
  const DevicePlan p = PlanDevicePass(m.hp, m.layers, 100000, 1, o);
  EXPECT_EQ(p.scores, 1342 * 100000);
  EXPECT_LE(double(p.scores * 8) / kGiB, 1.0);
  // A sequence shorter than a block holds n x n scores; an asked block is kept.
  EXPECT_EQ(PlanDevicePass(m.hp, m.layers, 600, 1, o).scores, 600 * 600);
  o.device_query_block = 128;
  EXPECT_EQ(PlanDevicePass(m.hp, m.layers, 600, 1, o).query_block, 128);
  EXPECT_EQ(PlanDevicePass(m.hp, m.layers, 600, 1, o).scores, 128 * 600);
}

TEST(DevicePlan, ChunksAreClampedToTheSequence) {
  const Qwen27 m;
  ExactOptions o;
  EXPECT_EQ(PlanDevicePass(m.hp, m.layers, 600, 1, o).chunk, 600);
  EXPECT_EQ(PlanDevicePass(m.hp, m.layers, 100000, 1, o).chunk, 8192);
  o.device_chunk = 0;
  EXPECT_EQ(PlanDevicePass(m.hp, m.layers, 100000, 1, o).chunk, 1);
}

TEST(DevicePlan, TheWidestLayerIsHeldTwice) {
  const Qwen27 m;
  const DevicePlan p = PlanDevicePass(m.hp, m.layers, 1000, 1, ExactOptions{});
  // The MLP (3 x 17408 x 5120) and the DeltaNet mixer (10240 + 6144 + 48 + 48 rows of 5120, and
  // 5120 x 6144) outweigh the attention layer's 2 x 6144 + 2 x 1024 rows and its output.
  const int64_t mlp = 3 * 17408 * 5120, deltanet = (10240 + 6144 + 96) * 5120 + 5120 * 6144;
  EXPECT_EQ(p.layer, mlp + deltanet);
  EXPECT_NEAR(double(p.layer * 8) / kGiB, 2.85, 0.01);
}

TEST(DevicePlan, TwentySevenBOverOneHundredKTokensFitsOneCard) {
  const Qwen27 m;
  const int64_t n = 100000;
  const DevicePlan p = PlanDevicePass(m.hp, m.layers, n, 25000, ExactOptions{});
  // Per token: the residual (5120), Q and its gate (6144 each), K and V (1024 each), the output (6144).
  EXPECT_EQ(p.h + p.q + p.qgate + p.k + p.v + p.attn, n * (5120 + 3 * 6144 + 2 * 1024));
  EXPECT_EQ(p.output_floats, int64_t(248320) * 5120);
  const double gib = double(p.Bytes()) / kGiB;
  EXPECT_GT(gib, 30);  // 19 GiB of activations, 6 of layers, 4.7 of output matrix, chunks
  EXPECT_LT(gib, 45);  // under an H100's 80 GB with room
  EXPECT_TRUE(CheckDeviceMemory(p, n, int64_t(78 * kGiB), "CUDA0").ok());
  const Status s = CheckDeviceMemory(p, n, int64_t(24 * kGiB), "CUDA0");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("device CUDA0: a pass over 100000 tokens needs"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("24.0 GiB is free"), std::string::npos) << s.message();
  EXPECT_EQ(s.message().find('\n'), std::string::npos);
}

TEST(DevicePlan, ADenseModelHasNoRecurrentOrExpertBuffers) {
  Hparams hp;
  hp.n_embd = 4096, hp.n_head = 32, hp.n_head_kv = 8, hp.head_k = hp.head_v = 128, hp.n_ff = 14336;
  hp.n_vocab = 128256;
  std::vector<Layer> layers(32);
  for (Layer& L : layers)
    L.wq = W(4096, 4096), L.wk = W(1024, 4096), L.wv = W(1024, 4096), L.wo = W(4096, 4096), L.gate = W(14336, 4096),
    L.up = W(14336, 4096), L.down = W(4096, 14336);
  const DevicePlan p = PlanDevicePass(hp, layers, 32768, 8192, ExactOptions{});
  EXPECT_EQ(p.mixed + p.z + p.state + p.conv + p.dn_out + p.xs + p.ed + p.qgate, 0);
  EXPECT_EQ(p.layer, 2 * 4096 * 4096 + 2 * 1024 * 4096 + 3 * 14336 * 4096);
  // Probe rows come back at once; the logits go 64 probes (probe_group) at a time.
  EXPECT_EQ(p.rows, 8192 * 4096 + 1);
  EXPECT_EQ(p.logits, 64 * 128256 + 1);
}

}  // namespace
}  // namespace flipscope::exact
