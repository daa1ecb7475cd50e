// The pooled intervals over sessions: coverage by simulation (clustered against naive), the
// deterministic seed, the weights, and the Student t quantiles they are widened by.
#include <gtest/gtest.h>

#include <cstdio>
#include <random>

#include "compare/compare.h"

namespace flipscope {
namespace {

// A population of sessions with a known mean flip rate mu: each session's own rate is drawn
// from Beta(2, 2(1-mu)/mu), and inside a session flips come in passages of `passage` probes, a
// quarter of them at 4x the session's rate and the rest at none (mean: the session's rate).
struct Population {
  double mu = 0.03;
  int sessions = 10, probes = 400, passage = 16;
};

std::vector<RatioCluster> Draw(const Population& p, std::mt19937_64& rng) {
  std::gamma_distribution<double> ga(2.0, 1.0), gb(2.0 * (1 - p.mu) / p.mu, 1.0);
  std::bernoulli_distribution hot(0.25);
  std::vector<RatioCluster> out(size_t(p.sessions));
  for (RatioCluster& c : out) {
    const double a = ga(rng), rate = a / (a + gb(rng));  // Beta(2, b) by two gammas
    std::vector<double> flips;
    for (int k = 0; k < p.probes / p.passage; ++k) {
      const double q = hot(rng) ? 4 * rate : 0;
      std::bernoulli_distribution flip(std::min(1.0, q));
      for (int i = 0; i < p.passage; ++i) flips.push_back(flip(rng) ? 1 : 0);
    }
    c.blocks = BlocksOf(flips, p.passage);
  }
  return out;
}

struct Coverage {
  double clustered = 0, naive = 0;
};

Coverage Simulate(const Population& p, int draws, uint64_t seed) {
  std::mt19937_64 rng(seed);
  BootstrapOptions o;
  o.replicates = 1000;
  int clustered = 0, naive = 0;
  for (int d = 0; d < draws; ++d) {
    const auto suite = Draw(p, rng);
    o.seed = rng();
    const auto e = ClusteredRate(suite, o);
    clustered += e.ci.first <= p.mu && p.mu <= e.ci.second;
    const auto [lo, hi] = NaiveRateInterval(suite);
    naive += lo <= p.mu && p.mu <= hi;
  }
  return {double(clustered) / draws, double(naive) / draws};
}

TEST(Clustered, The95PercentIntervalCoversTheKnownRateWhereTheNaiveOneUndercovers) {
  const Population p;
  const Coverage c = Simulate(p, 1000, 20261203);
  std::printf(
      "%d sessions of %d probes, passages of %d, mean rate %.3f, 1000 draws: clustered 95%% interval "
      "covers %.1f%%, naive Wilson %.1f%%\n",
      p.sessions, p.probes, p.passage, p.mu, 100 * c.clustered, 100 * c.naive);
  EXPECT_GE(c.clustered, 0.93);
  EXPECT_LE(c.clustered, 0.97);
  EXPECT_LT(c.naive, 0.85);
}

TEST(Clustered, TheSameDataAndSeedGiveTheSameInterval) {
  std::mt19937_64 rng(7);
  const auto suite = Draw(Population{}, rng);
  const auto a = ClusteredRate(suite), b = ClusteredRate(suite);
  EXPECT_EQ(a.ci, b.ci);
  BootstrapOptions other;
  other.seed = 99;
  EXPECT_NE(ClusteredRate(suite, other).ci, a.ci);
}

TEST(Clustered, WeightsScaleASessionsProbesInThePooledRatio) {
  std::vector<RatioCluster> s(2);
  s[0].blocks = {{2, 100}};  // 2%
  s[1].blocks = {{8, 100}};  // 8%
  EXPECT_DOUBLE_EQ(ClusteredRatio(s).value, 0.05);
  s[1].weight = 3;
  EXPECT_DOUBLE_EQ(ClusteredRatio(s).value, (2 + 24) / 400.0);
  EXPECT_EQ(ClusteredRatio(s).clusters, 2);
}

TEST(Clustered, NoFlipsStillHasTheWilsonUpperBound) {
  std::vector<RatioCluster> s(3);
  for (auto& c : s) c.blocks = BlocksOf(std::vector<double>(64, 0.0), 16);
  const auto e = ClusteredRate(s);
  EXPECT_EQ(e.value, 0);
  EXPECT_EQ(e.ci.first, 0);
  EXPECT_NEAR(e.ci.second, NaiveRateInterval(s).second, 1e-15);
  EXPECT_GT(e.ci.second, 0.01);
}

TEST(Clustered, StudentTQuantiles) {
  EXPECT_NEAR(StudentT(1), 12.706, 1e-3);
  EXPECT_NEAR(StudentT(2), 4.303, 1e-3);
  EXPECT_NEAR(StudentT(3), 3.182, 4e-3);
  EXPECT_NEAR(StudentT(4), 2.776, 1.5e-3);
  EXPECT_NEAR(StudentT(9), 2.262, 1e-3);
  EXPECT_NEAR(StudentT(1000), 1.962, 1e-3);
}

}  // namespace
}  // namespace flipscope
