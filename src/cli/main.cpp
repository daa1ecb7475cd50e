// flipscope: the pipeline's stages as subcommands; kCommands below is the list.
#include <fmt/format.h>

#include <algorithm>
#include <string>
#include <vector>

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

namespace {
// llama.cpp spells some flags as one dash and several letters (-fa, -ctk); CLI11 reads those as
// bundled short flags, so they are rewritten to their long names before parsing.
std::vector<std::string> LlamaStyleArgs(int argc, char** argv) {
  std::vector<std::pair<std::string, std::string>> spellings;
  for (const auto& k : flipscope::KnobTable()) {
    std::string long_flag = k.long_flag;
    if (*k.llama_flag) spellings.emplace_back(k.llama_flag, long_flag.substr(long_flag.find("--")));
  }
  std::vector<std::string> out;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "-nr" || a == "--no-repack") {  // llama.cpp's switch for --repack off
      out.push_back("--repack");
      out.push_back("off");
      continue;
    }
    for (auto& [s, l] : spellings) {
      if (a == s)
        a = l;
      else if (a.rfind(s + "=", 0) == 0)
        a = l + a.substr(s.size());
    }
    out.push_back(a);
  }
  std::reverse(out.begin(), out.end());  // CLI11 takes arguments in reverse order
  return out;
}

// The subcommands, in the order --help lists them.
struct Command {
  const char* name;
  const char* help;
  Action (*define)(CLI::App* cmd);
};
const Command kCommands[] = {
    {"info", "A model file's facts: architecture, size, vocabulary, quant types, template", DefineInfo},
    {"capture", "Run a workload teacher-forced and store the logits at probe positions", DefineCapture},
    {"inspect", "A capture's manifest, tensors, probes, vocabulary and storage", DefineInspect},
    {"compare", "FP64 flips, KL and per-window rates of candidates against a base capture", DefineCompare},
    {"branch", "Decode both futures at every disagreement of two captures and judge them", DefineBranch},
    {"layers", "Where each flip of two captures is born: every layer's attention, MLP and residual at the flips",
     DefineLayers},
    {"run", "Run an experiment file: captures, comparisons, branches, report and recipe", DefineRun},
    {"report",
     "Render report.html, report.md and results.csv again from a results.json "
     "(e.g. one made on another machine)",
     DefineReport},
    {"tensors", "Tensor-by-tensor diff of two checkpoints (GGUF, safetensors, sharded)", DefineTensors},
    {"doctor",
     "Checks of a model file: chat template, BOS/EOS, tools, sampling, context, pre-tokenizer "
     "(exit 2 on an error finding)",
     DefineDoctor},
};

void PrintVersion() {
  fmt::print("flipscope {}\nllama.cpp {}\nggml {}\nbackends {}\n", FLIPSCOPE_VERSION, LlamaVersion(), GgmlVersion(),
             fmt::join(Backends(), ", "));
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
  std::vector<std::pair<CLI::App*, Action>> actions;
  for (const Command& c : kCommands) {
    CLI::App* sub = app.add_subcommand(c.name, c.help);
    actions.emplace_back(sub, c.define(sub));
  }
  const std::vector<std::string> args = LlamaStyleArgs(argc, argv);
  try {
    std::vector<std::string> consumed = args;  // CLI11 takes the arguments out of the vector it parses
    app.parse(consumed);
  } catch (const CLI::Success& e) {  // --help: CLI11 prints it
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    return Fail(flipscope::Status::InvalidArgument(ArgumentErrorLine(app, args, e)));
  }
  if (version) {
    PrintVersion();
    return 0;
  }
  for (auto& [sub, action] : actions)
    if (sub->parsed()) return action();
  fmt::print("{}", app.help());
  return 0;
}
