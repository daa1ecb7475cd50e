// history: one workload and one set of knobs over an ordered list of llama.cpp versions — the
// trees vendored in llama-cpp-python releases. Each release's capture worker (this flipscope tree
// built against that release, scripts/build-worker.sh) is built once into the cache and captures
// in its own process; the captures are compared each with the one before, with the first, and
// with the FP64 exact reference when asked. docs/history.md.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
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

// ---- Bisect (docs/history.md, "Bisect") -------------------------------------------------------

// What makes a commit bad: its capture, compared with good's, has any row that is not
// bit-identical, more than N flips, or a KL mean above x.
struct BisectCriterion {
  enum class Kind { kNotBitIdentical, kFlipsAbove, kKlMeanAbove };
  Kind kind = Kind::kNotBitIdentical;
  double threshold = 0;  // N (whole) or x
  std::string ToString() const;  // the text ParseBisectCriterion takes
};
// "not-bit-identical", "flips>N" (N a whole number) or "kl>X" (X a number >= 0); else an error naming the text.
Result<BisectCriterion> ParseBisectCriterion(const std::string& text);
// Whether a comparison with good's capture (its probes, bit-identical rows, flips, KL mean) is bad.
bool IsBad(const BisectCriterion& c, int64_t probes, int64_t bit_identical, int64_t flips, double kl_mean);

// One commit of the range, as `git log --first-parent --reverse --format=%H%x09%s GOOD..BAD` prints it.
struct GitCommit {
  std::string sha, subject;
  bool operator==(const GitCommit&) const = default;
};
// That output parsed: one "SHA<TAB>subject" line per commit (SHA 40 or 64 lowercase hex digits);
// an error naming the first line that is not one. Empty output is an empty range.
Result<std::vector<GitCommit>> ParseCommitList(std::string_view text);

// The search over the commits after good up to bad (oldest first, bad last and known bad), as git
// bisect does on a first-parent history: test the untested commit nearest the middle of what is
// still unknown; a commit that does not build is skipped and never tested again.
class BisectSearch {
 public:
  enum class Mark { kUntested, kGood, kBad, kSkip };
  // commits: at least one (bad itself); an error otherwise.
  static Result<BisectSearch> Create(std::vector<GitCommit> commits);
  // The index of the commit to test next; nullopt when the search is over.
  std::optional<size_t> Next() const;
  // Records a tested commit's mark (kGood, kBad or kSkip); an error for an index out of range, a
  // mark that contradicts an earlier one (a good commit after a bad one), or kUntested.
  Status Record(size_t index, Mark mark);
  // Once over: the first bad commit alone, or, when skipped commits hide it, every commit it may
  // be (the skipped ones between the last good and the first bad, then that bad one).
  std::vector<size_t> Candidates() const;
  const std::vector<GitCommit>& commits() const { return commits_; }
  Mark mark(size_t index) const { return marks_[index]; }

 private:
  std::vector<GitCommit> commits_;
  std::vector<Mark> marks_;
  // The last known good index + 1 (0: only good itself is known good) and the first known bad index.
  size_t lo_ = 0, hi_ = 0;
};

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
