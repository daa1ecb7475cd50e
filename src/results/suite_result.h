// The results of an experiment over a suite of sessions (OUTDIR/suite.json; docs/report.md,
// "Suites"): every configuration's figures pooled over the sessions with clustered intervals,
// one row per session, where the flips concentrate, the breakdown by kind of text and by depth,
// the recipe on the pooled figures and where a session would rank otherwise. The experiment
// stage computes it; this file alone turns it into JSON and back (tolerant, as results.json).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "results/recipe_result.h"
#include "results/results.h"
#include "util/status.h"

namespace flipscope {

// One session of the suite and where its own results folder is.
struct SuiteSession {
  std::string name, workload, outdir;
  double weight = 1;
  int64_t tokens = 0;
};

// A figure pooled over the sessions: the weighted ratio, its clustered interval (sessions and
// blocks of probes, bootstrap) and, for rates, the naive interval that treats every probe as
// independent (shown beside it, never used).
struct PooledFigure {
  double value = 0;
  Interval ci{0, 0};
  std::optional<Interval> naive_ci;
  nlohmann::json ToJson() const;
  static PooledFigure FromJson(const nlohmann::json& j);
};

// A configuration's figures in one session (its median repeat against the session's baseline).
struct SuiteSessionRow {
  std::string session;
  int64_t probes = 0, flips = 0;
  double flip_rate = 0, kl_mean = 0;
  std::optional<double> damage_rate;  // null where its forks were not followed
  std::optional<int64_t> damage, followed;
  bool above_floor = false;
  std::optional<int> rank;  // the session's own recipe's tie group
};

// Flips and KL over the probes whose predicted token lies in one kind of text, in one session
// or pooled (session ""). Pooled rows weigh each session's probes by its weight: probes and flips
// are the weighted sums rounded, flip_rate and kl_mean the weighted ratios themselves.
struct KindRow {
  std::string kind, session;
  int64_t probes = 0, flips = 0;
  double kl_mean = 0;
  double flip_rate = 0;
};

// One window of token depth in one session, or pooled over the sessions (session ""), weighted
// as KindRow.
struct DepthRow {
  std::string session;
  int64_t begin = 0, end = 0, probes = 0, flips = 0;
  double kl_mean = 0;
  double flip_rate = 0;
};

// Where a configuration's flips (or damage) concentrate: one session holds this share of them.
struct Concentration {
  std::string session, of;  // of: "flips" or "damage"
  double share = 0;         // of the pooled weighted count
};

struct SuiteConfig {
  std::string config, status, reason;
  int repeats = 0;
  std::optional<PooledFigure> flip_rate, kl_mean, damage_rate;
  int64_t probes = 0, flips = 0;  // weighted sums over the sessions, rounded
  bool above_floor = false;
  std::vector<SuiteSessionRow> sessions;
  std::optional<Concentration> concentration;
  std::vector<KindRow> kinds;
  std::vector<DepthRow> depth;
};

// A session whose own recipe orders two configurations the other way round from the pooled one,
// or recommends another configuration.
struct RankDifference {
  std::string session, recommended;   // its own recommendation
  std::vector<std::string> reversed;  // "a above b" where the pooled ranking has b above a
};

struct SuiteResults {
  std::string flipscope_version, created, name, experiment_file, baseline;
  int64_t window = 0;
  int block = 0;  // probes per block of the bootstrap
  int replicates = 0;
  std::vector<SuiteSession> sessions;
  std::optional<PooledFigure> floor;  // the baseline's repeats, pooled (none: one repeat)
  std::vector<SuiteSessionRow> floor_sessions;
  std::vector<SuiteConfig> configs;       // the baseline first
  std::vector<std::string> matrix_cells;  // the variants a matrix made
  std::string matrix_baseline_cell;       // its cell with the baseline's knobs
  std::optional<RecipeResult> recipe;     // ranked on the pooled figures
  std::vector<RankDifference> rank_differences;

  const SuiteConfig* Config(const std::string& name) const;
  nlohmann::json ToJson() const;
  static SuiteResults FromJson(const nlohmann::json& j);
};

// Reads OUTDIR/suite.json.
Result<SuiteResults> ReadSuiteFile(const std::string& path);

}  // namespace flipscope
