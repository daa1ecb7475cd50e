// experiment's internal steps (not part of the stage's interface): comparisons, summary, branches.
#pragma once

#include <nlohmann/json.hpp>

#include "checkpoint/checkpoint.h"
#include "experiment/experiment.h"

namespace flipscope {

// KV-cache bytes per token of context for a model shape and the knobs' K/V cache types.
double KvBytesPerToken(const ModelInfo& model, const Knobs& knobs);
// What results.json takes from a capture's manifest, never throwing on a foreign or edited one:
// {"config": {knobs, flags (null when absent), engine, timings}, "run": {workload without spans,
// probe_plan, environment}}; absent keys come out null (timings: an empty object).
nlohmann::json ManifestFacts(const nlohmann::json& manifest);
// Fills results["comparisons"]: baseline repeats vs baseline r0, every variant repeat vs baseline r0.
Status CompareAll(const Experiment& exp, nlohmann::json& results);
// Fills results["summary"] (median over repeats per configuration) and results["floor"].
void Summarize(const Experiment& exp, nlohmann::json& results);
// Fills results["branches"] for each variant whose first repeat flips.
Status BranchAll(const Experiment& exp, nlohmann::json& results, const RunOptions& opts);

}  // namespace flipscope
