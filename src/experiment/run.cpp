// RunExperiment: captures (cached by request), comparisons, summary, branches, layers, served
// replay, recipe; results.json written once from the typed results, then the report.
#include <fmt/format.h>

#include <filesystem>
#include <map>

#include "checkpoint/model_info.h"
#include "experiment/experiment.h"
#include "experiment/steps.h"
#include "records/records.h"
#include "report/report.h"
#include "results/experiment_results.h"
#include "util/util.h"

namespace flipscope {

namespace fs = std::filesystem;

void AddCaptureFacts(const CaptureManifest& m, ConfigEntry& entry) {
  entry.knobs = Recorded<KnobsFacts>::Read(m.knobs ? ToJson(*m.knobs) : nlohmann::json());
  if (!m.engine.flags.empty()) entry.flags = m.engine.flags;
  entry.engine = m.engine;
  entry.timings = m.timings ? ToJson(*m.timings) : nlohmann::json::object();
}

void AddRunFacts(const CaptureManifest& m, ExperimentResults& results) {
  results.workload = Recorded<WorkloadFacts>::Read(m.workload.record);
  results.probe_plan = Recorded<ProbePlanFacts>::Read(m.probe_plan ? ToJson(*m.probe_plan) : nlohmann::json());
  results.environment = m.engine;
}

namespace {

// results.json's head: what ran, on which model, with which settings (--memory over the file's).
ExperimentResults ResultsHead(const Experiment& exp, const RunOptions& opts, const ModelInfo& model) {
  ExperimentResults r;
  r.flipscope_version = FlipscopeVersion();
  r.created = UtcNowIso();
  r.name = exp.name;
  r.experiment_file = exp.path;
  r.model = {model.ToJson(), model};
  r.baseline = exp.baseline.name;
  r.settings.window = exp.window;
  r.settings.confident = exp.confident;
  const std::optional<uint64_t> budget = opts.memory_budget ? opts.memory_budget : exp.memory_budget;
  if (budget) r.settings.memory_budget_bytes = double(*budget);
  return r;
}

// 4c. replay = "both": the served twins captured, compared with the served baseline,
// summarized like the prefill configurations and their forks followed (results.served), then
// each configuration's prefill-vs-served distance and the ranking under each replay.
Status RunServed(const Experiment& exp, const RunOptions& opts, const ModelInfo& model,
                 std::map<std::string, std::string> hashes, ExperimentResults& results) {
  ServedResults served;
  served.baseline = ServedName(exp.baseline.name);
  const Experiment sv = ServedTwin(exp, &served.skipped);
  std::optional<ReferenceResults> no_reference;  // the twins have none (ServedTwin clears it)
  FS_RETURN_IF_ERROR(CaptureAll(sv, opts, model, &hashes, served.measured, &no_reference));
  FS_RETURN_IF_ERROR(CompareAll(sv, served.measured, opts.log));
  Summarize(sv, served.measured);
  if (sv.branch.enabled) {
    FS_RETURN_IF_ERROR(BranchAll(sv, served.measured, opts));
    AddDamage(served.measured);
  }
  results.served = std::move(served);
  return ReplayDistances(exp, results, opts.log);
}

// 5. The recipe, ranking by damage and flip rate (under served replay where it was measured),
// and with --verify-recipe whether its command serves what was captured.
void AddRecipe(ExperimentResults& results, const ModelInfo& model, const RunOptions& opts) {
  results.recipe = MakeRecipe(results, model);
  if (opts.verify_recipe) {
    VerifyOptions vo;
    vo.log_path = (fs::path(opts.outdir) / "captures" / "recipe.server.log").string();
    results.recipe->verification = VerifyRecipe(results, vo, opts.log);
  }
}

}  // namespace

Result<ExperimentResults> RunExperiment(const Experiment& exp, const RunOptions& opts) {
  // The model is read before the results folder is made: a model that cannot be read leaves none.
  FS_ASSIGN_OR_RETURN(ModelInfo model, ReadModelInfo(exp.model));
  std::error_code ec;
  fs::create_directories(fs::path(opts.outdir) / "captures", ec);
  if (ec) return Status::Error(opts.outdir + ": cannot create the results folder: " + ec.message());
  std::map<std::string, std::string> hashes;  // path -> SHA-256, shared by every capture
  // ReadModelInfo hashed the baseline's model already: its captures need not hash it again.
  if (!model.sha256.empty()) hashes[exp.model] = model.sha256;
  ExperimentResults results = ResultsHead(exp, opts, model);
  Measurements& measured = results.measured;
  FS_RETURN_IF_ERROR(CaptureAll(exp, opts, model, &hashes, measured, &results.reference));
  {
    // The run's facts (workload, probe plan, environment) are the baseline's first capture's.
    FS_ASSIGN_OR_RETURN(auto r, CaptureReader::Open(measured.configs[0].captures[0]));
    AddRunFacts(r->manifest(), results);
  }

  // 2. Comparisons: the baseline's repeats give the floor; every variant repeat against baseline r0.
  FS_RETURN_IF_ERROR(CompareAll(exp, measured, opts.log));
  // 3. Summary and floor; with the exact reference, every capture against it too.
  Summarize(exp, measured);
  if (results.reference) FS_RETURN_IF_ERROR(CompareWithReference(exp, results, opts.log));
  // 4. Follow the forks of each variant that flips; the damage they find joins the summary.
  if (exp.branch.enabled) FS_RETURN_IF_ERROR(BranchAll(exp, measured, opts));
  AddDamage(measured);
  // 4b. Where the flips of each [layers] variant are born, layer by layer.
  if (exp.layers.enabled) FS_RETURN_IF_ERROR(LayersAll(exp, results, opts));
  if (exp.replay_both) FS_RETURN_IF_ERROR(RunServed(exp, opts, model, hashes, results));
  // 4d. With both, the served twins against the exact reference too (what a served ranking reads).
  if (exp.replay_both && results.reference) FS_RETURN_IF_ERROR(CompareServedWithReference(exp, results, opts.log));
  AddRecipe(results, model, opts);
  // 6. Results (written from the typed results, once) and report.
  FS_RETURN_IF_ERROR(WriteFileAtomic((fs::path(opts.outdir) / "results.json").string(),
                                     results.ToJson().dump(1, ' ', false, nlohmann::json::error_handler_t::replace)));
  FS_RETURN_IF_ERROR(WriteReport(results, opts.outdir));
  return results;
}

}  // namespace flipscope
