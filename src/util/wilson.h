// The Wilson score interval, the one formula behind every rate interval (compare's flip rates,
// the recipe's damage and repair rates).
#pragma once

#include <algorithm>
#include <cmath>
#include <utility>

namespace flipscope {

// The two-sided Wilson score interval of k successes in n trials at normal quantile z (1.96 for
// 95%), clamped to [0, 1]; exactly 0 below when k <= 0 and exactly 1 above when k >= n; {0, 1}
// when n <= 0.
inline std::pair<double, double> WilsonScore(double k, double n, double z = 1.959963984540054) {
  if (n <= 0) return {0.0, 1.0};
  const double p = k / n, z2 = z * z;
  const double denom = 1.0 + z2 / n;
  const double center = (p + z2 / (2.0 * n)) / denom;
  const double half = z / denom * std::sqrt(p * (1.0 - p) / n + z2 / (4.0 * n * n));
  // At k = 0 the lower bound is center - half with both terms z²/(2n)/denom in exact arithmetic,
  // but rounding leaves a residue such as 4.3e-19 (and at k = n, 1 - 1e-16 above): the bounds
  // are set exactly there, so that no flips reads as a lower bound of 0, not of "almost 0".
  const double lo = k <= 0 ? 0.0 : std::max(0.0, center - half);
  const double hi = k >= n ? 1.0 : std::min(1.0, center + half);
  return {lo, hi};
}

}  // namespace flipscope
