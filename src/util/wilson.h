// The Wilson score interval, the one formula behind every rate interval (compare's flip rates,
// the recipe's damage and repair rates).
#pragma once

#include <algorithm>
#include <cmath>
#include <utility>

namespace flipscope {

// The two-sided Wilson score interval of k successes in n trials at normal quantile z (1.96 for
// 95%), clamped to [0, 1]; {0, 1} when n <= 0.
inline std::pair<double, double> WilsonScore(double k, double n, double z = 1.959963984540054) {
  if (n <= 0) return {0.0, 1.0};
  const double p = k / n, z2 = z * z;
  const double denom = 1.0 + z2 / n;
  const double center = (p + z2 / (2.0 * n)) / denom;
  const double half = z / denom * std::sqrt(p * (1.0 - p) / n + z2 / (4.0 * n * n));
  return {std::max(0.0, center - half), std::min(1.0, center + half)};
}

}  // namespace flipscope
