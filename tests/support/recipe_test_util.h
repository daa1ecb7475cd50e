// What the recipe's ranking tests share: a small model's facts and a made-up summary row.
#pragma once

#include <string>

#include "checkpoint/model_info.h"
#include "compare/compare.h"
#include "results/results.h"

namespace flipscope::fixtures {

// A one-layer model with a 1,024-token training context: KV memory the recipe can compute.
inline ModelInfo RecipeModel() {
  ModelInfo m;
  m.n_ctx_train = 1024;
  m.n_layer = m.n_head_kv = 1;
  m.head_dim_k = m.head_dim_v = 8;
  return m;
}

// A configuration's summary over one repeat: `flips` of `probes` with their Wilson interval, above
// the floor or not, forks known (none followed unless the caller adds them).
inline SummaryRow RecipeSummary(const std::string& name, int64_t flips, int64_t probes, bool above) {
  SummaryRow s;
  s.config = name;
  s.repeats = 1;
  s.median_flip_rate = double(flips) / double(probes);
  s.flips = flips, s.probes = probes;
  auto [lo, hi] = compare::WilsonInterval(flips, probes);
  s.flip_rate_ci = Interval{lo, hi};
  s.above_floor = above;
  s.forks_known = true;
  return s;
}

}  // namespace flipscope::fixtures
