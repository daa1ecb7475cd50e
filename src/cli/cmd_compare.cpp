// `flipscope compare` (not built yet: registers nothing).
#include "cli/commands.h"

namespace flipscope::cli {
void AddCompareCommand(CLI::App&) {}
}  // namespace flipscope::cli
