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
