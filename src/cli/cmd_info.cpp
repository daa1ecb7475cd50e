// `flipscope info MODEL.gguf [--json]`
#include <fmt/format.h>

#include "checkpoint/checkpoint.h"
#include "cli/commands.h"

namespace flipscope::cli {

void AddInfoCommand(CLI::App& app) {
  struct Opts { std::string model; bool json = false; };
  auto opts = std::make_shared<Opts>();
  auto* cmd = app.add_subcommand("info", "A model file's facts: architecture, size, vocabulary, quant types, template");
  cmd->add_option("model", opts->model, "GGUF model file")->required();
  cmd->add_flag("--json", opts->json, "Print JSON");
  cmd->callback([opts] {
    auto info = ReadModelInfo(opts->model);
    if (!info.ok()) {
      ExitCode() = Fail(info.status());
      return;
    }
    if (opts->json) fmt::print("{}\n", info->ToJson().dump(2));
    else fmt::print("{}", info->ToText());
  });
}

}  // namespace flipscope::cli
