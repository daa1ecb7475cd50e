// flipscope-worker: the capture command alone, built against one llama.cpp release for
// `flipscope history` (scripts/build-worker.sh), which runs it as a child process.
#include <fmt/format.h>

#include "cli/commands.h"
#include "engine/engine.h"

int main(int argc, char** argv) {
  using namespace flipscope::cli;
  static const Command kCommands[] = {
      {"capture", "Run a workload teacher-forced and store the logits at probe positions", DefineCapture}};
  CLI::App app{"flipscope-worker: flipscope's capture built against one llama.cpp release"};
  return RunCommands(argc, argv, app, kCommands, [] {
    fmt::print("llama.cpp {}\nggml {}\nbackends {}\n", flipscope::LlamaVersion(), flipscope::GgmlVersion(),
               fmt::join(flipscope::Backends(), ", "));
  });
}
