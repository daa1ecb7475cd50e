// The branch stage end to end on real SmolLM2 captures of a ~1,000-token netops session
// (tests/support/branch_e2e_case.h); the ~3,000-token session runs in make test-long (branch_long_test.cpp).
#include "support/branch_e2e_case.h"

TEST(BranchSmolLM2, KvQ4AgainstF16OnANetopsSession) { branch_e2e::NetopsBranchCase(1000, 60); }
