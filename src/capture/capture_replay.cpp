// ReplayOf: the model file and knobs that re-create a capture's rows, from its manifest.
#include <fmt/format.h>

#include "capture/capture.h"
#include "util/util.h"

namespace flipscope {

Result<CaptureReplay> ModelOf(const CaptureReader& cap, std::map<std::string, std::string>* hashes) {
  const std::string& path = cap.path();
  const ModelInfo& model = cap.manifest().model;
  if (model.path.empty() || model.sha256.empty())
    return Status::Error(path + ": the manifest names no model file (model.path and model.sha256)");
  CaptureReplay r;
  r.model_path = model.path;
  r.model_sha256 = model.sha256;
  if (!hashes->count(r.model_path)) {
    auto h = Sha256File(r.model_path);
    if (!h.ok())
      return Status::Error(
          fmt::format("{}: the model file {} cannot be read (expected sha256 {})", path, r.model_path, r.model_sha256));
    (*hashes)[r.model_path] = *h;
  }
  if ((*hashes)[r.model_path] != r.model_sha256)
    return Status::Error(fmt::format("{}: the model file {} has changed: sha256 {}, expected {}", path, r.model_path,
                                     (*hashes)[r.model_path], r.model_sha256));
  return r;
}

namespace {

// The GGML_* variables of an environment: ggml reads them once per process, so a capture made under
// others cannot be re-created here, whatever its knobs.
std::map<std::string, std::string> GgmlOnly(const std::map<std::string, std::string>& env) {
  std::map<std::string, std::string> out;
  for (const auto& [k, v] : env)
    if (k.starts_with("GGML_")) out.emplace(k, v);
  return out;
}

std::string EnvWords(const std::map<std::string, std::string>& env) { return env.empty() ? "none set" : EnvText(env); }

}  // namespace

Result<CaptureReplay> ReplayOf(const CaptureReader& cap, const std::string& stage,
                               std::map<std::string, std::string>* hashes) {
  const std::string& path = cap.path();
  const CaptureManifest& m = cap.manifest();
  if (cap.truncated())
    return Status::Error(path + ": a truncated (top-k) capture cannot be re-run; " + stage +
                         " needs a capture of the llama engine");
  const std::string name = m.engine.name.empty() ? std::string(NameOf(EngineKind::kLlama)) : m.engine.name;
  const std::optional<EngineKind> kind = FromName<EngineKind>(name);  // none: another writer's engine
  if (kind == EngineKind::kExact)
    return Status::Error(path + ": an exact (FP64) capture cannot be re-run by " + stage +
                         ": the exact engine computes teacher-forced rows only, it cannot decode a future or "
                         "expose llama.cpp's graph; capture the workload with --engine llama for " +
                         stage + ", and compare that capture against this one");
  if (kind != EngineKind::kLlama)
    return Status::Error(path + ": captured by the '" + name + "' engine; " + stage + " re-runs the llama engine only");
  const auto captured = GgmlOnly(m.engine.env), here = GgmlOnly(NumericsEnvironment());
  if (captured != here)
    return Status::Error(fmt::format(
        "{}: captured under the ggml variables {}, and this process runs under {}: ggml reads them once per "
        "process, so run {} under the capture's (the two captures of a pair are re-run in one process: "
        "both must have run under the same)",
        path, EnvWords(captured), EnvWords(here), stage));
  FS_ASSIGN_OR_RETURN(CaptureReplay r, ModelOf(cap, hashes));
  if (!m.knobs) return Status::Error(path + ": the manifest has no knobs");
  if (!m.parsed_knobs.ok()) return m.parsed_knobs.status().Prefixed(path + ": manifest knobs");
  r.knobs = *m.parsed_knobs;  // knobs.replay says how to feed it: a stage that cannot serve refuses served ones
  return r;
}

}  // namespace flipscope
