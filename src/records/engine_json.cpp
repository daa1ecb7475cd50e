// The JSON of an engine's records (engine_records.h): the keys and number types the engines have
// always written, so that a manifest written from a record is the same bytes as before.
#include <algorithm>
#include <nlohmann/json.hpp>

#include "records/engine_records.h"
#include "util/read.h"

namespace flipscope {

using nlohmann::json;

OpaqueJson::OpaqueJson() = default;
OpaqueJson::OpaqueJson(const json& value) : value_(std::make_shared<const json>(value)) {}

const json& OpaqueJson::get() const {
  static const json kNull;
  return value_ ? *value_ : kNull;
}

bool OpaqueJson::is_null() const { return get().is_null(); }

AsRead AsReadOf(const json& stored, const json& written) {
  AsRead a;
  json differing = json::object();
  for (auto it = stored.begin(); it != stored.end(); ++it)
    if (const auto w = written.find(it.key()); w == written.end() || *w != *it || w->dump() != it->dump())
      differing[it.key()] = *it;
  for (auto it = written.begin(); it != written.end(); ++it)
    if (!stored.contains(it.key())) a.missing.push_back(it.key());
  if (!differing.empty()) a.differing = OpaqueJson(differing);
  return a;
}

void ApplyAsRead(json& written, const AsRead& as_read) {
  for (const std::string& key : as_read.missing) written.erase(key);
  const json& differing = as_read.differing.get();
  if (differing.is_object())
    for (auto it = differing.begin(); it != differing.end(); ++it) written[it.key()] = *it;
}

json ToJson(const KnobValue& v) {
  return std::visit([](const auto& x) { return json(x); }, v);
}

json ToJson(const KnobValues& values) {
  json out = json::object();
  for (const auto& [key, v] : values) out[key] = ToJson(v);
  return out;
}

KnobValue KnobValueFromJson(const json& j) {
  if (j.is_boolean()) return j.get<bool>();
  if (j.is_number_integer()) return j.get<int64_t>();
  if (j.is_number_float()) return j.get<double>();
  if (j.is_string()) return j.get<std::string>();
  if (j.is_array() && std::all_of(j.begin(), j.end(), [](const json& x) { return x.is_number(); }))
    return j.get<std::vector<double>>();
  return nullptr;
}

KnobValues KnobValuesFromJson(const json& j) {
  KnobValues out;
  if (j.is_object())
    for (auto it = j.begin(); it != j.end(); ++it) out[it.key()] = KnobValueFromJson(*it);
  return out;
}

std::string KnobText(const KnobValue& v) {
  if (const auto* s = std::get_if<std::string>(&v)) return *s;
  return ToJson(v).dump();
}

json ToJson(const std::vector<KnobResolution>& resolutions) {
  json out = json::object();
  for (const KnobResolution& r : resolutions)
    out[r.key] = {{"requested", ToJson(r.requested)}, {"effective", ToJson(r.effective)}, {"reason", r.reason}};
  return out;
}

namespace {

void AddFacts(json& d, const LlamaEngineFacts& f) {
  d["engine"] = "llama";
  d["llama_cpp"] = f.llama_cpp;
  if (f.source) d["llama_source"] = ToJson(*f.source);
  d["ggml"] = f.ggml;
  d["backends"] = f.backends;
  d["devices"] = ToJson(f.devices);
  d["system_info"] = f.system_info;
  d["model_desc"] = f.model_desc;
  d["resolved"] = ToJson(f.resolved);
  d["kernel_path"] = ToJson(f.kernel_path);
  d["kv_unified"] = f.kv_unified;
  d["swa_full"] = f.swa_full;
}

void AddFacts(json& d, const ExactEngineFacts& f) {
  json types = json::object();
  for (const auto& [type, c] : f.dequant_types)
    types[type] = {{"elements", c.elements}, {"checked", c.checked}, {"inexact", c.inexact}};
  d["engine"] = "exact";
  d["name"] = "exact";
  d["version"] = f.version;
  d["precision"] = f.precision;
  d["architecture"] = f.architecture;
  d["blas"] = f.blas.get();
  d["dequantization"] = {
      {"route", f.dequant_route}, {"check", f.dequant_check}, {"exact", f.dequant_exact}, {"types", types}};
  d["attention"] = {{"query_block", f.query_block}, {"softmax", f.softmax}};
  d["load_s"] = f.load_s;
  if (const auto& g = f.device)  // only then: CPU manifests stay as they were
    d["device"] = {{"kind", g->kind},
                   {"name", g->name},
                   {"description", g->description},
                   {"compute_capability", g->compute_capability},
                   {"memory_gib", g->memory_gib},
                   {"driver_cuda", g->driver_cuda},
                   {"runtime_cuda", g->runtime_cuda},
                   {"cublas", g->cublas},
                   {"route", g->route}};
}

void AddFacts(json& d, const ServerEngineFacts& f) {
  d["engine"] = "openai";
  d["api"] = f.api;
  d["url"] = f.url;
  d["endpoint"] = f.endpoint;
  d["served_model"] = f.served_model;
  d["server"] = f.server.get();
  d["server_context"] = f.server_context;
  d["server_note"] = f.server_note;
  d["logprobs"] = f.logprobs;
  d["topk"] = f.topk;
  d["api_key_env"] = f.api_key_env;
  d["timeout_s"] = f.timeout_s;
  d["retries"] = f.retries;
  if (f.launch) d["launch"] = {{"asked", f.launch->asked.get()}, {"run", f.launch->run.get()}};
}

void AddFacts(json&, const std::monostate&) {}

}  // namespace

json ToJson(const EngineDescription& d) {
  json out = json::object();
  std::visit([&](const auto& facts) { AddFacts(out, facts); }, d.facts);
  out["flags"] = d.flags;
  out["knobs"] = ToJson(d.knobs);
  // Written only when set, so that a capture made without any reads as before.
  if (!d.env.empty()) out["env"] = d.env;
  ApplyAsRead(out, d.as_read);
  return out;
}

namespace {

LlamaEngineFacts LlamaFactsOf(const json& j) {
  LlamaEngineFacts f;
  f.llama_cpp = read::Str(j, "llama_cpp");
  f.ggml = read::Str(j, "ggml");
  f.system_info = read::Str(j, "system_info");
  f.model_desc = read::Str(j, "model_desc");
  f.source = EngineSourceFromJson(read::Sub(j, "llama_source"));
  f.backends = read::Values<std::string>(j, "backends");
  f.devices = EngineDevicesFromJson(read::Sub(j, "devices"));
  if (const json& r = read::Sub(j, "resolved"); r.is_object())
    for (auto it = r.begin(); it != r.end(); ++it)
      f.resolved.push_back({it.key(), KnobValueFromJson(read::Sub(*it, "requested")),
                            KnobValueFromJson(read::Sub(*it, "effective")), read::Str(*it, "reason")});
  const json& k = read::Sub(j, "kernel_path");
  f.kernel_path.cpu_features = read::Values<std::string>(k, "cpu_features");
  f.kernel_path.llama_build = read::Str(k, "llama_build");
  if (const json& w = read::Sub(k, "weight_buffers"); w.is_object())
    for (auto it = w.begin(); it != w.end(); ++it)
      if (it->is_number()) f.kernel_path.weight_buffers[it.key()] = it->get<double>();
  f.kernel_path.extra_buffer_types = read::Values<std::string>(k, "extra_buffer_types");
  f.kernel_path.summary = read::Str(k, "summary");
  f.kv_unified = read::Get<bool>(j, "kv_unified", true);
  f.swa_full = read::Get<bool>(j, "swa_full", true);
  return f;
}

ExactEngineFacts ExactFactsOf(const json& j) {
  ExactEngineFacts f;
  f.version = read::Str(j, "version");
  f.precision = read::Str(j, "precision");
  f.architecture = read::Str(j, "architecture");
  f.blas = OpaqueJson(read::Sub(j, "blas"));
  const json& dq = read::Sub(j, "dequantization");
  f.dequant_route = read::Str(dq, "route");
  f.dequant_check = read::Str(dq, "check");
  f.dequant_exact = read::Get<bool>(dq, "exact", false);
  if (const json& types = read::Sub(dq, "types"); types.is_object())
    for (auto it = types.begin(); it != types.end(); ++it)
      f.dequant_types[it.key()] = {.elements = read::Get<int64_t>(*it, "elements", 0),
                                   .inexact = read::Get<int64_t>(*it, "inexact", 0),
                                   .checked = read::Get<bool>(*it, "checked", false)};
  const json& att = read::Sub(j, "attention");
  f.query_block = read::Get<int64_t>(att, "query_block", 0);
  f.softmax = read::Str(att, "softmax");
  f.load_s = read::Get<double>(j, "load_s", 0);
  if (const json& g = read::Sub(j, "device"); g.is_object())
    f.device = ExactDeviceFacts{.kind = read::Str(g, "kind"),
                                .name = read::Str(g, "name"),
                                .description = read::Str(g, "description"),
                                .compute_capability = read::Str(g, "compute_capability"),
                                .memory_gib = read::Get<double>(g, "memory_gib", 0),
                                .driver_cuda = read::Str(g, "driver_cuda"),
                                .runtime_cuda = read::Str(g, "runtime_cuda"),
                                .cublas = read::Str(g, "cublas"),
                                .route = read::Str(g, "route")};
  return f;
}

ServerEngineFacts ServerFactsOf(const json& j) {
  ServerEngineFacts f;
  f.api = read::Str(j, "api");
  f.url = read::Str(j, "url");
  f.endpoint = read::Str(j, "endpoint");
  f.served_model = read::Str(j, "served_model");
  f.server = OpaqueJson(read::Sub(j, "server"));
  f.server_context = read::Get<int64_t>(j, "server_context", 0);
  f.server_note = read::Str(j, "server_note");
  f.logprobs = read::Get<int64_t>(j, "logprobs", 0);
  f.topk = read::Get<int64_t>(j, "topk", 0);
  f.api_key_env = read::Str(j, "api_key_env");
  f.timeout_s = read::Get<double>(j, "timeout_s", 0);
  f.retries = read::Get<int64_t>(j, "retries", 0);
  if (const json& l = read::Sub(j, "launch"); l.is_object())
    f.launch = ServerEngineFacts::Launch{OpaqueJson(read::Sub(l, "asked")), OpaqueJson(read::Sub(l, "run"))};
  return f;
}

}  // namespace

std::optional<EngineDescription> EngineDescriptionFromJson(const json& j) {
  if (!j.is_object()) return std::nullopt;
  EngineDescription d;
  std::string kind = read::Str(j, "engine");
  if (kind.empty() && read::Str(j, "name") == "exact") kind = "exact";  // older exact blocks
  if (kind == "llama") d.facts = LlamaFactsOf(j);
  if (kind == "exact") d.facts = ExactFactsOf(j);
  if (kind == "openai") d.facts = ServerFactsOf(j);
  d.flags = read::Str(j, "flags");
  d.knobs = KnobValuesFromJson(read::Sub(j, "knobs"));
  if (const json& env = read::Sub(j, "env"); env.is_object())
    for (auto it = env.begin(); it != env.end(); ++it)
      if (it->is_string()) d.env[it.key()] = it->get<std::string>();
  d.as_read = AsReadOf(j, ToJson(d));
  return d;
}

}  // namespace flipscope
