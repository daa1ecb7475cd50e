// `flipscope tensors A B [--json] [--map FILE] [--threads N]`: the same weights or not, tensor by
// tensor, for GGUF and safetensors checkpoints in any combination.
#include <fmt/format.h>

#include "checkpoint/checkpoint.h"
#include "cli/commands.h"

namespace flipscope::cli {

void AddTensorsCommand(CLI::App& app) {
  struct Opts {
    std::string a, b;
    bool json = false;
    TensorsOptions diff;
  };
  auto opts = std::make_shared<Opts>();
  auto* cmd = app.add_subcommand("tensors", "Tensor-by-tensor diff of two checkpoints (GGUF, safetensors, sharded)");
  cmd->add_option("a", opts->a, "Checkpoint A (the reference): .gguf, .safetensors, index.json or a folder")
      ->required();
  cmd->add_option("b", opts->b, "Checkpoint B")->required();
  cmd->add_flag("--json", opts->json, "Print JSON (every tensor)");
  cmd->add_option("--map", opts->diff.map_path,
                  "JSON object {\"tensor in A\": \"tensor in B\"} for names the "
                  "automatic pairing does not know");
  cmd->add_option("--threads", opts->diff.threads, "Worker threads (default: all cores)");
  cmd->callback([opts] {
    auto report = DiffCheckpoints(opts->a, opts->b, opts->diff);
    if (!report.ok()) {
      ExitCode() = Fail(report.status());
      return;
    }
    if (opts->json)
      fmt::print("{}\n", report->ToJson().dump(2));
    else
      fmt::print("{}", report->ToText());
  });
}

}  // namespace flipscope::cli
