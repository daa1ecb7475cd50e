// RunBisect: the bisect command over a llama.cpp checkout — build, capture, compare, search, log.
#include <fmt/format.h>

#include <filesystem>
#include <set>

#include "compare/compare.h"
#include "history/history.h"
#include "history/internal.h"

namespace flipscope {

namespace fs = std::filesystem;

namespace {

const char* MarkName(BisectSearch::Mark m) {
  switch (m) {
    case BisectSearch::Mark::kGood:
      return "good";
    case BisectSearch::Mark::kBad:
      return "bad";
    case BisectSearch::Mark::kSkip:
      return "skip";
    case BisectSearch::Mark::kUntested:
      break;
  }
  return "untested";
}

// Everything one bisect's steps share.
struct Bisect {
  explicit Bisect(const BisectRequest& r) : br(r) {}
  const BisectRequest& br;
  std::string good, bad;  // full ids
  history::WorkerInput in;
  ManifestRequest request;  // the capture request every commit's capture must have
  fs::path out, caps, logs;
  BisectResult doc;
  CompareOptions compare;

  Status Save() const { return WriteFileAtomic((out / "bisect.json").string(), doc.ToJson().dump(2) + "\n"); }
};

// good and bad resolved and checked; the commits after good up to bad, oldest first.
Result<std::vector<GitCommit>> ResolveRange(const BisectRequest& br, std::string& good, std::string& bad) {
  FS_ASSIGN_OR_RETURN(good, ResolveCommit(br.llama_src, br.good));
  FS_ASSIGN_OR_RETURN(bad, ResolveCommit(br.llama_src, br.bad));
  if (good == bad)
    return Status::InvalidArgument(
        fmt::format("good '{}' and bad '{}' are the same commit ({})", br.good, br.bad, good.substr(0, 12)));
  FS_ASSIGN_OR_RETURN(bool ancestor, IsAncestor(br.llama_src, good, bad));
  if (!ancestor)
    return Status::InvalidArgument(fmt::format("good '{}' ({}) is not an ancestor of bad '{}' ({})", br.good,
                                               good.substr(0, 12), br.bad, bad.substr(0, 12)));
  FS_ASSIGN_OR_RETURN(auto log, history::RunGit(br.llama_src, {"log", "--first-parent", "--reverse",
                                                               "--format=%H%x09%s", good + ".." + bad}));
  if (log.code != 0) return Status::Error(fmt::format("git log {}..{}: {}", good, bad, log.err));
  FS_ASSIGN_OR_RETURN(auto commits, ParseCommitList(log.out));
  if (commits.empty() || commits.back().sha != bad)
    return Status::Error(fmt::format("git log {}..{} does not end at bad", good.substr(0, 12), bad.substr(0, 12)));
  return commits;
}

// Builds sha's worker and captures in it, unless its capture is kept from an earlier run. Fills
// entry: build and capture seconds, the capture, or the error when the build failed.
Status BuildAndCapture(Bisect& b, const std::string& sha, BisectStep& entry) {
  entry.commit = sha;
  entry.capture = (b.caps / (sha + ".safetensors")).string();
  CaptureRequest req = b.in.req;
  req.out_path = entry.capture;
  if (history::Reusable(entry.capture, b.request, "commit", sha)) {
    entry.reused = true;
    return Status::Ok();
  }
  FS_ASSIGN_OR_RETURN(Worker w, PrepareCommitWorker(b.br.llama_src, sha, b.br.worker));
  entry.build_seconds = w.build_seconds;
  entry.llama_build_seconds = w.llama_build_seconds;
  entry.build_log = w.build_log;
  if (w.binary.empty()) {
    entry.error = w.error;
    return Status::Ok();
  }
  const std::string log_path = (b.logs / (sha + ".log")).string();
  FS_ASSIGN_OR_RETURN(entry.capture_seconds,
                      history::CaptureInWorker(w, req, log_path, "llama.cpp " + sha.substr(0, 12)));
  entry.reused = false;
  return Status::Ok();
}

// One step: commit index i of the search built, captured, compared and marked.
Result<BisectSearch::Mark> Step(Bisect& b, BisectSearch& search, size_t i, BisectStep& entry) {
  const GitCommit& c = search.commits()[i];
  entry = BisectStep{};
  entry.index = int64_t(i), entry.subject = c.subject;
  FS_RETURN_IF_ERROR(BuildAndCapture(b, c.sha, entry));
  if (entry.error) return BisectSearch::Mark::kSkip;
  FS_ASSIGN_OR_RETURN(Comparison cmp, CompareFiles(b.doc.good_capture->capture, entry.capture, b.compare));
  entry.comparison = history::ComparisonOf("bisect", "good", "commit", cmp);
  const OverallStats& o = cmp.overall;
  return IsBad(b.br.criterion, cmp.probes_compared, cmp.bit_identical, o.flips, o.kl_base_cand.mean)
             ? BisectSearch::Mark::kBad
             : BisectSearch::Mark::kGood;
}

// The progress line of a step.
std::string StepLine(size_t number, const BisectStep& e) {
  std::string line = fmt::format("bisect: step {}: {} {}: ", number, e.commit.substr(0, 12), e.subject.value_or(""));
  if (e.reused.value_or(false))
    line += "capture kept from an earlier run";
  else
    line += fmt::format("built in {:.0f} s", e.build_seconds.value_or(0));
  if (e.error) return line + fmt::format(", does not build (skipped): {}", *e.error);
  if (e.capture_seconds) line += fmt::format(", captured in {:.0f} s", *e.capture_seconds);
  const HistoryComparison& c = *e.comparison;
  return line + fmt::format("; {} of {} rows bit-identical, {} flips, KL mean {:.3g} -> {}", c.bit_identical, c.probes,
                            c.flips, c.kl_mean, e.mark.value_or(""));
}

// The header of bisect.json: what decides the bisect; a rerun resumes only when it is the same.
BisectHeader Header(const Bisect& b) {
  const BisectRequest& br = b.br;
  std::error_code ec;
  BisectHeader h;
  h.llama_src = fs::weakly_canonical(br.llama_src, ec).string(), h.good = b.good, h.bad = b.bad;
  h.criterion = br.criterion.ToString();
  h.model = br.model_path, h.model_sha256 = b.in.src.model.sha256;
  h.workload = br.workload_path, h.workload_sha256 = b.in.src.workload_sha256;
  h.max_tokens = br.max_tokens, h.n_tokens = int64_t(b.in.src.workload.tokens.size());
  h.tokens_sha256 = b.in.tokens_sha, h.flags = br.knobs.ToFlags();
  h.probe_plan = {br.plan.stride, br.plan.full};
  h.cpu = br.worker.cpu.empty() ? MainBuildCpu() : br.worker.cpu;
  return h;
}

// The steps of an earlier run of the same bisect (out_dir/bisect.json), replayed into the search.
Status Resume(Bisect& b, BisectSearch& search) {
  const std::string path = (b.out / "bisect.json").string();
  if (!fs::exists(path)) return Status::Ok();
  auto text = ReadFile(path);
  if (!text.ok()) return text.status();
  const nlohmann::json parsed = nlohmann::json::parse(*text, nullptr, false);
  // The header as written, against this run's: any difference in what decides the bisect refuses.
  const nlohmann::json& header = parsed.is_object() && parsed.contains("header") ? parsed["header"] : nlohmann::json();
  if (header != ToJson(b.doc.header))
    return Status::InvalidArgument(
        fmt::format("{}: a bisect of other inputs (or not one); give another -o to start a new one", path));
  for (BisectStep& step : BisectResult::FromJson(parsed).steps) {
    const std::string mark = step.mark.value_or("");
    const int64_t i = step.index.value_or(-1);
    if (i < 0 || size_t(i) >= search.commits().size() || search.commits()[size_t(i)].sha != step.commit)
      return Status::Error(fmt::format("{}: step {} names no commit of the range", path, b.doc.steps.size() + 1));
    const auto m = mark == "good"  ? BisectSearch::Mark::kGood
                   : mark == "bad" ? BisectSearch::Mark::kBad
                                   : BisectSearch::Mark::kSkip;
    FS_RETURN_IF_ERROR(search.Record(size_t(i), m));
    b.doc.steps.push_back(std::move(step));
  }
  if (!b.doc.steps.empty())
    b.br.log.Info(fmt::format("bisect: resuming after {} logged steps ({})", b.doc.steps.size(), path));
  return Status::Ok();
}

}  // namespace

Result<BisectResult> RunBisect(const BisectRequest& br) {
  Bisect b(br);
  FS_ASSIGN_OR_RETURN(auto commits, ResolveRange(br, b.good, b.bad));
  FS_ASSIGN_OR_RETURN(BisectSearch search, BisectSearch::Create(std::move(commits)));
  if (br.knobs.replay != Replay::kPrefill)
    return Status::InvalidArgument("bisect replays by prefill only: every commit is fed the rendered token ids");
  FS_RETURN_IF_ERROR(CheckKnobs(EngineKind::kLlama, br.knobs));
  b.out = br.out_dir, b.caps = b.out / "captures", b.logs = b.out / "logs";
  std::error_code ec;
  fs::create_directories(b.caps, ec);
  fs::create_directories(b.logs, ec);
  if (ec) return Status::Io(fmt::format("{}: {}", br.out_dir, ec.message()));
  FS_ASSIGN_OR_RETURN(b.in, history::PrepareWorkerInput({br.model_path, br.workload_path, br.workload, br.knobs,
                                                         br.plan, br.max_tokens, br.out_dir, br.log}));
  b.in.req.out_path = (b.caps / (b.good + ".safetensors")).string();
  b.request = CaptureRequestOf(b.in.req, b.in.src.model.sha256, b.in.tokens_sha);
  b.compare.window = br.window, b.compare.confident = br.confident, b.compare.log = Log::Quiet();
  if (auto d = LoadDetokenizer(br.model_path); d.ok()) b.compare.detokenize = *d;
  b.doc.header = Header(b);
  for (const GitCommit& c : search.commits()) b.doc.commits.push_back({c.sha, c.subject});
  FS_RETURN_IF_ERROR(Resume(b, search));

  BisectStep good;
  br.log.Info(fmt::format("bisect: good {}, bad {}: {} commits after good", b.good.substr(0, 12), b.bad.substr(0, 12),
                          search.commits().size()));
  FS_RETURN_IF_ERROR(BuildAndCapture(b, b.good, good));
  if (good.error)
    return Status::Error(fmt::format("good {} does not build, so there is nothing to compare with: {}",
                                     b.good.substr(0, 12), *good.error));
  b.doc.good_capture = good;
  FS_RETURN_IF_ERROR(b.Save());
  std::set<size_t> tested;
  for (const BisectStep& s : b.doc.steps) tested.insert(size_t(s.index.value_or(0)));
  for (;;) {
    std::optional<size_t> next = search.Next();
    // The search ends on bad itself, never tested: test it, so the result carries its comparison.
    if (!next && search.Candidates().size() == 1 && !tested.count(search.Candidates()[0]))
      next = search.Candidates()[0];
    if (!next) break;
    BisectStep entry;
    FS_ASSIGN_OR_RETURN(BisectSearch::Mark mark, Step(b, search, *next, entry));
    entry.mark = MarkName(mark);
    tested.insert(*next);
    b.doc.steps.push_back(entry);
    FS_RETURN_IF_ERROR(b.Save());
    br.log.Info(StepLine(b.doc.steps.size(), entry));
    if (*next + 1 == search.commits().size() && mark == BisectSearch::Mark::kGood)
      return Status::Error(
          fmt::format("bad {} does not meet the criterion {} against good {}: nothing to find "
                      "(its step is in {}/bisect.json)",
                      b.bad.substr(0, 12), br.criterion.ToString(), b.good.substr(0, 12), br.out_dir));
    FS_RETURN_IF_ERROR(search.Record(*next, mark));
  }
  FS_RETURN_IF_ERROR(history::BisectFinish(br, search, b.doc));
  FS_RETURN_IF_ERROR(b.Save());
  return b.doc;
}

}  // namespace flipscope
