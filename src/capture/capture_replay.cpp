// ReplayOf: the model file and knobs that re-create a capture's rows, from its manifest.
#include <fmt/format.h>

#include "capture/capture.h"
#include "util/util.h"

namespace flipscope {

Result<CaptureReplay> ModelOf(const CaptureReader& cap, std::map<std::string, std::string>* hashes) {
  using json = nlohmann::json;
  const std::string& path = cap.path();
  const json model = cap.manifest().value("model", json::object());
  if (!model.is_object() || !model.contains("path") || !model["path"].is_string() || !model.contains("sha256") ||
      !model["sha256"].is_string())
    return Status::Error(path + ": the manifest names no model file (model.path and model.sha256)");
  CaptureReplay r;
  r.model_path = model["path"].get<std::string>();
  r.model_sha256 = model["sha256"].get<std::string>();
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

Result<CaptureReplay> ReplayOf(const CaptureReader& cap, const std::string& stage,
                               std::map<std::string, std::string>* hashes) {
  using json = nlohmann::json;
  const std::string& path = cap.path();
  const json& m = cap.manifest();
  if (cap.truncated())
    return Status::Error(path + ": a truncated (top-k) capture cannot be re-run; " + stage +
                         " needs a capture of the llama engine");
  const json engine = m.value("engine", json::object());
  // Older exact captures name their engine under "name" only.
  const std::string name =
      engine.is_object() ? engine.value("engine", engine.value("name", std::string("llama"))) : std::string("llama");
  if (name == "exact")
    return Status::Error(path + ": an exact (FP64) capture cannot be re-run by " + stage +
                         ": the exact engine computes teacher-forced rows only, it cannot decode a future or "
                         "expose llama.cpp's graph; capture the workload with --engine llama for " + stage +
                         ", and compare that capture against this one");
  if (name != "llama")
    return Status::Error(path + ": captured by the '" + name + "' engine; " + stage +
                         " re-runs the llama engine only");
  FS_ASSIGN_OR_RETURN(CaptureReplay r, ModelOf(cap, hashes));
  if (!m.contains("knobs")) return Status::Error(path + ": the manifest has no knobs");
  auto knobs = Knobs::FromJson(m["knobs"]);
  if (!knobs.ok()) return knobs.status().Prefixed(path + ": manifest knobs");
  r.knobs = *knobs;  // knobs.replay says how to feed it: a stage that cannot serve refuses served ones
  return r;
}

}  // namespace flipscope
