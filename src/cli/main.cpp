// flipscope: the pipeline's stages as subcommands; kCommands below is the list.
#include <fmt/format.h>

#include <string>
#include <vector>

#include "cli/commands.h"
#include "engine/engine.h"
#include "records/records.h"

namespace flipscope::cli {

namespace {
// The subcommands, in the order --help lists them.
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
    {"history",
     "One workload and one set of knobs over several llama.cpp releases (llama-cpp-python's): what each "
     "upgrade changed",
     DefineHistory},
    {"bisect",
     "The first commit of a llama.cpp checkout between a good and a bad one whose numbers differ from good's",
     DefineBisect},
    {"tensors", "Tensor-by-tensor diff of two checkpoints (GGUF, safetensors, sharded)", DefineTensors},
    {"doctor",
     "Checks of a model file: chat template, BOS/EOS, tools, sampling, context, pre-tokenizer "
     "(exit 2 on an error finding)",
     DefineDoctor},
};

void PrintVersion() {
  fmt::print("flipscope {}\nllama.cpp {}\nggml {}\nbackends {}\n", FlipscopeVersion(), LlamaVersion(), GgmlVersion(),
             fmt::join(Backends(), ", "));
}
}  // namespace
}  // namespace flipscope::cli

int main(int argc, char** argv) {
  using namespace flipscope::cli;
  CLI::App app{"flipscope: where does a different inference stack flip the model's choices?"};
  return RunCommands(argc, argv, app, kCommands, PrintVersion);
}
