// results: the typed rows of an experiment's results document (results.json; docs/report.md)
// that the experiment stage computes and the report stage ranks and shows: each configuration's
// summary over its repeats, the repeat floor, the load floor and the exact reference's summary.
// The experiment writes them with ToJson; each FromJson tolerates missing or mistyped parts (they
// come back empty, never an error). The whole document, typed, is ExperimentResults
// (results/experiment_results.h), which the report reads.
#pragma once

#include <array>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "results/comparison.h"
#include "util/names.h"

namespace flipscope {

// How a configuration's captures ended: its results.json configs[] entry's "status". A refused one
// (a configuration llama.cpp or the knobs' checks decline) and a failed one are recorded, with
// their "reason", and the run goes on.
enum class ConfigStatus { kOk, kRefused, kFailed };
template <>
struct Names<ConfigStatus> {
  static constexpr std::pair<ConfigStatus, const char*> v[] = {
      {ConfigStatus::kOk, "ok"}, {ConfigStatus::kRefused, "refused"}, {ConfigStatus::kFailed, "failed"}};
};
// The status of a configs[] entry; nullopt when it has none or names none of the above.
std::optional<ConfigStatus> ReadConfigStatus(const nlohmann::json& config);

using Interval = std::array<double, 2>;  // a 95% interval [lo, hi]

// The figures of one comparison (compare's JSON: its "overall" block and counts) that a summary
// is made of.
struct ComparisonFigures {
  double flip_rate = 0;
  std::optional<Interval> flip_rate_ci;
  int64_t flips = 0, probes = 0, confident_flips = 0, uncertain_flips = 0;
  double kl_mean = 0, kl_p99 = 0, kl_max = 0;
  std::optional<double> same_top1_rate;
  int64_t bit_identical = 0, probes_compared = 0;

  // The figures of a comparison.
  static ComparisonFigures Of(const Comparison& c);
};

// One entry of comparisons[]: a configuration's repeat against the reference capture.
struct ComparisonEntry {
  std::string config;
  int repeat = 0;  // 0-based capture index
  ComparisonFigures figures;
};

// The index of the median repeat of these flip rates: the lower middle by rate, ties in repeat
// order (the one rule: the summary names it and the report shows that repeat's flips); 0 when empty.
size_t MedianRepeatIndex(const std::vector<double>& flip_rates);

// What following the forks of a configuration found (results.json summary[] damage fields).
struct ForkCounts {
  int64_t damage = 0, repair = 0, followed = 0;
  double damage_rate = 0;  // the median flip rate scaled by the followed forks' damage share
  // Flips where the model reads the next token (tool results, system, user): never forked, never
  // damage; and the flips where it writes, followed or not (followed is the first N of these).
  int64_t teacher_forced_only = 0, forkable = 0;
};

// One configuration over its repeats (summary[], and reference.summary[] against exact).
struct SummaryRow {
  std::string config;
  int repeats = 0;
  double median_flip_rate = 0;
  std::optional<int> median_repeat;  // the repeat whose counts these are; absent in files before it
  std::vector<double> flip_rates;
  // The median repeat's counts and interval; KL figures are medians over repeats.
  std::optional<Interval> flip_rate_ci;
  int64_t flips = 0, probes = 0, confident_flips = 0, uncertain_flips = 0;
  double kl_mean = 0, kl_p99 = 0, kl_max = 0;
  std::optional<double> same_top1_rate;
  int64_t bit_identical = 0, bit_identical_of = 0;  // rows identical over all repeats, of rows compared
  std::optional<bool> above_floor;                  // absent against exact
  std::optional<int> load;                          // a loaded configuration's filler count
  std::string alone;                                // with load: the same configuration alone ("" = none)
  bool forks_known = false;                         // the damage fields are written (null when no forks)
  std::optional<ForkCounts> forks;
  std::optional<double> exact_flip_rate, exact_kl_mean;  // against the exact reference, when present

  // Summary of one configuration's comparisons (in repeat order; at least one).
  static SummaryRow Of(const std::string& config, const std::vector<ComparisonEntry>& entries);
  // The summary[] entry.
  nlohmann::json ToJson() const;
  // The reference.summary[] entry (the figures against exact).
  nlohmann::json ToReferenceJson() const;
  // Either entry back; absent or mistyped fields keep their defaults.
  static SummaryRow FromJson(const nlohmann::json& j);
  // Repeats bit for bit identical at every compared row.
  bool AllBitIdentical() const { return bit_identical == bit_identical_of; }
  // 95% intervals of the damage rate and of the repair rate (damaging / repairing flips per
  // probe): the Wilson interval of the followed forks' damage (repair) share, times the flip
  // rate's Wilson interval, times the share of flips where the model writes; both uncertainties
  // in one conservative interval. nullopt where the forks were not followed.
  std::optional<Interval> DamageRateCi() const;
  std::optional<double> RepairRate() const;
  std::optional<Interval> RepairRateCi() const;
};

// ---- Ranking with statistical ties (recipe.ranking) ----

// The 95% Wilson score interval of k successes in n trials, as compare's flip-rate intervals
// (compare::WilsonInterval), for counts the report and the recipe derive; {0, 1} when n <= 0.
Interval Wilson95(double k, double n);

// One figure a ranking compares (lower is better): its estimate and 95% interval.
struct Estimate {
  double value = 0;
  Interval ci{0, 0};
  // Whether two figures are statistically indistinguishable: their intervals overlap.
  bool Overlaps(const Estimate& o) const { return ci[0] <= o.ci[1] && o.ci[0] <= ci[1]; }
};
// A configuration as the ranking sees it.
struct RankInput {
  std::string config;
  std::vector<Estimate> keys;  // in precedence order; every row has the same number
  double memory = 0;           // bytes it needs (the tie-break: least first); +inf when unknown
  double last = 0;             // a final, non-statistical order (e.g. KL mean), lowest first
};
struct RankedRow {
  size_t index = 0;   // into the input
  int tie_group = 0;  // 1-based; rows sharing one are indistinguishable on every key
};
// Orders rows by keys[0]: each group starts at the best remaining row, and takes every row whose
// keys[0] interval overlaps it; within a group the same by keys[1], and so on. The last level's
// groups are the statistical ties, ordered by memory (least first), then by the keys' estimates,
// then `last`. With no keys, one group ordered by memory.
std::vector<RankedRow> RankWithTies(const std::vector<RankInput>& rows);

// The reference configuration against itself (results.json floor).
struct Floor {
  int repeats = 0;  // captures of the reference, the first included
  std::optional<double> flip_rate;
  std::optional<Interval> flip_rate_ci;
  std::optional<int64_t> flips, probes;
  std::optional<double> kl_mean;
  std::optional<bool> bit_identical;
  std::string note;  // why there is no floor

  // The floor from the reference's repeats (none: a floor of one run, with the note).
  static Floor Of(const std::optional<SummaryRow>& repeats_vs_first, size_t n_captures);
  // The flip rate a configuration must exceed to be above the floor: the interval's upper end;
  // 0 when the repeats were bit for bit identical or there is no floor.
  double Threshold() const;
  nlohmann::json ToJson() const;
  static Floor FromJson(const nlohmann::json& j);
};

// One row of results.json load_floor: the floor alone (load 0) or under a load.
struct LoadFloorRow {
  int load = 0;
  std::string config;
  int repeats = 0;
  std::optional<int64_t> flips, probes;
  std::optional<double> flip_rate;
  std::optional<Interval> flip_rate_ci;
  std::optional<double> kl_mean;
  std::optional<bool> bit_identical;

  nlohmann::json ToJson() const;
  static LoadFloorRow FromJson(const nlohmann::json& j);
};

// The name of a configuration's served twin under replay = "both" ("q8" -> "q8@served").
std::string ServedName(const std::string& config);
// The configuration a served twin's name is of ("q8@served" -> "q8"); any other name as it is.
std::string UnservedName(const std::string& name);

// One group of the probes of a prefill-vs-served distance (results.json served.distance[].groups[]).
struct ReplayGroup {
  // "written": the model wrote the predicted token (ModelWrites at p + 1); "tool_calls": of
  // those, the ones inside a tool call; "elsewhere": the model read it (prefilled either way).
  std::string name;
  int64_t probes = 0, flips = 0, bit_identical = 0;
  double flip_rate = 0, kl_mean = 0;

  nlohmann::json ToJson() const;
  static ReplayGroup FromJson(const nlohmann::json& j);
};

// A configuration captured under both replays: its prefill capture (base) against its served
// one, first repeats (results.json served.distance[]; per-window figures stay compare's JSON
// under "windows").
struct ReplayDistance {
  std::string config;         // the prefill configuration's name
  ComparisonFigures figures;  // flips, rate, interval, KL, bit-identical rows of the whole capture
  std::vector<ReplayGroup> groups;
  std::optional<std::vector<WindowStats>> windows;  // compare's per-window figures, when kept

  nlohmann::json ToJson() const;
  static ReplayDistance FromJson(const nlohmann::json& j);
};

// The configurations in ranking order under each replay (by median flip rate, then KL mean,
// each against its own replay's baseline), and whether the orders differ (served.ranking).
struct ReplayRanking {
  std::vector<std::string> prefill, served;  // prefill names both
  bool changed = false;

  nlohmann::json ToJson() const;
  static ReplayRanking FromJson(const nlohmann::json& j);
};

}  // namespace flipscope
