// The whole results document of an experiment (results.json; docs/report.md), typed: what ran,
// each configuration's captures, the comparisons, the summary and floors, the exact reference,
// the forks followed, the layers, the served replay and the recipe. The experiment stage fills an
// ExperimentResults step by step and writes results.json from it once; only results/ turns it into
// JSON and back. A document the experiment wrote reads back and writes out identically (FromJson
// then ToJson). Comparisons, layers, forks and the recipe are typed (results/comparison.h,
// results/layers_result.h, results/branch_result.h, results/recipe_result.h).
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "engine/engine_record.h"
#include "results/branch_result.h"
#include "results/layers_result.h"
#include "results/recipe_result.h"
#include "results/results.h"
#include "results/run_facts.h"
#include "util/status.h"

namespace flipscope {

// One configuration's entry (configs[], reference, served.configs[]): how its captures ended.
struct ConfigEntry {
  std::string name;
  std::optional<ConfigStatus> status;     // absent until its captures end
  std::optional<std::string> reason;      // why it was refused or failed
  std::vector<std::string> captures;      // capture paths, one per repeat made, in repeat order
  std::optional<std::string> model_path;  // the model file it ran (requantized ones in OUT/models)
  // What the experiment file said of it and what its captures recorded; absent where an entry
  // does not hold the field (or holds another type: then the value stays in fields, as read).
  std::optional<std::string> description;
  std::optional<std::string> flags;  // the settings it ran with, as llama.cpp flags (effective values)
  std::optional<int64_t> repeats;    // captures asked for
  std::optional<std::vector<double>> capture_seconds;  // each repeat's capture, wall seconds
  std::optional<std::vector<bool>> reused;             // each repeat's capture was an earlier run's
  std::optional<double> kv_bytes_per_token;            // KV cache bytes per token of context
  bool kv_bytes_unknown = false;  // a server configuration's: its server decides its KV cache (written as null)
  std::optional<uint64_t> model_file_size;  // bytes of the model file it ran
  // What its first capture recorded: the knobs it ran with and the engine's record.
  std::optional<Recorded<KnobsFacts>> knobs;
  std::optional<EngineRecord> engine;
  // The knob values the experiment file set (key -> value, as written), and each one the capture
  // records otherwise with no reason.
  std::optional<nlohmann::json> changes;
  std::optional<std::vector<Contradiction>> contradictions;
  // The first capture's timings as it recorded them (load, prefill, forks, total; no stage reads
  // them).
  std::optional<nlohmann::json> timings;
  // Every other field as read (a later version's), and a typed field whose value could not be
  // read, kept as it was.
  nlohmann::json fields = nlohmann::json::object();

  // Whether its captures all ran.
  bool Ok() const { return status == ConfigStatus::kOk; }
  // The knobs it ran with, or nullptr when none are recorded (or readable).
  const Knobs* RanKnobs() const { return knobs && knobs->facts.knobs ? &*knobs->facts.knobs : nullptr; }
  // How its captures computed the transcript (its knobs' replay; prefill when not recorded).
  Replay RanReplay() const { return RanKnobs() ? RanKnobs()->replay : Replay::kPrefill; }
  nlohmann::json ToJson() const;
  // Never fails: what is missing stays empty, what is mistyped stays in fields.
  static ConfigEntry FromJson(const nlohmann::json& j);
};

// One comparison (comparisons[], reference.comparisons[]): a capture against the base one.
struct ComparisonRecord {
  ComparisonEntry entry;              // the configuration, its repeat and the figures summaries use
  std::optional<Comparison> compare;  // compare's result; none when a document holds no object there

  nlohmann::json ToJson() const;
  // The figures are the compare document's (ComparisonFigures::Of).
  static ComparisonRecord FromJson(const nlohmann::json& j);
};

// What following one configuration's forks found (branches[]): the branch stage's result, its
// own "config" written as "branch_config" so that "config" names the configuration.
struct BranchRecord {
  std::string config;
  BranchResult result;
  // The same forks decoded free when the result's were under a grammar ([branch] compare_free).
  std::optional<BranchCounts> free_counts;
  nlohmann::json extra = nlohmann::json::object();  // fields this version does not know, as read

  // The counts the summary's damage fields are made of (result.counts): forks followed,
  // damage, repair, teacher-forced-only flips, forkable flips (branch_points); damage_rate is 0.
  ForkCounts Counts() const;
  nlohmann::json ToJson() const;
  static BranchRecord FromJson(const nlohmann::json& j);
};

// Where one configuration's flips are born (layers[]): the layers stage's document, or why not.
struct LayersRecord {
  std::string config;
  std::optional<std::string> skipped;  // why the layers stage cannot look into it
  std::optional<std::string> error;    // its rows did not reproduce (said, not fatal)
  std::optional<LayersResult> result;  // the layers stage's result (docs/layers.md)

  nlohmann::json ToJson() const;
  static LayersRecord FromJson(const nlohmann::json& j);
};

// What one replay's captures measured: the configurations, their comparisons with the
// baseline's first capture, the floor, the summary, the load floor and the forks followed (the
// document's top level, and served under replay = "both").
struct Measurements {
  std::vector<ConfigEntry> configs;  // the baseline first, then the variants in file order
  std::vector<ComparisonRecord> comparisons;
  std::optional<Floor> floor;
  std::vector<SummaryRow> summary;
  std::vector<LoadFloorRow> load_floor;               // written when not empty
  std::optional<std::vector<BranchRecord>> branches;  // written when forks were followed

  // The configuration named so, or nullptr.
  const ConfigEntry* Config(const std::string& name) const;
  // The summary row of a configuration, or nullptr.
  const SummaryRow* Row(const std::string& name) const;
  // Writes these parts into a document object.
  void WriteInto(nlohmann::json& doc) const;
  // Reads these parts of a document; never fails.
  static Measurements ReadFrom(const nlohmann::json& doc);
};

// The exact reference (results.json reference): its capture and every capture against it.
struct ReferenceResults {
  ConfigEntry capture;                        // the exact capture's entry
  std::vector<ComparisonRecord> comparisons;  // the exact capture as base
  std::vector<SummaryRow> summary;            // written with SummaryRow::ToReferenceJson
  // replay = "both": the served twins (X@served) against the same exact capture, apart from the
  // prefill captures' rows so that a ranking by served twins reads served distances only.
  std::vector<ComparisonRecord> served_comparisons;
  std::vector<SummaryRow> served_summary;
  const SummaryRow* Row(const std::string& config, bool served) const;  // its row; nullptr when none

  nlohmann::json ToJson() const;
  static ReferenceResults FromJson(const nlohmann::json& j);
};

// A configuration left without a served twin, and why (served.skipped[]).
struct ServedSkip {
  std::string config, reason;
};

// replay = "both" (results.json served): the served twins measured like the prefill
// configurations, each configuration's prefill-vs-served distance and the ranking under each.
struct ServedResults {
  std::string baseline;  // the served baseline's name
  // The variant whose only change was the replay, which asked for this part (it is not a
  // configuration: its figures are the baseline's distance); none under replay = "both".
  std::optional<std::string> asked_by;
  std::vector<ServedSkip> skipped;  // no served twin
  Measurements measured;
  std::vector<ReplayDistance> distance;
  std::optional<ReplayRanking> ranking;

  nlohmann::json ToJson() const;
  static ServedResults FromJson(const nlohmann::json& j);
};

// The run's settings (results.json settings); each absent where a document does not hold it (or
// holds another type: then it stays in fields, as read).
struct RunSettings {
  std::optional<int64_t> window;    // flip-rate window in positions
  std::optional<double> confident;  // a confident flip's reference top-1 probability
  // The recipe's budget in bytes; none: no budget (written as null). Written as an integer when it
  // is a whole number of bytes (as the experiment writes it).
  std::optional<double> memory_budget_bytes;
  nlohmann::json fields = nlohmann::json::object();

  nlohmann::json ToJson() const;
  static RunSettings FromJson(const nlohmann::json& j);
};

// The whole document.
struct ExperimentResults {
  // What ran, on which model, with which settings.
  std::string flipscope_version, created, name, experiment_file, baseline;
  Recorded<ModelInfo> model;  // the model's facts (ModelInfo::ToJson)
  RunSettings settings;
  // The run's facts, from the baseline's first capture's manifest.
  Recorded<WorkloadFacts> workload;
  Recorded<ProbePlanFacts> probe_plan;
  EngineRecord environment;  // the baseline's engine
  Measurements measured;
  std::optional<ReferenceResults> reference;
  std::optional<std::vector<LayersRecord>> layers;  // written when [layers] ran
  std::optional<ServedResults> served;
  std::optional<RecipeResult> recipe;  // the recipe step's (MakeRecipe); none: no recipe
  // Top-level fields this version does not know, kept as read and written back (forward
  // compatibility of files).
  nlohmann::json extra = nlohmann::json::object();

  // results.json's content.
  nlohmann::json ToJson() const;
  // Reads a results document; never fails (what is missing stays empty).
  static ExperimentResults FromJson(const nlohmann::json& j);
};

// Reads a results.json file; an error names the file in one line (missing, not JSON, or not a
// results document: no "configs" array).
Result<ExperimentResults> ReadResultsFile(const std::string& path);

}  // namespace flipscope
