// The recipe's launch commands for a llama configuration: every setting that changed the
// captured numbers, so that the command serves what was measured.
#include <fmt/format.h>

#include "experiment/steps.h"

namespace flipscope {
namespace {


// A word as /bin/sh reads it: quoted when it holds anything but plain path characters.
std::string ShellWord(const std::string& s) {
  if (!s.empty() && s.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_./:=,+-@%") ==
                        std::string::npos)
    return s;
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

// The flags of a configuration's knobs without the context it was captured at (the recipe
// states the context to serve); the recorded flags when no knobs are.
std::string KnobFlags(const ConfigEntry& config) {
  if (const Knobs* ran = config.RanKnobs()) {
    Knobs k = *ran;
    k.n_ctx = 0;
    return k.ToFlags();
  }
  return config.flags.value_or("");
}

// The chat template the workload was rendered with, as llama.cpp's tools take it: a built-in
// name goes through llama.cpp's non-Jinja path (as flipscope rendered it; with Jinja on, a name
// would be read as template source), a file by its path; the model's own needs no flag.
std::string TemplateFlags(const WorkloadFacts& workload) {
  if (!workload.template_name) return "";
  const std::string& name = *workload.template_name;
  if (workload.template_source == "builtin") return " --no-jinja --chat-template " + ShellWord(name);
  if (workload.template_source == "file") return " --chat-template-file " + ShellWord(name);
  return "";
}

}  // namespace

std::string EnvPrefix(const std::map<std::string, std::string>& env) {
  std::string out;
  for (const auto& [k, v] : env) out += k + "=" + ShellWord(v) + " ";  // words quoted as needed
  return out;
}

std::optional<RecipeServerLaunch> ServerLaunch(const ConfigEntry& config) {
  const std::optional<EngineLaunch>& launch = config.engine ? config.engine->launch : std::nullopt;
  if (!launch || !launch->command) return std::nullopt;
  std::string note = "the launch command flipscope ran for this server configuration, as it was run (its {port} filled in";
  note += launch->url ? " for " + *launch->url + ")" : ")";
  note += launch->env.empty() ? ", with no variable set on top of flipscope's environment"
                              : ", with the variables it set on top of flipscope's environment";
  RecipeServerLaunch out;
  out.command = EnvPrefix(launch->env) + *launch->command, out.as_run = *launch->command;
  out.asked = launch->asked_command, out.note = note, out.env = launch->env;
  return out;
}

bool CapturedSwaFull(const ConfigEntry& config, const ModelInfo& model) {
  return model.n_layer_swa != 0 && config.engine && config.engine->swa_full.value_or(false);
}

std::string LlamaCommand(const std::string& tool, const ConfigEntry& config, const WorkloadFacts& workload,
                         const ModelInfo& model, int64_t n_ctx) {
  // The ggml variables the configuration was measured under belong to its command.
  std::string cmd = fmt::format("{}{} -m {} -c {}", config.engine ? EnvPrefix(config.engine->env) : "", tool,
                                ShellWord(config.model_path.value_or("")), n_ctx);
  // One sequence, as captured: llama-server's default (-np auto) splits the cache into 4 slots.
  if (tool == "llama-server") cmd += " -np 1";
  const std::string flags = KnobFlags(config);
  if (!flags.empty()) cmd += " " + flags;
  if (CapturedSwaFull(config, model)) cmd += " --swa-full";
  return cmd + TemplateFlags(workload);
}

}  // namespace flipscope
