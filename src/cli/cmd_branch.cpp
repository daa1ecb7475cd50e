// `flipscope branch` (not built yet: registers nothing).
#include "cli/commands.h"

namespace flipscope::cli {
void AddBranchCommand(CLI::App&) {}
}  // namespace flipscope::cli
