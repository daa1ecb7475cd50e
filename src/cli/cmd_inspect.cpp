// `flipscope inspect` (not built yet: registers nothing).
#include "cli/commands.h"

namespace flipscope::cli {
void AddInspectCommand(CLI::App&) {}
}  // namespace flipscope::cli
