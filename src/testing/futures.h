// testing: what two greedy futures of the same prefix computed through different batch shapes
// (a forked cache against a re-prefill) are guaranteed to share, whichever CPU kernels run.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

namespace flipscope::fixtures {

// Two computations that differ only in rounding give the same greedy tokens until a step where
// the top two tokens are nearly tied; there each side's chosen token has probability <= 1/2
// (plus the rounding). So: the same tokens and probabilities (within tol) up to the first
// difference, and at that difference both probabilities below 1/2 + tol. A wrong cache copy or
// a wrong position gives confident, different tokens and fails this.
inline void ExpectSameGreedyFuture(const std::vector<int>& a_tokens, const std::vector<double>& a_probs,
                                   const std::vector<int>& b_tokens, const std::vector<double>& b_probs,
                                   const std::string& where, double tol = 1e-3) {
  ASSERT_EQ(a_tokens.size(), a_probs.size()) << where;
  ASSERT_EQ(b_tokens.size(), b_probs.size()) << where;
  const size_t n = std::min(a_tokens.size(), b_tokens.size());
  for (size_t t = 0; t < n; ++t) {
    if (a_tokens[t] != b_tokens[t]) {
      EXPECT_LT(a_probs[t], 0.5 + tol) << where << " step " << t << ": a confident token differs";
      EXPECT_LT(b_probs[t], 0.5 + tol) << where << " step " << t << ": a confident token differs";
      return;
    }
    EXPECT_NEAR(a_probs[t], b_probs[t], tol) << where << " step " << t;
  }
  // Equal tokens throughout: only an end of generation may make one side shorter.
  EXPECT_EQ(a_tokens.size(), b_tokens.size()) << where;
}

}  // namespace flipscope::fixtures
