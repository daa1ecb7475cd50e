// The records' serializers: the only code that turns the engine's typed records into JSON and
// back. The keys and number types are those the engines have always written, so that a manifest
// written from a record is the same bytes as before.
#include <nlohmann/json.hpp>

#include "records/records.h"
#include "util/read.h"

namespace flipscope {

using nlohmann::json;

json ToJson(const EngineSource& s) { return {{"release", s.release}, {"commit", s.commit}, {"build", s.build}}; }

std::optional<EngineSource> EngineSourceFromJson(const json& j) {
  if (!j.is_object()) return std::nullopt;
  return EngineSource{read::Str(j, "release"), read::Str(j, "commit"), read::Str(j, "build")};
}

json ToJson(const std::vector<EngineDevice>& devices) {
  json out = json::array();
  for (const EngineDevice& d : devices)
    out.push_back({{"name", d.name},
                   {"description", d.description},
                   {"memory_total", d.memory_total ? json(uint64_t(*d.memory_total)) : json(nullptr)}});
  return out;
}

std::vector<EngineDevice> EngineDevicesFromJson(const json& j) {
  return read::Each<EngineDevice>(j, [](const json& d) {
    return EngineDevice{read::Str(d, "name"), read::Str(d, "description"), read::Num(d, "memory_total")};
  });
}

json ToJson(const KernelPathRecord& k) {
  return {{"cpu_features", k.cpu_features},
          {"llama_build", k.llama_build},
          {"weight_buffers", k.weight_buffers},
          {"extra_buffer_types", k.extra_buffer_types},
          {"summary", k.summary}};
}

json ToJson(const PassPartTimes& t) {
  json parts = {
      {"embed_s", t.embed_s}, {"widen_s", t.widen_s},   {"project_s", t.project_s}, {"attention_s", t.attention_s},
      {"mlp_s", t.mlp_s},     {"logits_s", t.logits_s}, {"rows_s", t.rows_s}};
  if (t.recurrent_s) parts["recurrent_s"] = *t.recurrent_s;
  if (t.device_memory_gib) parts["device_memory_gib"] = *t.device_memory_gib;
  return parts;
}

json ToJson(const CaptureTimings& t) {
  json j = {{"load_s", t.load_s}, {"prefill_s", t.prefill_s},         {"tokens_per_s", t.tokens_per_s},
            {"forks", t.forks},   {"fork_decode_s", t.fork_decode_s}, {"total_s", t.total_s}};
  if (t.parts) j["parts"] = ToJson(*t.parts);
  return j;
}

std::optional<CaptureTimings> CaptureTimingsFromJson(const json& j) {
  if (!j.is_object()) return std::nullopt;
  CaptureTimings t;
  t.load_s = read::Get<double>(j, "load_s", 0);
  t.prefill_s = read::Get<double>(j, "prefill_s", 0);
  t.tokens_per_s = read::Get<double>(j, "tokens_per_s", 0);
  t.fork_decode_s = read::Get<double>(j, "fork_decode_s", 0);
  t.total_s = read::Get<double>(j, "total_s", 0);
  t.forks = read::Get<int64_t>(j, "forks", 0);
  if (const auto it = j.find("parts"); it != j.end() && it->is_object()) {
    PassPartTimes p;
    p.embed_s = read::Get<double>(*it, "embed_s", 0);
    p.widen_s = read::Get<double>(*it, "widen_s", 0);
    p.project_s = read::Get<double>(*it, "project_s", 0);
    p.attention_s = read::Get<double>(*it, "attention_s", 0);
    p.mlp_s = read::Get<double>(*it, "mlp_s", 0);
    p.logits_s = read::Get<double>(*it, "logits_s", 0);
    p.rows_s = read::Get<double>(*it, "rows_s", 0);
    p.recurrent_s = read::Opt<double>(*it, "recurrent_s");
    p.device_memory_gib = read::Opt<double>(*it, "device_memory_gib");
    t.parts = p;
  }
  return t;
}

json ToJson(const ServedPlan& p) {
  return {{"fed_singly", p.fed_singly},
          {"decode_calls", p.decode_calls},
          {"prefill_segments", p.prefill_segments},
          {"prefill_chunks", p.prefill_chunks},
          {"written_tokens", p.written_tokens},
          {"written_runs", p.written_runs},
          {"decode_s", p.decode_s},
          {"decode_tokens_per_s", p.decode_tokens_per_s}};
}

std::optional<ServedPlan> ServedPlanFromJson(const json& j) {
  if (!j.is_object()) return std::nullopt;
  ServedPlan p;
  p.fed_singly = read::Get<int64_t>(j, "fed_singly", 0);
  p.decode_calls = read::Get<int64_t>(j, "decode_calls", 0);
  p.prefill_segments = read::Get<int64_t>(j, "prefill_segments", 0);
  p.prefill_chunks = read::Get<int64_t>(j, "prefill_chunks", 0);
  p.written_tokens = read::Get<int64_t>(j, "written_tokens", 0);
  p.written_runs = read::Get<int64_t>(j, "written_runs", 0);
  p.decode_s = read::Get<double>(j, "decode_s", 0);
  p.decode_tokens_per_s = read::Get<double>(j, "decode_tokens_per_s", 0);
  return p;
}

json ToJson(const LoadComparison& c) {
  json flipped = json::array();
  for (const LoadFlip& f : c.flipped)
    flipped.push_back({{"position", f.position}, {"alone", f.alone}, {"loaded", f.loaded}});
  return {{"capture", c.capture},
          {"probes", c.probes},
          {"identical_rows", c.identical_rows},
          {"bit_identical", c.bit_identical},
          {"flips", c.flips},
          {"flipped", flipped}};
}

json ToJson(const LoadFloorRecord& f) {
  json repeats = json::array();
  for (const LoadComparison& c : f.repeats) repeats.push_back(ToJson(c));
  return {{"alone", f.alone},
          {"load", f.load},
          {"load_seed", f.load_seed},
          {"repeats", repeats},
          {"bit_identical_repeats", f.bit_identical_repeats},
          {"of", f.of}};
}

}  // namespace flipscope
