// `flipscope run` (not built yet: registers nothing).
#include "cli/commands.h"

namespace flipscope::cli {
void AddRunCommand(CLI::App&) {}
}  // namespace flipscope::cli
