// Building blocks of the history stage, shared by its files and its tests.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "capture/capture_run.h"
#include "compare/compare.h"
#include "history/history.h"

namespace flipscope::history {

// What a git command printed and how it ended.
struct GitOutput {
  int code = 0;
  std::string out, err;
};
// Runs `git -C repo args...` (git from PATH); an error only when it cannot run at all.
Result<GitOutput> RunGit(const std::string& repo, const std::vector<std::string>& args);

// Sorted positions as ranges "A-B,C-D" (inclusive), the --full syntax.
std::string PositionRanges(const std::vector<int32_t>& positions);
// The plan a worker runs over token ids (which carry no spans): the stride kept, the extra
// positions of plan.full (tool calls, ranges) named as explicit ranges, so that the worker's
// probes are exactly PlanProbes(plan, workload).
Result<ProbePlan> WorkerPlan(const ProbePlan& plan, const Workload& w);

// The llama_source field (release, commit) of a capture's manifest; "" when it has none.
std::string ManifestSource(const CaptureManifest& m, const std::string& field);
// True when path holds a complete capture of exactly this request whose llama_source `field`
// equals value (field "": any source).
bool Reusable(const std::string& path, const ManifestRequest& request, const std::string& field,
              const std::string& value);
// The last line of a log file, for an error message ("" when unreadable).
std::string LogTail(const std::string& path);

// What every version's worker is fed: the workload rendered and tokenized once by this binary.
struct WorkerInputOptions {
  std::string model_path, workload_path;
  WorkloadOptions workload;
  Knobs knobs;
  ProbePlan plan;
  int max_tokens = 0;   // > 0: only the first max_tokens tokens (a short range)
  std::string out_dir;  // receives workload.tokens
  Log log;
};
struct WorkerInput {
  CaptureRequest req;  // the workers' request: token ids, explicit probe ranges; out_path unset
  CaptureSource src;   // the rendered workload (cut to max_tokens) and the model's facts
  std::string tokens_path, tokens_sha;
};
// Renders and tokenizes the workload, keeps the first max_tokens tokens (and the spans there),
// writes out_dir/workload.tokens and makes the request every worker runs.
Result<WorkerInput> PrepareWorkerInput(const WorkerInputOptions& options);
// Runs req in worker w (its output appended to log_path), with `extra` arguments after the
// request's; returns the seconds it took, or an error naming `name` and the log's last line.
Result<double> CaptureInWorker(const Worker& w, const CaptureRequest& req, const std::string& log_path,
                               const std::string& name, const std::vector<std::string>& extra = {});
// The worker of a history.json "versions" entry (a release, or a commit of hr.llama_src: built or
// found in the cache); *name gets the version as the terminal names it.
Result<Worker> VersionWorker(const HistoryRequest& hr, const HistoryVersion& entry, std::string* name);
// With hr.forks > 0 and a step that flips: follows the forks at the first hr.forks flips where
// the model writes of doc's step that changed most, each side's futures decoded by its own
// version's worker, and sets doc.forks (the branch stage's result and how it was followed).
Status FollowForks(const HistoryRequest& hr, const WorkerInput& in, HistoryResult& doc);

// Fills doc.result from the finished search: the candidates and, when one is left, the files it
// changed (git show in br.llama_src) and its comparison with good.
Status BisectFinish(const BisectRequest& br, BisectSearch& search, BisectResult& doc);

// One comparison of history.json: the figures of a Comparison that the history section shows.
HistoryComparison ComparisonOf(const std::string& kind, const std::string& base, const std::string& cand,
                               const Comparison& c);
// Whether a version moved toward exact from the one before, from each one's KL(exact||version)
// per probe position (the probes both hold): the mean change with a 95% interval (normal, paired)
// and "toward exact" / "away from exact" only when the interval lies below / above 0, else "no
// clear direction" ("no change" when every probe's KL is the same).
KlDirection DirectionOf(const std::map<int32_t, double>& before, const std::map<int32_t, double>& now);
// Compares the captures of doc.versions (and doc.exact): each with the one before (steps), each
// from the third on with the first (from_first), each against exact (to_exact, from the second
// on with from_before: DirectionOf); names the step with the most flips (changed_most).
Status CompareAll(const HistoryRequest& req, HistoryResult& doc);

}  // namespace flipscope::history
