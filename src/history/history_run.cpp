// RunHistory: render once, capture under each release's worker, compare, write history.json.
#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <iterator>
#include <set>

#include "compare/compare.h"
#include "history/history.h"
#include "history/internal.h"

namespace flipscope {

namespace fs = std::filesystem;

namespace history {

std::string PositionRanges(const std::vector<int32_t>& positions) {
  std::string out;
  for (size_t i = 0; i < positions.size();) {
    size_t j = i;
    while (j + 1 < positions.size() && positions[j + 1] == positions[j] + 1) ++j;
    out += fmt::format("{}{}-{}", out.empty() ? "" : ",", positions[i], positions[j]);
    i = j + 1;
  }
  return out;
}

Result<ProbePlan> WorkerPlan(const ProbePlan& plan, const Workload& w) {
  if (plan.full.empty()) return plan;
  const auto n = int32_t(w.tokens.size());
  FS_ASSIGN_OR_RETURN(auto all, PlanProbes(plan, n, w.spans));
  FS_ASSIGN_OR_RETURN(auto strided, PlanProbes(ProbePlan{plan.stride, ""}, n, {}));
  std::vector<int32_t> extra;
  std::set_difference(all.begin(), all.end(), strided.begin(), strided.end(), std::back_inserter(extra));
  return ProbePlan{plan.stride, PositionRanges(extra)};
}

std::string ManifestSource(const CaptureManifest& m, const std::string& field) {
  if (!m.engine.source) return "";
  return field == "commit" ? m.engine.source->commit : field == "release" ? m.engine.source->release : "";
}

bool Reusable(const std::string& path, const ManifestRequest& request, const std::string& field,
              const std::string& value) {
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) return false;
  auto r = CaptureReader::Open(path);
  if (!r.ok()) return false;
  const auto& m = (*r)->manifest();
  return m.request == request && (field.empty() || ManifestSource(m, field) == value);
}

std::vector<std::string> WorkerArgs(const Worker& w, const CaptureRequest& req) {
  std::vector<std::string> a = {w.binary,
                                "capture",
                                "-q",
                                "-m",
                                req.model_path,
                                "-w",
                                req.workload_path,
                                "--format",
                                "tokens",
                                "-o",
                                req.out_path,
                                "--stride",
                                std::to_string(req.plan.stride),
                                "--store",
                                StoreName(req.store)};
  if (!req.plan.full.empty()) a.insert(a.end(), {"--full", req.plan.full});
  std::string flags = req.knobs.ToFlags();
  for (size_t i = 0; i < flags.size();) {
    size_t j = flags.find(' ', i);
    if (j == std::string::npos) j = flags.size();
    if (j > i) a.push_back(flags.substr(i, j - i));
    i = j + 1;
  }
  return a;
}

std::string LogTail(const std::string& path) {
  auto text = ReadFile(path);
  if (!text.ok()) return "";
  std::string t = *text;
  while (!t.empty() && (t.back() == '\n' || t.back() == '\r')) t.pop_back();
  size_t nl = t.rfind('\n');
  return nl == std::string::npos ? t : t.substr(nl + 1);
}

Result<WorkerInput> PrepareWorkerInput(const WorkerInputOptions& o) {
  WorkerInput in;
  CaptureRequest& req = in.req;
  req.model_path = o.model_path;
  req.workload_path = o.workload_path;
  req.workload = o.workload;
  req.knobs = o.knobs;
  req.plan = o.plan;
  req.log = o.log;
  FS_ASSIGN_OR_RETURN(in.src, PrepareCapture(req));
  Workload& w = in.src.workload;
  if (o.max_tokens > 0 && size_t(o.max_tokens) < w.tokens.size()) {
    // A short range: the first max_tokens tokens, the spans that begin there cut at its end.
    w.tokens.resize(size_t(o.max_tokens));
    std::erase_if(w.spans, [&](const Span& s) { return s.begin >= o.max_tokens; });
    for (Span& s : w.spans) s.end = std::min(s.end, o.max_tokens);
  }
  in.tokens_path = (fs::path(o.out_dir) / "workload.tokens").string();
  FS_RETURN_IF_ERROR(WriteFileAtomic(in.tokens_path, fmt::format("{}\n", fmt::join(w.tokens, " "))));
  FS_ASSIGN_OR_RETURN(in.tokens_sha, Sha256File(in.tokens_path));
  FS_ASSIGN_OR_RETURN(req.plan, WorkerPlan(o.plan, w));
  req.workload_path = in.tokens_path;
  req.workload = WorkloadOptions{};
  req.workload.format = WorkloadFormat::kTokens;
  req.log = Log::Quiet();
  return in;
}

Result<double> CaptureInWorker(const Worker& w, const CaptureRequest& req, const std::string& log_path,
                               const std::string& name, const std::vector<std::string>& extra) {
  double t0 = NowSeconds();
  std::vector<std::string> args = WorkerArgs(w, req);
  args.insert(args.end(), extra.begin(), extra.end());
  FS_ASSIGN_OR_RETURN(int code, RunProcess(args, log_path));
  if (code != 0)
    return Status::Error(fmt::format("{}: the worker's capture failed (exit {}): {}", name, code, LogTail(log_path)));
  return NowSeconds() - t0;
}

Result<Worker> VersionWorker(const HistoryRequest& hr, const HistoryVersion& entry, std::string* name) {
  Worker w;
  if (entry.commit) {
    const std::string& commit = *entry.commit;
    FS_ASSIGN_OR_RETURN(w, PrepareCommitWorker(hr.llama_src, commit, hr.worker));
    if (w.binary.empty()) return Status::Error(w.error);
    *name = "llama.cpp " + commit.substr(0, 12);
    return w;
  }
  FS_ASSIGN_OR_RETURN(Release rel, ParseRelease(entry.release));
  FS_ASSIGN_OR_RETURN(w, PrepareWorker(rel, hr.worker));
  *name = "llama-cpp-python " + rel.ToString();
  return w;
}

}  // namespace history

namespace {

using history::ManifestSource;
using history::Reusable;

// Captures (or reuses) one version's capture; fills its entry of history.json's "versions": a
// release ("release" its number) or a commit of hr.llama_src ("commit" its id, "release" its short id).
Status CaptureVersion(const HistoryRequest& hr, const CaptureRequest& req, const ManifestRequest& request,
                      const std::string& logs_dir, HistoryVersion& entry) {
  const bool is_commit = entry.commit.has_value();
  std::string name;
  FS_ASSIGN_OR_RETURN(Worker w, history::VersionWorker(hr, entry, &name));
  // What the manifest's llama_source must say: the commit, or the release as named.
  const std::string field = is_commit ? "commit" : "release";
  const std::string value = is_commit ? *entry.commit : name;
  entry.worker = w.binary;
  entry.worker_build_seconds = w.build_seconds;
  if (is_commit) entry.llama_build_seconds = w.llama_build_seconds;
  entry.reused = Reusable(req.out_path, request, field, value);
  if (!*entry.reused) {
    const std::string log_path = (fs::path(logs_dir) / (entry.release + ".log")).string();
    hr.log.Info(fmt::format("{}: capturing in its worker (log {})", name, log_path));
    FS_ASSIGN_OR_RETURN(entry.capture_seconds, history::CaptureInWorker(w, req, log_path, name));
    hr.log.Info(fmt::format("{}: captured in {:.1f} s", name, *entry.capture_seconds));
  }
  FS_ASSIGN_OR_RETURN(auto reader, CaptureReader::Open(req.out_path));
  const EngineRecord& me = reader->manifest().engine;
  entry.llama_cpp = me.llama_cpp;
  entry.llama_source = me.source;
  entry.kernel_path = me.kernel_path;
  entry.flags = me.flags;
  if (ManifestSource(reader->manifest(), field) != value)
    return Status::Error(fmt::format("{}: the worker wrote a capture of {} '{}'", req.out_path, field,
                                     ManifestSource(reader->manifest(), field)));
  return Status::Ok();
}

// history.json's "versions" before capturing: each release, or each commit of --llama-src resolved.
Result<std::vector<HistoryVersion>> VersionEntries(const HistoryRequest& hr, const fs::path& caps) {
  std::vector<HistoryVersion> out;
  if (!hr.llama_src.empty() || !hr.commits.empty()) {
    if (hr.llama_src.empty() || hr.commits.empty() || !hr.releases.empty())
      return Status::InvalidArgument(OptionName("commits") + " needs " + OptionName("llama_src") + " (and no " +
                                     OptionName("releases") + "): the commits of one llama.cpp checkout");
    if (hr.commits.size() < 2)
      return Status::InvalidArgument(fmt::format("a history needs at least two commits ({} given)", hr.commits.size()));
    std::set<std::string> seen;
    for (const auto& rev : hr.commits) {
      FS_ASSIGN_OR_RETURN(std::string sha, ResolveCommit(hr.llama_src, rev));
      if (!seen.insert(sha).second)
        return Status::InvalidArgument(fmt::format("commit '{}' ({}) is listed twice", rev, sha.substr(0, 12)));
      HistoryVersion v;
      v.release = sha.substr(0, 12), v.commit = sha, v.capture = (caps / (sha + ".safetensors")).string();
      out.push_back(std::move(v));
    }
    return out;
  }
  FS_ASSIGN_OR_RETURN(auto releases, ParseHistoryReleases(hr.releases));
  for (const Release& r : releases) {
    HistoryVersion v;
    v.release = r.ToString(), v.capture = (caps / (r.ToString() + ".safetensors")).string();
    out.push_back(std::move(v));
  }
  return out;
}

// The exact reference over the same token ids, in this process (the FP64 engine does not depend
// on the llama.cpp release).
Status CaptureExact(const HistoryRequest& hr, CaptureRequest req, const std::string& model_sha,
                    const std::string& tokens_sha, HistoryExact& entry) {
  req.engine = EngineKind::kExact;
  Knobs exact_knobs;
  exact_knobs.n_threads = req.knobs.n_threads;
  req.knobs = exact_knobs;
  req.out_path = entry.capture;
  const ManifestRequest request = CaptureRequestOf(req, model_sha, tokens_sha);
  entry.reused = Reusable(req.out_path, request, "", "");
  if (*entry.reused) return Status::Ok();
  hr.log.Info("exact: capturing with the FP64 engine");
  req.log = hr.log;  // its layers take long: the stage's bar and lines
  double t0 = NowSeconds();
  FS_ASSIGN_OR_RETURN(auto m, RunCapture(req));
  entry.capture_seconds = NowSeconds() - t0;
  return Status::Ok();
}

}  // namespace

Result<HistoryResult> RunHistory(const HistoryRequest& hr) {
  const fs::path out(hr.out_dir), caps = out / "captures", logs = out / "logs";
  FS_ASSIGN_OR_RETURN(std::vector<HistoryVersion> versions, VersionEntries(hr, caps));
  if (hr.knobs.replay != Replay::kPrefill)
    return Status::InvalidArgument("history replays by prefill only: every release is fed the rendered token ids");
  FS_RETURN_IF_ERROR(CheckKnobs(EngineKind::kLlama, hr.knobs));
  std::error_code ec;
  fs::create_directories(caps, ec);
  fs::create_directories(logs, ec);
  if (ec) return Status::Io(fmt::format("{}: {}", hr.out_dir, ec.message()));

  // Render and tokenize once; every version is fed these token ids.
  FS_ASSIGN_OR_RETURN(history::WorkerInput in,
                      history::PrepareWorkerInput({hr.model_path, hr.workload_path, hr.workload, hr.knobs, hr.plan,
                                                   hr.max_tokens, hr.out_dir, hr.log}));
  CaptureRequest& req = in.req;
  const CaptureSource& src = in.src;
  HistoryResult doc;
  doc.model = hr.model_path, doc.model_sha256 = src.model.sha256;
  doc.workload = hr.workload_path, doc.workload_sha256 = src.workload_sha256;
  doc.n_tokens = int64_t(src.workload.tokens.size()), doc.tokens = in.tokens_path;
  doc.flags = hr.knobs.ToFlags(), doc.probe_plan = HistoryResult::Plan{hr.plan.stride, hr.plan.full};
  doc.window = hr.window, doc.cpu = hr.worker.cpu.empty() ? MainBuildCpu() : hr.worker.cpu;
  if (!hr.llama_src.empty()) doc.llama_src = hr.llama_src;
  for (HistoryVersion& entry : versions) {
    req.out_path = entry.capture;
    FS_RETURN_IF_ERROR(
        CaptureVersion(hr, req, CaptureRequestOf(req, src.model.sha256, in.tokens_sha), logs.string(), entry));
    doc.versions.push_back(std::move(entry));
  }
  if (hr.reference_exact) {
    HistoryExact entry{(caps / "exact.safetensors").string()};
    FS_RETURN_IF_ERROR(CaptureExact(hr, req, src.model.sha256, in.tokens_sha, entry));
    doc.exact = std::move(entry);
  }
  FS_RETURN_IF_ERROR(history::CompareAll(hr, doc));
  FS_RETURN_IF_ERROR(history::FollowForks(hr, in, doc));
  FS_RETURN_IF_ERROR(WriteFileAtomic((out / "history.json").string(), doc.ToJson().dump(2) + "\n"));
  FS_RETURN_IF_ERROR(WriteFileAtomic((out / "history.md").string(), HistoryMarkdown(doc)));
  return doc;
}

}  // namespace flipscope
