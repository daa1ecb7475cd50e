// EngineRecord: an engine's self-description read once, tolerantly (any writer, any version).
#include "engine/engine_record.h"

#include <algorithm>

#include "util/read.h"

namespace flipscope {

using nlohmann::json;

namespace {

// A value as a line of text: a string as it is, anything else as its JSON.
std::string TextOf(const json& v) { return v.is_string() ? v.get<std::string>() : v.dump(); }

}  // namespace

std::optional<EngineLaunch> EngineLaunch::Of(const json& block) {
  if (!block.is_object()) return std::nullopt;
  EngineLaunch l;
  l.asked = read::Sub(block, "asked"), l.run = read::Sub(block, "run");
  l.command = read::Opt<std::string>(l.run, "command");
  l.url = read::Opt<std::string>(l.run, "url");
  l.asked_command = read::Sub(l.asked, "command");
  if (const json& env = read::Sub(l.asked, "env"); env.is_object())
    for (auto it = env.begin(); it != env.end(); ++it) l.env[it.key()] = TextOf(*it);
  return l;
}

namespace {

// The "resolved" block: key -> {requested, effective, reason}; an entry that is not an object is
// left out, a reason that is not text reads "?".
std::vector<KnobResolution> ReadResolved(const json& block) {
  std::vector<KnobResolution> out;
  if (!block.is_object()) return out;
  for (auto it = block.begin(); it != block.end(); ++it)
    if (it->is_object())
      out.push_back({it.key(), KnobValueFromJson(read::Sub(*it, "requested")),
                     KnobValueFromJson(read::Sub(*it, "effective")), read::Str(*it, "reason", "?")});
  return out;
}

}  // namespace

EngineRecord EngineRecord::Of(const json& block) {
  EngineRecord e;
  e.record = block;
  e.name = read::Str(block, "engine");
  if (e.name.empty()) e.name = read::Str(block, "name");  // older exact captures
  e.flags = read::Str(block, "flags");
  const json& kernel = read::Sub(block, "kernel_path");
  e.kernel_path = read::Str(kernel, "summary");
  e.llama_build = read::Str(kernel, "llama_build");
  e.llama_cpp = read::Str(block, "llama_cpp");
  e.ggml = read::Str(block, "ggml");
  e.system_info = read::Str(block, "system_info");
  e.source = EngineSourceFromJson(read::Sub(block, "llama_source"));
  if (const json& server = read::Sub(block, "server"); server.is_object())
    e.server_version = read::Str(server, "version");
  e.url = read::Str(block, "url");
  e.backends = read::Values<std::string>(block, "backends");
  e.devices = EngineDevicesFromJson(read::Sub(block, "devices"));
  e.resolved = ReadResolved(read::Sub(block, "resolved"));
  e.swa_full = read::Opt<bool>(block, "swa_full");
  e.launch = EngineLaunch::Of(read::Sub(block, "launch"));
  e.knobs = read::Sub(block, "knobs");
  if (const json& env = read::Sub(block, "env"); env.is_object())
    for (auto it = env.begin(); it != env.end(); ++it)
      e.env[it.key()] = it->is_string() ? it->get<std::string>() : it->dump();
  return e;
}

std::string EnvText(const std::map<std::string, std::string>& env) {
  std::string out;
  for (const auto& [k, v] : env) out += (out.empty() ? "" : " ") + k + "=" + v;
  return out;
}

std::vector<std::string> ResolvedNotes(const EngineRecord& engine, const std::vector<std::string>& except) {
  std::vector<std::string> out;
  for (const KnobResolution& r : engine.resolved) {
    if ((r.key == "ctx_size" || r.key == "threads") && r.requested == KnobValue(int64_t(0))) continue;
    if (r.key == "n_gpu_layers" && r.requested == KnobValue(int64_t(-1))) continue;
    std::string note = r.key + " " + KnobText(r.requested) + " ran as " + KnobText(r.effective) + ": " + r.reason;
    if (std::find(except.begin(), except.end(), note) == except.end()) out.push_back(std::move(note));
  }
  return out;
}

}  // namespace flipscope
