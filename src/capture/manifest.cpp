// CaptureManifest <-> the manifest JSON: the one place that knows the manifest's keys.
#include "capture/manifest.h"

#include "util/read.h"

namespace flipscope {

namespace {

using json = nlohmann::json;

// The truncation note every top-k capture carries (docs/engines.md explains the estimate).
constexpr const char* kTruncationNote =
    "rows hold the server's top-k log-probabilities only: flips are exact (argmax = its top-1 id); "
    "KL is a tail-bucket estimate (a lower bound), see docs/engines.md";

// j[key] when j is an object holding it, else null: manifests may come from other writers or be
// edited, so a missing key or a block of the wrong type must read as absent, never throw.
json At(const json& j, const char* key) {
  if (!j.is_object()) return nullptr;
  auto it = j.find(key);
  return it == j.end() ? json(nullptr) : *it;
}

std::string Text(const json& j, const char* key) {
  const json v = At(j, key);
  return v.is_string() ? v.get<std::string>() : std::string();
}

ManifestWorkload ReadWorkload(const json& block) {
  ManifestWorkload w;
  w.record = block.is_object() ? block : json::object();
  w.record.erase("spans");
  if (const json spans = At(block, "spans"); !spans.is_null()) {
    auto read = SpansFromJson(spans);
    if (read.ok())
      w.spans = std::move(*read);
    else
      w.spans_status = read.status();
  }
  w.path = Text(block, "path");
  w.tool_call_form = Text(block, "tool_call_form");
  w.tools = At(block, "tools");
  return w;
}

std::optional<ManifestKnobs> ReadKnobs(const json& block) {
  if (!block.is_object()) return std::nullopt;
  ManifestKnobs k{KnobValuesFromJson(block), {}};
  k.as_read = AsReadOf(block, ToJson(k));
  return k;
}

std::optional<ManifestProbePlan> ReadProbePlan(const json& block) {
  if (!block.is_object()) return std::nullopt;
  ManifestProbePlan p{
      read::Get<int64_t>(block, "stride", 0), Text(block, "full"), read::Get<int64_t>(block, "n_probes", 0), {}};
  p.as_read = AsReadOf(block, ToJson(p));
  return p;
}

// The served block of either engine: an HTTP engine's names its mechanism.
std::optional<ManifestServed> ReadServed(const json& block) {
  if (!block.is_object()) return std::nullopt;
  ManifestServed s;
  if (block.contains("mechanism")) {
    s.record = *ServerServedRecordFromJson(block);
    s.planned_probes = read::Opt<int64_t>(block, "planned_probes");
  } else {
    s.record = *ServedPlanFromJson(block);
    s.rule = Text(block, "rule");
    s.note = Text(block, "note");
  }
  s.as_read = AsReadOf(block, ToJson(s));
  return s;
}

std::optional<ManifestLoad> ReadLoad(const json& block) {
  if (!block.is_object()) return std::nullopt;
  ManifestLoad l{*EngineLoadRecordFromJson(block), {}, {}};
  l.sources = read::Each<LoadSourceRecord>(At(block, "sources"), [](const json& s) {
    return LoadSourceRecord{Text(s, "name"), Text(s, "path"), read::Opt<std::string>(s, "sha256"),
                            read::Opt<int64_t>(s, "n_tokens")};
  });
  l.as_read = AsReadOf(block, ToJson(l));
  return l;
}

std::optional<ManifestRequest> ReadRequest(const json& block) {
  if (!block.is_object()) return std::nullopt;
  ManifestRequest r;
  r.model_sha256 = Text(block, "model_sha256");
  r.workload_sha256 = Text(block, "workload_sha256");
  if (const auto format = FromName<WorkloadFormat>(Text(block, "format"))) r.workload.format = *format;
  r.workload.chat_template = Text(block, "chat_template");
  r.knobs = KnobValuesFromJson(At(block, "knobs"));
  const json plan = At(block, "probe_plan");
  r.stride = read::Get<int64_t>(plan, "stride", 0);
  r.full = Text(plan, "full");
  if (const auto store = FromName<StoreDtype>(Text(block, "store"))) r.store = *store;
  r.tool_version = Text(block, "tool_version");
  if (const auto engine = FromName<EngineKind>(Text(block, "engine"))) r.engine = *engine;
  if (const json env = At(block, "env"); env.is_object())
    for (auto it = env.begin(); it != env.end(); ++it)
      if (it->is_string()) r.env[it.key()] = it->get<std::string>();
  r.load_text = read::Values<std::string>(block, "load_text");
  if (const json http = At(block, "http"); http.is_object())
    r.http = ManifestRequest::Http{Text(http, "flags"), Text(http, "server_note"),
                                   http.contains("launch") ? OpaqueJson(http["launch"]) : OpaqueJson()};
  r.as_read = AsReadOf(block, ToJson(r));
  return r;
}

}  // namespace

json ToJson(const ManifestRequest& r) {
  json j = {{"model_sha256", r.model_sha256},
            {"workload_sha256", r.workload_sha256},
            {"format", std::string(NameOf(r.workload.format))},
            {"chat_template", r.workload.chat_template},
            {"knobs", ToJson(r.knobs)},
            {"probe_plan", {{"stride", r.stride}, {"full", r.full}}},
            {"store", std::string(NameOf(r.store))},
            {"tool_version", r.tool_version}};
  if (r.engine != EngineKind::kLlama) j["engine"] = std::string(NameOf(r.engine));
  if (!r.env.empty()) j["env"] = r.env;
  if (!r.load_text.empty()) j["load_text"] = r.load_text;
  if (r.http) {
    j["http"] = {{"flags", r.http->flags}, {"server_note", r.http->server_note}};
    if (!r.http->launch.is_null()) j["http"]["launch"] = r.http->launch.get();
  }
  ApplyAsRead(j, r.as_read);
  return j;
}

bool operator==(const ManifestRequest& a, const ManifestRequest& b) { return ToJson(a) == ToJson(b); }

json ToJson(const ManifestKnobs& k) {
  json j = ToJson(k.values);
  ApplyAsRead(j, k.as_read);
  return j;
}

json ToJson(const ManifestProbePlan& p) {
  json j = {{"stride", p.stride}, {"full", p.full}, {"n_probes", p.n_probes}};
  ApplyAsRead(j, p.as_read);
  return j;
}

json ToJson(const ManifestServed& s) {
  json j;
  if (const auto* plan = std::get_if<ServedPlan>(&s.record)) {
    j = ToJson(*plan);
    if (!s.rule.empty()) j["rule"] = s.rule;
    if (!s.note.empty()) j["note"] = s.note;
  } else {
    j = ToJson(std::get<ServerServedRecord>(s.record));
  }
  if (s.planned_probes) j["planned_probes"] = *s.planned_probes;
  ApplyAsRead(j, s.as_read);
  return j;
}

json ToJson(const std::vector<LoadSourceRecord>& sources) {
  json out = json::array();
  for (const LoadSourceRecord& s : sources) {
    json e = {{"name", s.name}, {"path", s.path}};
    if (s.sha256) e["sha256"] = *s.sha256;
    if (s.n_tokens) e["n_tokens"] = *s.n_tokens;
    out.push_back(e);
  }
  return out;
}

json ToJson(const ManifestLoad& l) {
  json j = ToJson(l.record);
  j["sources"] = ToJson(l.sources);
  ApplyAsRead(j, l.as_read);
  return j;
}

int64_t CaptureManifest::NTokens() const { return read::Get<int64_t>(workload.record, "n_tokens", 0); }
int64_t CaptureManifest::NProbes() const { return probe_plan ? probe_plan->n_probes : 0; }
double CaptureManifest::TokensPerSecond() const { return timings ? timings->tokens_per_s : 0; }
std::optional<int64_t> CaptureManifest::FedSingly() const {
  const ServedPlan* plan = served ? std::get_if<ServedPlan>(&served->record) : nullptr;
  return plan ? std::optional<int64_t>(plan->fed_singly) : std::nullopt;
}

json CaptureManifest::ToJson() const {
  json workload_block = workload.record;
  workload_block["spans"] = SpansToJson(workload.spans);
  json m = {
      {"format", format},
      {"format_version", format_version},
      {"tool", {{"name", "flipscope"}, {"version", tool_version}}},
      {"created", created},
      {"model", model.ToJson()},
      {"tokenizer_sha256", tokenizer_sha256},
      {"workload", workload_block},
      {"engine", engine.record},
      {"knobs", knobs ? flipscope::ToJson(*knobs) : json(nullptr)},
      {"probe_plan", probe_plan ? flipscope::ToJson(*probe_plan) : json(nullptr)},
      {"store", store},
      {"truncated", truncated},
      {"topk", topk},
      {"request", request ? flipscope::ToJson(*request) : json(nullptr)},
  };
  if (topk > 0) m["truncation"] = {{"k", topk}, {"note", kTruncationNote}};
  if (timings) m["timings"] = flipscope::ToJson(*timings);
  if (served) m["served"] = flipscope::ToJson(*served);
  if (load) m["load"] = flipscope::ToJson(*load);
  return m;
}

CaptureManifest CaptureManifest::FromJson(const json& j) {
  CaptureManifest m;
  m.raw = j;
  m.format = Text(j, "format");
  if (const json v = At(j, "format_version"); v.is_number_integer()) m.format_version = v.get<int>();
  m.tool_version = Text(At(j, "tool"), "version");
  m.created = Text(j, "created");
  m.model = ModelInfo::FromJson(At(j, "model"));
  m.tokenizer_sha256 = Text(j, "tokenizer_sha256");
  m.workload = ReadWorkload(At(j, "workload"));
  const json engine = At(j, "engine");
  m.engine = EngineRecord::Of(engine.is_object() ? engine : json::object());
  const json knobs = At(j, "knobs");
  m.knobs = ReadKnobs(knobs);
  if (!knobs.is_null()) m.parsed_knobs = Knobs::FromJson(knobs);
  if (const auto replay = FromName<Replay>(Text(knobs, "replay"))) m.replay = *replay;
  m.probe_plan = ReadProbePlan(At(j, "probe_plan"));
  m.store = Text(j, "store");
  if (const json v = At(j, "truncated"); v.is_boolean()) m.truncated = v.get<bool>();
  if (const json v = At(j, "topk"); v.is_number_integer()) m.topk = v.get<int32_t>();
  m.request = ReadRequest(At(j, "request"));
  if (m.request) m.workload_options = m.request->workload;
  m.timings = CaptureTimingsFromJson(At(j, "timings"));
  m.served = ReadServed(At(j, "served"));
  m.load = ReadLoad(At(j, "load"));
  return m;
}

}  // namespace flipscope
