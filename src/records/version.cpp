// The one place the build's version enters the code (CMake defines FLIPSCOPE_VERSION here only).
#include "records/records.h"

namespace flipscope {

std::string_view FlipscopeVersion() { return FLIPSCOPE_VERSION; }

}  // namespace flipscope
