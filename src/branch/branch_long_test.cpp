// make test-long: the branch stage over a ~3,000-token netops session (tests/support/branch_e2e_case.h), about
// 300-600 s on two cores (six teacher-forced passes with a 4-bit KV cache on one thread).
#include "support/branch_e2e_case.h"

TEST(BranchSmolLM2Long, KvQ4AgainstF16OnANetopsSession) { branch_e2e::NetopsBranchCase(3000, 150); }
