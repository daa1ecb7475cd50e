// `flipscope doctor` (not built yet: registers nothing).
#include "cli/commands.h"

namespace flipscope::cli {
void AddDoctorCommand(CLI::App&) {}
}  // namespace flipscope::cli
