// The layers document: written from a LayersResult and read back to the same bytes, the summary
// counted from the flips, unknown fields kept.
#include "results/layers_result.h"

#include <gtest/gtest.h>

namespace flipscope {
namespace {

using nlohmann::json;

// Two flips over two layers: one born in layer 1's attention (largest growth in its MLP), one
// with no jump; both with the exact reference and token text.
LayersResult TwoFlips() {
  LayersResult r;
  r.base.flags = "-fa on", r.cand.flags = "-fa off", r.base.knobs = {{"flash_attn", "on"}};
  r.architecture = "llama", r.n_layer = 2, r.jump = 4, r.floor = 1e-5;
  r.flips_available = 7, r.flips_compared = 2, r.rows_peak_bytes = 4096;
  r.exact = {{"seconds", 0.5}};
  for (int i = 0; i < 2; ++i) {
    LayersFlip f;
    f.position = 10 + i, f.base_token = 1, f.cand_token = 2 + i;
    f.logits = {0.1 * (i + 1), 0.99};
    for (int l = 0; l < 2; ++l) {
      std::array<RowDiff, 4> a;
      for (size_t k = 0; k < 4; ++k) a[k] = {0.01 * double(l + 1) * double(k + 1) * (i + 1), 0.9};
      f.layers.push_back(a);
    }
    if (i == 0) f.birth = StreamPlace{1, "attention"}, f.birth_rel = 0.02, f.largest_jump = StreamPlace{1, "mlp"};
    LayersFlip::VsExact v{1e-7, 2e-4, {{1e-6, 2e-6, 3e-6, 4e-6}, {5e-6, 6e-6, 7e-6, 8e-6 * (i + 1)}}};
    f.vs_exact = std::array<LayersFlip::VsExact, 2>{v, v};
    f.base_text = "a", f.cand_text = "b";
    r.flips.push_back(f);
  }
  r.max_flips = 2, r.exact_asked = true;
  return r;
}

TEST(LayersResult, WritesReadsAndWritesTheSameBytes) {
  const json once = ToJson(TwoFlips());
  const LayersResult back = LayersResultFromJson(once);
  EXPECT_EQ(ToJson(back).dump(), once.dump());
  EXPECT_TRUE(back.extra.empty()) << back.extra.dump();
  ASSERT_EQ(back.flips.size(), 2u);
  ASSERT_TRUE(back.flips[0].birth && back.flips[0].vs_exact);
  EXPECT_EQ(back.flips[0].birth->block, "attention");
  EXPECT_FALSE(back.flips[1].birth);
  EXPECT_EQ(once["config"]["base"]["knobs"]["flash_attn"], "on");
  EXPECT_EQ(once["max_flips"], 2);
  EXPECT_EQ(once["exact"], true);
}

TEST(LayersResult, TheSummaryIsCountedFromTheFlips) {
  const LayersSummary s = Summarize(TwoFlips());
  EXPECT_EQ(s.flips, 2);
  EXPECT_EQ(s.born_attention, 1);
  EXPECT_EQ(s.born_none, 1);
  EXPECT_EQ(s.born_mlp + s.born_embedding, 0);
  ASSERT_EQ(s.birth_layers.size(), 2u);
  EXPECT_EQ(s.birth_layers[1][0], 1);
  EXPECT_EQ(s.jump_mlp, 1);
  EXPECT_EQ(s.jump_none, 1);
  // The median of two flips is their mean: layer 0's MLP output 0.03 and 0.06.
  EXPECT_DOUBLE_EQ(s.median_rel[2][0], 0.045);
  EXPECT_DOUBLE_EQ(s.median_logits_rel, 0.15);
  ASSERT_TRUE(s.vs_exact_median_layer_out);
  EXPECT_DOUBLE_EQ((*s.vs_exact_median_layer_out)[1][1], 1.2e-5);
  // Written as the document's summary.
  const json j = ToJson(TwoFlips());
  EXPECT_EQ(j["summary"]["births"]["attention"], 1);
  EXPECT_EQ(j["summary"]["birth_layers"][1]["attention"], 1);
  EXPECT_EQ(j["summary"]["largest_jumps"]["mlp"], 1);
}

TEST(LayersResult, ReadingNeverFailsAndKeepsUnknownFields) {
  for (const json& j : {json(), json(3), json{{"flips", "x"}, {"config", 1}}, json{{"flips", {1, {{"layers", 2}}}}}}) {
    const LayersResult r = LayersResultFromJson(j);
    EXPECT_EQ(r.n_layer, 0);
  }
  const LayersResult r = LayersResultFromJson(json{{"later", {1, 2}}});
  EXPECT_EQ(ToJson(r)["later"], json({1, 2}));
}

}  // namespace
}  // namespace flipscope
