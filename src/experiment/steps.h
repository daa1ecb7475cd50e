// experiment's internal steps (not part of the stage's interface): comparisons, summary, branches.
#pragma once

#include <nlohmann/json.hpp>

#include "checkpoint/checkpoint.h"
#include "experiment/experiment.h"

namespace flipscope {

// KV-cache bytes per token of context for a model shape and the knobs' K/V cache types.
double KvBytesPerToken(const ModelInfo& model, const Knobs& knobs);
// Fills results["comparisons"]: baseline repeats vs baseline r0, every variant repeat vs baseline r0.
Status CompareAll(const Experiment& exp, nlohmann::json& results);
// Fills results["summary"] (median over repeats per configuration) and results["floor"].
void Summarize(const Experiment& exp, nlohmann::json& results);
// Fills results["branches"] for each variant whose first repeat flips.
Status BranchAll(const Experiment& exp, nlohmann::json& results, const RunOptions& opts);

}  // namespace flipscope
