// Configuration tables of an experiment file ([baseline], [[variant]]): knobs, weights and
// server keys, each checked as it is read, then the configuration as a whole.
#include <fmt/format.h>
#include <toml++/toml.h>

#include <algorithm>

#include "experiment/parse_internal.h"

namespace flipscope {
namespace {

// The knob keys an experiment table accepts: those of the knob table.
std::string KnobKeys() {
  std::vector<std::string> keys;
  for (const auto& k : KnobTable()) keys.emplace_back(k.key);
  std::sort(keys.begin(), keys.end());
  return fmt::format("{}", fmt::join(keys, ", "));
}

// A TOML value as written, as JSON: what Knobs::FromJson reads and results.json shows as changes.
nlohmann::json ToJson(const toml::node& n) {
  if (auto v = n.as_string()) return v->get();
  if (auto v = n.as_integer()) return v->get();
  if (auto v = n.as_floating_point()) return v->get();
  if (auto v = n.as_boolean()) return v->get();
  if (auto a = n.as_array()) {
    nlohmann::json out = nlohmann::json::array();
    for (auto& e : *a) out.push_back(ToJson(e));
    return out;
  }
  return nullptr;
}

constexpr const char* kServerKeys =
    "engine, url, launch, port, health, startup_timeout, stop_timeout, env, api, logprobs, served_model_name, "
    "timeout, retries, api_key_env";

// A number of seconds > 0 from an integer or float node.
Status Seconds(const ParseCtx& c, const toml::node& n, const std::string& key, double& out) {
  auto v = n.value<double>();
  if (!v || *v <= 0) return c.At(n, key + " must be a number of seconds > 0");
  out = *v;
  return Status::Ok();
}

// A server configuration's api: vllm or sglang (llama-server serves only the recipe's check).
Status ReadApi(const ParseCtx& c, const toml::node& n, HttpApi& out) {
  const std::optional<std::string> name = n.value<std::string>();
  const std::optional<HttpApi> api = n.is_string() && name ? FromName<HttpApi>(*name) : std::nullopt;
  if (!n.is_string()) return c.At(n, "api must be a string");
  if (!api || *api == HttpApi::kLlamaServer) return c.At(n, "api must be vllm or sglang");
  out = *api;
  return Status::Ok();
}

// Reads one server key of a configuration table into out.server; *known is false for other keys.
Status ReadServerKey(const ParseCtx& c, const std::string& key, const toml::node& n, ConfigSpec& out, bool* known) {
  ServerSpec& sv = out.server;
  *known = true;
  auto str = [&](std::string& dst) -> Status {
    if (!n.is_string()) return c.At(n, key + " must be a string");
    dst = *n.value<std::string>();
    return Status::Ok();
  };
  auto integer = [&](int& dst, int64_t lo, int64_t hi) -> Status {
    auto v = n.value<int64_t>();
    if (!n.is_integer() || !v || *v < lo || *v > hi)
      return c.At(n, fmt::format("{} must be an integer from {} to {}", key, lo, hi));
    dst = int(*v);
    return Status::Ok();
  };
  if (key == "engine") {
    std::string name;
    FS_RETURN_IF_ERROR(str(name));
    const auto engine = FromName<EngineKind>(name);
    if (!engine || *engine == EngineKind::kExact) return c.At(n, "engine must be llama or openai");
    out.engine = *engine;
    if (out.engine == EngineKind::kLlama) sv = ServerSpec();
  } else if (key == "url")
    FS_RETURN_IF_ERROR(str(sv.url));
  else if (key == "launch")
    FS_RETURN_IF_ERROR(str(sv.launch));
  else if (key == "port")
    FS_RETURN_IF_ERROR(integer(sv.port, 1, 65535));
  else if (key == "health") {
    FS_RETURN_IF_ERROR(str(sv.health));
    if (sv.health.empty() || sv.health[0] != '/') return c.At(n, "health must be a path such as \"/health\"");
  } else if (key == "startup_timeout")
    FS_RETURN_IF_ERROR(Seconds(c, n, key, sv.startup_timeout_s));
  else if (key == "stop_timeout")
    FS_RETURN_IF_ERROR(Seconds(c, n, key, sv.stop_timeout_s));
  else if (key == "timeout")
    FS_RETURN_IF_ERROR(Seconds(c, n, key, sv.http.timeout_s));
  else if (key == "retries")
    FS_RETURN_IF_ERROR(integer(sv.http.retries, 0, 100));
  else if (key == "logprobs") {
    FS_RETURN_IF_ERROR(integer(sv.http.logprobs, -1, 1 << 20));
    if (sv.http.logprobs == 0) return c.At(n, "logprobs must be >= 1, or -1 for the whole vocabulary (vLLM)");
  } else if (key == "api") {
    FS_RETURN_IF_ERROR(ReadApi(c, n, sv.http.api));
  } else if (key == "served_model_name")
    FS_RETURN_IF_ERROR(str(sv.http.served_model));
  else if (key == "api_key_env")
    FS_RETURN_IF_ERROR(str(sv.http.api_key_env));
  else if (key == "env") {
    if (!n.is_table()) return c.At(n, "env must be a table, e.g. env = { VLLM_BATCH_INVARIANT = \"1\" }");
    for (auto& [ek, ev] : *n.as_table()) {
      if (!ev.is_string()) return c.At(ev, "env." + std::string(ek.str()) + " must be a string");
      sv.env[std::string(ek.str())] = *ev.value<std::string>();  // on top of the baseline's
    }
  } else {
    *known = false;
  }
  return Status::Ok();
}

// Checks a server configuration once its table is read; `t` is where it is defined.
Status CheckServer(const ParseCtx& c, const toml::table& t, const ConfigSpec& s, const toml::node* own_knob,
                   const toml::node* own_model) {
  if (s.engine != EngineKind::kOpenai) return Status::Ok();
  if (own_knob)
    return c.At(*own_knob,
                "a llama.cpp knob does not apply to a server configuration (its launch command decides the numerics)");
  if (own_model)
    return c.At(*own_model,
                "a server configuration serves its own weights (name them in its launch command); the "
                "experiment's model only tokenizes");
  const ServerSpec& sv = s.server;
  if (sv.url.empty() && sv.launch.empty())
    return c.At(t, "a server configuration needs url = \"http://...\" or launch = \"command\"");
  if (!sv.url.empty() && sv.url.rfind("http://", 0) != 0 && sv.url.rfind("https://", 0) != 0)
    return c.At(t, "url must start with http:// or https://");
  if (!sv.launch.empty() && sv.port == 0 && sv.url.empty() && sv.launch.find("{port}") == std::string::npos)
    return c.At(t, "launch needs port = N, {port} in the command (a free port), or url");
  return Status::Ok();
}

// What a configuration table's own keys set, for the checks once the whole table is read.
struct ConfigSeen {
  const toml::node* knob = nullptr;   // a knob but replay (a server configuration may not set one)
  const toml::node* model = nullptr;  // model or requantize (a server serves its own weights)
  bool url = false, launch = false;   // either makes a server; each replaces the inherited other
};

// Reads one key of a configuration table other than a server key: name, description, repeats,
// model, requantize or a knob (checked with the knobs read so far); *known is false for others.
Status ReadConfigKey(const ParseCtx& c, const std::string& key, const toml::node& node, const std::string& base_dir,
                     nlohmann::json& knobs, ConfigSpec& out, ConfigSeen& seen, bool* known) {
  *known = true;
  if (key == "name") {
    if (!node.is_string()) return c.At(node, "name must be a string");
    out.name = *node.value<std::string>();
  } else if (key == "description") {
    out.description = node.value_or<std::string>("");
  } else if (key == "repeats") {
    auto r = node.value<int64_t>();
    if (!r || *r < 1 || *r > 100) return c.At(node, "repeats must be an integer from 1 to 100");
    out.repeats = int(*r);
  } else if (key == "model") {
    if (!node.is_string()) return c.At(node, "model must be a path");
    out.model_path = ExpandPath(*node.value<std::string>(), base_dir);
    out.changes.values["model"] = out.model_path;
    seen.model = &node;
    return CheckFileAt(c, node, "model", out.model_path);
  } else if (key == "requantize") {
    if (!node.is_string()) return c.At(node, "requantize must be a type name such as F16 or Q8_0");
    out.requantize = *node.value<std::string>();
    out.changes.values["requantize"] = out.requantize;
    seen.model = &node;
  } else if (FindKnob(key)) {
    // replay is how flipscope asks (a server's twin is captured over HTTP, docs/served.md); the
    // other knobs are llama.cpp's numerics, which a server's launch command decides.
    if (key != "replay") seen.knob = &node;
    knobs[key] = ToJson(node);
    out.changes.values[key] = KnobValueFromJson(ToJson(node));
    auto parsed = Knobs::FromJson(knobs);
    if (!parsed.ok()) return c.At(node, parsed.status().message());
  } else {
    *known = false;
  }
  return Status::Ok();
}

}  // namespace

nlohmann::json ToJson(const ConfigChanges& c) {
  nlohmann::json j = ToJson(c.values);
  if (c.env) j["env"] = *c.env;
  return j;
}

Status ReadConfig(const ParseCtx& c, const toml::table& t, const ConfigSpec* base, const std::string& base_dir,
                  ConfigSpec& out) {
  nlohmann::json knobs = base ? base->knobs.ToJson() : Knobs().ToJson();
  out.line = int(t.source().begin.line);
  if (base) {
    out.model_path = base->model_path;
    out.repeats = 1;
    out.engine = base->engine;
    out.server = base->server;
  }
  ConfigSeen seen;
  const std::string keys = fmt::format("knobs: {}; servers: {}", KnobKeys(), kServerKeys);
  FS_RETURN_IF_ERROR(ReadKeys(c, t, "", keys, [&](const std::string& key, const toml::node& node, bool* known) {
    FS_RETURN_IF_ERROR(ReadServerKey(c, key, node, out, known));
    if (!*known) return ReadConfigKey(c, key, node, base_dir, knobs, out, seen, known);
    if (key == "env")
      out.changes.env = out.server.env;
    else
      out.changes.values[key] = KnobValueFromJson(ToJson(node));  // a string or a number: checked above
    seen.url |= key == "url";
    seen.launch |= key == "launch";
    return Status::Ok();
  }));
  auto parsed = Knobs::FromJson(knobs);
  if (!parsed.ok()) return c.At(t, parsed.status().message());
  out.knobs = *parsed;
  // A URL replaces an inherited launch command and the other way round; either makes a server.
  if (seen.url && !seen.launch) out.server.launch.clear();
  if (seen.launch && !seen.url) out.server.url.clear();
  if (seen.url || seen.launch) out.engine = EngineKind::kOpenai;
  // A knob llama.cpp would refuse is kept: the run records it as refused with the reason.
  return CheckServer(c, t, out, seen.knob, seen.model);
}

}  // namespace flipscope
