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

}  // namespace history

namespace {

// The release named in a capture's manifest ("llama-cpp-python X"), or "" when none.
std::string ManifestRelease(const CaptureManifest& m) {
  const nlohmann::json& e = m.engine.record;
  if (!e.is_object() || !e.contains("llama_source") || !e["llama_source"].is_object()) return "";
  return e["llama_source"].value("release", "");
}

// True when path holds a complete capture of exactly this request (and release, when given).
bool Reusable(const std::string& path, const nlohmann::json& request, const std::string& release) {
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) return false;
  auto r = CaptureReader::Open(path);
  if (!r.ok()) return false;
  const auto& m = (*r)->manifest();
  return m.request == request && (release.empty() || ManifestRelease(m) == release);
}

// The worker's capture command: the same token ids, probe positions, store and knobs for every release.
std::vector<std::string> WorkerArgs(const Worker& w, const CaptureRequest& req) {
  std::vector<std::string> a = {w.binary,   "capture", "-q", "-m", req.model_path, "-w", req.workload_path,
                                "--format", "tokens",  "-o", req.out_path, "--stride", std::to_string(req.plan.stride),
                                "--store",  StoreName(req.store)};
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

// The tail of a worker's log, for an error message.
std::string LogTail(const std::string& path) {
  auto text = ReadFile(path);
  if (!text.ok()) return "";
  std::string t = *text;
  while (!t.empty() && (t.back() == '\n' || t.back() == '\r')) t.pop_back();
  size_t nl = t.rfind('\n');
  return nl == std::string::npos ? t : t.substr(nl + 1);
}

// Captures (or reuses) one release's capture; fills its entry of history.json's "versions".
Status CaptureRelease(const HistoryRequest& hr, const CaptureRequest& req, const nlohmann::json& request,
                      const std::string& logs_dir, nlohmann::json& entry) {
  FS_ASSIGN_OR_RETURN(Release rel, ParseRelease(entry["release"].get<std::string>()));
  FS_ASSIGN_OR_RETURN(Worker w, PrepareWorker(rel, hr.worker));
  entry["worker"] = w.binary;
  entry["worker_build_seconds"] = w.build_seconds;
  const std::string name = "llama-cpp-python " + rel.ToString();
  entry["reused"] = Reusable(req.out_path, request, name);
  if (!entry["reused"].get<bool>()) {
    const std::string log_path = (fs::path(logs_dir) / (rel.ToString() + ".log")).string();
    hr.log.Info(fmt::format("{}: capturing in its worker (log {})", name, log_path));
    double t0 = NowSeconds();
    FS_ASSIGN_OR_RETURN(int code, RunProcess(WorkerArgs(w, req), log_path));
    if (code != 0)
      return Status::Error(fmt::format("{}: the worker's capture failed (exit {}): {}", name, code, LogTail(log_path)));
    entry["capture_seconds"] = NowSeconds() - t0;
  }
  FS_ASSIGN_OR_RETURN(auto reader, CaptureReader::Open(req.out_path));
  const ManifestEngine& me = reader->manifest().engine;
  const nlohmann::json& e = me.record;
  entry["llama_cpp"] = e.is_object() ? e.value("llama_cpp", "") : "";
  entry["llama_source"] = e.is_object() ? e.value("llama_source", nlohmann::json()) : nlohmann::json();
  entry["kernel_path"] = me.kernel_path;
  entry["flags"] = me.flags;
  if (ManifestRelease(reader->manifest()) != name)
    return Status::Error(fmt::format("{}: the worker wrote a capture of '{}'", req.out_path, ManifestRelease(reader->manifest())));
  return Status::Ok();
}

// The exact reference over the same token ids, in this process (the FP64 engine does not depend
// on the llama.cpp release).
Status CaptureExact(const HistoryRequest& hr, CaptureRequest req, const std::string& model_sha,
                    const std::string& tokens_sha, nlohmann::json& entry) {
  req.engine = EngineKind::kExact;
  Knobs exact_knobs;
  exact_knobs.n_threads = req.knobs.n_threads;
  req.knobs = exact_knobs;
  req.out_path = entry["capture"].get<std::string>();
  nlohmann::json request = CaptureRequestJson(req, model_sha, tokens_sha);
  entry["reused"] = Reusable(req.out_path, request, "");
  if (entry["reused"].get<bool>()) return Status::Ok();
  hr.log.Info("exact: capturing with the FP64 engine");
  double t0 = NowSeconds();
  FS_ASSIGN_OR_RETURN(auto m, RunCapture(req));
  entry["capture_seconds"] = NowSeconds() - t0;
  return Status::Ok();
}

}  // namespace

Result<nlohmann::json> RunHistory(const HistoryRequest& hr) {
  FS_ASSIGN_OR_RETURN(auto releases, ParseHistoryReleases(hr.releases));
  if (hr.knobs.replay != Replay::kPrefill)
    return Status::InvalidArgument("history replays by prefill only: every release is fed the rendered token ids");
  FS_RETURN_IF_ERROR(CheckKnobs(EngineKind::kLlama, hr.knobs));
  const fs::path out(hr.out_dir), caps = out / "captures", logs = out / "logs";
  std::error_code ec;
  fs::create_directories(caps, ec);
  fs::create_directories(logs, ec);
  if (ec) return Status::Io(fmt::format("{}: {}", hr.out_dir, ec.message()));

  // Render and tokenize once; every release is fed these token ids.
  CaptureRequest req;
  req.model_path = hr.model_path;
  req.workload_path = hr.workload_path;
  req.workload = hr.workload;
  req.knobs = hr.knobs;
  req.plan = hr.plan;
  req.log = hr.log;
  FS_ASSIGN_OR_RETURN(CaptureSource src, PrepareCapture(req));
  const std::string tokens_path = (out / "workload.tokens").string();
  FS_RETURN_IF_ERROR(WriteFileAtomic(tokens_path, fmt::format("{}\n", fmt::join(src.workload.tokens, " "))));
  FS_ASSIGN_OR_RETURN(std::string tokens_sha, Sha256File(tokens_path));
  FS_ASSIGN_OR_RETURN(req.plan, history::WorkerPlan(hr.plan, src.workload));
  req.workload_path = tokens_path;
  req.workload = WorkloadOptions{};
  req.workload.format = WorkloadFormat::kTokens;
  req.log = Log::Quiet();

  nlohmann::json doc = {{"model", hr.model_path},           {"model_sha256", src.model.sha256},
                        {"workload", hr.workload_path},      {"workload_sha256", src.workload_sha256},
                        {"n_tokens", src.workload.tokens.size()}, {"tokens", tokens_path},
                        {"flags", hr.knobs.ToFlags()},       {"probe_plan", hr.plan.ToJson()},
                        {"window", hr.window},               {"cpu", hr.worker.cpu.empty() ? MainBuildCpu() : hr.worker.cpu},
                        {"versions", nlohmann::json::array()}};
  for (const Release& r : releases) {
    nlohmann::json entry = {{"release", r.ToString()},
                            {"capture", (caps / (r.ToString() + ".safetensors")).string()}};
    req.out_path = entry["capture"].get<std::string>();
    FS_RETURN_IF_ERROR(CaptureRelease(hr, req, CaptureRequestJson(req, src.model.sha256, tokens_sha), logs.string(), entry));
    doc["versions"].push_back(std::move(entry));
  }
  if (hr.reference_exact) {
    nlohmann::json entry = {{"capture", (caps / "exact.safetensors").string()}};
    FS_RETURN_IF_ERROR(CaptureExact(hr, req, src.model.sha256, tokens_sha, entry));
    doc["exact"] = std::move(entry);
  }
  FS_RETURN_IF_ERROR(history::CompareAll(hr, doc));
  FS_RETURN_IF_ERROR(WriteFileAtomic((out / "history.json").string(), doc.dump(2) + "\n"));
  FS_RETURN_IF_ERROR(WriteFileAtomic((out / "history.md").string(), HistoryMarkdown(doc)));
  return doc;
}

}  // namespace flipscope
