#include "checkpoint/checkpoint.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "testing/tiny_model.h"
#include "util/util.h"

using namespace flipscope;

TEST(Info, TinyModelFacts) {
  std::string p = fixtures::TempPath("info-tiny.gguf");
  ASSERT_TRUE(fixtures::WriteTinyModel(p).ok());
  auto info = ReadModelInfo(p);
  ASSERT_TRUE(info.ok()) << info.status().message();
  EXPECT_EQ(info->architecture, "llama");
  EXPECT_EQ(info->n_layer, 2);
  EXPECT_EQ(info->n_ctx_train, 512);
  EXPECT_EQ(info->n_vocab, 307);
  EXPECT_EQ(info->tokenizer, "llama");
  // 2 layers x (q 64x64 + k,v 64x32 + o 64x64 + 3 x 64x128 + 2 norms) + embd + out + norm.
  uint64_t per_layer = 64 * 64 * 2 + 64 * 32 * 2 + 3 * 64 * 128 + 2 * 64;
  EXPECT_EQ(info->n_params, 2 * per_layer + 2 * 64 * 307 + 64);
  EXPECT_EQ(info->quant_types.at("f16"), 2 * 7 + 2);
  EXPECT_EQ(info->quant_types.at("f32"), 2 * 2 + 1);
  EXPECT_EQ(info->bos, 1);
  EXPECT_EQ(info->eos, 4);
  EXPECT_TRUE(info->has_chat_template);
  EXPECT_EQ(info->sha256, *Sha256File(p));
  EXPECT_EQ(info->kv_elements_per_token, 2 * 1 * (32 + 32));
}

TEST(Info, NoTemplate) {
  std::string p = fixtures::TempPath("info-notemplate.gguf");
  fixtures::TinyModelOptions o;
  o.chat_template = false;
  ASSERT_TRUE(fixtures::WriteTinyModel(p, o).ok());
  auto info = ReadModelInfo(p);
  ASSERT_TRUE(info.ok());
  EXPECT_FALSE(info->has_chat_template);
}

TEST(Info, BadFilesGiveOneClearError) {
  auto missing = ReadModelInfo("/nonexistent/model.gguf");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().message(), "/nonexistent/model.gguf: no such file");

  std::string text = fixtures::TempPath("not-a-model.gguf");
  std::ofstream(text) << "hello, this is not a model";
  auto bad = ReadModelInfo(text);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("not a GGUF file"), std::string::npos);

  std::string full = fixtures::TempPath("full.gguf"), cut = fixtures::TempPath("truncated.gguf");
  ASSERT_TRUE(fixtures::WriteTinyModel(full).ok());
  auto bytes = *ReadFile(full);
  for (size_t keep : {bytes.size() - 100, size_t(2000), size_t(30)}) {
    std::ofstream(cut, std::ios::binary).write(bytes.data(), std::streamsize(keep));
    auto r = ReadModelInfo(cut);
    ASSERT_FALSE(r.ok()) << keep;
    EXPECT_NE(r.status().message().find(cut), std::string::npos) << r.status().message();
  }
}

// The quantizer writes under a temporary name: a missing output folder is said of the final
// name, before llama.cpp is asked, and nothing is created.
TEST(Requantize, AMissingOutputFolderNamesTheFinalPath) {
  namespace fs = std::filesystem;
  std::string in = fixtures::TempPath("requantize-in.gguf");
  ASSERT_TRUE(fixtures::WriteTinyModel(in).ok());
  const fs::path dir = fixtures::TempPath("requantize-no-folder");
  fs::remove_all(dir);
  const std::string out = (dir / "q8.gguf").string();
  const Status s = Requantize(in, "Q8_0", out);
  EXPECT_EQ(s.message(), out + ": cannot create: its folder " + dir.string() + " does not exist");
  EXPECT_FALSE(fs::exists(dir));
}
