// The N-fork rule every fork follower shares (FirstFlips): which flips it takes under each pick,
// fed one probe at a time as a capture meets them.
#include "capture/pairing.h"

#include <gtest/gtest.h>

#include <vector>

namespace flipscope {
namespace {

// The positions FirstFlips takes from flips at `flips` (every one forkable except those `where`
// refuses) in a session of n tokens.
std::vector<int32_t> Taken(const std::vector<int32_t>& flips, int max, ForkPick pick, int64_t n,
                           ForkFilter where = nullptr) {
  FirstFlips rule(max, std::move(where), pick, n);
  std::vector<int32_t> out;
  for (int32_t p : flips)
    if (rule.Take(p, 1, 2)) out.push_back(p);
  return out;
}

TEST(FirstFlips, FirstTakesTheFirstMaxByPosition) {
  EXPECT_EQ(Taken({3, 5, 8, 900, 950}, 3, ForkPick::kFirst, 1000), (std::vector<int32_t>{3, 5, 8}));
  EXPECT_EQ(Taken({3, 5, 8, 900}, 0, ForkPick::kFirst, 1000), (std::vector<int32_t>{3, 5, 8, 900}));
}

// Four forks over 1,000 tokens: one per quarter at most until the quarter's end; flips clustered
// at the start take one slot, and a quarter without flips leaves its slot to the next flips.
TEST(FirstFlips, SpreadGivesEveryStretchItsShare) {
  EXPECT_EQ(Taken({3, 5, 8, 300, 310, 600, 900, 950}, 4, ForkPick::kSpread, 1000),
            (std::vector<int32_t>{3, 300, 600, 900}));
  // Nothing between 250 and 750: the slots of the second and third quarters go to 760 and 770.
  EXPECT_EQ(Taken({3, 5, 760, 770, 780, 990}, 4, ForkPick::kSpread, 1000), (std::vector<int32_t>{3, 760, 770, 780}));
  // The quota at position p is ceil(max (p + 1) / n): position 249 is still the first quarter.
  EXPECT_EQ(Taken({0, 249, 250}, 4, ForkPick::kSpread, 1000), (std::vector<int32_t>{0, 250}));
  // Never more than max, and all of them when there are fewer flips than slots.
  EXPECT_EQ(Taken({10, 400, 999}, 8, ForkPick::kSpread, 1000), (std::vector<int32_t>{10, 400, 999}));
  EXPECT_EQ(Taken({3, 5, 8}, 0, ForkPick::kSpread, 1000), (std::vector<int32_t>{3, 5, 8}));
}

// Flips where forks are not allowed use up no slot under either pick.
TEST(FirstFlips, RefusedFlipsUseNoSlot) {
  ForkFilter odd_only = [](int32_t p) { return p % 2 == 1; };
  EXPECT_EQ(Taken({2, 3, 4, 501, 502, 503}, 2, ForkPick::kSpread, 1000, odd_only), (std::vector<int32_t>{3, 501}));
  FirstFlips rule(2, odd_only, ForkPick::kFirst, 1000);
  for (int32_t p : {2, 3, 4, 5, 7}) rule.Take(p, 1, 2);
  EXPECT_EQ(rule.forkable(), 3);
  EXPECT_EQ(rule.elsewhere(), 2);
}

}  // namespace
}  // namespace flipscope
