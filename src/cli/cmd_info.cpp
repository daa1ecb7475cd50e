// `flipscope info MODEL.gguf [--json]`
#include <fmt/format.h>

#include "checkpoint/model_info.h"
#include "cli/commands.h"

namespace flipscope::cli {

Action DefineInfo(CLI::App* cmd) {
  struct Opts {
    std::string model;
    bool json = false;
  };
  auto opts = std::make_shared<Opts>();
  cmd->add_option("model", opts->model, "GGUF model file")->required();
  cmd->add_flag("--json", opts->json, "Print JSON");
  return [opts]() -> int {
    auto info = ReadModelInfo(opts->model);
    if (!info.ok()) return Fail(info.status());
    if (opts->json)
      fmt::print("{}\n", info->ToJson().dump(2));
    else
      fmt::print("{}", info->ToText());
    return 0;
  };
}

}  // namespace flipscope::cli
