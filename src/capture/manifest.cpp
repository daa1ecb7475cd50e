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

}  // namespace

int64_t CaptureManifest::NTokens() const { return read::Get<int64_t>(workload.record, "n_tokens", 0); }
int64_t CaptureManifest::NProbes() const { return read::Get<int64_t>(probe_plan, "n_probes", 0); }
double CaptureManifest::TokensPerSecond() const { return timings ? timings->tokens_per_s : 0; }
std::optional<int64_t> CaptureManifest::FedSingly() const { return read::Opt<int64_t>(served, "fed_singly"); }

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
      {"knobs", knobs},
      {"probe_plan", probe_plan},
      {"store", store},
      {"truncated", truncated},
      {"topk", topk},
      {"request", request},
  };
  if (topk > 0) m["truncation"] = {{"k", topk}, {"note", kTruncationNote}};
  if (timings) m["timings"] = flipscope::ToJson(*timings);
  if (!served.is_null()) m["served"] = served;
  if (!load.is_null()) m["load"] = load;
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
  m.knobs = At(j, "knobs");
  if (!m.knobs.is_null()) m.parsed_knobs = Knobs::FromJson(m.knobs);
  if (const auto replay = FromName<Replay>(Text(m.knobs, "replay"))) m.replay = *replay;
  m.probe_plan = At(j, "probe_plan");
  m.store = Text(j, "store");
  if (const json v = At(j, "truncated"); v.is_boolean()) m.truncated = v.get<bool>();
  if (const json v = At(j, "topk"); v.is_number_integer()) m.topk = v.get<int32_t>();
  m.request = At(j, "request");
  if (const auto format = FromName<WorkloadFormat>(Text(m.request, "format"))) m.workload_options.format = *format;
  m.workload_options.chat_template = Text(m.request, "chat_template");
  m.timings = CaptureTimingsFromJson(At(j, "timings"));
  m.served = At(j, "served");
  m.load = At(j, "load");
  return m;
}

}  // namespace flipscope
