// Bisect and --llama-src against a small git repository the test makes (a tree that does not
// build, so nothing is compiled): commits resolved, bad ranges refused in one line before anything
// is written, a failing build told in one line naming its log, and nothing in OUT lost.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "history/history.h"
#include "testing/shell.h"
#include "testing/tiny_model.h"

namespace flipscope {
namespace {

namespace fs = std::filesystem;

class BisectGit : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    root_ = fixtures::TempPath("bisect-git-" + std::to_string(::getpid()));
    repo_ = root_ + "/llama";
    // The commits' builds go to a cache of the test's own.
    ::setenv("FLIPSCOPE_CACHE", (root_ + "/cache").c_str(), 1);
    const std::string cmd =
        "set -e; mkdir -p " + repo_ + "; cd " + repo_ +
        "; git init -q -b main; git config user.email t@t; git config user.name t"
        "; printf 'message(FATAL_ERROR \"this tree does not build\")\\n' > CMakeLists.txt"
        "; git add .; git commit -q -m first; git tag first"
        "; echo a > a.txt; git add .; git commit -q -m second"
        "; echo b > b.txt; git add .; git commit -q -m third; git tag third"
        "; git checkout -q -b side first; echo s > s.txt; git add .; git commit -q -m side; git checkout -q main";
    auto [code, out] = ::fixtures::RunShell(cmd);
    ASSERT_EQ(code, 0) << out;
    model_ = root_ + "/tiny.gguf";
    ASSERT_TRUE(fixtures::WriteTinyModel(model_).ok());
    workload_ = root_ + "/w.txt";
    std::ofstream(workload_) << "one two three four five six seven eight nine ten";
  }
  static void TearDownTestSuite() {
    std::error_code ec;
    fs::remove_all(root_, ec);
  }

  BisectRequest Request(const std::string& good, const std::string& bad, const std::string& out) const {
    BisectRequest r;
    r.llama_src = repo_, r.good = good, r.bad = bad;
    r.model_path = model_, r.workload_path = workload_, r.out_dir = out;
    r.log = r.worker.log = Log::Quiet();
    return r;
  }
  static void ExpectOneLine(const Status& s, const std::string& part) {
    ASSERT_FALSE(s.ok());
    EXPECT_EQ(s.message().find('\n'), std::string::npos) << s.message();
    EXPECT_NE(s.message().find(part), std::string::npos) << s.message();
  }

  static inline std::string root_, repo_, model_, workload_;
};

TEST_F(BisectGit, ResolvesCommitsTagsAndBranchesAndNamesAnUnknownOne) {
  auto third = ResolveCommit(repo_, "third");
  ASSERT_TRUE(third.ok()) << third.status().message();
  EXPECT_EQ(third->size(), 40u);
  EXPECT_EQ(*ResolveCommit(repo_, "main"), *third);
  EXPECT_EQ(*ResolveCommit(repo_, third->substr(0, 8)), *third);
  for (const char* bad : {"nope", "-h", "", "third~9"})
    ExpectOneLine(ResolveCommit(repo_, bad).status(), std::string("'") + bad + "'");
  ExpectOneLine(ResolveCommit(root_, "main").status(), "not a git checkout");
  EXPECT_TRUE(*IsAncestor(repo_, *ResolveCommit(repo_, "first"), *third));
  EXPECT_FALSE(*IsAncestor(repo_, *ResolveCommit(repo_, "side"), *third));
}

TEST_F(BisectGit, RefusesBadRangesInOneLineWritingNothing) {
  const std::string out = root_ + "/out-refused";
  ExpectOneLine(RunBisect(Request("nope", "third", out)).status(), "no commit 'nope'");
  ExpectOneLine(RunBisect(Request("first", "zzz", out)).status(), "no commit 'zzz'");
  ExpectOneLine(RunBisect(Request("third", "main", out)).status(), "are the same commit");
  ExpectOneLine(RunBisect(Request("third", "first", out)).status(), "is not an ancestor of bad");
  ExpectOneLine(RunBisect(Request("side", "third", out)).status(), "is not an ancestor of bad");
  EXPECT_FALSE(fs::exists(out));
}

TEST_F(BisectGit, AFailingBuildIsOneLineNamingItsLogAndKeepsWhatWasThere) {
  auto first = ResolveCommit(repo_, "first");
  ASSERT_TRUE(first.ok());
  WorkerOptions quiet;
  quiet.log = Log::Quiet();
  auto w = PrepareCommitWorker(repo_, *first, quiet);
  ASSERT_TRUE(w.ok()) << w.status().message();  // a failed build is the caller's to judge (bisect skips it)
  EXPECT_TRUE(w->binary.empty());
  EXPECT_EQ(w->error.find('\n'), std::string::npos);
  EXPECT_NE(w->error.find(w->build_log), std::string::npos) << w->error;
  std::ifstream log(w->build_log);
  std::string text((std::istreambuf_iterator<char>(log)), {});
  EXPECT_NE(text.find("this tree does not build"), std::string::npos);
  EXPECT_TRUE(fs::exists(CommitCacheDir(repo_) + "/" + *first + "/tree/CMakeLists.txt"));

  const std::string out = root_ + "/out-kept";
  fs::create_directories(out);
  std::ofstream(out + "/keep.txt") << "mine";
  ExpectOneLine(RunBisect(Request("first", "third", out)).status(), "does not build");
  EXPECT_TRUE(fs::exists(out + "/keep.txt"));

  HistoryRequest h;
  h.llama_src = repo_, h.commits = {"first", "third"};
  h.model_path = model_, h.workload_path = workload_, h.out_dir = out, h.log = h.worker.log = Log::Quiet();
  ExpectOneLine(RunHistory(h).status(), "does not build");
  h.commits = {"first", "nope"};
  ExpectOneLine(RunHistory(h).status(), "no commit 'nope'");
  h.commits = {"third", "main"};
  ExpectOneLine(RunHistory(h).status(), "listed twice");
  EXPECT_TRUE(fs::exists(out + "/keep.txt"));
}

}  // namespace
}  // namespace flipscope
