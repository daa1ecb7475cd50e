// Test helpers for tensors_test and safetensors_ckpt_test: tiny GGUF models, the reference
// scripts of tests/ref (numpy, gguf-py) and a quiet DiffCheckpoints.
#pragma once

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>

#include "checkpoint/checkpoint.h"
#include "testing/tiny_model.h"

namespace flipscope::testutil {

// A tiny model written to the test temp folder.
inline std::string Tiny(const std::string& name, const fixtures::TinyModelOptions& o = {}) {
  std::string p = fixtures::TempPath(name);
  EXPECT_TRUE(fixtures::WriteTinyModel(p, o).ok());
  return p;
}

// Runs a shell command and returns its standard output; a non-zero exit fails the test.
inline std::string Shell(const std::string& cmd) {
  std::string out;
  if (FILE* p = popen(cmd.c_str(), "r")) {
    char buf[4096];
    while (size_t n = fread(buf, 1, sizeof(buf), p)) out.append(buf, n);
    EXPECT_EQ(pclose(p), 0) << cmd;
  }
  return out;
}

// "python tests/ref/<script>" with the test interpreter (numpy, gguf, safetensors).
inline std::string Ref(const std::string& script) {
  return fmt::format("{} {}/tests/ref/{}", FLIPSCOPE_PYTHON, FLIPSCOPE_SOURCE_DIR, script);
}

// DiffCheckpoints without progress bars, optionally with a name map; failures fail the test.
inline TensorsReport Diff(const std::string& a, const std::string& b, const std::string& map = "") {
  auto r = DiffCheckpoints(a, b, {map, 0, Log::Quiet()});
  EXPECT_TRUE(r.ok()) << r.status().message();
  return r.ok() ? *r : TensorsReport{};
}

// The diff of name, or a failed test and an empty entry.
inline const TensorDiff& Get(const TensorsReport& r, const std::string& name) {
  static const TensorDiff none;
  const TensorDiff* d = r.Find(name);
  EXPECT_TRUE(d) << "no tensor " << name;
  return d ? *d : none;
}

// Checks a pair's metrics against tests/ref/tensor_diff.py run over the same files.
inline void ExpectMatchesReference(const std::string& a, const std::string& b, const TensorDiff& d,
                                   const std::string& extra = "") {
  auto ref = nlohmann::json::parse(
      Shell(fmt::format("{} {} {} {} {} {}", Ref("tensor_diff.py"), a, d.name_a, b, d.name_b, extra)), nullptr, false);
  ASSERT_TRUE(ref.is_object()) << "reference script failed for " << d.name_a;
  ASSERT_TRUE(d.compared) << d.name_a;
  EXPECT_NEAR(d.rel_l2, ref["rel_l2"].get<double>(), 1e-9 * d.rel_l2 + 1e-15) << d.name_a;
  EXPECT_NEAR(d.max_abs, ref["max_abs"].get<double>(), 1e-12) << d.name_a;
  EXPECT_NEAR(d.cosine, ref["cosine"].get<double>(), 1e-12) << d.name_a;
  EXPECT_EQ(d.n_differ, ref["n_differ"].get<int64_t>()) << d.name_a;
}

// The group of a component, or a failed test and an empty group.
inline TensorsReport::Group GroupOf(const TensorsReport& r, const std::string& component) {
  for (const auto& g : r.Groups())
    if (g.component == component) return g;
  ADD_FAILURE() << "no group " << component;
  return {};
}

}  // namespace flipscope::testutil
