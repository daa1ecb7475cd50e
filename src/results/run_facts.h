// The facts the captures recorded that results.json carries on: the model's facts, the
// workload's record, the probe plan (the run's), and a configuration's knobs and the
// contradictions between what it asked and what ran. Each record is kept as written, so that a
// file reads back byte for byte, beside its facts read once (tolerantly: results.json is outside
// input); readers use the facts. The engine's record is engine/engine_record.h's EngineRecord.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "checkpoint/model_info.h"
#include "engine/knobs.h"

namespace flipscope {

// A record as written (null: absent) and its facts (T::FromJson, which never fails).
template <typename T>
struct Recorded {
  nlohmann::json record;
  T facts{};
  static Recorded Read(const nlohmann::json& j) { return {j, T::FromJson(j)}; }
};

// The workload's record (the manifest's "workload" block without its spans). Empty text: not
// recorded.
struct WorkloadFacts {
  std::string path, format, sha256;
  std::string text_sha256;                       // of the rendered text
  std::string tool_call_form, tool_result_form;  // how tool calls and results were rendered
  std::optional<int64_t> n_tokens;
  // The chat template it was rendered with: its name (a built-in's name or a file's path; none
  // when not recorded), where it came from ("builtin", "file", "model") and its hash.
  std::optional<std::string> template_name;
  std::string template_source, template_sha256;
  // What the workload stage accepted but warned about (a tool call's arguments that are not
  // JSON), one line each; empty when none or not recorded.
  std::vector<std::string> warnings;
  static WorkloadFacts FromJson(const nlohmann::json& j);
};

// The probe plan the captures ran (the manifest's "probe_plan"): every stride-th position plus
// every position of `full`; none where not recorded.
struct ProbePlanFacts {
  std::optional<int64_t> stride, n_probes;
  // "" | "tool_calls" | "A-B,C-D"; none when not recorded (older files wrote a list of the
  // parts: read joined with ", ")
  std::optional<std::string> full;
  bool recorded = false;  // the record is an object
  static ProbePlanFacts FromJson(const nlohmann::json& j);
};

// A configuration's knobs as its first capture recorded them (effective values).
struct KnobsFacts {
  std::optional<Knobs> knobs;  // none when this version cannot read them (a later version's knob)
  static KnobsFacts FromJson(const nlohmann::json& j);
};

// A knob the experiment file set that the capture records with another value and no reason
// (results.json configs[].contradictions[]): a configuration that did not run as named.
struct Contradiction {
  std::string knob;
  nlohmann::json asked, ran;  // the values as the file and the capture have them
  nlohmann::json ToJson() const { return {{"knob", knob}, {"asked", asked}, {"ran", ran}}; }
};

}  // namespace flipscope
