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

namespace {

json LoadJson(const LlamaLoadRecord& r) {
  json jobs = json::array(), batches = json::array();
  for (const FillerJobRecord& j : r.jobs)
    jobs.push_back({{"slot", j.slot},
                    {"job", j.job},
                    {"source", j.source},
                    {"offset", j.offset},
                    {"length", j.length},
                    {"generate", j.generate},
                    {"chunk", j.chunk},
                    {"warm", j.warm},
                    {"prefilled", j.prefilled},
                    {"generated", j.generated}});
  for (const LoadBatchRecord& b : r.batches) batches.push_back({b.decoding, b.measured, b.prefilling});
  return {{"fillers", r.fillers},
          {"seed", r.seed},
          {"cells_per_filler", r.cells_per_filler},
          {"context_batch", r.context_batch},
          {"jobs", jobs},
          {"jobs_total", r.jobs_total},
          {"batches", batches},
          {"batches_total", r.batches_total},
          {"batches_columns", {"decoding", "measured", "prefilling"}}};
}

json LoadJson(const ServerLoadRecord& r) {
  json requests = json::array();
  for (const FillerRequestRecord& q : r.requests)
    requests.push_back({{"slot", q.slot},
                        {"job", q.job},
                        {"source", q.source},
                        {"offset", q.offset},
                        {"length", q.length},
                        {"generate", q.generate},
                        {"start_s", q.start_s},
                        {"end_s", q.end_s},
                        {"status", q.status ? json(*q.status) : json(nullptr)}});
  return {{"fillers", r.fillers},
          {"seed", r.seed},
          {"cells_per_filler", r.cells_per_filler},
          {"measured_start_s", r.measured_start_s},
          {"measured_end_s", r.measured_end_s},
          {"overlapping", r.overlapping},
          {"requests", requests}};
}

}  // namespace

json ToJson(const EngineLoadRecord& r) {
  return std::visit([](const auto& x) { return LoadJson(x); }, r);
}

std::optional<EngineLoadRecord> EngineLoadRecordFromJson(const json& j) {
  if (!j.is_object()) return std::nullopt;
  auto i64 = [](const json& o, const char* key) { return read::Get<int64_t>(o, key, 0); };
  if (j.contains("jobs")) {
    LlamaLoadRecord r{.fillers = i64(j, "fillers"),
                      .seed = i64(j, "seed"),
                      .cells_per_filler = i64(j, "cells_per_filler"),
                      .context_batch = i64(j, "context_batch"),
                      .jobs = {},
                      .jobs_total = i64(j, "jobs_total"),
                      .batches = {},
                      .batches_total = i64(j, "batches_total")};
    r.jobs = read::Each<FillerJobRecord>(read::Sub(j, "jobs"), [&](const json& x) {
      return FillerJobRecord{.slot = i64(x, "slot"),
                             .job = i64(x, "job"),
                             .source = read::Str(x, "source"),
                             .offset = i64(x, "offset"),
                             .length = i64(x, "length"),
                             .generate = i64(x, "generate"),
                             .chunk = i64(x, "chunk"),
                             .warm = read::Get<bool>(x, "warm", false),
                             .prefilled = i64(x, "prefilled"),
                             .generated = i64(x, "generated")};
    });
    r.batches = read::Each<LoadBatchRecord>(read::Sub(j, "batches"), [](const json& b) {
      const auto at = [&](size_t i) { return b.is_array() && b.size() > i ? read::As<int64_t>(b[i]).value_or(0) : 0; };
      return LoadBatchRecord{at(0), at(1), at(2)};
    });
    return r;
  }
  ServerLoadRecord r{.fillers = i64(j, "fillers"),
                     .seed = i64(j, "seed"),
                     .cells_per_filler = i64(j, "cells_per_filler"),
                     .measured_start_s = read::Get<double>(j, "measured_start_s", 0),
                     .measured_end_s = read::Get<double>(j, "measured_end_s", 0),
                     .overlapping = i64(j, "overlapping"),
                     .requests = {}};
  r.requests = read::Each<FillerRequestRecord>(read::Sub(j, "requests"), [&](const json& x) {
    return FillerRequestRecord{.slot = i64(x, "slot"),
                               .job = i64(x, "job"),
                               .source = read::Str(x, "source"),
                               .offset = i64(x, "offset"),
                               .length = i64(x, "length"),
                               .generate = i64(x, "generate"),
                               .start_s = read::Get<double>(x, "start_s", 0),
                               .end_s = read::Get<double>(x, "end_s", 0),
                               .status = read::Opt<int64_t>(x, "status")};
  });
  return r;
}

std::optional<ServerServedRecord> ServerServedRecordFromJson(const json& j) {
  if (!j.is_object()) return std::nullopt;
  auto i64 = [](const json& o, const char* key) { return read::Get<int64_t>(o, key, 0); };
  const json &rows = read::Sub(j, "rows"), &proof = read::Sub(j, "proof"), &per_row = read::Sub(j, "per_row");
  ServerServedRecord r;
  r.mechanism = read::Str(j, "mechanism");
  r.api = read::Str(j, "api");
  r.requests = i64(j, "requests");
  r.generations = i64(j, "generations");
  r.generated_tokens = i64(j, "generated_tokens");
  r.generation_matched = i64(j, "generation_matched");
  r.not_served = i64(rows, "not_served");
  r.recomputed = read::Each<ServerServedRecord::Recomputed>(read::Sub(j, "recomputed"), [&](const json& x) {
    return ServerServedRecord::Recomputed{i64(x, "position"), i64(x, "cached"), i64(x, "computed")};
  });
  r.proof_compared = i64(proof, "compared");
  r.proof_identical = i64(proof, "identical");
  r.proof_differs = read::Values<int64_t>(proof, "differs");
  r.positions = read::Values<int64_t>(per_row, "positions");
  r.source = read::Values<std::string>(per_row, "source");
  r.cached = read::Values<int64_t>(per_row, "cached");
  r.computed = read::Values<int64_t>(per_row, "computed");
  r.seconds = read::Get<double>(j, "seconds", 0);
  r.requests_per_s = read::Get<double>(j, "requests_per_s", 0);
  return r;
}

json ToJson(const ServerServedRecord& r) {
  json recomputed = json::array();
  for (const auto& x : r.recomputed)
    recomputed.push_back({{"position", x.position}, {"cached", x.cached}, {"computed", x.computed}});
  auto from = [&](const char* source) { return std::count(r.source.begin(), r.source.end(), source); };
  return {
      {"mechanism", r.mechanism},
      {"api", r.api},
      {"requests", r.requests},
      {"generations", r.generations},
      {"generated_tokens", r.generated_tokens},
      {"generation_matched", r.generation_matched},
      {"rows",
       {{"kept", r.positions.size()},
        {"decode", from("decode")},
        {"generation", from("generation")},
        {"prompt", from("prompt")},
        {"recomputed", r.recomputed.size()},
        {"not_served", r.not_served}}},
      {"recomputed", recomputed},
      {"proof", {{"compared", r.proof_compared}, {"identical", r.proof_identical}, {"differs", r.proof_differs}}},
      {"per_row", {{"positions", r.positions}, {"source", r.source}, {"cached", r.cached}, {"computed", r.computed}}},
      {"seconds", r.seconds},
      {"requests_per_s", r.requests_per_s}};
}

}  // namespace flipscope
