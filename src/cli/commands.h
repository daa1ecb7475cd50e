// cli: one subcommand per stage. Each Define* registers its flags on the subcommand main made for
// it and returns its action; main's command table names them. Actions print one clear line on
// error and return the exit code.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>

#include "util/status.h"

namespace flipscope::cli {

// Prints "flipscope: error: <message>" to stderr and returns exit code 1.
int Fail(const Status& status);
// 0 on success, else Fail(status).
int Done(const Status& status);

// What a subcommand does once its flags are parsed; returns the process exit code.
using Action = std::function<int()>;

Action DefineInfo(CLI::App* cmd);
Action DefineCapture(CLI::App* cmd);
Action DefineInspect(CLI::App* cmd);
Action DefineCompare(CLI::App* cmd);
Action DefineBranch(CLI::App* cmd);
Action DefineLayers(CLI::App* cmd);
Action DefineRun(CLI::App* cmd);
Action DefineReport(CLI::App* cmd);
Action DefineTensors(CLI::App* cmd);
Action DefineDoctor(CLI::App* cmd);

}  // namespace flipscope::cli
