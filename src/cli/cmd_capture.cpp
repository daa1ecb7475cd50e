// `flipscope capture` (not built yet: registers nothing).
#include "cli/commands.h"

namespace flipscope::cli {
void AddCaptureCommand(CLI::App&) {}
}  // namespace flipscope::cli
