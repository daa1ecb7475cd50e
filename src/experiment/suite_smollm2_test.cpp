// A suite end to end on the real SmolLM2: two sessions of examples/suite/ (one weighted twice)
// under a 2 x 2 matrix (flash attention x KV cache), run by the CLI. Every per-session row and
// pooled figure (flip rate, KL, kinds of text and depth windows, weighted) is recomputed from the
// sessions' captures with numpy (tests/ref/suite_check.py), the terminal agrees with suite.json,
// and headless Chromium finds the per-session tables, the kinds and the depth charts on the page.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "results/suite_result.h"
#include "support/experiment_test_util.h"
#include "util/util.h"

namespace flipscope {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// Runs a command; its exit status and its output (stdout and stderr).
std::pair<int, std::string> Shell(const std::string& cmd) {
  std::string out;
  FILE* p = popen((cmd + " 2>&1").c_str(), "r");
  if (!p) return {-1, "popen failed"};
  char buf[4096];
  while (size_t n = fread(buf, 1, sizeof(buf), p)) out.append(buf, n);
  const int st = pclose(p);
  return {WIFEXITED(st) ? WEXITSTATUS(st) : -1, out};
}

// The checker's one JSON line in its output; null when none.
json JsonLine(const std::string& out) {
  size_t at = 0;
  for (size_t end; (end = out.find('\n', at)) != std::string::npos; at = end + 1)
    if (out[at] == '{') return json::parse(out.substr(at, end - at), nullptr, false);
  return nullptr;
}

TEST(SuiteSmolLM2, PooledFiguresAreTheCapturesAndThePageShowsThem) {
  const std::string model = fixtures::SmolLM2Path();
  if (model.empty()) GTEST_SKIP() << "SmolLM2 is not in the cache";
  const fs::path dir = fs::path(fixtures::MakeExperiment("suite-smollm2", "")).parent_path();
  const std::string examples = std::string(FLIPSCOPE_SOURCE_DIR) + "/examples/suite/";
  std::ofstream(dir / "exp.toml") << "name = \"two sessions\"\nmodel = \"" << model << "\"\nwindow = 256\n"
                                  << "[[session]]\nworkload = \"" << examples << "support-desk.json\"\nweight = 2\n"
                                  << "[[session]]\nworkload = \"" << examples << "code-edit.json\"\n"
                                  << "[probe]\nstride = 16\n[baseline]\nflash_attn = \"on\"\nthreads = 2\nrepeats = 2\n"
                                  << "[[axis]]\nknob = \"flash_attn\"\nvalues = [\"on\", \"off\"]\n"
                                  << "[[axis]]\nname = \"kv\"\nknob = [\"cache_type_k\", \"cache_type_v\"]\n"
                                  << "values = [\"f16\", \"q8_0\"]\n";
  const fs::path out = dir / "out";
  auto [rc, terminal] =
      Shell(fmt::format("cd '{}' && '{}' run exp.toml -o '{}'", dir.string(), FLIPSCOPE_CLI, out.string()));
  ASSERT_EQ(rc, 0) << terminal;
  auto read = ReadSuiteFile((out / "suite.json").string());
  ASSERT_TRUE(read.ok()) << read.status().message();
  const SuiteResults& s = *read;
  ASSERT_EQ(s.sessions.size(), 2u);
  EXPECT_EQ(s.sessions[0].name, "support-desk");
  EXPECT_EQ(s.sessions[0].weight, 2);
  EXPECT_EQ(s.matrix_baseline_cell, "fa-on+kv-f16");
  // Two cells measured in both sessions, one (a quantized V cache without flash attention)
  // refused in both: a row per session each, the refused one with its reason.
  for (const char* name : {"fa-on+kv-q8_0", "fa-off+kv-f16"}) {
    const SuiteConfig* c = s.Config(name);
    ASSERT_NE(c, nullptr) << name;
    ASSERT_EQ(c->sessions.size(), 2u) << name;
    EXPECT_EQ(c->sessions[1].session, "code-edit");
    EXPECT_GT(c->sessions[0].probes, 40);
    EXPECT_FALSE(c->kinds.empty());
    EXPECT_FALSE(c->depth.empty());
    EXPECT_NE(terminal.find(fmt::format("{:<24} flip rate", name)), std::string::npos) << terminal;
  }
  const SuiteConfig* refused = s.Config("fa-off+kv-q8_0");
  ASSERT_NE(refused, nullptr);
  EXPECT_EQ(refused->status, "refused");
  EXPECT_EQ(refused->reason.rfind("in every session: ", 0), 0u) << refused->reason;
  ASSERT_TRUE(s.recipe);
  EXPECT_EQ(s.recipe->Row("fa-off+kv-q8_0"), nullptr);
  EXPECT_NE(terminal.find("Recommended on the pooled figures: " + s.recipe->recommended + " — "), std::string::npos)
      << terminal;
  // Every figure again from the captures, independently.
  auto [crc, check] = Shell(
      fmt::format("'{}' '{}/tests/ref/suite_check.py' '{}'", FLIPSCOPE_PYTHON, FLIPSCOPE_SOURCE_DIR, out.string()));
  EXPECT_EQ(crc, 0) << check;
  const json checked = JsonLine(check);
  ASSERT_TRUE(checked.is_object()) << check;
  EXPECT_EQ(checked["configs"], json::array({"fa-on+kv-q8_0", "fa-off+kv-f16"}));
  EXPECT_GT(checked["kind_rows"].get<int>(), 6);
  EXPECT_GT(checked["depth_rows"].get<int>(), 6);
  // The page, as a reader's browser lays it out.
  auto [brc, page] = Shell(fmt::format("'{}' '{}/tests/ref/check_report_chromium.py' '{}' --page suite",
                                       FLIPSCOPE_PYTHON, FLIPSCOPE_SOURCE_DIR, (out / "report.html").string()));
  EXPECT_EQ(brc, 0) << page;
  const json dom = JsonLine(page);
  ASSERT_TRUE(dom.is_object()) << page;
  EXPECT_EQ(dom["suite_sessions"],
            json::array({json::array({"support-desk", "code-edit"}), json::array({"support-desk", "code-edit"})}));
  EXPECT_EQ(dom["charts"].size(), 2u);
  for (const char* kind : {"system", "tool-call arguments"})
    EXPECT_NE(std::find(dom["suite_kinds"].begin(), dom["suite_kinds"].end(), kind), dom["suite_kinds"].end())
        << kind << ": " << dom["suite_kinds"];
  EXPECT_NE(dom["suite_matrix"].get<std::string>().find("Matrix: 4 cells, fa-on+kv-f16 the baseline, 1 refused"),
            std::string::npos);
  EXPECT_NE(dom["suite_recipe"].get<std::string>().find("Recommended on the pooled figures: " + s.recipe->recommended),
            std::string::npos);
}

}  // namespace
}  // namespace flipscope
