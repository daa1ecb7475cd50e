// The history stage's result (history.json; docs/history.md), typed: the versions and how each
// capture ran, every comparison (each version with the one before, with the first, with exact),
// the step that changed most and the forks followed there. The history stage builds a
// HistoryResult; only results/ turns it into JSON and back. Reading is tolerant (outside input): a
// missing or mistyped field reads as its default (a figure as NaN, written as null), and fields
// this version does not know are kept in `extra` and written back. A file the history stage wrote
// reads back and writes out byte for byte.
#pragma once

#include <array>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "engine/engine_record.h"
#include "results/branch_result.h"

namespace flipscope {

// One window of a comparison (windows[]).
struct HistoryWindow {
  int64_t begin = 0, end = 0, probes = 0, flips = 0;
  double kl_mean = 0, kl_max = 0;
};

// One flip of a comparison (flip_list[]).
struct HistoryFlip {
  int64_t position = 0, base_token = 0, cand_token = 0;
  std::string base_text, cand_text;
  std::optional<double> base_prob;  // none when the base row's probability is unknown (null)
  double kl = 0;
  std::string klass;  // "confident", "uncertain", ... (JSON "class")
};

// Whether a version moved toward exact from the one before (to_exact[].from_before): the paired
// change of each probe's KL(exact||version), its 95% interval, and the direction in words.
struct KlDirection {
  int64_t probes = 0;
  double mean = 0;
  std::array<double, 2> ci{};
  std::string direction;  // "toward exact", "away from exact", "no clear direction", "no change"
};

// One comparison of two versions' captures (steps[], from_first[], to_exact[]).
struct HistoryComparison {
  std::string kind;  // "step", "from_first", "to_exact"
  std::string base, cand;
  int64_t probes = 0, flips = 0, confident_flips = 0, bit_identical = 0;
  double flip_rate = 0;
  std::array<double, 2> flip_rate_ci{};
  double kl_mean = 0, kl_median = 0, kl_p99 = 0, kl_max = 0;
  bool kernel_paths_differ = false;
  std::vector<HistoryWindow> windows;
  std::vector<HistoryFlip> flip_list;
  std::optional<KlDirection> from_before;  // to_exact from the second version on
  nlohmann::json extra = nlohmann::json::object();
};

// A server version's server (versions[].server): its version, URL and launch as recorded.
struct HistoryServer {
  std::string version, url;
  std::optional<EngineLaunch> launch;  // written as {"asked", "run"}
};

// One version (versions[]): a release, a commit, or a configuration's capture, and how it ran.
struct HistoryVersion {
  std::string release;                // its name: a release number, a commit's short id, a configuration
  std::optional<std::string> commit;  // a commit's full id
  std::string capture;
  // How its capture was made (a history of releases or commits): the worker, its build, reuse.
  std::optional<std::string> worker;
  std::optional<double> worker_build_seconds, llama_build_seconds, capture_seconds;
  std::optional<bool> reused;
  // What its capture's manifest records.
  std::optional<std::string> engine, flags, kernel_path, llama_cpp;
  std::optional<EngineSource> llama_source;
  std::optional<int64_t> n_tokens;
  std::optional<HistoryServer> server;
  nlohmann::json extra = nlohmann::json::object();
};

// The exact reference's capture (exact).
struct HistoryExact {
  std::string capture;
  std::optional<bool> reused;
  std::optional<double> capture_seconds;
  nlohmann::json extra = nlohmann::json::object();
};

// The forks followed at the step that changed most (forks): the branch stage's result and how
// they were followed, in words.
struct HistoryForks {
  BranchResult result;
  std::string how;
};

// A comparison as history.json (and bisect.json) write it, and back (never fails).
nlohmann::json ToJson(const HistoryComparison& c);
HistoryComparison HistoryComparisonFromJson(const nlohmann::json& j);

// The whole history.json.
struct HistoryResult {
  std::optional<std::string> kind;  // "configurations" for a history of an experiment's captures
  std::string model, workload;
  std::optional<std::string> model_sha256, workload_sha256, tokens, llama_src;
  int64_t n_tokens = 0;
  std::string flags, cpu;  // the knobs as flags; the llama.cpp CPU build mode
  struct Plan {
    int64_t stride = 0;
    std::string full;
  };
  std::optional<Plan> probe_plan;
  int64_t window = 0;
  std::vector<HistoryVersion> versions;
  std::optional<HistoryExact> exact;
  std::vector<HistoryComparison> steps, from_first, to_exact;
  int64_t changed_most = -1;  // index into steps of the one that changed most; -1: none
  std::optional<HistoryForks> forks;
  nlohmann::json extra = nlohmann::json::object();

  // Whether it is a history of an experiment's configurations (kind "configurations").
  bool OfConfigurations() const { return kind == "configurations"; }
  // The step that changed most, or nullptr.
  const HistoryComparison* ChangedMost() const;
  nlohmann::json ToJson() const;
  // Never fails: what is missing or mistyped reads as empty.
  static HistoryResult FromJson(const nlohmann::json& j);
};

}  // namespace flipscope
