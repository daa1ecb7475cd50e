// What the branch stage refuses, and what its command writes: captures of other tokens, bad
// options, a changed or missing model, an output folder that does not exist.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>

#include "branch/branch.h"
#include "support/branch_captures.h"
#include "support/branches.h"
#include "testing/tiny_model.h"
#include "util/util.h"

using namespace flipscope;
using flipscope::fixtures::BranchKnobs;
using flipscope::fixtures::CapturePair;
using flipscope::fixtures::Captures;
using flipscope::fixtures::PythonCheck;
using flipscope::fixtures::Request;
using flipscope::fixtures::RunBranchesJson;
using flipscope::fixtures::UserThenAssistant;
using flipscope::fixtures::WriteCapture;
namespace fs = std::filesystem;

// `flipscope branch` writes the records the library returns (the run is deterministic), says how
// many, and refuses an output folder that does not exist in one line.
TEST(BranchCommand, WritesTheLibraryRecordsAndRefusesAMissingFolder) {
  auto out = RunBranchesJson(Request());
  ASSERT_TRUE(out.ok()) << out.status().message();
  const std::string exe = std::string(FLIPSCOPE_BINARY_DIR) + "/bin/flipscope";
  ASSERT_TRUE(fs::exists(exe)) << exe << " is not built";
  const std::string json_path = fixtures::TempPath("branch-cli.json"), log = fixtures::TempPath("branch-cli.log");
  std::string cmd = "FLIPSCOPE_NO_PROGRESS=1 " + exe + " branch -q " + Captures().base + " " + Captures().cand +
                    " -o " + json_path + " --max-tokens 10 > " + log + " 2>&1";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << *ReadFile(log);
  const size_t n = (*out)["records"].size();
  EXPECT_NE(ReadFile(log)->find(std::to_string(n) + " branches"), std::string::npos) << *ReadFile(log);
  auto written = nlohmann::json::parse(*ReadFile(json_path));
  auto library = nlohmann::json::parse(out->dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
  EXPECT_EQ(written["records"], library["records"]);
  cmd =
      exe + " branch -q " + Captures().base + " " + Captures().cand + " -o /nonexistent/dir/x.json > " + log + " 2>&1";
  EXPECT_NE(std::system(cmd.c_str()), 0);
  EXPECT_EQ(*ReadFile(log), "flipscope: error: /nonexistent/dir/x.json: the folder /nonexistent/dir does not exist\n");
}

TEST(RunBranches, ChangedOrMissingModelNamesTheExpectedHash) {
  std::string model = fixtures::TempPath("branch-moved.gguf");
  fs::copy_file(fixtures::DefaultTinyModel(), model, fs::copy_options::overwrite_existing);
  std::string sha = *Sha256File(model);
  std::string base = fixtures::TempPath("branch-moved.safetensors");
  WriteCapture(base, model, BranchKnobs("f16"), fixtures::TinyTokens(40), 4);
  BranchRequest r = Request();
  r.base_path = base;
  r.cand_path = base;
  fixtures::TinyModelOptions other;
  other.seed = 7;
  ASSERT_TRUE(fixtures::WriteTinyModel(model, other).ok());
  auto out = RunBranchesJson(r);
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().message(),
            base + ": the model file " + model + " has changed: sha256 " + *Sha256File(model) + ", expected " + sha);
  fs::remove(model);
  out = RunBranchesJson(r);
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().message(),
            base + ": the model file " + model + " cannot be read (expected sha256 " + sha + ")");
}

TEST(RunBranches, RefusesCapturesOfDifferentTokensAndBadOptions) {
  std::string other = fixtures::TempPath("branch-other.safetensors");
  WriteCapture(other, fixtures::DefaultTinyModel(), BranchKnobs("f16"), fixtures::TinyTokens(240, 41), 2);
  BranchRequest r = Request();
  r.cand_path = other;
  auto out = RunBranchesJson(r);
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find(other + ": fed different tokens than " + Captures().base +
                                        " (first difference at position 1: "),
            std::string::npos)
      << out.status().message();
  r = Request();
  // A bad name is refused where it is read (the CLI reads --at).
  EXPECT_EQ(ParseName<BranchAt>("everywhere", "at").status().message(), "at must be flips or ranges, not 'everywhere'");
  r.options.at = BranchAt::kRanges;
  EXPECT_EQ(RunBranchesJson(r).status().message(), "at ranges needs ranges A-B,... or tool_calls");
  r.options.ranges = "9-3";
  EXPECT_EQ(RunBranchesJson(r).status().message(), "ranges: '9-3' is not tool_calls or a range A-B (0 <= A <= B)");
  // The same rule as capture's --full: a range that starts past the last scored position is an error.
  r.options.ranges = "5000-6000";
  EXPECT_NE(RunBranchesJson(r).status().message().find("ranges: range 5000-6000 starts past the workload's last scored "
                                                       "position "),
            std::string::npos)
      << RunBranchesJson(r).status().message();
  r = Request();
  r.base_path = "/nonexistent/base.safetensors";
  EXPECT_NE(RunBranchesJson(r).status().message().find("/nonexistent/base.safetensors"), std::string::npos);
}
