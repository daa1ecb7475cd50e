// history: one workload and one set of knobs over an ordered list of llama.cpp versions — the
// trees vendored in llama-cpp-python releases. Each release's capture worker (this flipscope tree
// built against that release, scripts/build-worker.sh) is built once into the cache and captures
// in its own process; the captures are compared each with the one before, with the first, and
// with the FP64 exact reference when asked. docs/history.md.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "capture/capture.h"
#include "engine/engine.h"
#include "util/status.h"
#include "util/util.h"
#include "workload/workload.h"

namespace flipscope {

// ---- Releases --------------------------------------------------------------------------------

// A llama-cpp-python release, e.g. 0.3.36.
struct Release {
  int major = 0, minor = 0, patch = 0;
  std::string ToString() const;
  auto operator<=>(const Release&) const = default;
};

// "0.3.36" or "llama-cpp-python==0.3.36" -> the release; an error naming the text otherwise.
Result<Release> ParseRelease(const std::string& text);
// The releases whose llama.cpp API the engine is known to drive, oldest and newest (docs/history.md).
Release OldestSupported();
Release NewestSupported();
// Ok inside [OldestSupported(), NewestSupported()]; else a refusal naming the release and the range.
Status CheckSupported(const Release& release);
// Each text parsed and checked, in the order given; at least two, none twice.
Result<std::vector<Release>> ParseHistoryReleases(const std::vector<std::string>& texts);

// ---- Workers ---------------------------------------------------------------------------------

struct WorkerOptions {
  std::string tree = FLIPSCOPE_HISTORY_TREE;  // the flipscope source tree workers are built from
  // Every release's llama.cpp CPU build: "portable" (ggml's x86-64 set) or "native" (this
  // machine's, AMX masked out); "" = the main binary's own (MainBuildCpu()).
  std::string cpu;
  Log log;
};

// One release's capture worker, built (or found) in the cache.
struct Worker {
  Release release;
  std::string binary;     // the worker's flipscope executable
  std::string build_log;  // where a failed build's compiler output is
  double build_seconds = 0;  // this call's build time; 0 when the worker was already built
};

// The CPU mode ("native" or "portable") of the llama.cpp this binary links.
std::string MainBuildCpu();

// Builds the worker of release (scripts/build-worker.sh) or finds it built. A release whose
// llama.cpp the tree does not compile against is refused in one line naming it and the range.
// The release and CPU mode this binary was built with need no build: its own flipscope-worker,
// beside it, is that worker.
Result<Worker> PrepareWorker(const Release& release, const WorkerOptions& options);

// Runs argv (argv[0] a path) with stdout and stderr appended to log_path; returns its exit code
// (128 + signal when killed), or an error when it cannot start.
Result<int> RunProcess(const std::vector<std::string>& argv, const std::string& log_path);

// ---- The history -------------------------------------------------------------------------------

struct HistoryRequest {
  std::string model_path, workload_path;
  WorkloadOptions workload;
  ProbePlan plan;
  Knobs knobs;                        // the same for every release
  std::vector<std::string> releases;  // ordered, oldest first as a rule
  bool reference_exact = false;       // also capture with the FP64 exact engine and compare each release with it
  int window = 8192;
  double confident = 0.9;
  std::string out_dir;
  WorkerOptions worker;
  Log log;
};

// Renders the workload once (the main binary's llama.cpp: every release is fed the same token
// ids), captures it under each release's worker (reusing a capture in out_dir whose request and
// release match), compares, and writes out_dir/history.json and history.md. Returns the
// history.json document (docs/history.md lists its fields).
Result<nlohmann::json> RunHistory(const HistoryRequest& req);

// The history section as Markdown, and a short terminal table, from a history.json document.
std::string HistoryMarkdown(const nlohmann::json& history);
std::string HistoryTerminal(const nlohmann::json& history);

}  // namespace flipscope
