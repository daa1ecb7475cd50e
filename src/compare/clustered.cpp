// Pooled ratios over sessions whose probes cluster: a two-stage bootstrap (sessions, then blocks
// of consecutive probes inside each), widened by Student's t for few sessions. docs/compare.md,
// "Pooled over sessions", states the method; clustered_test checks its coverage by simulation.
#include <algorithm>
#include <cmath>
#include <numbers>

#include "compare/compare.h"
#include "util/wilson.h"

namespace flipscope {

namespace {

// splitmix64: a small, fast generator whose stream is the same on every platform (the standard
// distributions are not), so that an interval is a pure function of the data and the seed.
struct SplitMix {
  uint64_t s;
  uint64_t Next() {
    uint64_t z = (s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  size_t Below(size_t n) { return size_t((unsigned __int128)Next() * n >> 64); }
};

// The standard normal quantile at probability p, by bisection on erfc (exact to 1e-12).
double NormalQuantile(double p) {
  double lo = -10, hi = 10;
  for (int i = 0; i < 100; ++i) {
    const double mid = (lo + hi) / 2;
    (0.5 * std::erfc(-mid / std::numbers::sqrt2) < p ? lo : hi) = mid;
  }
  return (lo + hi) / 2;
}

// Sums of a cluster's blocks, weighted.
RatioBlock Total(const RatioCluster& c) {
  RatioBlock t;
  for (const RatioBlock& b : c.blocks) t.num += b.num, t.den += b.den;
  return {t.num * c.weight, t.den * c.weight};
}

// The percentile of sorted values by linear interpolation (q in [0, 1]).
double Quantile(const std::vector<double>& sorted, double q) {
  const double at = q * double(sorted.size() - 1);
  const size_t i = size_t(at);
  const double f = at - double(i);
  return i + 1 < sorted.size() ? sorted[i] * (1 - f) + sorted[i + 1] * f : sorted.back();
}

}  // namespace

double StudentT(int df, double level) {
  const double p = 0.5 + level / 2;
  if (df <= 0) return std::numeric_limits<double>::infinity();
  if (df == 1) return std::tan(std::numbers::pi * (p - 0.5));
  if (df == 2) return (2 * p - 1) / std::sqrt(2 * p * (1 - p));
  // Cornish-Fisher expansion of t in the normal quantile (Abramowitz & Stegun 26.7.5): within
  // 4e-3 at df = 3 and 1.5e-3 from df = 4 on (a 0.1% wider or narrower interval).
  const double z = NormalQuantile(p), z2 = z * z, n = df;
  const double g1 = (z2 + 1) * z / 4, g2 = ((5 * z2 + 16) * z2 + 3) * z / 96;
  const double g3 = (((3 * z2 + 19) * z2 + 17) * z2 - 15) * z / 384;
  const double g4 = ((((79 * z2 + 776) * z2 + 1482) * z2 - 1920) * z2 - 945) * z / 92160;
  return z + g1 / n + g2 / (n * n) + g3 / (n * n * n) + g4 / (n * n * n * n);
}

std::vector<RatioBlock> BlocksOf(std::span<const double> per_probe, int block) {
  std::vector<RatioBlock> out;
  const size_t b = size_t(std::max(1, block));
  for (size_t i = 0; i < per_probe.size(); i += b) {
    RatioBlock r;
    for (size_t j = i; j < std::min(per_probe.size(), i + b); ++j) r.num += per_probe[j], r.den += 1;
    out.push_back(r);
  }
  return out;
}

ClusteredEstimate ClusteredRatio(std::span<const RatioCluster> clusters, const BootstrapOptions& options) {
  ClusteredEstimate e;
  std::vector<const RatioCluster*> used;  // sessions with probes
  RatioBlock all;
  for (const RatioCluster& c : clusters) {
    const RatioBlock t = Total(c);
    if (t.den <= 0) continue;
    used.push_back(&c);
    all.num += t.num, all.den += t.den;
  }
  e.clusters = int(used.size());
  if (all.den <= 0) return e;
  e.value = all.num / all.den;
  e.ci = {e.value, e.value};
  SplitMix rng{options.seed};
  std::vector<double> reps;
  reps.reserve(size_t(std::max(1, options.replicates)));
  const size_t s = used.size();
  for (int r = 0; r < options.replicates; ++r) {
    RatioBlock sum;
    for (size_t i = 0; i < s; ++i) {
      // With one session only its blocks vary: the sessions stay as they are.
      const RatioCluster& c = *used[s > 1 ? rng.Below(s) : i];
      const size_t nb = c.blocks.size();
      RatioBlock t;
      for (size_t j = 0; j < nb; ++j) {
        const RatioBlock& b = c.blocks[rng.Below(nb)];
        t.num += b.num, t.den += b.den;
      }
      sum.num += t.num * c.weight, sum.den += t.den * c.weight;
    }
    if (sum.den > 0) reps.push_back(sum.num / sum.den);
  }
  if (reps.empty()) return e;
  std::sort(reps.begin(), reps.end());
  const double alpha = 1 - options.level;
  double lo = Quantile(reps, alpha / 2), hi = Quantile(reps, 1 - alpha / 2);
  if (s >= 2) {
    const double widen = StudentT(int(s) - 1, options.level) / NormalQuantile(1 - alpha / 2);
    lo = e.value - (e.value - lo) * widen;
    hi = e.value + (hi - e.value) * widen;
  }
  e.ci = {std::min(lo, e.value), std::max(hi, e.value)};
  return e;
}

std::pair<double, double> NaiveRateInterval(std::span<const RatioCluster> clusters) {
  RatioBlock all;
  for (const RatioCluster& c : clusters) {
    const RatioBlock t = Total(c);
    all.num += t.num, all.den += t.den;
  }
  return WilsonScore(all.num, all.den);
}

ClusteredEstimate ClusteredRate(std::span<const RatioCluster> clusters, const BootstrapOptions& options) {
  ClusteredEstimate e = ClusteredRatio(clusters, options);
  const auto [wlo, whi] = NaiveRateInterval(clusters);
  e.ci = {std::clamp(std::min(e.ci.first, wlo), 0.0, 1.0), std::clamp(std::max(e.ci.second, whi), 0.0, 1.0)};
  return e;
}

}  // namespace flipscope
