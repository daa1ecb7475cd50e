// Bisect's pure parts: the criterion's forms and meaning, git's commit list, and the search
// checked exhaustively over small ranges (every first-bad position, every set of commits that do
// not build) against the first bad commit the simulated range was made with.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "history/history.h"

namespace flipscope {
namespace {

using Kind = BisectCriterion::Kind;

TEST(BisectCriterion, ParsesTheThreeFormsAndPrintsThemBack) {
  for (const char* text : {"not-bit-identical", "flips>0", "flips>12", "kl>0.001", "kl>1e-05"}) {
    auto c = ParseBisectCriterion(text);
    ASSERT_TRUE(c.ok()) << text << ": " << c.status().message();
    auto again = ParseBisectCriterion(c->ToString());
    ASSERT_TRUE(again.ok()) << c->ToString();
    EXPECT_EQ(again->kind, c->kind);
    EXPECT_EQ(again->threshold, c->threshold);
  }
  EXPECT_EQ(ParseBisectCriterion("kl>.5")->threshold, 0.5);
  EXPECT_EQ(ParseBisectCriterion("flips>3")->kind, Kind::kFlipsAbove);
  for (const char* bad : {"", "flips", "flips>", "flips>-1", "flips>1.5", "kl>", "kl>-1", "kl>nan", "kl>1e999",
                          "bit-identical", "KL>1", "flips>3 "}) {
    auto c = ParseBisectCriterion(bad);
    ASSERT_FALSE(c.ok()) << bad;
    EXPECT_NE(c.status().message().find(std::string("'") + bad + "'"), std::string::npos) << c.status().message();
  }
}

TEST(BisectCriterion, MeaningAtItsBoundaries) {
  const BisectCriterion bit{}, flips{Kind::kFlipsAbove, 2}, kl{Kind::kKlMeanAbove, 1e-4};
  EXPECT_FALSE(IsBad(bit, 100, 100, 0, 0));
  EXPECT_TRUE(IsBad(bit, 100, 99, 0, 1e-12));  // one row off by a bit, no flip
  EXPECT_FALSE(IsBad(flips, 100, 0, 2, 1));    // more than N: N itself is good
  EXPECT_TRUE(IsBad(flips, 100, 0, 3, 0));
  EXPECT_FALSE(IsBad(kl, 100, 0, 50, 1e-4));
  EXPECT_TRUE(IsBad(kl, 100, 0, 0, 1.01e-4));
}

TEST(ParseCommitList, ReadsShaTabSubjectLines) {
  const std::string a(40, 'a'), b(64, 'b');
  auto l = ParseCommitList(a + "\tggml : fix the AVX2 dot\n" + b + "\t\n");
  ASSERT_TRUE(l.ok()) << l.status().message();
  ASSERT_EQ(l->size(), 2u);
  EXPECT_EQ((*l)[0], (GitCommit{a, "ggml : fix the AVX2 dot"}));
  EXPECT_EQ((*l)[1], (GitCommit{b, ""}));
  EXPECT_TRUE(ParseCommitList("")->empty());
  for (const std::string& bad : {std::string(39, 'a') + "\tx\n", std::string(40, 'A') + "\tx\n",
                                 std::string(40, 'a') + " x\n", a + "\tx\n\n", a + "\tx\r\n", std::string("fatal: bad revision\n")}) {
    auto r = ParseCommitList(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.status().message().find("line "), std::string::npos);
    EXPECT_EQ(r.status().message().find('\n'), std::string::npos);
  }
}

std::vector<GitCommit> Range(size_t n) {
  std::vector<GitCommit> out;
  for (size_t i = 0; i < n; ++i) out.push_back({fmt::format("{:040x}", i + 1), fmt::format("commit {}", i)});
  return out;
}

// Runs the search with commit `first_bad` the first bad one and `broken` not building; returns
// the candidates and counts the commits tested (built) on the way.
std::vector<size_t> Search(size_t n, size_t first_bad, const std::set<size_t>& broken, int* tested) {
  auto s = BisectSearch::Create(Range(n));
  EXPECT_TRUE(s.ok());
  *tested = 0;
  std::set<size_t> seen;
  while (auto i = s->Next()) {
    EXPECT_TRUE(seen.insert(*i).second) << "commit " << *i << " offered twice";
    ++*tested;
    const auto mark = broken.count(*i)     ? BisectSearch::Mark::kSkip
                      : *i >= first_bad ? BisectSearch::Mark::kBad
                                        : BisectSearch::Mark::kGood;
    EXPECT_TRUE(s->Record(*i, mark).ok());
    if (*tested > int(n)) break;
  }
  return s->Candidates();
}

TEST(BisectSearch, FindsEveryFirstBadCommitInAboutLog2Steps) {
  for (size_t n = 1; n <= 40; ++n)
    for (size_t first_bad = 0; first_bad < n; ++first_bad) {
      int tested = 0;
      auto c = Search(n, first_bad, {}, &tested);
      ASSERT_EQ(c, std::vector<size_t>{first_bad}) << "n=" << n << " first bad " << first_bad;
      // bad itself is known: n - 1 unknown commits, ceil(log2(n)) tests at most.
      EXPECT_LE(tested, int(std::ceil(std::log2(double(n))))) << "n=" << n << " first bad " << first_bad;
    }
}

TEST(BisectSearch, SkippedCommitsWidenTheAnswerButNeverLoseIt) {
  const size_t n = 9;
  for (size_t first_bad = 0; first_bad < n; ++first_bad)
    for (unsigned mask = 0; mask < (1u << (n - 1)); ++mask) {  // bad itself (the last) always builds
      std::set<size_t> broken;
      for (size_t i = 0; i + 1 < n; ++i)
        if (mask & (1u << i)) broken.insert(i);
      int tested = 0;
      auto c = Search(n, first_bad, broken, &tested);
      // The answer holds the first bad commit; every other candidate is one that did not build,
      // and they run contiguously from the last good commit up to the first bad one found.
      ASSERT_NE(std::find(c.begin(), c.end(), first_bad), c.end()) << "mask " << mask << " first bad " << first_bad;
      for (size_t k = 0; k + 1 < c.size(); ++k) {
        EXPECT_TRUE(broken.count(c[k])) << "mask " << mask;
        EXPECT_EQ(c[k] + 1, c[k + 1]) << "mask " << mask;
      }
      if (!broken.count(first_bad) && (first_bad == 0 || !broken.count(first_bad - 1))) {
        EXPECT_EQ(c, std::vector<size_t>{first_bad}) << "mask " << mask;
      }
    }
}

TEST(BisectSearch, RefusesContradictionsAndBadInput) {
  EXPECT_FALSE(BisectSearch::Create({}).ok());
  auto s = BisectSearch::Create(Range(8));
  ASSERT_TRUE(s.ok());
  EXPECT_FALSE(s->Record(8, BisectSearch::Mark::kGood).ok());
  EXPECT_FALSE(s->Record(2, BisectSearch::Mark::kUntested).ok());
  ASSERT_TRUE(s->Record(5, BisectSearch::Mark::kBad).ok());
  Status late_good = s->Record(6, BisectSearch::Mark::kGood);
  ASSERT_FALSE(late_good.ok());
  EXPECT_NE(late_good.message().find("not monotone"), std::string::npos);
  ASSERT_TRUE(s->Record(3, BisectSearch::Mark::kGood).ok());
  EXPECT_FALSE(s->Record(1, BisectSearch::Mark::kBad).ok());
  ASSERT_EQ(s->Next(), std::optional<size_t>(4));
  ASSERT_TRUE(s->Record(4, BisectSearch::Mark::kGood).ok());
  EXPECT_FALSE(s->Next());
  EXPECT_EQ(s->Candidates(), std::vector<size_t>{5});
}

TEST(BisectTerminal, NamesTheCommitItsFilesAndFiguresOrTheCandidates) {
  nlohmann::json doc = {{"header", {{"good", std::string(40, 'a')}}}};
  doc["result"] = {{"steps", 3}, {"builds", 2},
                   {"first_bad", {{"commit", std::string(40, 'b')}, {"subject", "ggml-cpu: repack"},
                                  {"stat", " ggml/src/ggml-cpu/repack.cpp | 4 ++--\n"},
                                  {"comparison", {{"bit_identical", 1}, {"probes", 38}, {"flips", 2},
                                                  {"confident_flips", 0}, {"kl_mean", 3e-3}, {"kl_p99", 0.02},
                                                  {"kl_max", 0.04}}}}}};
  const std::string text = BisectTerminal(BisectResult::FromJson(doc));
  EXPECT_NE(text.find("first bad commit: " + std::string(40, 'b') + " ggml-cpu: repack"), std::string::npos) << text;
  EXPECT_NE(text.find("1 of 38 rows bit-identical, 2 flips"), std::string::npos) << text;
  EXPECT_NE(text.find("repack.cpp | 4"), std::string::npos) << text;
  doc["result"].erase("first_bad");
  doc["result"]["candidates"] = {{{"commit", std::string(40, 'c')}, {"subject", "x"}, {"mark", "skip"}},
                                 {{"commit", std::string(40, 'd')}, {"subject", "y"}, {"mark", "bad"}}};
  const std::string cands = BisectTerminal(BisectResult::FromJson(doc));
  EXPECT_NE(cands.find(std::string(40, 'c') + " x (skip)"), std::string::npos) << cands;
  EXPECT_NE(cands.find(std::string(40, 'd') + " y (bad)"), std::string::npos) << cands;
}

TEST(ParseChangedFiles, OneNonEmptyLineEach) {
  EXPECT_EQ(ParseChangedFiles("a/b.c\n\nc d.h\r\n"), (std::vector<std::string>{"a/b.c", "c d.h"}));
  EXPECT_TRUE(ParseChangedFiles("").empty());
  EXPECT_TRUE(ParseChangedFiles("\n\r\n").empty());
}

}  // namespace
}  // namespace flipscope
