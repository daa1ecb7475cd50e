// Safetensors checkpoints (single, sharded) and the cross-format path: tiny GGUF models converted
// to Hugging Face-style safetensors by tests/ref/gguf_to_safetensors.py (gguf-py + numpy), metrics
// checked against tests/ref/tensor_diff.py.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "support/tensors_test_util.h"

using namespace flipscope;
using namespace flipscope::testutil;

namespace {

std::string TinyOf(const std::string& name, const std::string& matrix_type) {
  fixtures::TinyModelOptions o;
  o.matrix_type = matrix_type;
  return Tiny(name, o);
}

// The GGUF converted to Hugging Face names and layout by tests/ref/gguf_to_safetensors.py.
std::string Convert(const std::string& gguf, const std::string& name, const std::string& args) {
  std::string out = fixtures::TempPath(name);
  std::filesystem::remove_all(out);
  Shell(fmt::format("{} {} {} {}", Ref("gguf_to_safetensors.py"), gguf, out, args));
  return out;
}

bool IsQk(const TensorDiff& d) {
  return d.name_a.find("attn_q.") != std::string::npos || d.name_a.find("attn_k.") != std::string::npos ||
         d.name_a.find("q_proj") != std::string::npos || d.name_a.find("k_proj") != std::string::npos;
}

}  // namespace

TEST(Safetensors, ConvertedF32HoldsTheSameWeights) {
  std::string gguf = TinyOf("s-f32.gguf", "f32"), st = Convert(gguf, "s-f32.safetensors", "--dtype f32");
  for (bool gguf_first : {true, false}) {
    auto r = gguf_first ? Diff(gguf, st) : Diff(st, gguf);
    EXPECT_TRUE(r.Same()) << r.ToText();
    EXPECT_EQ(r.tensors.size(), 21u);  // every tensor paired through llama.cpp's names
    for (const auto& d : r.tensors) {
      // Q/K rows are in Hugging Face order in the safetensors and permuted in the GGUF.
      EXPECT_EQ(d.state, IsQk(d) ? TensorState::kSameValues : TensorState::kIdentical) << d.name_a;
      EXPECT_EQ(d.qk_unpermuted, IsQk(d)) << d.name_a;
      if (IsQk(d)) {
        EXPECT_GT(d.rel_l2_raw, 0.5) << d.name_a;  // as stored, the rows do not line up
      }
    }
  }
  auto r = Diff(gguf, st);
  EXPECT_EQ(Get(r, "blk.1.ffn_norm.weight").name_b, "model.layers.1.post_attention_layernorm.weight");
  EXPECT_EQ(Get(r, "token_embd.weight").name_b, "model.embed_tokens.weight");
  EXPECT_EQ(Get(r, "output.weight").name_b, "lm_head.weight");
  EXPECT_NE(Get(r, "blk.0.attn_q.weight").note.find("permuted Q/K"), std::string::npos);
  EXPECT_NE(r.ToText().find("equal after decoding, stored differently (4)"), std::string::npos) << r.ToText();
}

TEST(Safetensors, KeptPermutationIsByteIdentical) {
  std::string gguf = TinyOf("s-f16.gguf", "f16"),
              st = Convert(gguf, "s-f16-perm.safetensors", "--dtype f16 --keep-permutation");
  auto r = Diff(gguf, st);
  for (const auto& d : r.tensors) {
    // F16 in both formats is one encoding; the F32 norms were written as F16 here.
    EXPECT_EQ(d.state, d.dtype_a == "f32" ? TensorState::kDifferent : TensorState::kIdentical) << d.name_a;
    EXPECT_FALSE(d.qk_unpermuted);
  }
}

TEST(Safetensors, Bf16AgainstF32MatchesNumpy) {
  std::string gguf = TinyOf("s-f32b.gguf", "f32"), st = Convert(gguf, "s-bf16.safetensors", "--dtype bf16");
  auto r = Diff(gguf, st);
  EXPECT_FALSE(r.Same());
  for (const auto& d : r.tensors) {
    EXPECT_EQ(d.state, TensorState::kDifferent) << d.name_a;
    EXPECT_LT(d.rel_l2, 1.0 / 256) << d.name_a;  // BF16 keeps 8 significant bits
  }
  auto check = [&](const std::string& name, const std::string& extra) {
    ExpectMatchesReference(gguf, st, Get(r, name), extra);
  };
  check("token_embd.weight", "");
  check("blk.1.ffn_norm.weight", "");
  check("blk.0.attn_q.weight", "--permute-b 2");  // tiny model: 2 heads, 1 KV head
  check("blk.1.attn_k.weight", "--permute-b 1");
  EXPECT_TRUE(Get(r, "blk.0.attn_q.weight").qk_unpermuted);
}

TEST(Safetensors, ShardedIndexAndFolder) {
  std::string gguf = TinyOf("s-shard.gguf", "f16");
  std::string single = Convert(gguf, "s-single.safetensors", "--dtype f16");
  std::string dir = Convert(gguf, "s-sharded", "--dtype f16 --shards 3");
  auto c = OpenCheckpoint(dir);
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->files.size(), 3u);
  EXPECT_EQ(c->tensors.size(), 21u);
  auto r = Diff(single, dir + "/model.safetensors.index.json");
  EXPECT_TRUE(r.Same());
  for (const auto& d : r.tensors) EXPECT_EQ(d.state, TensorState::kIdentical) << d.name_a;
  // Across formats the sharded checkpoint compares exactly as the single file does.
  auto via_single = Diff(gguf, single).ToJson()["tensors"], via_shards = Diff(gguf, dir).ToJson()["tensors"];
  ASSERT_EQ(via_single.size(), via_shards.size());
  for (size_t i = 0; i < via_single.size(); ++i)
    for (const char* k : {"name_b", "state", "xxh3_b", "rel_l2", "cosine"})
      EXPECT_EQ(via_single[i][k], via_shards[i][k]) << k;
}

namespace {

// Writes a safetensors file from a header and a data section.
std::string WriteRaw(const std::string& name, const std::string& header, size_t data_bytes) {
  std::string p = fixtures::TempPath(name);
  std::ofstream f(p, std::ios::binary);
  uint64_t n = header.size();
  f.write(reinterpret_cast<const char*>(&n), 8);
  f << header << std::string(data_bytes, '\0');
  return p;
}

std::string ErrorOf(const std::string& path) {
  auto r = OpenCheckpoint(path);
  return r.ok() ? "" : r.status().message();
}

}  // namespace

TEST(Safetensors, CorruptFilesGiveOneClearError) {
  std::string tiny = WriteRaw("s-short.safetensors", "", 0);
  std::filesystem::resize_file(tiny, 5);
  EXPECT_EQ(ErrorOf(tiny), tiny + ": not a safetensors file (shorter than its 8-byte header length)");
  std::string ok_header = R"({"w": {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 24]}})";
  EXPECT_EQ(ErrorOf(WriteRaw("s-ok.safetensors", ok_header, 24)), "");
  struct Case {
    const char* file;
    std::string header;
    size_t data;
    const char* expect;
  };
  const Case cases[] = {
      {"s-trunc.safetensors", ok_header, 20, "tensor 'w': truncated: data ends at byte"},
      {"s-json.safetensors", "{not json", 0, "header is not a JSON object"},
      {"s-dtype.safetensors", R"({"w": {"dtype": "F7", "shape": [1], "data_offsets": [0, 1]}})", 1,
       "unknown dtype 'F7'"},
      {"s-size.safetensors", R"({"w": {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 20]}})", 24,
       "holds 20 bytes, its dtype and shape need 24"},
      {"s-neg.safetensors", R"({"w": {"dtype": "F32", "shape": [-2], "data_offsets": [0, 8]}})", 8, "negative"},
      {"s-keys.safetensors", R"({"w": {"dtype": "F32"}})", 0, "lacks dtype, shape or data_offsets"},
  };
  for (const auto& c : cases) {
    std::string p = WriteRaw(c.file, c.header, c.data), e = ErrorOf(p);
    EXPECT_EQ(e.rfind(p + ": ", 0), 0u) << e;
    EXPECT_NE(e.find(c.expect), std::string::npos) << e;
  }
  // A header length past the end of the file.
  std::string big = fixtures::TempPath("s-big.safetensors");
  std::ofstream(big, std::ios::binary) << std::string("\xff\xff\xff\x00\x00\x00\x00\x00{}", 10);
  EXPECT_NE(ErrorOf(big).find("not a safetensors file or truncated"), std::string::npos) << ErrorOf(big);
  // Sharded: a shard that is missing, and a tensor the index puts in the wrong shard.
  std::string dir = fixtures::TempPath("s-badindex");
  std::filesystem::create_directories(dir);
  std::filesystem::copy_file(WriteRaw("s-shard1.safetensors", ok_header, 24), dir + "/a.safetensors",
                             std::filesystem::copy_options::overwrite_existing);
  std::ofstream(dir + "/model.safetensors.index.json")
      << R"({"weight_map": {"w": "a.safetensors", "v": "b.safetensors"}})";
  EXPECT_NE(ErrorOf(dir).find("b.safetensors: no such file"), std::string::npos) << ErrorOf(dir);
  std::ofstream(dir + "/model.safetensors.index.json")
      << R"({"weight_map": {"w": "a.safetensors", "v": "a.safetensors"}})";
  EXPECT_NE(ErrorOf(dir).find("weight_map puts 'v' in a.safetensors, which does not hold it"), std::string::npos);
  std::ofstream(dir + "/model.safetensors.index.json") << R"({"metadata": {}})";
  EXPECT_NE(ErrorOf(dir).find("not a safetensors index"), std::string::npos);
  std::string empty = fixtures::TempPath("s-empty-dir");
  std::filesystem::create_directories(empty);
  EXPECT_NE(ErrorOf(empty).find("folder holds neither"), std::string::npos);
}

TEST(Safetensors, RealModelConvertedFromGguf) {
  std::string smol = fixtures::SmolLM2Path();
  ASSERT_FALSE(smol.empty()) << "SmolLM2 is not in the cache (make test fetches it)";
  std::string st = Convert(smol, "s-smollm2-f32.safetensors", "--dtype f32");
  auto r = Diff(smol, st);
  std::filesystem::remove(st);
  EXPECT_EQ(r.tensors.size(), 272u) << r.ToText();  // paired one to one through llama.cpp's names
  int qk = 0;
  for (const auto& d : r.tensors) {
    // F32 tensors are copied; quantized ones were decoded by gguf-py's numpy code, and match
    // ggml's decoding exactly or to float rounding.
    if (d.dtype_a == "f32")
      EXPECT_EQ(d.state, TensorState::kIdentical) << d.name_a;
    else
      EXPECT_LT(d.rel_l2, 1e-6) << d.name_a;
    qk += d.qk_unpermuted;
  }
  EXPECT_EQ(qk, 2 * 30);  // SmolLM2 is a llama: every layer's Q and K were permuted
}

TEST(Safetensors, ReshapedTensorIsAShapeMismatch) {
  std::string a = WriteRaw("s-shape-a.safetensors",
                           R"({"w": {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 24]},
                               "b": {"dtype": "F32", "shape": [1, 4], "data_offsets": [24, 40]}})",
                           40);
  std::string b = WriteRaw("s-shape-b.safetensors",
                           R"({"w": {"dtype": "F32", "shape": [3, 2], "data_offsets": [0, 24]},
                               "b": {"dtype": "F32", "shape": [4], "data_offsets": [24, 40]}})",
                           40);
  auto r = Diff(a, b);
  EXPECT_EQ(Get(r, "w").state, TensorState::kShapeMismatch);
  EXPECT_NE(Get(r, "w").note.find("same number of elements"), std::string::npos);
  EXPECT_EQ(Get(r, "b").state, TensorState::kIdentical);  // [1, 4] and [4] are one shape
}
