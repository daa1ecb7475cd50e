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
    case BisectSearch::Mark::kGood: return "good";
    case BisectSearch::Mark::kBad: return "bad";
    case BisectSearch::Mark::kSkip: return "skip";
    case BisectSearch::Mark::kUntested: break;
  }
  return "untested";
}

// Everything one bisect's steps share.
struct Bisect {
  explicit Bisect(const BisectRequest& r) : br(r) {}
  const BisectRequest& br;
  std::string good, bad;  // full ids
  history::WorkerInput in;
  nlohmann::json request;  // the capture request every commit's capture must have
  fs::path out, caps, logs;
  nlohmann::json doc;
  CompareOptions compare;

  Status Save() const { return WriteFileAtomic((out / "bisect.json").string(), doc.dump(2) + "\n"); }
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

// The figures of a comparison with good's capture that bisect.json keeps (no windows).
nlohmann::json Figures(const Comparison& c) {
  nlohmann::json j = ToJson(history::ComparisonOf("bisect", "good", "commit", c));
  j.erase("windows");
  j.erase("kind"), j.erase("base"), j.erase("cand");
  return j;
}

// Builds sha's worker and captures in it, unless its capture is kept from an earlier run. Fills
// entry: build and capture seconds, the capture, or "error" when the build failed.
Status BuildAndCapture(Bisect& b, const std::string& sha, nlohmann::json& entry) {
  const std::string capture = (b.caps / (sha + ".safetensors")).string();
  entry["capture"] = capture;
  CaptureRequest req = b.in.req;
  req.out_path = capture;
  if (history::Reusable(capture, b.request, "commit", sha)) {
    entry["reused"] = true;
    return Status::Ok();
  }
  FS_ASSIGN_OR_RETURN(Worker w, PrepareCommitWorker(b.br.llama_src, sha, b.br.worker));
  entry["build_seconds"] = w.build_seconds;
  entry["llama_build_seconds"] = w.llama_build_seconds;
  entry["build_log"] = w.build_log;
  if (w.binary.empty()) {
    entry["error"] = w.error;
    return Status::Ok();
  }
  const std::string log_path = (b.logs / (sha + ".log")).string();
  FS_ASSIGN_OR_RETURN(entry["capture_seconds"],
                      history::CaptureInWorker(w, req, log_path, "llama.cpp " + sha.substr(0, 12)));
  entry["reused"] = false;
  return Status::Ok();
}

// One step: commit index i of the search built, captured, compared and marked.
Result<BisectSearch::Mark> Step(Bisect& b, BisectSearch& search, size_t i, nlohmann::json& entry) {
  const GitCommit& c = search.commits()[i];
  entry = {{"index", i}, {"commit", c.sha}, {"subject", c.subject}};
  FS_RETURN_IF_ERROR(BuildAndCapture(b, c.sha, entry));
  if (entry.contains("error")) return BisectSearch::Mark::kSkip;
  FS_ASSIGN_OR_RETURN(Comparison cmp,
                      CompareFiles(b.doc["good_capture"]["capture"].get<std::string>(), entry["capture"].get<std::string>(), b.compare));
  entry["comparison"] = Figures(cmp);
  const OverallStats& o = cmp.overall;
  return IsBad(b.br.criterion, cmp.probes_compared, cmp.bit_identical, o.flips, o.kl_base_cand.mean)
             ? BisectSearch::Mark::kBad
             : BisectSearch::Mark::kGood;
}

// The progress line of a step.
std::string StepLine(size_t number, const nlohmann::json& e) {
  std::string line = fmt::format("bisect: step {}: {} {}: ", number, e["commit"].get<std::string>().substr(0, 12),
                                 e["subject"].get<std::string>());
  if (e.value("reused", false))
    line += "capture kept from an earlier run";
  else
    line += fmt::format("built in {:.0f} s", e.value("build_seconds", 0.0));
  if (e.contains("error")) return line + fmt::format(", does not build (skipped): {}", e["error"].get<std::string>());
  if (e.contains("capture_seconds")) line += fmt::format(", captured in {:.0f} s", e["capture_seconds"].get<double>());
  const auto& c = e["comparison"];
  return line + fmt::format("; {} of {} rows bit-identical, {} flips, KL mean {:.3g} -> {}",
                            c["bit_identical"].get<int64_t>(), c["probes"].get<int64_t>(), c["flips"].get<int64_t>(),
                            c["kl_mean"].get<double>(), e["mark"].get<std::string>());
}

// The header of bisect.json: what decides the bisect; a rerun resumes only when it is the same.
nlohmann::json Header(const Bisect& b) {
  const BisectRequest& br = b.br;
  std::error_code ec;
  return {{"llama_src", fs::weakly_canonical(br.llama_src, ec).string()},
          {"good", b.good},
          {"bad", b.bad},
          {"criterion", br.criterion.ToString()},
          {"model", br.model_path},
          {"model_sha256", b.in.src.model.sha256},
          {"workload", br.workload_path},
          {"workload_sha256", b.in.src.workload_sha256},
          {"max_tokens", br.max_tokens},
          {"n_tokens", b.in.src.workload.tokens.size()},
          {"tokens_sha256", b.in.tokens_sha},
          {"flags", br.knobs.ToFlags()},
          {"probe_plan", br.plan.ToJson()},
          {"cpu", br.worker.cpu.empty() ? MainBuildCpu() : br.worker.cpu}};
}

// The steps of an earlier run of the same bisect (out_dir/bisect.json), replayed into the search.
Status Resume(Bisect& b, BisectSearch& search) {
  const std::string path = (b.out / "bisect.json").string();
  if (!fs::exists(path)) return Status::Ok();
  auto text = ReadFile(path);
  if (!text.ok()) return text.status();
  nlohmann::json old = nlohmann::json::parse(*text, nullptr, false);
  if (old.is_discarded() || !old.is_object() || old.value("header", nlohmann::json()) != b.doc["header"])
    return Status::InvalidArgument(
        fmt::format("{}: a bisect of other inputs (or not one); give another -o to start a new one", path));
  for (const auto& step : old.value("steps", nlohmann::json::array())) {
    const std::string mark = step.value("mark", "");
    size_t i = step.value("index", size_t(0));
    if (i >= search.commits().size() || search.commits()[i].sha != step.value("commit", ""))
      return Status::Error(fmt::format("{}: step {} names no commit of the range", path, b.doc["steps"].size() + 1));
    const auto m = mark == "good" ? BisectSearch::Mark::kGood
                   : mark == "bad" ? BisectSearch::Mark::kBad
                                   : BisectSearch::Mark::kSkip;
    FS_RETURN_IF_ERROR(search.Record(i, m));
    b.doc["steps"].push_back(step);
  }
  if (!b.doc["steps"].empty())
    b.br.log.Info(fmt::format("bisect: resuming after {} logged steps ({})", b.doc["steps"].size(), path));
  return Status::Ok();
}

}  // namespace

Result<nlohmann::json> RunBisect(const BisectRequest& br) {
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
  b.request = CaptureRequestJson(b.in.req, b.in.src.model.sha256, b.in.tokens_sha);
  b.compare.window = br.window, b.compare.confident = br.confident, b.compare.log = Log::Quiet();
  if (auto d = LoadDetokenizer(br.model_path); d.ok()) b.compare.detokenize = *d;
  b.doc = {{"header", Header(b)}, {"commits", nlohmann::json::array()}, {"steps", nlohmann::json::array()}};
  for (const GitCommit& c : search.commits()) b.doc["commits"].push_back({{"commit", c.sha}, {"subject", c.subject}});
  FS_RETURN_IF_ERROR(Resume(b, search));

  nlohmann::json good = {{"commit", b.good}};
  br.log.Info(fmt::format("bisect: good {}, bad {}: {} commits after good", b.good.substr(0, 12), b.bad.substr(0, 12),
                          search.commits().size()));
  FS_RETURN_IF_ERROR(BuildAndCapture(b, b.good, good));
  if (good.contains("error"))
    return Status::Error(fmt::format("good {} does not build, so there is nothing to compare with: {}",
                                     b.good.substr(0, 12), good["error"].get<std::string>()));
  b.doc["good_capture"] = good;
  FS_RETURN_IF_ERROR(b.Save());
  std::set<size_t> tested;
  for (const auto& s : b.doc["steps"]) tested.insert(s["index"].get<size_t>());
  for (;;) {
    std::optional<size_t> next = search.Next();
    // The search ends on bad itself, never tested: test it, so the result carries its comparison.
    if (!next && search.Candidates().size() == 1 && !tested.count(search.Candidates()[0]))
      next = search.Candidates()[0];
    if (!next) break;
    nlohmann::json entry;
    FS_ASSIGN_OR_RETURN(BisectSearch::Mark mark, Step(b, search, *next, entry));
    entry["mark"] = MarkName(mark);
    tested.insert(*next);
    b.doc["steps"].push_back(entry);
    FS_RETURN_IF_ERROR(b.Save());
    br.log.Info(StepLine(b.doc["steps"].size(), entry));
    if (*next + 1 == search.commits().size() && mark == BisectSearch::Mark::kGood)
      return Status::Error(fmt::format("bad {} does not meet the criterion {} against good {}: nothing to find "
                                       "(its step is in {}/bisect.json)",
                                       b.bad.substr(0, 12), br.criterion.ToString(), b.good.substr(0, 12), br.out_dir));
    FS_RETURN_IF_ERROR(search.Record(*next, mark));
  }
  FS_RETURN_IF_ERROR(history::BisectFinish(br, search, b.doc));
  FS_RETURN_IF_ERROR(b.Save());
  return b.doc;
}

}  // namespace flipscope
