// Subcommands whose stages are not built yet register nothing.
#include "cli/commands.h"

namespace flipscope::cli {
void AddCaptureCommand(CLI::App&) {}
void AddInspectCommand(CLI::App&) {}
void AddCompareCommand(CLI::App&) {}
void AddBranchCommand(CLI::App&) {}
void AddRunCommand(CLI::App&) {}
void AddTensorsCommand(CLI::App&) {}
void AddDoctorCommand(CLI::App&) {}
}  // namespace flipscope::cli
