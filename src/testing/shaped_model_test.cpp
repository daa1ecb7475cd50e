// Models of any shape, streamed: the same bytes for any thread count, files the exact engine loads
// and runs, and shapes a block format cannot hold refused in one line.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <iterator>

#include "exact/exact.h"
#include "testing/tiny_model.h"

namespace flipscope::fixtures {
namespace {

std::string Bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

TinyModelOptions Small(const std::string& arch, const std::string& type) {
  TinyModelOptions o;
  o.arch = arch;
  o.matrix_type = type;
  o.n_vocab = 700;  // the tiny vocabulary padded with seed tokens
  o.output_scale = 4;
  return o;
}

TEST(ShapedModel, SameBytesForAnyThreadCountAndTheExactEngineRunsIt) {
  for (const char* arch : {"llama", "qwen35"}) {
    const TinyModelOptions o = Small(arch, "q8_0");
    const std::string a = TempPath(std::string("shaped-") + arch + "-1.gguf"),
                      b = TempPath(std::string("shaped-") + arch + "-3.gguf");
    ASSERT_TRUE(WriteShapedModel(a, o, 1).ok());
    ASSERT_TRUE(WriteShapedModel(b, o, 3).ok());
    const std::string bytes = Bytes(a);
    EXPECT_EQ(bytes, Bytes(b)) << arch;
    TinyModelOptions other = o;
    other.seed = 2;
    ASSERT_TRUE(WriteShapedModel(b, other, 3).ok());
    EXPECT_NE(bytes, Bytes(b)) << "the seed must change the weights";
    auto e = ExactEngine::Create(a, ExactOptions{.n_threads = 1});
    ASSERT_TRUE(e.ok()) << e.status().message();
    EXPECT_EQ((*e)->n_vocab(), 700);
    const std::vector<int32_t> tokens = {1, 300, 650, 12, 699, 5, 6, 7}, probes = {6, 7};
    int rows = 0;
    ASSERT_TRUE((*e)->PrefillF64(tokens, probes,
                                 [&](const RowF64& r) {
                                   for (double x : r.logits) EXPECT_TRUE(std::isfinite(x));
                                   ++rows;
                                   return Status::Ok();
                                 },
                                 nullptr)
                    .ok());
    EXPECT_EQ(rows, 2);
  }
}

TEST(ShapedModel, BlockFormatsAndTypes) {
  TinyModelOptions o = Small("llama", "q4_k");
  const std::string path = TempPath("shaped-q4k.gguf");
  Status st = WriteShapedModel(path, o, 2);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("do not split into q4_K blocks"), std::string::npos) << st.message();
  o.n_embd = 256, o.n_ff = 256;  // whole Q4_K blocks
  ASSERT_TRUE(WriteShapedModel(path, o, 2).ok());
  EXPECT_TRUE(ExactEngine::Create(path, ExactOptions{.n_threads = 1}).ok());
  o.matrix_type = "bf16";
  ASSERT_TRUE(WriteShapedModel(path, o, 2).ok());
  EXPECT_TRUE(ExactEngine::Create(path, ExactOptions{.n_threads = 1}).ok());
  o.matrix_type = "q3_k";
  EXPECT_EQ(WriteShapedModel(path, o, 2).code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace flipscope::fixtures
