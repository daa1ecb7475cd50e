// flipscope: the pipeline's stages as subcommands.
//   info      a model file's facts
//   capture   workload -> teacher-forced logits at probe positions (.safetensors)
//   inspect   a capture's manifest and tensors
//   compare   FP64 flip / KL metrics between captures
//   branch    decode both futures at every disagreement and judge them
//   run       an experiment file: captures -> comparisons -> branches -> report + recipe
//   tensors   tensor-by-tensor diff of two checkpoints
//   doctor    checks of a model file
#include <fmt/format.h>

#include "cli/commands.h"
#include "engine/engine.h"

#ifndef FLIPSCOPE_VERSION
#define FLIPSCOPE_VERSION "0.0.0"
#endif

namespace flipscope::cli {

int Fail(const Status& status) {
  fmt::print(stderr, "flipscope: error: {}\n", status.message());
  return 1;
}
int Done(const Status& status) { return status.ok() ? 0 : Fail(status); }
int& ExitCode() {
  static int code = 0;
  return code;
}

namespace {
void PrintVersion() {
  fmt::print("flipscope {}\nllama.cpp {}\nggml {}\nbackends {}\n", FLIPSCOPE_VERSION, LlamaVersion(),
             GgmlVersion(), fmt::join(Backends(), ", "));
}
}  // namespace
}  // namespace flipscope::cli

int main(int argc, char** argv) {
  using namespace flipscope::cli;
  CLI::App app{"flipscope: where does a different inference stack flip the model's choices?"};
  app.require_subcommand(0, 1);
  bool version = false, verbose = false;
  app.add_flag("--version", version, "Print flipscope's, llama.cpp's and ggml's versions and the backends");
  app.add_flag("-v,--verbose", verbose, "Show llama.cpp's log");
  app.parse_complete_callback([&] { flipscope::InitLlamaLogging(verbose); });
  AddInfoCommand(app);
  AddCaptureCommand(app);
  AddInspectCommand(app);
  AddCompareCommand(app);
  AddBranchCommand(app);
  AddRunCommand(app);
  AddTensorsCommand(app);
  AddDoctorCommand(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  if (version) {
    PrintVersion();
    return 0;
  }
  if (app.get_subcommands().empty()) {
    fmt::print("{}", app.help());
    return 0;
  }
  return ExitCode();
}
