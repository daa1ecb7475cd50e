// Suites and matrices: parsing (each refusal in one line), the pooled figures with the
// per-session table and the concentration flag on a constructed suite, and a suite run on the
// tiny model (each session in its own folder, suite.json read back as written).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "experiment/experiment.h"
#include "experiment/suite_internal.h"
#include "support/experiment_test_util.h"
#include "util/util.h"

using namespace flipscope;
namespace fs = std::filesystem;

namespace {

// exp.toml's folder with two more text workloads, a.txt and b.txt.
std::string SuiteFolder(const std::string& name, const std::string& body) {
  const std::string p = fixtures::MakeExperiment(name, "");
  const fs::path dir = fs::path(p).parent_path();
  fs::create_directories(dir / "sessions");
  for (const char* f : {"a.txt", "b.txt"}) {
    std::ofstream w(dir / "sessions" / f);
    for (int i = 0; i < 5; ++i) w << f << " asks for port " << (8080 + i) << " on host db" << i << ". ";
  }
  std::ofstream(p) << "model = \"tiny.gguf\"\nwindow = 64\n" << body;
  return p;
}

std::string Error(const std::string& path) {
  auto e = ParseExperiment(path);
  return e.ok() ? "parsed" : e.status().message();
}

}  // namespace

TEST(ParseSuite, AListAFolderOrSessionTables) {
  auto p = SuiteFolder("suite-list", "workload = [\"sessions/a.txt\", \"sessions/b.txt\"]\n");
  auto e = ParseExperiment(p);
  ASSERT_TRUE(e.ok()) << e.status().message();
  ASSERT_EQ(e->sessions.size(), 2u);
  EXPECT_EQ(e->sessions[0].name, "a");
  EXPECT_EQ(e->workload, e->sessions[0].workload);
  p = SuiteFolder("suite-folder", "workload = \"sessions\"\n");
  ASSERT_TRUE((e = ParseExperiment(p)).ok()) << e.status().message();
  EXPECT_EQ(e->sessions.size(), 2u);
  p = SuiteFolder("suite-tables",
                  "[[session]]\nworkload = \"sessions/a.txt\"\nname = \"first\"\nweight = 2\n"
                  "[[session]]\nworkload = \"sessions/b.txt\"\n");
  ASSERT_TRUE((e = ParseExperiment(p)).ok()) << e.status().message();
  EXPECT_EQ(e->sessions[0].name, "first");
  EXPECT_EQ(e->sessions[0].weight, 2);
  EXPECT_EQ(e->sessions[1].name, "b");
  // One workload stays one workload: no suite.
  p = fixtures::MakeExperiment("suite-none", "");
  ASSERT_TRUE((e = ParseExperiment(p)).ok());
  EXPECT_TRUE(e->sessions.empty());
}

TEST(ParseSuite, RefusalsAreOneLineNamingTheFileAndLine) {
  auto p = SuiteFolder("suite-empty", "workload = []\n");
  EXPECT_EQ(Error(p), p + ":3: workload is an empty list (name at least one file)");
  p = SuiteFolder("suite-dup", "workload = [\"sessions/a.txt\", \"sessions/a.txt\"]\n");
  EXPECT_EQ(Error(p), p + ":3: duplicate session name 'a'");
  p = SuiteFolder("suite-both", "workload = \"sessions/a.txt\"\n[[session]]\nworkload = \"sessions/b.txt\"\n");
  EXPECT_EQ(Error(p), p + ":3: [[session]] and workload both name the workloads: use one");
  p = SuiteFolder("suite-weight", "[[session]]\nworkload = \"sessions/a.txt\"\nweight = 0\n");
  EXPECT_EQ(Error(p), p + ":5: weight must be a number > 0");
  for (const std::string& e : {Error(SuiteFolder("suite-e1", "workload = []\n"))})
    EXPECT_EQ(e.find('\n'), std::string::npos);
}

TEST(ParseMatrix, AxesExpandToTheirCrossProductNamedFromValues) {
  auto p = fixtures::MakeExperiment("matrix-2x3",
                                    "[baseline]\nflash_attn = \"on\"\n[matrix]\nrepeats = 3\n"
                                    "[[axis]]\nknob = \"flash_attn\"\nvalues = [\"on\", \"off\"]\n"
                                    "[[axis]]\nname = \"kv\"\nknob = [\"cache_type_k\", \"cache_type_v\"]\n"
                                    "values = [\"f16\", \"q8_0\", \"q4_0\"]\n");
  auto e = ParseExperiment(p);
  ASSERT_TRUE(e.ok()) << e.status().message();
  // fa-on+kv-f16 is the baseline's own knobs: the other five cells are variants.
  EXPECT_EQ(e->matrix.baseline_cell, "fa-on+kv-f16");
  const std::vector<std::string> want = {"fa-on+kv-q8_0", "fa-on+kv-q4_0", "fa-off+kv-f16", "fa-off+kv-q8_0",
                                         "fa-off+kv-q4_0"};
  EXPECT_EQ(e->matrix.cells, want);
  ASSERT_EQ(e->variants.size(), 5u);
  EXPECT_EQ(e->variants[4].repeats, 3);
  EXPECT_EQ(e->variants[4].knobs.cache_type_v, KvCacheType::kQ4_0);
  EXPECT_EQ(e->variants[4].knobs.flash_attn, FlashAttn::kOff);
  // Without [[axis]] nothing is expanded: one change at a time stays the default.
  EXPECT_TRUE(ParseExperiment(fixtures::MakeExperiment("matrix-none", ""))->matrix.cells.empty());
}

TEST(ParseMatrix, RefusalsAreOneLine) {
  auto expect = [](const std::string& name, const std::string& body, const std::string& what) {
    const std::string p = fixtures::MakeExperiment(name, body);
    const std::string e = Error(p);
    EXPECT_EQ(e, p + what);
    EXPECT_EQ(e.find('\n'), std::string::npos);
  };
  expect("axis-empty", "[[axis]]\nknob = \"threads\"\nvalues = []\n", ":6: values is an empty list");
  expect("axis-dup", "[[axis]]\nknob = \"threads\"\nvalues = [1, 2]\n[[axis]]\nknob = \"threads\"\nvalues = [3]\n",
         ":7: duplicate axis name 't'");
  expect("axis-dupvalue", "[[axis]]\nknob = \"threads\"\nvalues = [1, 1]\n", ":6: duplicate value '1'");
  expect("axis-noknob", "[[axis]]\nknob = \"flash_atn\"\nvalues = [\"on\"]\n",
         ":5: axis over 'flash_atn', which is no knob");
  expect("axis-large",
         "[[axis]]\nknob = \"threads\"\nvalues = [1, 2, 3, 4, 5]\n[[axis]]\nknob = \"ubatch_size\"\n"
         "values = [64, 128, 256, 512]\n",
         ":4: the matrix has 20 cells, more than 16: set allow_large = true under [matrix]");
  auto p =
      fixtures::MakeExperiment("axis-allowed",
                               "[matrix]\nallow_large = true\n[[axis]]\nknob = \"threads\"\nvalues = [1, 2, 3, 4, 5]\n"
                               "[[axis]]\nknob = \"ubatch_size\"\nvalues = [64, 128, 256, 512]\n");
  auto e = ParseExperiment(p);
  ASSERT_TRUE(e.ok()) << e.status().message();
  EXPECT_EQ(e->matrix.cells.size(), 20u);
  expect("axis-clash", "[[variant]]\nname = \"t-2\"\nthreads = 2\n[[axis]]\nknob = \"threads\"\nvalues = [2]\n",
         ":7: duplicate configuration name 't-2' (a matrix cell and a variant)");
}
