// Building blocks of the history stage, shared by its files and its tests.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "compare/compare.h"
#include "history/history.h"

namespace flipscope::history {

// Sorted positions as ranges "A-B,C-D" (inclusive), the --full syntax.
std::string PositionRanges(const std::vector<int32_t>& positions);
// The plan a worker runs over token ids (which carry no spans): the stride kept, the extra
// positions of plan.full (tool calls, ranges) named as explicit ranges, so that the worker's
// probes are exactly PlanProbes(plan, workload).
Result<ProbePlan> WorkerPlan(const ProbePlan& plan, const Workload& w);

// One comparison of history.json: the figures of a Comparison that the history section shows.
nlohmann::json StepJson(const std::string& kind, const std::string& base, const std::string& cand,
                        const Comparison& c);
// Compares the captures of doc["versions"] (and doc["exact"]): each with the one before
// ("steps"), each from the third on with the first ("from_first"), each against exact
// ("to_exact"); names the step with the most flips ("changed_most").
Status CompareAll(const HistoryRequest& req, nlohmann::json& doc);

}  // namespace flipscope::history
