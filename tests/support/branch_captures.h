// Test helper (tests/support): tiny-model captures for the branch stage's tests, written the way the
// capture stage writes them, and the independent numpy check of its records.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "branch/branch.h"
#include "capture/capture.h"
#include "testing/tiny_model.h"
#include "util/util.h"

namespace flipscope::fixtures {

inline Knobs BranchKnobs(const std::string& kv) {
  Knobs k;
  k.n_threads = 1;
  k.n_ctx = 256;
  k.n_batch = 64;
  k.flash_attn = FlashAttn::kOn;
  k.cache_type_k = k.cache_type_v = *FromName<KvCacheType>(kv);
  return k;
}

// Writes a capture the way the capture stage does: a plain teacher-forced prefill, F32 rows.
// `spans`: the workload's spans for the manifest (none: a plain-text workload).
inline void WriteCapture(const std::string& path, const std::string& model, const Knobs& k,
                         const std::vector<int32_t>& tokens, int stride, const nlohmann::json& spans = nullptr) {
  auto e = LlamaEngine::Create(model, k);
  ASSERT_TRUE(e.ok()) << e.status().message();
  CaptureLayout layout;
  layout.tokens = tokens;
  for (int32_t p = 0; p + 1 < int32_t(tokens.size()); p += stride) layout.positions.push_back(p);
  layout.n_vocab = (*e)->n_vocab();
  nlohmann::json manifest = {
      {"model", {{"path", model}, {"sha256", *Sha256File(model)}}},
      {"engine", ToJson((*e)->Describe())},
      {"knobs", ToJson((*e)->Describe())["knobs"]},
      {"workload", {{"tool_call_form", "<tool_call> in content"}, {"tools", nlohmann::json::array()}}}};
  if (!spans.is_null()) manifest["workload"]["spans"] = spans;
  if (k.replay == Replay::kServed) {  // the capture stage's schedule: what the model wrote is fed singly
    auto sp = SpansFromJson(spans);
    ASSERT_TRUE(sp.ok()) << sp.status().message();
    std::vector<uint8_t> written(tokens.size());
    for (size_t p = 0; p < written.size(); ++p) written[p] = ModelWrites(*sp, int32_t(p)) ? 1 : 0;
    (*e)->SetWritten(std::move(written));
  }
  auto w = CaptureWriter::Create(path, layout, manifest);
  ASSERT_TRUE(w.ok()) << w.status().message();
  Status st = (*e)->Prefill(
      tokens, layout.positions, [&](const Row& r) { return (*w)->WriteRow(r.index, r.logits); }, nullptr);
  ASSERT_TRUE(st.ok()) << st.message();
  ASSERT_TRUE((*w)->Commit().ok());
}

struct CapturePair {
  std::string base, cand;
};
inline const CapturePair& Captures() {
  static CapturePair p = [] {
    CapturePair x{fixtures::TempPath("branch-base.safetensors"), fixtures::TempPath("branch-cand.safetensors")};
    WriteCapture(x.base, fixtures::DefaultTinyModel(), BranchKnobs("f16"), fixtures::TinyTokens(240), 2);
    WriteCapture(x.cand, fixtures::DefaultTinyModel(), BranchKnobs("q4_0"), fixtures::TinyTokens(240), 2);
    return x;
  }();
  return p;
}

inline BranchRequest Request(int max_tokens = 10) {
  BranchRequest r;
  r.base_path = Captures().base;
  r.cand_path = Captures().cand;
  r.options.max_tokens = max_tokens;
  r.options.log.bars = false;
  return r;
}

// Runs the independent numpy check over the captures and the output; returns its exit status and output.
inline int PythonCheck(const nlohmann::json& out, std::string* said, const CapturePair& captures = Captures()) {
  // Beside the captures: tests over other captures run their checks at the same time.
  std::string json_path = captures.base + ".check.json", log = captures.base + ".check.log";
  std::ofstream(json_path) << out.dump(1);
  std::string cmd = std::string(FLIPSCOPE_PYTHON) + " " + FLIPSCOPE_SOURCE_DIR + "/tests/ref/branch_check.py " +
                    captures.base + " " + captures.cand + " " + json_path + " > " + log + " 2>&1";
  int rc = std::system(cmd.c_str());
  *said = *ReadFile(log);
  return rc;
}

// The spans of a 240-token chat: a user message, then the assistant's (from position 120).
inline nlohmann::json UserThenAssistant() {
  return {
      {{"kind", "message"}, {"begin", 0}, {"end", 120}, {"index", 1}, {"role", "user"}, {"label", "message #1 user"}},
      {{"kind", "message"},
       {"begin", 120},
       {"end", 240},
       {"index", 2},
       {"role", "assistant"},
       {"label", "message #2 assistant"}}};
}

}  // namespace flipscope::fixtures
