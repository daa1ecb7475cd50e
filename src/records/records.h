// records: the vocabulary and the records that stages hand each other, below every stage that
// produces or reads them (engine, capture, branch, results): the named modes (records/modes.h)
// and the version that writes every file. It holds no JSON: files are written by their stages'
// serializers.
#pragma once

#include <string_view>

#include "records/modes.h"

namespace flipscope {

// The flipscope version that writes manifests, results and reports (the project's version, as the
// build configured it).
std::string_view FlipscopeVersion();

}  // namespace flipscope
