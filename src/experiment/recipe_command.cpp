// The recipe's launch commands for a llama configuration: every setting that changed the
// captured numbers, so that the command serves what was measured.
#include <fmt/format.h>

#include "experiment/steps.h"

namespace flipscope {
namespace {

using nlohmann::json;

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
std::string KnobFlags(const json& config) {
  if (auto k = Knobs::FromJson(config.value("knobs", json())); k.ok()) {
    k->n_ctx = 0;
    return k->ToFlags();
  }
  auto flags = config.find("flags");
  return flags != config.end() && flags->is_string() ? flags->get<std::string>() : "";
}

// The chat template the workload was rendered with, as llama.cpp's tools take it: a built-in
// name goes through llama.cpp's non-Jinja path (as flipscope rendered it; with Jinja on, a name
// would be read as template source), a file by its path; the model's own needs no flag.
std::string TemplateFlags(const json& workload) {
  if (!workload.is_object() || !workload.contains("template")) return "";
  const json* t = &workload["template"];
  if (!t->is_object() || !(*t)["name"].is_string()) return "";
  const std::string source = t->value("source", ""), name = (*t)["name"];
  if (source == "builtin") return " --no-jinja --chat-template " + ShellWord(name);
  if (source == "file") return " --chat-template-file " + ShellWord(name);
  return "";
}

// A shell line that sets env's variables for one command: "K=v K2=v2 " (words quoted as needed).
std::string EnvPrefix(const json& env) {
  std::string out;
  if (env.is_object())
    for (const auto& [k, v] : env.items()) out += k + "=" + ShellWord(v.is_string() ? v.get<std::string>() : v.dump()) + " ";
  return out;
}

}  // namespace

std::optional<RecipeServerLaunch> ServerLaunch(const json& config) {
  // Each field looked up without assuming the entry's shape (results.json is outside input).
  auto field = [](const json& j, const char* key) { return j.is_object() && j.contains(key) ? j[key] : json(); };
  const json launch = field(field(config, "engine"), "launch");
  const json run = field(launch, "run"), asked = field(launch, "asked");
  const json command = field(run, "command"), url = field(run, "url");
  if (!command.is_string()) return std::nullopt;
  const json env = field(asked, "env").is_object() ? field(asked, "env") : json::object();
  const std::string as_run = command.get<std::string>();
  std::string note = "the launch command flipscope ran for this server configuration, as it was run (its {port} filled in";
  note += url.is_string() ? " for " + url.get<std::string>() + ")" : ")";
  note += env.empty() ? ", with no variable set on top of flipscope's environment"
                      : ", with the variables it set on top of flipscope's environment";
  RecipeServerLaunch out;
  out.command = EnvPrefix(env) + as_run, out.as_run = as_run, out.asked = field(asked, "command"), out.note = note;
  auto& vars = out.env.emplace();
  for (auto it = env.begin(); it != env.end(); ++it)
    vars[it.key()] = it->is_string() ? it->get<std::string>() : it->dump();  // as EnvPrefix sets it
  return out;
}

bool CapturedSwaFull(const json& config, const ModelInfo& model) {
  if (model.n_layer_swa == 0) return false;
  const json* e = &config;
  for (const char* key : {"engine", "swa_full"}) {
    if (!e->is_object() || !e->contains(key)) return false;
    e = &(*e)[key];
  }
  return e->is_boolean() && e->get<bool>();
}

std::string LlamaCommand(const std::string& tool, const json& config, const json& workload, const ModelInfo& model,
                         int64_t n_ctx) {
  std::string cmd = fmt::format("{} -m {} -c {}", tool, ShellWord(config.value("model_path", "")), n_ctx);
  // One sequence, as captured: llama-server's default (-np auto) splits the cache into 4 slots.
  if (tool == "llama-server") cmd += " -np 1";
  const std::string flags = KnobFlags(config);
  if (!flags.empty()) cmd += " " + flags;
  if (CapturedSwaFull(config, model)) cmd += " --swa-full";
  return cmd + TemplateFlags(workload);
}

}  // namespace flipscope
