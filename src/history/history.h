// history: one workload and one set of knobs over an ordered list of llama.cpp versions — the
// trees vendored in llama-cpp-python releases. Each release's capture worker (this flipscope tree
// built against that release, scripts/build-worker.sh) is built once into the cache and captures
// in its own process; the captures are compared each with the one before, with the first, and
// with the FP64 exact reference when asked. docs/history.md.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "capture/capture.h"
#include "engine/engine.h"
#include "results/branch_result.h"
#include "results/bisect_result.h"
#include "results/history_result.h"
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

// One version's capture worker, built (or found) in the cache: a release's, or a commit's of a
// llama.cpp checkout.
struct Worker {
  Release release;
  std::string commit;              // a checkout's commit (full id); "" for a release
  std::string binary;              // the worker's flipscope executable; "" when its build failed (error)
  std::string build_log;           // where a failed build's compiler output is
  std::string error;               // a commit whose build failed: the one-line reason, naming build_log
  double build_seconds = 0;        // this call's build time; 0 when the worker was already built
  double llama_build_seconds = 0;  // of that, the llama.cpp libraries (a commit's build only)
};

// The CPU mode ("native" or "portable") of the llama.cpp this binary links.
std::string MainBuildCpu();

// Builds the worker of release (scripts/build-worker.sh) or finds it built. A release whose
// llama.cpp the tree does not compile against is refused in one line naming it and the range.
// The release and CPU mode this binary was built with need no build: its own flipscope-worker,
// beside it, is that worker.
Result<Worker> PrepareWorker(const Release& release, const WorkerOptions& options);

// ---- A llama.cpp checkout (--llama-src) ----------------------------------------------------------

// REV (a commit, tag or branch) of the checkout repo as a full commit id (git rev-parse --verify
// REV^{commit}); one line naming REV when there is no such commit, or repo when it is no checkout.
Result<std::string> ResolveCommit(const std::string& repo, const std::string& rev);
// Whether commit a is an ancestor of b (git merge-base --is-ancestor); a is its own ancestor.
Result<bool> IsAncestor(const std::string& repo, const std::string& a, const std::string& b);
// The cache folder of repo's commits: $FLIPSCOPE_CACHE/commits/<hash of repo's path>; commit S is
// checked out in S/tree, its llama.cpp built in S/llama and its worker in S/worker.
std::string CommitCacheDir(const std::string& repo);
// Checks sha out (git worktree add --detach) in CommitCacheDir(repo)/sha/tree, or finds it there;
// returns the tree.
Result<std::string> CheckoutCommit(const std::string& repo, const std::string& sha);
// The worker of one commit of repo: checked out, its llama.cpp libraries and this tree built
// against them (scripts/build-worker.sh, ccache shared between commits), or found built. A build
// that fails is no error here: the worker comes back without a binary, its error and log set.
Result<Worker> PrepareCommitWorker(const std::string& repo, const std::string& sha, const WorkerOptions& options);

// Runs argv (argv[0] a path) with stdout and stderr appended to log_path; returns its exit code
// (128 + signal when killed), or an error when it cannot start.
Result<int> RunProcess(const std::vector<std::string>& argv, const std::string& log_path);

// ---- Bisect (docs/history.md, "Bisect") -------------------------------------------------------

// What makes a commit bad: its capture, compared with good's, has any row that is not
// bit-identical, more than N flips, or a KL mean above x.
struct BisectCriterion {
  enum class Kind { kNotBitIdentical, kFlipsAbove, kKlMeanAbove };
  Kind kind = Kind::kNotBitIdentical;
  double threshold = 0;          // N (whole) or x
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

// `git show --name-only --format= SHA` parsed: the paths it lists, one a line, blank lines dropped.
std::vector<std::string> ParseChangedFiles(std::string_view text);

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

// A bisect of a llama.cpp checkout between a good and a bad commit (docs/history.md, "Bisect").
struct BisectRequest {
  std::string llama_src, good, bad;  // the checkout; good and bad as the user named them
  BisectCriterion criterion;
  std::string model_path, workload_path;
  WorkloadOptions workload;
  ProbePlan plan;
  Knobs knobs;
  int max_tokens = 0;  // > 0: only the workload's first max_tokens tokens (a short range)
  int window = 8192;
  double confident = 0.9;
  std::string out_dir;
  WorkerOptions worker;
  Log log;  // one line per step
};

// Finds the first commit after good up to bad whose capture differs from good's by the criterion:
// good and bad resolved (one line when either is unknown, they are equal, or good is not an
// ancestor of bad), good captured once, then each commit the search offers built, captured in its
// worker and compared with good's capture; a commit that does not build is skipped. Every step is
// logged to out_dir/bisect.json (atomically, after each step) and every capture kept in
// out_dir/captures/SHA.safetensors, so a rerun over the same inputs resumes. Returns what it
// wrote to bisect.json.
Result<BisectResult> RunBisect(const BisectRequest& req);
// The outcome of a bisect for a terminal: the commit (or candidates), its subject, the files it
// changed and its comparison with good.
std::string BisectTerminal(const BisectResult& bisect);

// ---- The history -------------------------------------------------------------------------------

struct HistoryRequest {
  std::string model_path, workload_path;
  WorkloadOptions workload;
  ProbePlan plan;
  Knobs knobs;                        // the same for every release
  std::vector<std::string> releases;  // ordered, oldest first as a rule
  // Or commits (ids, tags, branches) of the llama.cpp git checkout llama_src, in order.
  std::string llama_src;
  std::vector<std::string> commits;
  int max_tokens = 0;            // > 0: only the workload's first max_tokens tokens
  bool reference_exact = false;  // also capture with the FP64 exact engine and compare each release with it
  // > 0: follow the forks at the first `forks` flips (where the model writes) of the step that
  // changed most, each side's futures (fork_tokens long) decoded by its own version's worker.
  int forks = 0;
  int fork_tokens = CaptureForks().max_tokens;
  int window = 8192;
  double confident = 0.9;
  std::string out_dir;
  WorkerOptions worker;
  Log log;
};

// Renders the workload once (the main binary's llama.cpp: every release is fed the same token
// ids), captures it under each release's worker (reusing a capture in out_dir whose request and
// release match), compares, and writes out_dir/history.json and history.md. Returns what it
// wrote to history.json (docs/history.md lists its fields).
Result<HistoryResult> RunHistory(const HistoryRequest& req);

// ---- A history over captures made elsewhere ----------------------------------------------------

// One version of such a history: a configuration's name and its capture (an experiment's server
// configurations, e.g. vLLM from two environments, or any other configurations in order).
struct CapturedVersion {
  std::string name, capture;
};
// Forks followed elsewhere between two versions' captures (an experiment's branch stage, base
// the baseline): the branch stage's result.
struct FollowedForks {
  std::string base, cand;
  BranchResult result;
};
struct CapturedHistory {
  std::string model_path, workload_path;  // for the document's head and the flips' token texts
  std::vector<CapturedVersion> versions;  // at least two, in order, captures of the same tokens
  std::vector<FollowedForks> forks;       // the one of the step that changed most goes to "forks"
  std::string exact_capture;              // the FP64 reference's capture; "" for none
  int window = 8192;
  double confident = 0.9;
  std::string out_dir;  // receives history.json and history.md
};
// Compares the versions' captures as RunHistory does (each with the one before, from the third on
// with the first, each against exact) and writes out_dir/history.json and history.md. The
// document's "kind" is "configurations"; each version records how its capture ran (engine,
// flags, kernel path, the server's version and launch when it was a server). Forks followed
// between the two versions of the step that changed most become its "forks".
Result<HistoryResult> HistoryOfCaptures(const CapturedHistory& h);

// The history section as Markdown, and a short terminal table.
std::string HistoryMarkdown(const HistoryResult& history);
std::string HistoryTerminal(const HistoryResult& history);

}  // namespace flipscope
