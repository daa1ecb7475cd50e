// `tensors` on GGUF pairs with known differences (tiny generated models and the real ones);
// metrics are checked against tests/ref/tensor_diff.py (numpy, gguf-py's own dequantization).
#include <gtest/gtest.h>

#include <fstream>

#include "support/tensors_test_util.h"
#include "util/util.h"

using namespace flipscope;
using namespace flipscope::testutil;

TEST(Tensors, SameWeightsAreIdentical) {
  auto r = Diff(Tiny("t-same-a.gguf"), Tiny("t-same-b.gguf"));
  EXPECT_TRUE(r.Same());
  ASSERT_EQ(r.tensors.size(), 3u + 2 * 9);
  for (const auto& d : r.tensors) {
    EXPECT_EQ(d.state, TensorState::kIdentical) << d.name_a;
    EXPECT_EQ(d.hash_a, d.hash_b);
    EXPECT_NE(d.hash_a, 0u);
  }
  EXPECT_EQ(GroupOf(r, "overall").identical, 21);
  EXPECT_EQ(GroupOf(r, "attention").total, 8);
  EXPECT_EQ(GroupOf(r, "MLP / experts").total, 6);
  EXPECT_EQ(GroupOf(r, "norms").total, 5);
  EXPECT_EQ(GroupOf(r, "token embedding").total, 1);
  EXPECT_EQ(GroupOf(r, "output head").total, 1);
  EXPECT_NE(r.ToText().find("the same weights: 21 of 21"), std::string::npos) << r.ToText();
}

TEST(Tensors, OnePerturbedTensorMatchesNumpy) {
  fixtures::TinyModelOptions o;
  o.perturb_tensor = "blk.1.ffn_up.weight";
  std::string a = Tiny("t-base.gguf"), b = Tiny("t-perturbed.gguf", o);
  auto r = Diff(a, b);
  EXPECT_FALSE(r.Same());
  const TensorDiff& d = Get(r, "blk.1.ffn_up.weight");
  EXPECT_EQ(d.state, TensorState::kDifferent);
  EXPECT_NE(d.hash_a, d.hash_b);
  EXPECT_EQ(d.n_differ, 1);
  EXPECT_GT(d.rel_l2, 0);
  EXPECT_LT(d.cosine, 1);
  ExpectMatchesReference(a, b, d);
  EXPECT_EQ(GroupOf(r, "MLP / experts").identical, 5);
  EXPECT_EQ(GroupOf(r, "MLP / experts").different, 1);
  EXPECT_EQ(GroupOf(r, "overall").identical, 20);
  EXPECT_NE(r.ToText().find("20 of 21"), std::string::npos);
}

TEST(Tensors, QuantizedAgainstF16MatchesNumpy) {
  fixtures::TinyModelOptions q;
  q.matrix_type = "q8_0";
  std::string a = Tiny("t-f16.gguf"), b = Tiny("t-q8.gguf", q);
  auto r = Diff(a, b);
  int different = 0;
  for (const auto& d : r.tensors) {
    if (d.dtype_b == "q8_0") {
      ++different;
      EXPECT_EQ(d.state, TensorState::kDifferent) << d.name_a;
      EXPECT_LT(d.rel_l2, 0.02) << d.name_a;  // 8-bit blocks: well under 1% typical
      EXPECT_GT(d.cosine, 0.999) << d.name_a;
    } else {
      EXPECT_EQ(d.state, TensorState::kIdentical) << d.name_a;  // F32 norms are untouched
    }
  }
  EXPECT_EQ(different, 2 + 2 * 7);
  for (const char* name : {"token_embd.weight", "blk.0.attn_k.weight", "blk.1.ffn_down.weight"})
    ExpectMatchesReference(a, b, Get(r, name));
}

TEST(Tensors, MissingExtraAndUserMap) {
  fixtures::TinyModelOptions o;
  o.drop_tensor = "blk.1.ffn_down.weight";  // the last one drawn: the others keep their values
  o.rename_from = "blk.1.ffn_norm.weight";
  o.rename_to = "blk.1.post_norm.weight";
  std::string a = Tiny("t-full.gguf"), b = Tiny("t-edited.gguf", o);
  auto r = Diff(a, b);
  EXPECT_EQ(Get(r, "blk.1.ffn_down.weight").state, TensorState::kMissing);
  EXPECT_EQ(Get(r, "blk.1.ffn_norm.weight").state, TensorState::kMissing);
  EXPECT_EQ(Get(r, "blk.1.post_norm.weight").state, TensorState::kExtra);
  EXPECT_EQ(GroupOf(r, "overall").missing, 2);
  EXPECT_EQ(GroupOf(r, "overall").extra, 1);
  std::string text = r.ToText();
  EXPECT_NE(text.find("missing in B (2)"), std::string::npos) << text;
  EXPECT_NE(text.find("extra in B (1)"), std::string::npos) << text;

  std::string map = fixtures::TempPath("t-map.json");
  std::ofstream(map) << R"({"blk.1.ffn_norm.weight": "blk.1.post_norm.weight"})";
  auto mapped = Diff(a, b, map);
  const TensorDiff& d = Get(mapped, "blk.1.ffn_norm.weight");
  EXPECT_EQ(d.name_b, "blk.1.post_norm.weight");
  EXPECT_EQ(d.state, TensorState::kIdentical);
  EXPECT_EQ(GroupOf(mapped, "overall").missing, 1);
  EXPECT_EQ(GroupOf(mapped, "overall").extra, 0);

  std::ofstream(map) << R"({"blk.1.ffn_norm.weight": "no.such.tensor"})";
  auto bad = DiffCheckpoints(a, b, {map, 1, Log::Quiet()});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("'no.such.tensor' is not a tensor of"), std::string::npos);
  std::ofstream(map) << "[1, 2]";
  EXPECT_FALSE(DiffCheckpoints(a, b, {map, 1, Log::Quiet()}).ok());
}

TEST(Tensors, ShapeMismatchIsListedNotCompared) {
  fixtures::TinyModelOptions o;
  o.n_ff = 96;
  auto r = Diff(Tiny("t-ff128.gguf"), Tiny("t-ff96.gguf", o));
  for (const char* name : {"blk.0.ffn_gate.weight", "blk.0.ffn_up.weight", "blk.1.ffn_down.weight"}) {
    EXPECT_EQ(Get(r, name).state, TensorState::kShapeMismatch) << name;
    EXPECT_FALSE(Get(r, name).compared);
  }
  EXPECT_EQ(Get(r, "blk.0.ffn_up.weight").shape_a, (std::vector<int64_t>{128, 64}));
  EXPECT_EQ(Get(r, "blk.0.ffn_up.weight").shape_b, (std::vector<int64_t>{96, 64}));
  // Weights are drawn in order, so everything before the first resized tensor is unchanged.
  EXPECT_EQ(Get(r, "blk.0.attn_q.weight").state, TensorState::kIdentical);
  EXPECT_EQ(GroupOf(r, "overall").shape_mismatch, 6);
  EXPECT_NE(r.ToText().find("shape mismatch (not compared) (6)"), std::string::npos);
}

TEST(Tensors, ThreadCountDoesNotChangeResults) {
  fixtures::TinyModelOptions q;
  q.matrix_type = "q8_0";
  std::string a = Tiny("t-th-a.gguf"), b = Tiny("t-th-b.gguf", q);
  auto one = DiffCheckpoints(a, b, {"", 1, Log::Quiet()}), many = DiffCheckpoints(a, b, {"", 7, Log::Quiet()});
  ASSERT_TRUE(one.ok() && many.ok());
  EXPECT_EQ(one->ToJson()["tensors"], many->ToJson()["tensors"]);
}

TEST(Tensors, BadFilesGiveOneClearError) {
  std::string good = Tiny("t-good.gguf");
  auto missing = DiffCheckpoints("/nonexistent/a.gguf", good);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().message(), "/nonexistent/a.gguf: no such file");
  auto bytes = *ReadFile(good);
  std::string cut = fixtures::TempPath("t-cut.gguf");
  for (size_t keep : {bytes.size() - 10, size_t(600), size_t(3)}) {
    std::ofstream(cut, std::ios::binary).write(bytes.data(), std::streamsize(keep));
    auto r = DiffCheckpoints(good, cut, {"", 0, Log::Quiet()});
    ASSERT_FALSE(r.ok()) << keep;
    EXPECT_EQ(r.status().message().rfind(cut, 0), 0u) << r.status().message();
  }
}

TEST(Tensors, RealModels) {
  std::string smol = fixtures::SmolLM2Path(), gemma = fixtures::Gemma3Path();
  ASSERT_FALSE(smol.empty() || gemma.empty()) << "the real models are not in the cache (make test fetches them)";
  auto same = Diff(smol, smol);
  EXPECT_TRUE(same.Same());
  EXPECT_EQ(GroupOf(same, "overall").identical, 272);
  auto other = Diff(smol, gemma);
  EXPECT_FALSE(other.Same());
  auto all = GroupOf(other, "overall");
  EXPECT_EQ(all.identical, 0);
  EXPECT_EQ(all.total - all.extra, 272);
  EXPECT_GT(all.missing, 0);
  EXPECT_GT(all.shape_mismatch, 0);
}
