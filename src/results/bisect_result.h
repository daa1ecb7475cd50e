// `flipscope bisect`'s log and result (bisect.json; docs/history.md, "Bisect"), typed: what decides
// the bisect (the header a rerun must match to resume), the commits of the range, each step's
// build, capture, comparison with good and mark, and the outcome. The bisect builds a
// BisectResult, saves it after every step and reads an earlier run's back to resume; only
// results/ turns it into JSON and back. Reading is tolerant (outside input): a missing or
// mistyped field reads as its default; a file the bisect wrote reads back byte for byte.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "results/history_result.h"

namespace flipscope {

// What decides a bisect (header): a rerun resumes only when its header is the same.
struct BisectHeader {
  std::string llama_src, good, bad, criterion;  // the checkout; good and bad as full ids
  std::string model, model_sha256, workload, workload_sha256, tokens_sha256;
  int64_t max_tokens = 0, n_tokens = 0;
  std::string flags, cpu;
  HistoryResult::Plan probe_plan;
  nlohmann::json extra = nlohmann::json::object();
};

// One commit's build and capture (good_capture, steps[]) and, for a step, its comparison with
// good's capture and its mark.
struct BisectStep {
  std::optional<int64_t> index;  // in the range's commits (steps only)
  std::string commit;
  std::optional<std::string> subject;
  std::string capture;
  std::optional<bool> reused;  // its capture was kept from an earlier run
  std::optional<double> build_seconds, llama_build_seconds, capture_seconds;
  std::optional<std::string> build_log;
  std::optional<std::string> error;  // it does not build: why, in one line
  // Without its kind, names and windows (bisect.json keeps the figures and the flips).
  std::optional<HistoryComparison> comparison;
  std::optional<std::string> mark;  // "good", "bad" or "skip" (steps only)
  nlohmann::json extra = nlohmann::json::object();
};

// A commit the first bad one may be (result.candidates[]).
struct BisectCandidate {
  std::string commit, subject, mark;  // mark: "bad", or "skip" for one that does not build
};

// The first bad commit, when one is left (result.first_bad): what it changed and its comparison.
struct BisectFirstBad {
  std::string commit, subject;
  std::vector<std::string> files;  // the paths it changed (git show --name-only)
  std::string stat;                // git show --stat
  std::optional<HistoryComparison> comparison;
};

// The outcome of a finished bisect (result).
struct BisectOutcome {
  std::vector<BisectCandidate> candidates;
  std::optional<BisectFirstBad> first_bad;
  int64_t steps = 0, builds = 0;
  double step_seconds = 0;  // building and capturing, over every step
};

// The whole bisect.json.
struct BisectResult {
  BisectHeader header;
  struct Commit {
    std::string commit, subject;
  };
  std::vector<Commit> commits;  // after good up to bad, oldest first
  std::optional<BisectStep> good_capture;
  std::vector<BisectStep> steps;
  std::optional<BisectOutcome> result;  // none until it is finished
  nlohmann::json extra = nlohmann::json::object();

  // The step of a commit, or nullptr.
  const BisectStep* StepOf(const std::string& commit) const;
  nlohmann::json ToJson() const;
  // Never fails: what is missing or mistyped reads as empty.
  static BisectResult FromJson(const nlohmann::json& j);
};

// The header as bisect.json writes it (a rerun compares this document with its own).
nlohmann::json ToJson(const BisectHeader& h);

}  // namespace flipscope
