// `flipscope tensors A B [--json] [--map FILE] [--threads N]`: the same weights or not, tensor by
// tensor, for GGUF and safetensors checkpoints in any combination.
#include <fmt/format.h>

#include "checkpoint/tensors.h"
#include "cli/commands.h"

namespace flipscope::cli {

Action DefineTensors(CLI::App* cmd) {
  struct Opts {
    std::string a, b;
    bool json = false;
    TensorsOptions diff;
  };
  auto opts = std::make_shared<Opts>();
  cmd->add_option("a", opts->a, "Checkpoint A (the reference): .gguf, .safetensors, index.json or a folder")
      ->required();
  cmd->add_option("b", opts->b, "Checkpoint B")->required();
  cmd->add_flag("--json", opts->json, "Print JSON (every tensor)");
  cmd->add_option("--map", opts->diff.map_path,
                  "JSON object {\"tensor in A\": \"tensor in B\"} for names the "
                  "automatic pairing does not know");
  cmd->add_option("--threads", opts->diff.threads, "Worker threads (default: all cores)");
  return [opts]() -> int {
    auto report = DiffCheckpoints(opts->a, opts->b, opts->diff);
    if (!report.ok()) return Fail(report.status());
    if (opts->json)
      fmt::print("{}\n", report->ToJson().dump(2));
    else
      fmt::print("{}", report->ToText());
    return 0;
  };
}

}  // namespace flipscope::cli
