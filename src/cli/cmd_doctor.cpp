// `flipscope doctor MODEL.gguf [--generation-config FILE] [--json]`: checks of a model file, each
// finding with a severity and a one-line fix. Exit code 2 when a finding is an error.
#include <fmt/format.h>

#include "checkpoint/doctor.h"
#include "cli/commands.h"

namespace flipscope::cli {

Action DefineDoctor(CLI::App* cmd) {
  struct Opts {
    std::string model;
    bool json = false;
    DoctorOptions doctor;
  };
  auto opts = std::make_shared<Opts>();
  cmd->add_option("model", opts->model, "GGUF model file")->required();
  cmd->add_option("--generation-config", opts->doctor.generation_config,
                  "The model's generation_config.json, to check sampler settings and stop tokens against");
  cmd->add_flag("--json", opts->json, "Print JSON");
  return [opts]() -> int {
    auto report = RunDoctor(opts->model, opts->doctor);
    if (!report.ok()) return Fail(report.status());
    if (opts->json)
      fmt::print("{}\n", report->ToJson().dump(2));
    else
      fmt::print("{}", report->ToText());
    return report->ExitCode();
  };
}

}  // namespace flipscope::cli
