// Test helper (tests/support): the branch stage's result as the document it is written as (docs/branch.md),
// for tests that check the output users read.
#pragma once

#include <nlohmann/json.hpp>

#include "branch/branch.h"
#include "util/status.h"

namespace flipscope::fixtures {

// RunBranches, its result written as JSON.
inline Result<nlohmann::json> RunBranchesJson(const BranchRequest& req) {
  FS_ASSIGN_OR_RETURN(BranchResult result, RunBranches(req));
  return result.ToJson();
}

}  // namespace flipscope::fixtures
