// Experiment files: TOML -> Experiment, with errors that name the file and line.
#include <fmt/format.h>
#include <toml++/toml.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <set>

#include "experiment/experiment.h"
#include "util/util.h"

namespace flipscope {
namespace {

namespace fs = std::filesystem;

// The knob keys an experiment table accepts: those of the knob table.
std::string KnobKeys() {
  std::vector<std::string> keys;
  for (const auto& k : KnobTable()) keys.emplace_back(k.key);
  std::sort(keys.begin(), keys.end());
  return fmt::format("{}", fmt::join(keys, ", "));
}

struct Ctx {
  std::string file;
  Status At(const toml::node& n, const std::string& what) const {
    return Status::Error(fmt::format("{}:{}: {}", file, n.source().begin.line, what));
  }
};

// ~ and ${VAR} expanded; relative paths resolved against the experiment file's folder.
std::string ExpandPath(const std::string& raw, const std::string& base_dir) {
  std::string s;
  for (size_t i = 0; i < raw.size(); ++i) {
    if (raw[i] == '$' && i + 1 < raw.size() && raw[i + 1] == '{') {
      size_t close = raw.find('}', i);
      if (close != std::string::npos) {
        const char* v = std::getenv(raw.substr(i + 2, close - i - 2).c_str());
        s += v ? v : "";
        i = close;
        continue;
      }
    }
    s += raw[i];
  }
  if (s.rfind("~/", 0) == 0) {
    const char* home = std::getenv("HOME");
    s = std::string(home ? home : "") + s.substr(1);
  }
  if (!s.empty() && fs::path(s).is_relative()) s = (fs::path(base_dir) / s).lexically_normal().string();
  return s;
}

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
Status Seconds(const Ctx& c, const toml::node& n, const std::string& key, double& out) {
  auto v = n.value<double>();
  if (!v || *v <= 0) return c.At(n, key + " must be a number of seconds > 0");
  out = *v;
  return Status::Ok();
}

// Reads one server key of a configuration table into out.server; *known is false for other keys.
Status ReadServerKey(const Ctx& c, const std::string& key, const toml::node& n, ConfigSpec& out, bool* known) {
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
    FS_RETURN_IF_ERROR(str(out.engine));
    if (out.engine != "llama" && out.engine != "openai") return c.At(n, "engine must be llama or openai");
    if (out.engine == "llama") sv = ServerSpec();
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
    FS_RETURN_IF_ERROR(str(sv.http.api));
    if (sv.http.api != "vllm" && sv.http.api != "sglang") return c.At(n, "api must be vllm or sglang");
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
Status CheckServer(const Ctx& c, const toml::table& t, const ConfigSpec& s, const toml::node* own_knob,
                   const toml::node* own_model) {
  if (s.engine != "openai") return Status::Ok();
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

// Reads a configuration table (baseline or variant) over `base`'s knobs.
Status ReadConfig(const Ctx& c, const toml::table& t, const ConfigSpec* base, const std::string& base_dir,
                  ConfigSpec& out) {
  nlohmann::json knobs = base ? base->knobs.ToJson() : Knobs().ToJson();
  out.line = int(t.source().begin.line);
  if (base) {
    out.model_path = base->model_path;
    out.repeats = 1;
    out.engine = base->engine;
    out.server = base->server;
  }
  const toml::node *own_knob = nullptr, *own_model = nullptr;
  bool set_url = false, set_launch = false;
  for (auto& [k, node] : t) {
    std::string key(k.str());
    bool server_key = false;
    FS_RETURN_IF_ERROR(ReadServerKey(c, key, node, out, &server_key));
    if (server_key) {
      out.changes[key] = key == "env" ? nlohmann::json(out.server.env) : ToJson(node);
      set_url |= key == "url";
      set_launch |= key == "launch";
      continue;
    }
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
      out.changes["model"] = out.model_path;
      own_model = &node;
    } else if (key == "requantize") {
      if (!node.is_string()) return c.At(node, "requantize must be a type name such as F16 or Q8_0");
      out.requantize = *node.value<std::string>();
      out.changes["requantize"] = out.requantize;
      own_model = &node;
    } else if (FindKnob(key)) {
      own_knob = &node;
      knobs[key] = ToJson(node);
      out.changes[key] = ToJson(node);
      auto parsed = Knobs::FromJson(knobs);
      if (!parsed.ok()) return c.At(node, parsed.status().message());
    } else {
      return c.At(node, fmt::format("unknown key '{}' (knobs: {}; servers: {})", key, KnobKeys(), kServerKeys));
    }
  }
  auto parsed = Knobs::FromJson(knobs);
  if (!parsed.ok()) return c.At(t, parsed.status().message());
  out.knobs = *parsed;
  // A URL replaces an inherited launch command and the other way round; either makes a server.
  if (set_url && !set_launch) out.server.launch.clear();
  if (set_launch && !set_url) out.server.url.clear();
  if (set_url || set_launch) out.engine = "openai";
  FS_RETURN_IF_ERROR(CheckServer(c, t, out, own_knob, own_model));
  // A knob llama.cpp would refuse is kept: the run records it as refused with the reason.
  return Status::Ok();
}

template <typename T>
Status Get(const Ctx& c, const toml::node& n, T& out, const char* what) {
  auto v = n.value<T>();
  if (!v) return c.At(n, std::string(what));
  out = *v;
  return Status::Ok();
}

// configs = ["name", ...]: variant names (checked against the variants once they are read).
Status ReadNames(const Ctx& c, const toml::node& n, std::vector<std::string>& out) {
  auto* arr = n.as_array();
  if (!arr) return c.At(n, "configs must be a list of variant names");
  for (auto& e : *arr) {
    auto name = e.value<std::string>();
    if (!name) return c.At(e, "configs must be a list of variant names");
    out.push_back(*name);
  }
  return Status::Ok();
}

Status ReadLayers(const Ctx& c, const toml::node& node, LayersSettings& out) {
  if (!node.is_table()) return c.At(node, "[layers] must be a table");
  out.enabled = true;
  for (auto& [k, n] : *node.as_table()) {
    std::string key(k.str());
    int64_t v = 0;
    if (key == "enabled")
      FS_RETURN_IF_ERROR(Get(c, n, out.enabled, "enabled must be true or false"));
    else if (key == "exact")
      FS_RETURN_IF_ERROR(Get(c, n, out.exact, "exact must be true or false"));
    else if (key == "configs")
      FS_RETURN_IF_ERROR(ReadNames(c, n, out.configs));
    else if (key == "max_flips") {
      FS_RETURN_IF_ERROR(Get(c, n, v, "max_flips must be an integer"));
      if (v < 0) return c.At(n, "max_flips must be >= 0 (0: every flip)");
      out.max_flips = int(v);
    } else
      return c.At(n, "unknown key '" + key + "' in [layers] (enabled, configs, max_flips, exact)");
  }
  return Status::Ok();
}

}  // namespace

Result<Experiment> ParseExperiment(const std::string& path) {
  Ctx c{path};
  toml::table root;
  try {
    root = toml::parse_file(path);
  } catch (const toml::parse_error& e) {
    if (!fs::exists(path)) return Status::Error(path + ": no such file");
    return Status::Error(fmt::format("{}:{}: {}", path, e.source().begin.line, e.description()));
  }
  Experiment exp;
  exp.path = path;
  std::string dir = fs::path(path).parent_path().string();
  exp.name = fs::path(path).stem().string();
  const toml::table* baseline = nullptr;
  for (auto& [k, node] : root) {
    std::string key(k.str());
    if (key == "name")
      FS_RETURN_IF_ERROR(Get(c, node, exp.name, "name must be a string"));
    else if (key == "model") {
      FS_RETURN_IF_ERROR(Get(c, node, exp.model, "model must be a path"));
      exp.model = ExpandPath(exp.model, dir);
    } else if (key == "workload") {
      FS_RETURN_IF_ERROR(Get(c, node, exp.workload, "workload must be a path"));
      exp.workload = ExpandPath(exp.workload, dir);
    } else if (key == "chat_template") {
      FS_RETURN_IF_ERROR(Get(c, node, exp.workload_options.chat_template, "chat_template must be a string"));
      if (exp.workload_options.chat_template.find('/') != std::string::npos ||
          exp.workload_options.chat_template.find('.') != std::string::npos)
        exp.workload_options.chat_template = ExpandPath(exp.workload_options.chat_template, dir);
    } else if (key == "format")
      FS_RETURN_IF_ERROR(Get(c, node, exp.workload_options.format, "format must be a string"));
    else if (key == "window") {
      int64_t w = 0;
      FS_RETURN_IF_ERROR(Get(c, node, w, "window must be an integer"));
      if (w < 1) return c.At(node, "window must be >= 1");
      exp.window = int(w);
    } else if (key == "reference") {
      FS_RETURN_IF_ERROR(Get(c, node, exp.reference, "reference must be \"exact\""));
      if (exp.reference != "exact")
        return c.At(node, "reference must be \"exact\" (the FP64 exact engine, docs/exact.md)");
    } else if (key == "confident") {
      FS_RETURN_IF_ERROR(Get(c, node, exp.confident, "confident must be a probability"));
      if (exp.confident <= 0 || exp.confident > 1) return c.At(node, "confident must be in (0, 1]");
    } else if (key == "memory") {
      std::string m;
      FS_RETURN_IF_ERROR(Get(c, node, m, "memory must be a size such as \"8GiB\""));
      auto b = ParseBytes(m);
      if (!b.ok()) return c.At(node, b.status().message());
      exp.memory_budget = *b;
    } else if (key == "probe") {
      if (!node.is_table()) return c.At(node, "[probe] must be a table");
      for (auto& [pk, pn] : *node.as_table()) {
        std::string p(pk.str());
        if (p == "stride") {
          int64_t s = 0;
          FS_RETURN_IF_ERROR(Get(c, pn, s, "stride must be an integer"));
          if (s < 1) return c.At(pn, "stride must be >= 1");
          exp.plan.stride = int(s);
        } else if (p == "full")
          FS_RETURN_IF_ERROR(Get(c, pn, exp.plan.full, "full must be a string"));
        else if (p == "store") {
          std::string s;
          FS_RETURN_IF_ERROR(Get(c, pn, s, "store must be f32 or bf16"));
          auto st = ParseStore(s);
          if (!st.ok()) return c.At(pn, st.status().message());
          exp.store = *st;
        } else
          return c.At(pn, "unknown key '" + p + "' in [probe] (stride, full, store)");
      }
    } else if (key == "baseline") {
      if (!node.is_table()) return c.At(node, "[baseline] must be a table");
      baseline = node.as_table();
    } else if (key == "variant") {
      if (!node.is_array_of_tables()) return c.At(node, "variants are written [[variant]]");
    } else if (key == "branch") {
      if (!node.is_table()) return c.At(node, "[branch] must be a table");
      exp.branch.enabled = true;
      for (auto& [bk, bn] : *node.as_table()) {
        std::string b(bk.str());
        int64_t v = 0;
        if (b == "enabled")
          FS_RETURN_IF_ERROR(Get(c, bn, exp.branch.enabled, "enabled must be true or false"));
        else if (b == "configs")
          FS_RETURN_IF_ERROR(ReadNames(c, bn, exp.branch.configs));
        else if (b == "max_tokens" || b == "max_call_tokens" || b == "max_branches" || b == "reconverge") {
          FS_RETURN_IF_ERROR(Get(c, bn, v, "must be an integer"));
          // max_call_tokens 0 turns the extension off; the others count at least one.
          if (v < (b == "max_call_tokens" ? 0 : 1))
            return c.At(bn, b + (b == "max_call_tokens" ? " must be >= 0" : " must be >= 1"));
          (b == "max_tokens"        ? exp.branch.max_tokens
           : b == "max_call_tokens" ? exp.branch.max_call_tokens
           : b == "max_branches"    ? exp.branch.max_branches
                                    : exp.branch.reconverge) = int(v);
        } else
          return c.At(bn,
                      "unknown key '" + b +
                          "' in [branch] (enabled, configs, max_tokens, max_call_tokens, max_branches, reconverge)");
      }
    } else if (key == "layers") {
      FS_RETURN_IF_ERROR(ReadLayers(c, node, exp.layers));
    } else {
      return c.At(node, "unknown key '" + key +
                            "' (name, model, workload, chat_template, format, window, confident, memory, reference, "
                            "[probe], [baseline], [[variant]], [branch], [layers])");
    }
  }
  if (exp.model.empty()) return Status::Error(path + ": no model given (model = \"path/to/model.gguf\")");
  if (exp.workload.empty()) return Status::Error(path + ": no workload given (workload = \"path\")");
  exp.baseline.name = "baseline";
  exp.baseline.model_path = exp.model;
  if (baseline) FS_RETURN_IF_ERROR(ReadConfig(c, *baseline, nullptr, dir, exp.baseline));
  if (exp.baseline.name.empty()) exp.baseline.name = "baseline";
  std::set<std::string> names = {exp.baseline.name};
  if (auto arr = root["variant"].as_array()) {
    for (auto& v : *arr) {
      ConfigSpec spec;
      FS_RETURN_IF_ERROR(ReadConfig(c, *v.as_table(), &exp.baseline, dir, spec));
      if (spec.name.empty()) return c.At(v, "a variant needs a name");
      if (!names.insert(spec.name).second) return c.At(v, "duplicate configuration name '" + spec.name + "'");
      if (spec.changes.empty()) return c.At(v, "variant '" + spec.name + "' changes nothing from the baseline");
      exp.variants.push_back(std::move(spec));
    }
  }
  if (exp.reference == "exact" && names.count("exact"))
    return Status::Error(path + ": a configuration named 'exact' clashes with reference = \"exact\" (rename it)");
  for (const auto& [table, names] : {std::pair{"[branch]", &exp.branch.configs}, {"[layers]", &exp.layers.configs}})
    for (const auto& name : *names)
      if (std::none_of(exp.variants.begin(), exp.variants.end(), [&](const ConfigSpec& v) { return v.name == name; }))
        return Status::Error(path + ": " + table + " configs names '" + name + "', which is not a variant");
  return exp;
}

}  // namespace flipscope
