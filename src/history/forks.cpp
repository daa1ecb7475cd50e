// Following the forks at the flips of the step that changed most, for releases and commits: each
// side's futures are decoded by its own version's worker (its capture made again with --fork-at:
// the same rows, the futures beside them), and judged here over the transcript this binary
// rendered (its spans and tools: the workers were fed token ids, which carry neither).
#include <fmt/format.h>

#include <filesystem>

#include "branch/branch.h"
#include "history/history.h"
#include "history/internal.h"

namespace flipscope::history {

namespace {

namespace fs = std::filesystem;

// The branch points of the step base -> cand: its first `max` flips where the model writes the
// predicted token, by the branch stage's own rule (so that the judge forks at the same points).
Result<std::set<int32_t>> StepPoints(const std::string& base, const std::string& cand, const std::vector<Span>& spans,
                                     int max) {
  FS_ASSIGN_OR_RETURN(auto b, CaptureReader::Open(base));
  FS_ASSIGN_OR_RETURN(auto c, CaptureReader::Open(cand));
  FirstFlips rule(max, ForkWhere(spans, ForkScope::kAssistant), ForkPick::kFirst, int64_t(b->tokens().size()));
  std::set<int32_t> points;
  for (const Flip& f : Flips(b->positions(), b->argmax(), c->positions(), c->argmax()))
    if (rule.Take(f.position, f.base_token, f.cand_token)) points.insert(f.position);
  return points;
}

// One version's futures at the points: kept from an earlier run when they cover them, else its
// capture made again in its worker with --fork-at (the rows must come out bit for bit the same).
Result<DecodedFutures> VersionFutures(const HistoryRequest& hr, CaptureRequest req, const HistoryVersion& entry,
                                      const std::set<int32_t>& points, const std::string& logs_dir) {
  req.out_path = entry.capture;
  if (auto kept = ReadDecoded(req.out_path, req.out_path); kept && kept->max_tokens == hr.fork_tokens) {
    bool covered = true;
    for (int32_t p : points) covered = covered && kept->at.count(p);
    if (covered) return *kept;
  }
  std::string name;
  FS_ASSIGN_OR_RETURN(Worker w, VersionWorker(hr, entry, &name));
  FS_ASSIGN_OR_RETURN(auto before, CaptureReader::Open(req.out_path));
  const std::vector<uint64_t> digest(before->digest().begin(), before->digest().end());
  before.reset();
  std::vector<int32_t> list(points.begin(), points.end());
  const std::string log_path = (fs::path(logs_dir) / (entry.release + ".forks.log")).string();
  hr.log.Info(fmt::format("{}: decoding {} futures in its worker (log {})", name, list.size(), log_path));
  FS_RETURN_IF_ERROR(
      CaptureInWorker(w, req, log_path, name,
                      {"--fork-at", PositionRanges(list), "--fork-tokens", std::to_string(hr.fork_tokens)})
          .status());
  FS_ASSIGN_OR_RETURN(auto after, CaptureReader::Open(req.out_path));
  if (!std::equal(digest.begin(), digest.end(), after->digest().begin(), after->digest().end()))
    return Status::Error(
        fmt::format("{}: its capture made again to decode the futures has other rows than the "
                    "first (the worker does not repeat itself bit for bit)",
                    req.out_path));
  auto d = ReadDecoded(req.out_path, req.out_path);
  if (!d) return Status::Error(req.out_path + ": the worker wrote no futures beside it");
  return *d;
}

}  // namespace

Status FollowForks(const HistoryRequest& hr, const WorkerInput& in, HistoryResult& doc) {
  const HistoryComparison* step = doc.ChangedMost();
  if (hr.forks <= 0 || !step || step->flips == 0) return Status::Ok();
  const HistoryVersion& base = doc.versions[size_t(doc.changed_most)];
  const HistoryVersion& cand = doc.versions[size_t(doc.changed_most) + 1];
  const Workload& w = in.src.workload;
  BranchRequest br;
  br.base_path = base.capture;
  br.cand_path = cand.capture;
  FS_ASSIGN_OR_RETURN(std::set<int32_t> points, StepPoints(br.base_path, br.cand_path, w.spans, hr.forks));
  br.options.max_branches = hr.forks;
  br.options.max_tokens = hr.fork_tokens;
  br.options.max_call_tokens = 0;  // the workers decode max_tokens each: no "let calls finish"
  br.options.decoding = DecodingMode::kFree;
  br.options.log = Log::Quiet();
  ManifestWorkload t;
  t.spans = w.spans;
  t.tools = w.tools.empty() ? nlohmann::json() : w.tools;
  t.tool_call_form = w.tool_call_form;
  br.transcript = std::move(t);
  br.decoded_only = true;
  if (!points.empty()) {
    const std::string logs = (fs::path(hr.out_dir) / "logs").string();
    for (int si = 0; si < 2; ++si) {
      FS_ASSIGN_OR_RETURN(br.decoded[si], VersionFutures(hr, in.req, si == 0 ? base : cand, points, logs));
    }
  }
  FS_ASSIGN_OR_RETURN(BranchResult branches, RunBranches(br));
  const std::string how = fmt::format(
      "Forks followed at the first {} flips where the model writes (of {} there), each side's {}-token future "
      "decoded greedily by its own version's worker.",
      points.size(), branches.counts.branch_points.value_or(0), hr.fork_tokens);
  doc.forks = HistoryForks{std::move(branches), how};
  return Status::Ok();
}

}  // namespace flipscope::history
