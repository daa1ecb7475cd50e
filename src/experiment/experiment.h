// experiment: an experiment file (TOML) -> captures (repeats, cached) -> comparisons ->
// branches -> results.json + report + recipe, in one results folder.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "branch/branch.h"
#include "capture/capture.h"
#include "engine/engine.h"
#include "layers/layers.h"
#include "results/experiment_results.h"
#include "results/suite_result.h"
#include "util/status.h"
#include "util/util.h"

namespace flipscope {

// A configuration served over HTTP (docs/experiment.md, "Server configurations"): a URL, or a
// command flipscope launches, waits for, captures from and stops.
struct ServerSpec {
  std::string url;     // where it answers; empty for a launched one: http://127.0.0.1:<port>
  std::string launch;  // the command (`{port}` is replaced by the port); empty: the server runs already
  int port = 0;        // the launched server's port; 0 with {port} in the command: a free port
  std::string health = "/health";
  double startup_timeout_s = 600, stop_timeout_s = 10;
  std::map<std::string, std::string> env;  // set for the launched command
  HttpOptions http;                        // api, logprobs, served model, timeout, retries, key variable (url unused)
};

// What a configuration's table sets (results.json's configs[].changes): every knob and server
// setting it names, "model" and "requantize" among them, by key with its value as written, and a
// server's environment (the inherited variables with its own on top).
struct ConfigChanges {
  KnobValues values;
  std::optional<std::map<std::string, std::string>> env;  // "env"; none when the table sets none
  // How many keys it sets (env one of them); whether it sets `key`.
  size_t size() const { return values.size() + (env ? 1 : 0); }
  bool empty() const { return size() == 0; }
  bool contains(const std::string& key) const { return key == "env" ? env.has_value() : values.count(key) > 0; }
};
// The changes as results.json holds them: one object of key -> value.
nlohmann::json ToJson(const ConfigChanges& c);

// One configuration: the baseline's knobs with this configuration's changes applied.
struct ConfigSpec {
  std::string name, description;
  ConfigChanges changes;
  Knobs knobs;
  std::string model_path;  // the weights this configuration runs
  std::string requantize;  // e.g. "F16" or "Q8_0": derive the weights from the experiment's model
  int repeats = 1;
  int line = 0;                            // where it is defined in the experiment file
  EngineKind engine = EngineKind::kLlama;  // llama (knobs) or openai (server); exact only as the reference
  ServerSpec server;                       // engine "openai" only
};

struct BranchSettings {
  bool enabled = false;
  // How each variant's forks are followed (the branch stage's options, at its defaults but for
  // max_branches: 16 per configuration, the first flips by position).
  BranchOptions options = [] {
    BranchOptions o;
    o.max_branches = 16;
    return o;
  }();
  // With futures under the grammar: each variant's forks followed again free, for the counts both
  // ways (results' branches[].free_counts; a teacher-forced pass per side more).
  bool compare_free = false;
  std::vector<std::string> configs;  // variants whose forks are followed; empty = every variant that flips
};

// [layers]: where each flip of a variant against the baseline is born (the layers stage).
struct LayersSettings {
  bool enabled = false;
  // The layers stage's options, at its defaults but for max_flips: 16 per configuration, the
  // first flips by position (0: all); exact: also each side against the FP64 exact engine.
  LayersOptions options = [] {
    LayersOptions o;
    o.max_flips = 16;
    return o;
  }();
  std::vector<std::string> configs;  // variants to look into; empty = every llama variant that flips
};

// [history]: the baseline's knobs over several llama-cpp-python releases (or commits of a
// checkout), each version's llama.cpp in its own capture worker (`flipscope run` hands the file to
// the history stage; docs/history.md; the releases are checked there, against the supported
// range); or the file's own configurations in order (configs), captured by the run.
struct HistorySettings {
  bool enabled = false;
  std::vector<std::string> releases;  // in order, as written
  // Or commits (ids, tags, branches) of the llama.cpp git checkout llama_src, in order.
  std::string llama_src;
  std::vector<std::string> commits;
  // Or configurations of this file (baseline and variants, e.g. servers from two environments),
  // in order: the run captures them as usual and the history compares their first captures.
  std::vector<std::string> configs;
  std::string cpu;     // every version's llama.cpp CPU build: portable, native, or "" (the main build's)
  int max_tokens = 0;  // > 0: only the workload's first max_tokens tokens
  // > 0: the forks at the first `forks` flips of the step that changed most, fork_tokens long
  // (HistoryRequest's); releases and commits only.
  int forks = 0;
  int fork_tokens = 0;  // 0: the history stage's default
};

// One session of a suite (docs/experiment.md, "Suites"): every configuration is captured over
// each session with the same knobs, and the figures are pooled over the sessions.
struct SessionSpec {
  std::string name;      // unique; default: the file's stem
  std::string workload;  // the transcript (resolved path)
  double weight = 1;     // how much its probes count in the pooled figures (> 0)
  int line = 0;          // where it is named in the experiment file
};

// One [[axis]] of a matrix: one or several knobs set together to each value in turn.
struct AxisSpec {
  std::string name;                    // what cell names call it; default: the first knob's flag
  std::vector<std::string> knobs;      // KnobTable() keys
  std::vector<nlohmann::json> values;  // as written
  int line = 0;
};
// [matrix] and its [[axis]] tables: the cross product of the axes' values, each cell a variant
// named from its values (opt-in: without [[axis]] the variants are one change at a time).
struct MatrixSettings {
  std::vector<AxisSpec> axes;
  int repeats = 1;           // captures per cell (medians reported)
  bool allow_large = false;  // more than max_cells cells only with allow_large = true
  static constexpr int kMaxCells = 16;
  std::vector<std::string> cells;  // the variants the matrix made, in order
  std::string baseline_cell;       // the cell with the baseline's own knobs (not a variant), if any
};

struct Experiment {
  std::string path, name;
  std::string model, workload;        // with sessions: the first session's workload
  std::vector<SessionSpec> sessions;  // a suite (a list or a folder of workloads); empty: one workload
  WorkloadOptions workload_options;
  ProbePlan plan;
  StoreDtype store = StoreDtype::kF32;
  int window = 8192;
  double confident = 0.9;
  // reference = "exact" (the only reference there is): the FP64 exact engine captures the
  // workload once, and every configuration (the baseline's repeats too) is also compared with it
  // (docs/exact.md).
  bool reference_exact = false;
  // reference_device = "CUDA0": the exact reference runs on that CUDA device (docs/exact.md,
  // "On a GPU"); empty: on the CPU.
  std::string reference_device;
  // replay = "both": every llama.cpp configuration is also captured under served replay and
  // compared like with like (docs/served.md, "In experiments"); the served twins are ServedTwin's.
  bool replay_both = false;
  // A [[variant]] whose only change was replay (e.g. replay = "served") over a llama.cpp baseline:
  // not a setting to rank but the deployment's other path. The parser folds it into replay_both
  // (it is then no variant) and keeps its name here; "" when there was none.
  std::string replay_variant;
  std::optional<uint64_t> memory_budget;
  ConfigSpec baseline;
  std::vector<ConfigSpec> variants;  // [[variant]] tables, then the matrix's cells
  MatrixSettings matrix;
  BranchSettings branch;
  LayersSettings layers;
  HistorySettings history;
};

// Parses and checks an experiment file. Unknown keys, misspelt knobs and bad values are errors
// naming the file and line. Relative paths are relative to the file; ~ and ${VAR} are expanded.
Result<Experiment> ParseExperiment(const std::string& path);

struct RunOptions {
  std::string outdir;
  std::optional<uint64_t> memory_budget;  // --memory overrides the file's
  // --verify-recipe: serve the recommended llama-server command and check it against the capture
  // (recipe.verification in results.json).
  bool verify_recipe = false;
  Log log;  // status lines and progress bars (util.h); the default: stderr, bars on a terminal
};

// Runs the experiment: captures every configuration and repeat (reusing a capture whose
// request matches, so an interrupted run continues), compares, follows forks, writes
// OUTDIR/results.json, results.csv, report.md and report.html. Returns the results written.
// A configuration llama.cpp refuses is recorded as refused with the reason; the run goes on.
Result<ExperimentResults> RunExperiment(const Experiment& exp, const RunOptions& opts);

// Runs an experiment over a suite (exp.sessions): RunExperiment per session in
// OUTDIR/sessions/NAME (captures reused per session), then the figures pooled over the sessions
// with clustered intervals, the recipe on the pooled figures, OUTDIR/suite.json, report.md and
// report.html. Returns the suite's results written.
Result<SuiteResults> RunSuite(const Experiment& exp, const RunOptions& opts);

// What a run will compute, said before it starts (`flipscope run --dry-run`): per configuration
// its captures still to make, served decode steps and forks, and the time they should take here.
struct ConfigPlan {
  std::string line;               // its status line (name, replay, changes against the baseline)
  int repeats = 0, cached = 0;    // captures asked; of them already made for an equal request
  int64_t decode_steps = 0;       // served replay: positions fed alone, per capture
  std::optional<int> forks;       // forks followed at most by its captures still to make; none: no forks;
                                  // 0: every flip (max_branches = 0)
  int fork_tokens = 0;            // each future's length (the branch stage's max_tokens)
  std::optional<double> seconds;  // the captures and forks still to make; none: no rate known yet
  std::string basis;              // where the rate came from, or why there is none
  std::string refused;            // why llama.cpp would refuse it (Knobs::Validate); then nothing is made
  int ToMake() const { return refused.empty() ? repeats - cached : 0; }
};
struct RunPlan {
  std::string experiment, outdir;
  int64_t n_tokens = 0;             // tokens fed per capture
  std::vector<ConfigPlan> configs;  // the baseline, the variants, the exact reference, served twins
  std::vector<std::string> notes;   // what is not planned (skipped twins, a history of versions)
};
// Plans a run of exp into outdir without computing anything: reads the model's facts and the
// workload, hashes the model and workload only where a capture exists (to tell whether it is
// reusable), and takes rates from the timings of captures already in outdir/captures (none:
// "unknown until the first capture"). Creates no file or folder.
Result<RunPlan> PlanRun(const Experiment& exp, const std::string& outdir);
// The plan as the terminal shows it: one block per configuration, then the totals.
std::string PlanText(const RunPlan& plan);

// The experiment's served twin under replay = "both": the baseline and every variant that can
// run served (llama.cpp, alone) under ServedName with replay served; forks as [branch] says
// (names mapped to their twins), no layers or exact reference. Each configuration left out is appended to *skipped as
// {"config", "reason"}.
Experiment ServedTwin(const Experiment& exp, std::vector<ServedSkip>* skipped);

struct ModelInfo;
// The recipe from an experiment's results (its configs, summary, forks, served replay and
// reference) and the baseline's model (KV shape, training context): configurations ranked by
// fidelity against memory, KV bytes per token per KV type, the context a memory budget fits, and
// launch commands.
RecipeResult MakeRecipe(const ExperimentResults& results, const ModelInfo& model);
// The same from a results document (read with ExperimentResults::FromJson), as its document.
nlohmann::json MakeRecipe(const nlohmann::json& results, const ModelInfo& model);

}  // namespace flipscope
