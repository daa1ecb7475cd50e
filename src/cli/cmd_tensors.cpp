// `flipscope tensors` (not built yet: registers nothing).
#include "cli/commands.h"

namespace flipscope::cli {
void AddTensorsCommand(CLI::App&) {}
}  // namespace flipscope::cli
