// cli: one subcommand per stage. Each Add*Command registers its flags and its action on app;
// actions print one clear line on error and exit non-zero.
#pragma once

#include <CLI/CLI.hpp>

#include "util/status.h"

namespace flipscope::cli {

// Prints "flipscope: error: <message>" to stderr and returns exit code 1.
int Fail(const Status& status);
// Exit code when a CLI action finished: 0 on success, else Fail(status).
int Done(const Status& status);

void AddInfoCommand(CLI::App& app);
void AddCaptureCommand(CLI::App& app);
void AddInspectCommand(CLI::App& app);
void AddCompareCommand(CLI::App& app);
void AddBranchCommand(CLI::App& app);
void AddRunCommand(CLI::App& app);
void AddReportCommand(CLI::App& app);
void AddTensorsCommand(CLI::App& app);
void AddDoctorCommand(CLI::App& app);

// The exit code the chosen subcommand set (commands store it here from their callbacks).
int& ExitCode();

}  // namespace flipscope::cli
