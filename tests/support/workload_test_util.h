// Helpers shared by the workload stage's tests (test-only).
#pragma once

#include <gtest/gtest.h>
#include <llama.h>

#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "testing/tiny_model.h"
#include "workload/workload.h"

namespace flipscope::testing_workload {

// Routes llama.cpp's log away from the test output (registered once per test binary).
class Env : public ::testing::Environment {
 public:
  void SetUp() override { InitLlamaLogging(false); }
};
inline const auto* const kEnv = ::testing::AddGlobalTestEnvironment(new Env);

inline std::string Write(const std::string& name, const std::string& content) {
  std::string p = fixtures::TempPath("workload-" + name);
  std::ofstream(p, std::ios::binary) << content;
  return p;
}

inline const std::string& TinyModel(bool with_template = true) {
  static const std::string with = [] {
    std::string p = fixtures::TempPath("workload-tiny.gguf");
    EXPECT_TRUE(fixtures::WriteTinyModel(p).ok());
    return p;
  }();
  static const std::string without = [] {
    std::string p = fixtures::TempPath("workload-tiny-notemplate.gguf");
    fixtures::TinyModelOptions o;
    o.chat_template = false;
    EXPECT_TRUE(fixtures::WriteTinyModel(p, o).ok());
    return p;
  }();
  return with_template ? with : without;
}

// The model's vocabulary, loaded here independently of the workload code.
struct Vocab {
  explicit Vocab(const std::string& path) {
    llama_model_params mp = llama_model_default_params();
    mp.vocab_only = true;
    model.reset(llama_model_load_from_file(path.c_str(), mp));
    vocab = llama_model_get_vocab(model.get());
  }
  std::string Decode(const std::vector<int32_t>& tokens, int32_t b, int32_t e) const {
    std::string s;
    char buf[256];
    for (int32_t i = b; i < e; ++i) {
      int n = llama_token_to_piece(vocab, tokens[size_t(i)], buf, sizeof(buf), 0, true);
      s.append(buf, size_t(std::max(n, 0)));
    }
    return s;
  }
  std::vector<int32_t> Tokenize(const std::string& text) const {
    std::vector<int32_t> t(text.size() + 8);
    int n = llama_tokenize(vocab, text.data(), int32_t(text.size()), t.data(), int32_t(t.size()), true, true);
    t.resize(size_t(std::max(n, 0)));
    return t;
  }
  std::unique_ptr<llama_model, void (*)(llama_model*)> model{nullptr, llama_model_free};
  const llama_vocab* vocab = nullptr;
};

inline Result<Workload> Load(const std::string& file, const std::string& model, const std::string& tmpl = "",
                             const std::string& format = "auto") {
  WorkloadOptions o;
  o.chat_template = tmpl;
  // A format name is read where it enters (here, as the CLI reads --format): a bad one is its error.
  FS_ASSIGN_OR_RETURN(o.format, ParseWorkloadFormat(format, "--format"));
  return LoadWorkload(file, model, o);
}

inline std::vector<const Span*> Kind(const Workload& w, const std::string& kind) {
  std::vector<const Span*> out;
  for (const auto& s : w.spans)
    if (NameOf(s.kind) == kind) out.push_back(&s);
  return out;
}

inline const Span* LiteralSpan(const Workload& w, const std::string& text) {
  for (const Span* s : Kind(w, "literal"))
    if (s->label == text) return s;
  return nullptr;
}

inline bool EndsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

inline void ExpectError(const Result<Workload>& r, const std::vector<std::string>& parts) {
  ASSERT_FALSE(r.ok());
  for (const auto& p : parts) EXPECT_NE(r.status().message().find(p), std::string::npos) << r.status().message();
}

}  // namespace flipscope::testing_workload
